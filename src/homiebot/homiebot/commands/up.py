"""`homiebot up`: start the EMMOE simulation stack, one process per node, until Ctrl-C."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "start the simulation stack (what `ros2 launch homiebot emmoe_sim.launch.py` starts) until Ctrl-C"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot up`."""
    from homiebot.conditions import add_conditions_argument
    from homiebot.setting import DEFAULT_SETTING, SETTINGS, add_perception_argument

    parser.add_argument("--setting", choices=SETTINGS, default=DEFAULT_SETTING,
                        help="benchmark setting: background (privileged M3 skills) or no_background (sensor-only "
                             "skills on the chosen model's server; see homiebot.setting); default: %(default)s")
    add_conditions_argument(parser)
    add_perception_argument(parser)
    parser.add_argument("--config", type=Path, help="ROS parameter file (default: the installed emmoe_sim.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NODE.PARAM=VALUE",
                        help="override one parameter of one node, e.g. --set planner.backend=mock (repeatable)")
    parser.add_argument("--domain-id", type=int, help="ROS_DOMAIN_ID for the whole stack (default: inherited)")


def node_overrides(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """The per-node parameters of `--setting` and `--conditions` with the `--set` items on top.

    Raises:
        UsageError: a malformed item or an unknown node.
    """
    from homiebot.bringup import EMMOE_SIM_NODES, stack_parameters
    from homiebot.cli import UsageError

    try:
        overrides = stack_parameters(args.setting, args.overrides, args.conditions, args.perception)
    except ValueError as error:
        raise UsageError(str(error)) from error
    names = {spec.name for spec in EMMOE_SIM_NODES}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise UsageError(f"unknown node(s) in --set: {', '.join(unknown)}; the stack has {', '.join(sorted(names))}")
    return overrides


def run(args: argparse.Namespace) -> int:
    """Start every node; exit 0 after Ctrl-C, 1 when a node dies on its own."""
    from homiebot.bringup import config_path, require_loopback_stack, stack_environment, stack_process_specs, \
        with_checkout_data
    from homiebot.cli import UsageError
    from homiebot.setting import describe
    from homiebot.supervisor import Supervisor

    params_file = args.config or config_path()
    if not params_file.is_file():
        raise UsageError(f"parameter file not found: {params_file}")
    overrides = node_overrides(args)
    if args.config is None:  # the shipped file's data_dir is relative: the checkout's data, wherever we start
        try:
            overrides = with_checkout_data(overrides)
        except ValueError as error:
            raise UsageError(str(error)) from error
    require_loopback_stack(UsageError)  # the nodes start with stack_environment (DDS on loopback), if allowed
    environment = stack_environment(args.domain_id)
    specs = stack_process_specs(params_file, overrides, environment)
    supervisor = Supervisor(specs)
    supervisor.start()
    print(f"[up] {len(specs)} processes started (ROS_DOMAIN_ID={environment.get('ROS_DOMAIN_ID', '0')}, "
          f"{describe(args.setting, args.conditions, args.perception)}); Ctrl-C stops them", flush=True)
    try:
        ended = supervisor.wait_for_any_exit()
    except KeyboardInterrupt:
        print("[up] stopping", flush=True)
        supervisor.stop()
        return 0
    codes = supervisor.stop()
    assert ended is not None
    print(f"[up] {ended.name} exited with status {ended.returncode}; stopped the others "
          f"({', '.join(f'{name}={code}' for name, code in codes.items() if name != ended.name)})", flush=True)
    return 1
