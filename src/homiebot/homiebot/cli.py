"""The `homiebot` command: one entry point for the HomieBot tools.

Each sub-command is a module of `homiebot.commands` (see that package's docstring). User errors (a UsageError, or
malformed or missing EMMOE data) are reported as one line on stderr with exit status 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from emmoe_core.closed_pipe import quiet_on_closed_pipe
from emmoe_eval.dataset import DatasetError

from homiebot import commands


class UsageError(Exception):
    """A user mistake (bad argument, missing file): printed as one line, exit status 2."""


def command_modules() -> dict[str, ModuleType]:
    """Sub-command name -> module, for every module in homiebot.commands."""
    found = {}
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda info: info.name):
        if not info.name.startswith("_"):
            found[info.name.replace("_", "-")] = importlib.import_module(f"{commands.__name__}.{info.name}")
    return found


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The argument parser and the module behind each sub-command."""
    parser = argparse.ArgumentParser(prog="homiebot", description="HomieBot: EMMOE planners on a ROS 2 stack.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = command_modules()
    for name, module in modules.items():
        module.add_arguments(subparsers.add_parser(name, help=module.HELP, description=module.HELP))
    return parser, modules


@quiet_on_closed_pipe
def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the chosen sub-command (a reader that went away: quietly, exit status 141)."""
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(modules[args.command].run(args))
    except UsageError as error:
        print(f"homiebot {args.command}: error: {error}", file=sys.stderr)
        return 2
    except DatasetError as error:  # the EMMOE data: missing (e.g. started outside the repository root) or malformed
        print(f"homiebot {args.command}: error: {error}; --data names the EMMOE data folder", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"homiebot {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
