"""`homiebot run`: task selection, resuming, per-node parameters, and one real run through the whole stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from homiebot import runner
from homiebot.run_config import Progress, RunnerConfig, RunnerError
from homiebot.run_folders import pending_runs, without_result
from homiebot.runner import select_tasks, stack_overrides

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "data"


def test_task_selection_by_split_and_ids(tmp_path):
    assert select_tasks(DATA, "test") == [str(task_id) for task_id in range(91, 101)]
    train = select_tasks(DATA, "train")
    assert train[:3] == ["1", "2", "3"] and all(1 <= int(task_id) <= 90 for task_id in train)
    assert select_tasks(DATA, "all") == train + select_tasks(DATA, "test")
    assert select_tasks(DATA, "93, 91,93") == ["91", "93"]
    with pytest.raises(RunnerError, match="unknown task id"):
        select_tasks(DATA, "91,107")
    shutil.copytree(DATA / "test" / "91", tmp_path / "test" / "91")
    with pytest.raises(RunnerError, match="no train tasks"):
        select_tasks(tmp_path, "train")


def test_finished_runs_are_skipped(tmp_path):
    (tmp_path / "91" / "2").mkdir(parents=True)
    (tmp_path / "91" / "2" / "score.json").write_text("{}")
    (tmp_path / "92" / "1").mkdir(parents=True)
    (tmp_path / "92" / "1" / "trajectory.jsonl").write_text("{}\n")  # started but never scored: run again
    assert pending_runs(tmp_path, ["91", "92"], 2) == [("91", 1), ("92", 1), ("92", 2)]
    # Runs that ended without a planner result (a fault, a cancel) run again; an unreadable score too.
    for run, reason in ((1, "error"), (2, "gave_up")):
        (tmp_path / "92" / str(run)).mkdir(parents=True, exist_ok=True)
        (tmp_path / "92" / str(run) / "score.json").write_text(json.dumps({"end_reason": reason}))
    (tmp_path / "91" / "2" / "score.json").write_text("{trunc")
    assert pending_runs(tmp_path, ["91", "92"], 2) == [("91", 1), ("91", 2), ("92", 1)]


def test_experiment_parameters_reach_the_planner_and_evaluator(tmp_path):
    config = RunnerConfig(tasks="test", out=tmp_path / "exp", planner="openai", model="gpt-4o",
                          base_url="http://127.0.0.1:9/v1", max_steps=7, overrides=("planner.temperature=0.0",))
    overrides = stack_overrides(config)
    assert overrides["planner"] == {"data_dir": str(Path("data").resolve()), "max_steps": 7, "backend": "openai",
                                    "openai_model": "gpt-4o", "openai_base_url": "http://127.0.0.1:9/v1",
                                    "temperature": "0.0"}
    assert overrides["emmoe_evaluator"]["out_dir"] == str((tmp_path / "exp").resolve())


@pytest.mark.parametrize("options, message", [
    ({"planner": "gpt"}, "unknown planner"),
    ({"setting": "sensor"}, "setting: expected one of background, no_background"),
    ({"planner": "hf"}, "needs --model PATH"),
    ({"planner": "openai", "model": "x"}, "needs --base-url"),
    ({"runs": 0}, "at least 1"),
    ({"overrides": ("backend=mock",)}, "NODE.PARAM=VALUE"),
    ({"retries": -1}, "--retries"),
    ({"domain_id": 5, "jobs": 2}, "needs --jobs 1"),
    ({"domain_id": 150}, "needs --jobs 1"),
])
def test_invalid_configurations_are_refused(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        RunnerConfig(tasks="test", out=tmp_path, **options)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["homiebot", "run", *args], capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.ros
def test_expert_run_through_the_stack_then_resume(tmp_path, ros_domain_id):
    """The expert planner completes task 92 in the MuJoCo apartment; a rerun only scores."""
    out = tmp_path / "exp"
    first = run_cli("--tasks", "92", "--runs", "1", "--planner", "expert", "--out", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = out / "92" / "1"
    for name in ("trajectory.jsonl", "conversation.json", "episode.mcap", "score.json", "subtask1_front.png"):
        assert (run_dir / name).is_file(), name
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert [step["action"] for step in steps] == ["Go to", "Open", "Pick", "Go to", "Put", "End"]
    assert all(step["success"] for step in steps)
    assert "100.00" in first.stdout  # SR and TP of the one run
    bag = subprocess.run(["emmoe-eval", "score-bag", str(run_dir / "episode.mcap"), "--data", "data", "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(bag.stdout)["SR"] == 1.0

    again = run_cli("--tasks", "92", "--runs", "1", "--planner", "expert", "--out", str(out))
    assert again.returncode == 0
    assert "1 already done, 0 to run" in again.stderr.replace("\n", " ")


@pytest.mark.ros
@pytest.mark.slow
def test_expert_run_without_background_information(tmp_path, ros_domain_id):
    """--setting no_background: the sensor-only skills (routed to each model's server) complete task 96 (a drawer
    opened, the sponge put in it, the drawer closed) through the whole stack; any privileged query would have ended
    the run as an infrastructure failure (exit 1). Slow (about 2 minutes): the default suite runs the whole stack in
    this setting on the fetch backend (tests/test_fetch_backend.py) and counts privileged calls over a whole run
    in-process (tests/test_sensor_skills_mujoco.py)."""
    out = tmp_path / "exp"
    result = run_cli("--tasks", "96", "--runs", "1", "--planner", "expert", "--setting", "no_background",
                     "--out", str(out), "--no-videos")
    assert result.returncode == 0, result.stderr[-3000:]
    score = json.loads((out / "96" / "1" / "score.json").read_text())
    assert (score["success"], score["task_progress"]) == (True, 1.0)
    steps = [json.loads(line) for line in (out / "96" / "1" / "trajectory.jsonl").read_text().splitlines()]
    assert {"Open", "Pick", "Put", "Close"} <= {step["action"] for step in steps if step["success"]}
    assert json.loads((out / "setting.json").read_text())["setting"] == "no_background"
    assert "setting no_background" in result.stdout


def test_unknown_task_is_a_one_line_usage_error(tmp_path):
    result = run_cli("--tasks", "107", "--out", str(tmp_path))
    assert result.returncode == 2
    assert "homiebot run: error: unknown task id(s) 107" in result.stderr and "Traceback" not in result.stderr


def _cmdline(process) -> list[str]:
    """A process's command line, empty when it exited or cannot be read meanwhile."""
    import psutil

    try:
        return process.cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []


