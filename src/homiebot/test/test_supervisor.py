"""The process supervisor behind `homiebot up` and `homiebot run`, with plain Python child processes."""

from __future__ import annotations

import contextlib
import io
import sys
import time

import psutil
import pytest

from homiebot.supervisor import ProcessSpec, Supervisor

SERVE_UNTIL_SIGINT = """
import signal, sys, time
print("ready", flush=True)
def bye(*_):
    print("clean shutdown", flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, bye)
while True:
    time.sleep(0.05)
"""
IGNORE_SIGINT = """
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def python(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_output_is_prefixed_and_ctrl_c_stops_everything_cleanly():
    out = io.StringIO()
    specs = [ProcessSpec("bridge", python(SERVE_UNTIL_SIGINT)), ProcessSpec("planner", python(SERVE_UNTIL_SIGINT))]
    with Supervisor(specs, out=out) as supervisor:
        for name in ("bridge", "planner"):
            assert supervisor.wait_for_line(name, lambda line: line == "ready", timeout_s=20)
        assert supervisor.exited() == []
    codes = {exit_.name: exit_.returncode for exit_ in supervisor.exited()}
    assert codes == {"bridge": 0, "planner": 0}
    text = out.getvalue().splitlines()
    assert "[bridge ] ready" in text and "[planner] ready" in text
    assert "[bridge ] clean shutdown" in text


def test_a_dying_node_is_reported():
    specs = [ProcessSpec("steady", python(SERVE_UNTIL_SIGINT)),
             ProcessSpec("crasher", python("import sys; print('boom', flush=True); sys.exit(3)"))]
    supervisor = Supervisor(specs, out=io.StringIO())
    supervisor.start()
    try:
        ended = supervisor.wait_for_any_exit(timeout_s=20)
        assert ended is not None and (ended.name, ended.returncode) == ("crasher", 3)
        assert supervisor.lines["crasher"] == ["boom"]
    finally:
        codes = supervisor.stop()
    assert codes["steady"] == 0


def test_a_process_ignoring_sigint_is_killed_after_the_grace_period():
    supervisor = Supervisor([ProcessSpec("stubborn", python(IGNORE_SIGINT))], out=io.StringIO(), grace_s=0.5)
    supervisor.start()
    assert supervisor.wait_for_line("stubborn", lambda line: line == "ready", timeout_s=20)
    started = time.monotonic()
    codes = supervisor.stop()
    assert codes["stubborn"] == -9
    assert time.monotonic() - started < 5


def test_extra_environment_reaches_the_child():
    spec = ProcessSpec("env", python("import os; print(os.environ['ROS_DOMAIN_ID'])"), env={"ROS_DOMAIN_ID": "42"})
    supervisor = Supervisor([spec], echo=False)
    supervisor.start()
    supervisor.wait_for_any_exit(timeout_s=20)
    supervisor.stop()
    assert supervisor.lines["env"] == ["42"]


def test_a_dropped_variable_never_reaches_the_child(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    show = python("import os; print(os.environ.get('OPENAI_API_KEY', 'absent'))")
    supervisor = Supervisor([ProcessSpec("planner", show), ProcessSpec("monitor", show, drop_env=("OPENAI_API_KEY",))],
                            echo=False)
    supervisor.start()
    deadline = time.monotonic() + 20
    while not (supervisor.lines["planner"] and supervisor.lines["monitor"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    supervisor.stop()
    assert (supervisor.lines["planner"], supervisor.lines["monitor"]) == (["sk-secret"], ["absent"])


def test_invalid_specs_are_refused():
    with pytest.raises(ValueError, match="needs a name"):
        ProcessSpec("", ("true",))
    with pytest.raises(ValueError, match="unique"):
        Supervisor([ProcessSpec("a", ("true",)), ProcessSpec("a", ("true",))])


def _running(process: psutil.Process) -> bool:
    """Whether a process still runs: a zombie waiting for its new parent to reap it has ended."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_processes_end_when_the_supervisor_is_killed():
    """SIGKILL leaves the supervisor no chance to stop its nodes: the parent-death signal ends them anyway."""
    import signal
    import subprocess

    supervising = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from homiebot.supervisor import ProcessSpec, Supervisor\n"
        "supervisor = Supervisor([ProcessSpec('sleeper', (sys.executable, '-c', 'import time; time.sleep(60)'))],"
        " echo=False)\n"
        "supervisor.start()\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert supervising.stdout is not None and supervising.stdout.readline().strip() == "started"
        (child,) = psutil.Process(supervising.pid).children()
        supervising.send_signal(signal.SIGKILL)
        supervising.wait(timeout=10)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if not _running(child):
                return
            time.sleep(0.05)
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
        pytest.fail("the child outlived its killed supervisor by more than 2 s")
    finally:
        if supervising.poll() is None:
            supervising.kill()
