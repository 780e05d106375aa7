"""`homiebot doctor`: check this machine's set-up."""

from __future__ import annotations

import argparse

HELP = "check this machine's set-up and say how to fix what is missing"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot doctor`."""
    parser.add_argument("--json", action="store_true", help="print the checks as one JSON object")


def run(args: argparse.Namespace) -> int:
    """Run the checks; exit status 1 when a required one fails."""
    from homiebot import doctor

    return doctor.main(as_json=args.json)
