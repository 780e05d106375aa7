"""Run a set of node processes together: prefixed logs, clean shutdown, death reporting.

This is what `homiebot up` and `homiebot run` use on installs without `ros2 launch`: each node is
its own process, every output line is prefixed with the node's name, Ctrl-C (or `stop()`) sends
SIGINT to all of them and escalates to SIGKILL after a grace period, and a node that exits on its
own is reported so the caller can stop the rest and fail. Whatever ends the supervisor (SIGKILL, a closed terminal,
a broken pipe), its processes end too: on Linux each is started with a parent-death signal (SIGTERM), sent when the
thread that started it exits. Their ROS 2 log files go to a folder of the project's own, pruned at every start
(homiebot.ros_logs), unless the user exported ROS_LOG_DIR. No rclpy here: processes are plain commands.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from homiebot import ros_logs


# prctl(2) option: the signal a process gets when the thread that created it exits (Linux only).
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent() -> None:
    """For Popen's preexec_fn (runs in the child between fork and exec): SIGTERM when the starting thread exits."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass(frozen=True)
class ProcessSpec:
    """One process to supervise.

    Attributes:
        name: Label used as the log prefix (the node name).
        argv: The command line.
        env: Extra environment variables for this process (on top of the supervisor's).
        drop_env: Variables of the supervisor's environment this process must not inherit (secrets it does not
            need).
    """

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    drop_env: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not self.argv:
            raise ValueError("a supervised process needs a name and a command line")


@dataclass(frozen=True)
class Exit:
    """A process that ended: its name and exit status (negative: killed by that signal)."""

    name: str
    returncode: int


class Supervisor:
    """Starts processes, forwards their output with a `[name]` prefix and stops them together.

    Args:
        specs: The processes, started in order.
        out: Where prefixed output goes (default: stdout).
        grace_s: Seconds between SIGINT and SIGKILL when stopping.
        echo: Whether to forward output at all (the lines are always kept in `lines`).
    """

    def __init__(self, specs: Sequence[ProcessSpec], out: TextIO | None = None, grace_s: float = 10.0,
                 echo: bool = True) -> None:
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ValueError(f"process names must be unique: {names}")
        self.specs = list(specs)
        self.out = out or sys.stdout
        self.grace_s = grace_s
        self.echo = echo
        self.lines: dict[str, list[str]] = {spec.name: [] for spec in specs}
        self._processes: dict[str, subprocess.Popen[str]] = {}
        self._readers: list[threading.Thread] = []
        self._write_lock = threading.Lock()
        self._stopping = False
        self._width = max((len(name) for name in names), default=0)

    def start(self) -> None:
        """Start every process (each in its own process group so a terminal's Ctrl-C reaches us first), logging to
        the pruned ROS log folder (homiebot.ros_logs)."""
        log_environment = ros_logs.prepare(os.environ)
        for spec in self.specs:
            process = subprocess.Popen(
                list(spec.argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                env={**{name: value for name, value in os.environ.items() if name not in spec.drop_env},
                     "PYTHONUNBUFFERED": "1", **log_environment, **spec.env}, start_new_session=True,
                preexec_fn=die_with_parent,
            )
            self._processes[spec.name] = process
            reader = threading.Thread(target=self._forward, args=(spec.name, process), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _forward(self, name: str, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.rstrip("\n")
            self.lines[name].append(line)
            if self.echo:
                with self._write_lock:
                    self.out.write(f"[{name:<{self._width}}] {line}\n")
                    self.out.flush()

    def wait_for_line(self, name: str, predicate: Callable[[str], bool], timeout_s: float) -> bool:
        """Wait until process `name` prints a line matching `predicate`; False on time-out or if it died."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            lines = self.lines[name]
            if any(predicate(line) for line in lines[seen:]):
                return True
            seen = len(lines)
            if self._processes[name].poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def exited(self) -> list[Exit]:
        """Processes that have ended, in start order."""
        return [Exit(name, process.returncode) for name, process in self._processes.items()
                if process.poll() is not None]

    def wait_for_any_exit(self, timeout_s: float | None = None) -> Exit | None:
        """Block until some process ends (or the time-out passes); returns it, or None."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while deadline is None or time.monotonic() < deadline:
            ended = self.exited()
            if ended:
                return ended[0]
            time.sleep(0.1)
        return None

    def stop(self) -> dict[str, int]:
        """SIGINT to every running process, SIGKILL after the grace period; returns each exit status."""
        self._stopping = True
        for process in self._processes.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.grace_s
        for process in self._processes.values():
            remaining = max(0.0, deadline - time.monotonic())
            try:
                process.wait(remaining)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for reader in self._readers:
            reader.join(timeout=2)
        return {name: process.returncode for name, process in self._processes.items()}

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