@pytest.mark.ros
@pytest.mark.parametrize("executable, node", [
    ("executor_node", "homiebot_executor"),
    pytest.param("sim_stack", "sim_stack", marks=pytest.mark.slow),
    pytest.param("monitor_node", "emmoe_monitor", marks=pytest.mark.slow),
    pytest.param("evaluator_node", "emmoe_evaluator", marks=pytest.mark.slow),
    pytest.param("planner_node", "planner", marks=pytest.mark.slow),
])
def test_killing_a_node_mid_run_is_never_a_planner_result(tmp_path, ros_domain_id, executable, node):
    """A node process is SIGKILLed during task 92's first run: that attempt is an infrastructure failure (never
    scored as the planner's result), the stack restarts, `--retries 1` runs it again (now complete) and task 93
    completes; the command exits 0 because every run ends with a planner result."""
    import os
    import signal
    import time

    import psutil

    out = tmp_path / "exp"
    benchmark = subprocess.Popen(["homiebot", "run", "--tasks", "92,93", "--runs", "1", "--planner", "expert",
                                  "--retries", "1", "--out", str(out), "--no-videos"], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trajectory = out / "92" / "1" / "trajectory.jsonl"
    try:
        deadline = time.monotonic() + 300
        while not (trajectory.is_file() and trajectory.read_text().count("\n") >= 1):
            assert time.monotonic() < deadline and benchmark.poll() is None, "task 92 never started"
            time.sleep(0.02)
        # The node's process list can be read between two of its states (a child that just exited): look again
        # until the deadline rather than once.
        while True:
            victims = [child for child in psutil.Process(benchmark.pid).children(recursive=True)
                       if any(executable in part for part in _cmdline(child))]
            if len(victims) == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(victims) == 1
        os.kill(victims[0].pid, signal.SIGKILL)
        stdout, stderr = benchmark.communicate(timeout=400)
    finally:
        if benchmark.poll() is None:
            benchmark.kill()
    assert benchmark.returncode == 0, stderr[-3000:]
    text = " ".join(stderr.split())
    assert "retrying the run" in text, text[-3000:]
    for task in ("92", "93"):
        completed = json.loads((out / task / "1" / "score.json").read_text())
        assert completed["success"] is True and completed["task_progress"] == 1.0, task


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MB tmpfs (a real full disk: task 92 by the expert takes about 5 MB, task 93 about 8 MB); needs root."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.ros
@pytest.mark.slow  # failed once in the full default suite (passed alone before and after): under investigation
def test_a_full_disk_stops_the_benchmark_with_its_cause_and_keeps_finished_runs(small_disk):
    """Task 92's run fits on the disk, task 93's does not: the benchmark stops at once with the cause and exit 2,
    the finished run is intact, and the run that hit the full disk has no planner result (it runs again on resume)."""
    out = small_disk / "exp"
    result = run_cli("--tasks", "92,93", "--runs", "1", "--planner", "expert", "--out", str(out), "--no-videos")

    text = " ".join(result.stderr.split())
    assert result.returncode == 2, text[-3000:]
    assert "task 93 run 1: could not write the run's files: [Errno 28] No space left on device" in text, text[-3000:]
    assert "the benchmark stops here" in text and "Traceback" not in text
    finished = json.loads((out / "92" / "1" / "score.json").read_text())
    assert finished["success"] is True and finished["task_progress"] == 1.0
    assert pending_runs(out, ["92", "93"], 1) == [("93", 1)]


def test_a_run_without_a_planner_result_is_retried_while_retries_last(tmp_path):
    import queue

    progress = Progress(total=1)
    pairs: queue.Queue[tuple[str, int]] = queue.Queue()
    assert progress.retry(("92", 1), 2, pairs) and progress.retry(("92", 1), 2, pairs)
    assert not progress.retry(("92", 1), 2, pairs)
    assert (pairs.qsize(), progress.total) == (2, 3)
    assert not Progress(total=1).retry(("92", 1), 0, pairs)


def test_unusable_score_files_are_run_again_and_named(tmp_path):
    """Issue 40: a deeply nested score.json crashed the resume (RecursionError); a FIFO in its place would hang it."""
    for task, content in (("91", "[" * 100_000 + "]" * 100_000), ("92", '{"end_reason": "ended"}'),
                          ("93", json.dumps({"end_reason": "end"}))):
        (tmp_path / task / "1").mkdir(parents=True)
        (tmp_path / task / "1" / "score.json").write_text(content)
    (tmp_path / "94" / "1").mkdir(parents=True)
    os.mkfifo(tmp_path / "94" / "1" / "score.json")
    assert pending_runs(tmp_path, ["91", "92", "93", "94"], 1) == [("91", 1), ("92", 1), ("94", 1)]
    assert without_result(tmp_path, ["91", "92", "93", "94"], 1) == [
        f"task 91 run 1 ({tmp_path / '91' / '1' / 'score.json'}: invalid JSON (nested too deeply (line 1, column 1)))",
        f"task 92 run 1 ({tmp_path / '92' / '1' / 'score.json'}: unknown end reason 'ended')",
        f"task 94 run 1 ({tmp_path / '94' / '1' / 'score.json'}: cannot read (not a regular file but a FIFO))"]


def test_a_run_cut_by_a_killed_evaluator_has_no_result(tmp_path):
    """The evaluator writes score.json last, once the run has ended: a folder it never finished runs again."""
    run_dir = tmp_path / "91" / "1"
    (run_dir / "episode.mcap.partial").mkdir(parents=True)
    (run_dir / "trajectory.jsonl").write_text("{}\n")
    (run_dir / "run.json").write_text(json.dumps({"episode_id": "91", "run_index": 1}))
    assert without_result(tmp_path, ["91"], 1) == ["task 91 run 1"]


def test_without_a_data_folder_the_run_says_to_pass_data(tmp_path):
    """Issue 40: outside the repository root, `homiebot run` without --data ended in a DatasetError traceback."""
    result = subprocess.run(["homiebot", "run", "--tasks", "91", "--runs", "1", "--planner", "expert", "--out",
                             str(tmp_path / "exp")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"homiebot run: error: {tmp_path / 'data'}: not an EMMOE data folder (no train/ or test/ in it or in its "
        "data/); --data names the EMMOE data folder")


def test_runs_without_a_planner_result_are_listed(tmp_path):
    for task, reason in (("91", "end"), ("92", "error"), ("93", "cancelled")):
        (tmp_path / task / "1").mkdir(parents=True)
        (tmp_path / task / "1" / "score.json").write_text(json.dumps({"end_reason": reason}))
    assert without_result(tmp_path, ["91", "92", "93", "94"], 1) == [
        "task 92 run 1", "task 93 run 1", "task 94 run 1"]


@pytest.mark.ros
def test_the_runner_learns_that_a_run_ended_through_ros_only(tmp_path, ros_domain_id, monkeypatch):
    """Every read or listing of the run folder fails in the runner's process once the pending runs are known (as if
    only the evaluator, which runs in its own process, could read it); the run still finishes."""
    import builtins
    import io
    import os

    out = (tmp_path / "exp").resolve()
    guarded = {"on": False, "refused": 0}

    def refuse(path: object) -> None:
        if guarded["on"] and isinstance(path, (str, os.PathLike)) and str(Path(path).absolute()).startswith(str(out)):
            guarded["refused"] += 1
            raise PermissionError(f"the runner must not read {path}")

    def guard(function):
        def guarded_call(path, *args, **kwargs):
            refuse(path)
            return function(path, *args, **kwargs)
        return guarded_call

    for module, name in ((builtins, "open"), (io, "open"), (os, "scandir"), (os, "listdir")):
        monkeypatch.setattr(module, name, guard(getattr(module, name)))
    real_pending = runner.pending_runs

    def pending_then_guard(*args, **kwargs):
        pending = real_pending(*args, **kwargs)
        guarded["on"] = True
        return pending

    monkeypatch.setattr(runner, "pending_runs", pending_then_guard)
    config = RunnerConfig(tasks="92", out=out, runs=1, planner="expert", data_dir=ROOT / "data")
    progress = runner.run_benchmark(config, report=lambda _line: None)
    guarded["on"] = False
    assert (progress.done, progress.failed, guarded["refused"]) == (1, [], 0)
    score = json.loads((out / "92" / "1" / "score.json").read_text())
    assert (score["end_reason"], score["success"], score["task_progress"]) == ("end", True, 1.0)


def test_an_explicit_domain_held_by_another_stack_is_refused(tmp_path):
    from emmoe_core.ros_domains import lease_domain

    with lease_domain() as held:
        config = RunnerConfig(tasks="91", runs=1, planner="expert", out=tmp_path / "exp", data_dir=DATA,
                              domain_id=held.domain_id)
        with pytest.raises(RunnerError, match="in use"):
            runner.run_benchmark(config, report=lambda _line: None)


def test_a_busy_planner_means_the_run_is_under_way_and_its_score_is_its_result():
    """A goal request whose acceptance was lost is sent again; the planner answers the second BUSY while it runs the
    first. The runner then waits the whole run for that run's score and makes the result from it."""
    from emmoe_interfaces.action import RunTask
    from emmoe_interfaces.msg import RunScore

    stack = runner.Stack.__new__(runner.Stack)
    waits: list[float] = []
    score = RunScore(episode_id="emmoe_task_99", steps=10, ended_with_end=True, task_known=True, task_progress=1.0)
    stack.run_task = lambda *_args: RunTask.Result(error_code=RunTask.Result.BUSY)
    stack.wait_for_score = lambda _task, _run, timeout_s=60.0: waits.append(timeout_s) or score
    result, scored = stack.run_and_score("99", 1, 20, 900.0)
    assert (waits, scored) == ([900.0], score)
    assert (result.error_code, result.success, result.steps, scored.task_progress) == (0, True, 10, 1.0)
    stack.run_task = lambda *_args: RunTask.Result(error_code=RunTask.Result.NONE, steps=3)
    assert stack.run_and_score("99", 2, 20, 900.0)[0].steps == 3 and waits[-1] == 60.0
