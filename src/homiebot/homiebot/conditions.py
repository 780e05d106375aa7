"""The conditions of an experiment, one switch beside the setting: `reliable` (this project's default) or `paper`.

- reliable: the skills fail only when the simulation makes them (the privileged M3 skills almost never do in the
  MuJoCo apartment); the checks and attempts follow the paper's description (table order F1, F2, L1-L4, D1, D2;
  Put retried while held; L1/L2 read the simulator's hand); scoring with this project's default rules.
- paper: as close to the paper's stack as this simulator gets. The failure model draws each execution's outcome at
  the per-execution success rates behind the paper's Table 4 (`sim_stack.fail=table4`,
  homiebot_executor.failure_model: Go to 93.6 %, Pick 55.0 %, Put 87.2 %, Open 90.4 %, Close 80.1 %); the checks
  run in the release's order (F1, L1-L4, F2, D1, D2) and read L1/L2 from the inventory the planner was told; a Put
  gets the release's one attempt; `emmoe-eval score --compat official` scores the runs.

`homiebot run|collect --conditions` turn it into node parameters (`conditions_overrides`, applied after the
setting's and before the `--set` items) and record it in `<out>/setting.json` (homiebot.setting.record_setting).
"""

from __future__ import annotations

import argparse

from homiebot.setting import EXECUTOR_NODE, STACK_NODE

CONDITIONS: tuple[str, ...] = ("reliable", "paper")
DEFAULT_CONDITIONS = "reliable"
MONITOR_NODE = "emmoe_monitor"
# The release's checks and attempts, for both nodes that run the checks (the executor only when the monitor cannot).
_RELEASE_CHECKS: dict[str, object] = {"check_order": "release", "hand_source": "inventory"}
_PAPER: dict[str, dict[str, object]] = {
    STACK_NODE: {"fail": "table4"},
    MONITOR_NODE: dict(_RELEASE_CHECKS),
    EXECUTOR_NODE: {**_RELEASE_CHECKS, "put_retries": "release"},
}
# What each conditions value means, for logs, result tables and setting.json.
DESCRIPTIONS: dict[str, str] = {
    "reliable": "reliable skills (no failure model), the paper's check order, Put retried while held, L1/L2 from "
                "the simulator's hand, default scoring",
    "paper": "skills failing at the paper's per-execution rates (Table 4 calibrated: Go to 93.6 %, Pick 55.0 %, "
             "Put 87.2 %, Open 90.4 %, Close 80.1 %), the release's check order and Put attempts, L1/L2 from the "
             "planner's inventory, scoring --compat official",
}


def check_conditions(conditions: str) -> str:
    """`conditions` when it is one of CONDITIONS.

    Raises:
        ValueError: any other value.
    """
    if conditions not in CONDITIONS:
        raise ValueError(f"conditions: expected one of {', '.join(CONDITIONS)}, got {conditions!r}")
    return conditions


def conditions_overrides(conditions: str) -> dict[str, dict[str, object]]:
    """Node parameters of the conditions (none for reliable: the parameter file's defaults are those).

    Raises:
        ValueError: unknown conditions.
    """
    if check_conditions(conditions) == "reliable":
        return {}
    return {node: dict(values) for node, values in _PAPER.items()}


def scoring_arguments(conditions: str) -> list[str]:
    """`emmoe-eval score` options the conditions score with (every split: the run chose its tasks).

    Raises:
        ValueError: unknown conditions.
    """
    return ["--compat", "official", "--split", "all"] if check_conditions(conditions) == "paper" else []


def add_conditions_argument(parser: argparse.ArgumentParser) -> None:
    """`--conditions reliable|paper` of the commands that start a stack."""
    parser.add_argument("--conditions", choices=CONDITIONS, default=DEFAULT_CONDITIONS,
                        help="reliable (skills fail only as the simulation makes them) or paper (skills failing at "
                             "the paper's calibrated Table 4 rates, the release's checks and Put attempts, official "
                             "scoring; see homiebot.conditions); default: %(default)s")
