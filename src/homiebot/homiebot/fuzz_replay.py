"""`homiebot tasks fuzz`: replay fuzzed tasks' experts in MuJoCo, in-process, over `jobs` worker processes.

Each worker keeps one MuJoCo backend and regenerates its tasks from (seed, index) (`homiebot.task_fuzz`); a task's
scene is built like a defined task's (`benchmark_tasks.scene_for`) and its expert replayed by
`homiebot.expert_check.replay` up to the first step that differs from its design. The report
(`task_fuzz.summarize`) goes to `<out>/report.json`, every generated task to `<out>/tasks.yaml` (replay one with
`homiebot tasks check --definitions <out>/tasks.yaml --tasks <index + 1>`).

Each outcome is appended to `<out>/outcomes.jsonl` as soon as it is known, so a run that stops (a crash, Ctrl-C, a
larger `--n` later) goes on where it stopped when started again with the same `--out`, seed and setting: only the
tasks not yet in that file are replayed, and the report covers tasks 0 .. n-1 from the file.
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from homiebot.task_fuzz import FuzzTask, StepKey, StepOutcome, TaskOutcome, cause_of, generate_task

_WORKER: dict[str, Any] = {}
OUTCOMES_FILE = "outcomes.jsonl"


class FuzzOutError(ValueError):
    """The output folder holds outcomes of another fuzz run (another seed or setting)."""


def replay_task(task: FuzzTask, setting: str, backend: Any) -> TaskOutcome:
    """One task's outcome: its scene built, then its expert replayed until a step differs from its design."""
    from homiebot.benchmark_tasks import TaskDefinitionError, scene_for
    from homiebot.expert_check import misplaced_objects, replay

    try:
        scene = scene_for(task.definition)
    except TaskDefinitionError as error:
        return TaskOutcome(task.seed, task.index, task.kind, (), f"no scene: {error}")
    misplaced = misplaced_objects(task.definition, scene)
    if misplaced:
        return TaskOutcome(task.seed, task.index, task.kind, (), f"misplaced: {misplaced[0]}")
    steps = []
    for check in replay(task.definition, scene, backend=backend, setting=setting):
        key = task.keys[check.index - 1]
        steps.append(StepOutcome(key, check.as_designed, check.code, check.detail or check.feedback))
        if not check.as_designed:
            break
    return TaskOutcome(task.seed, task.index, task.kind, tuple(steps))


def _start_worker(setting: str) -> None:
    from habitat_bridge.backends.mujoco_backend import MujocoBackend

    _WORKER["setting"] = setting
    _WORKER["backend"] = MujocoBackend()


def _work(seed: int, index: int) -> TaskOutcome:
    return replay_task(generate_task(seed, index), _WORKER["setting"], _WORKER["backend"])


def replay_all(indices: Sequence[int], seed: int, setting: str, jobs: int) -> Iterator[TaskOutcome]:
    """The outcomes of the tasks `indices` in order (in-process for one job, else `jobs` processes)."""
    if jobs <= 1:
        _start_worker(setting)
        try:
            for index in indices:
                yield _work(seed, index)
        finally:
            _WORKER.pop("backend").close()
        return
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                             initargs=(setting,)) as pool:
        yield from pool.map(_work, [seed] * len(indices), indices)


def outcome_line(outcome: TaskOutcome, setting: str) -> str:
    """One line of `outcomes.jsonl`: the outcome's fields and the setting."""
    return json.dumps({**asdict(outcome), "setting": setting})


def read_outcomes(path: Path, seed: int, setting: str) -> dict[int, TaskOutcome]:
    """The outcomes an earlier run of this seed and setting wrote to `path`, by task index (a last line cut short
    by a crash is left out: that task is replayed again).

    Raises:
        FuzzOutError: when the file holds another seed's or setting's outcomes.
    """
    found: dict[int, TaskOutcome] = {}
    if not path.exists():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (entry["seed"], entry["setting"]) != (seed, setting):
            raise FuzzOutError(f"{path} holds the outcomes of seed {entry['seed']}, setting {entry['setting']}; "
                               f"give this run (seed {seed}, setting {setting}) another --out")
        steps = tuple(StepOutcome(**{**step, "key": StepKey(**step["key"])}) for step in entry["steps"])
        found[entry["index"]] = TaskOutcome(seed, entry["index"], entry["kind"], steps, entry["setup_error"])
    return found


def progress_line(done: int, count: int, outcome: TaskOutcome) -> str:
    """One line per replayed task."""
    head = f"[{done}/{count}] task {outcome.seed}:{outcome.index} ({outcome.kind}): "
    if outcome.setup_error:
        return head + outcome.setup_error
    if outcome.ok:
        return head + f"as designed ({len(outcome.steps)} steps)"
    last = outcome.steps[-1]
    return head + f"{last.key.label()} -> {cause_of(last.code, last.detail)}"


def fuzz(count: int, seed: int, setting: str, jobs: int, out: Path,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Generate and replay `count` tasks (those not yet in `<out>/outcomes.jsonl`), write `<out>/report.json` and
    `<out>/tasks.yaml`, return the report.

    Raises:
        FuzzOutError: when `out` holds the outcomes of another seed or setting.
    """
    import yaml

    from homiebot.task_fuzz import summarize

    out.mkdir(parents=True, exist_ok=True)
    known = read_outcomes(out / OUTCOMES_FILE, seed, setting)
    tasks = {index + 1: generate_task(seed, index).mapping for index in range(count)}
    (out / "tasks.yaml").write_text(yaml.safe_dump(tasks, sort_keys=False, width=200), encoding="utf-8")
    pending = [index for index in range(count) if index not in known]
    resumed = f"; {count - len(pending)} already replayed in {out / OUTCOMES_FILE}" if len(pending) < count else ""
    echo(f"fuzz: {count} task(s) of seed {seed}, setting {setting}, {jobs} job(s); tasks in {out / 'tasks.yaml'}"
         + resumed)
    with (out / OUTCOMES_FILE).open("a", encoding="utf-8") as log:
        for done, outcome in enumerate(replay_all(pending, seed, setting, jobs), start=count - len(pending) + 1):
            log.write(outcome_line(outcome, setting) + "\n")
            log.flush()
            known[outcome.index] = outcome
            echo(progress_line(done, count, outcome))
    report = {"seed": seed, "setting": setting, **summarize([known[index] for index in range(count)])}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report
