"""The `homiebot` command: one entry point for the HomieBot tools.

Sub-commands are registered in `COMMANDS`; each one adds its arguments to its own parser and gets
the parsed namespace back. User errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable


def _add_doctor(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    parser.add_argument("--json", action="store_true", help="print the checks as one JSON object")

    def run(args: argparse.Namespace) -> int:
        from homiebot import doctor

        return doctor.main(as_json=args.json)

    return run


# name -> (one-line help, function adding the arguments and returning the handler)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Callable[[argparse.Namespace], int]]]] = {
    "doctor": ("check this machine's set-up and say how to fix what is missing", _add_doctor),
}


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    """The argument parser and the handler of each sub-command."""
    parser = argparse.ArgumentParser(prog="homiebot", description="HomieBot: EMMOE planners on a ROS 2 stack.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    handlers = {}
    for name, (help_text, add_arguments) in COMMANDS.items():
        handlers[name] = add_arguments(subparsers.add_parser(name, help=help_text, description=help_text))
    return parser, handlers


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the chosen sub-command."""
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
