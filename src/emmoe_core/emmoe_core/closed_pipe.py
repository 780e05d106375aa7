"""Command-line entry points that end quietly when their reader goes away (`emmoe-eval score --json | head`).

Python turns SIGPIPE into BrokenPipeError on the write that finds the pipe closed, or on the flush at exit, and
prints a traceback (or "Exception ignored ... BrokenPipeError"). `quiet_on_closed_pipe` flushes standard output
inside the entry point and, when the pipe is gone, points it at /dev/null and returns CLOSED_PIPE_STATUS, as a
process killed by SIGPIPE would report to the shell (128 + 13). SIGPIPE itself keeps Python's handling: a supervisor
writing to a dead child must not die of it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TypeVar

CLOSED_PIPE_STATUS = 141
_Main = TypeVar("_Main", bound=Callable[..., int])


def quiet_on_closed_pipe(main: _Main) -> _Main:
    """`main` returning CLOSED_PIPE_STATUS, without a traceback, when standard output's reader has gone away."""
    @functools.wraps(main)
    def guarded(*args: object, **kwargs: object) -> int:
        try:
            try:
                return main(*args, **kwargs)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the flush at exit then writes the rest nowhere
            os.close(devnull)
            return CLOSED_PIPE_STATUS

    return guarded  # type: ignore[return-value]
