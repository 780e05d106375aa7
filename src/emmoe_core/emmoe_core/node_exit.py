"""How a node process ends once it is told to stop (used by emmoe_core.ros_helpers.spin_node).

- `StopWatch`: starts the exit countdown the moment the node's context is shut down, and wakes the executor.
- `exit_after(seconds, name)`: a daemon timer that ends the process with status 1 unless it is cancelled.
- `threads_left(timeout_s)`: whether threads that keep the interpreter alive are still running.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from rclpy.context import Context
from rclpy.executors import Executor

# Seconds a node process has to clean up after it was told to stop, before it exits regardless.
EXIT_GRACE_S = 1.8
# How often spin_node's stop watch looks whether the node's context was shut down (see StopWatch).
STOP_POLL_S = 0.05


class StopWatch:
    """Starts spin_node's exit countdown the moment the node's context is shut down, and wakes the executor.

    rclpy 9 handles SIGINT and SIGTERM in a thread of its own: it triggers the executors' signal guard condition and
    then shuts the context down, without the context's on_shutdown callbacks (the executor's wake-up among them). An
    executor that wakes between the two sees the context still up and waits again, for good when nothing else comes
    (on a loaded two-core machine an idle node's MultiThreadedExecutor missed 5 SIGINTs of 100); an executor whose
    only thread is in a long callback cannot look at all. So a daemon thread looks at the context every STOP_POLL_S:
    once it is down, the countdown starts and the executor is woken, whatever the spinning thread is doing.
    """

    def __init__(self, name: str, context: Context) -> None:
        self.name = name
        self.executor: Executor | None = None
        self._context = context
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._finished = threading.Event()
        threading.Thread(target=self._watch, name=f"{name} stop watch", daemon=True).start()

    def _watch(self) -> None:
        # Everything under the lock, and only until stop(): the main thread then shuts the executor and the context
        # down, and neither may race with a look at the context or a trigger of the executor's guard condition.
        while not self._finished.wait(STOP_POLL_S):
            with self._lock:
                if self._finished.is_set():
                    return
                try:
                    running = self._context.ok()
                except Exception:  # the context is being torn down
                    running = False
                if not running:
                    self._arm()
                    if self.executor is not None:
                        try:
                            self.executor.wake()
                        except Exception:  # the executor is being shut down already: nothing to wake
                            pass
                    return

    def _arm(self) -> threading.Timer:
        """The countdown, started unless it runs already (call with the lock held)."""
        if self._timer is None:
            self._timer = exit_after(EXIT_GRACE_S, self.name)
        return self._timer

    def stop(self) -> threading.Timer:
        """Spinning returned: stop watching; the countdown (started now unless it already runs) to cancel once the
        clean-up is done."""
        with self._lock:
            self._finished.set()
            return self._arm()


def exit_after(seconds: float, name: str) -> threading.Timer:
    """End the process with status 1 `seconds` from now unless it has ended by itself or the timer is cancelled (a
    daemon timer: it never keeps the process alive)."""
    def say_why() -> None:
        try:
            print(f"{name}: still busy {seconds:g} s after the stop (a callback does not return); exiting",
                  file=sys.stderr, flush=True)
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # the reader of our output is gone (its parent died: a broken pipe)

    def leave() -> None:
        try:
            # The last words get a moment, in a thread of their own: a write to a full pipe (a reader that stopped
            # reading) blocks, and must not keep the process alive.
            words = threading.Thread(target=say_why, daemon=True)
            words.start()
            words.join(0.05)
        finally:
            os._exit(1)

    timer = threading.Timer(seconds, leave)
    timer.daemon = True
    timer.start()
    return timer


def threads_left(timeout_s: float) -> bool:
    """Whether threads that would keep the interpreter from exiting (not daemon, e.g. an executor thread stuck in a
    callback) are still running after waiting up to `timeout_s` for them."""
    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    return any(thread.is_alive() and not thread.daemon and thread is not threading.current_thread()
               for thread in threading.enumerate())
