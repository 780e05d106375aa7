"""Sub-commands of the `homiebot` CLI, one module each, found automatically.

A command module defines:
    HELP: str                                   one-line description
    def add_arguments(parser) -> None           its options
    def run(args: argparse.Namespace) -> int    the work; returns the exit status
The module name (underscores as dashes) is the sub-command name. Imports of heavy libraries belong
inside `run`, so that `homiebot --help` stays fast.
"""
