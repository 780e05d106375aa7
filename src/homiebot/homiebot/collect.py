"""`homiebot collect`: record the annotated expert trajectories through the real ROS 2 stack; with `--dagger`,
the on-policy rows of a training round (`collect_dagger`, at the end).

Every selected task (variants `<id>_v<n>` included) is run once on the stack of `homiebot run` with the expert
planner replaying its info.txt block by block, designed failures included (expert source "replay"). The runs land
in a work folder (resumable: a run with a score is not run again); then each task is written to the output data
folder in the official layout: info.txt with the subtasks, models and analyses of the design but the feedback and
inventory the stack really returned, keypath.json and scene.json as committed, and the four views the stack recorded
after every subtask (`subtask{n}_{front,left,back,right}.png`), and `visible.json` and `locations.json`: for each
subtask, the names visible per view when it was planned and where the small objects among them rested (what a
text-only planner is shown). Every step whose outcome differs from its design
(another error type or feedback string, a missing step) is reported, and such a task is left out of the output
folder (its raw run stays in the work folder).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emmoe_core.protocol import VIEWS
from emmoe_eval.dataset import (
    INFO_FILE,
    KEYPATH_FILE,
    LOCATIONS_FILE,
    SCENE_FILE,
    VISIBLE_FILE,
    InfoTrajectory,
    Task,
    format_info,
    image_name,
    load_tasks,
)
from emmoe_eval.runs import TRAJECTORY_FILE, Step, read_trajectory

from homiebot.conditions import DEFAULT_CONDITIONS, check_conditions
from homiebot.setting import DEFAULT_SETTING, check_setting

if TYPE_CHECKING:
    from homiebot.run_config import RayOptions

RUN = 1  # the one run per task collect makes


class CollectError(RuntimeError):
    """Collection could not run (bad selection, stack failure); the message says why."""


@dataclass(frozen=True)
class CollectConfig:
    """What `homiebot collect` does.

    Attributes:
        tasks: "train", "test", "all" or comma-separated task ids (variant ids like "12_v1" included).
        data_dir: the data folder holding the designed tasks (train/ and test/).
        out: the data folder to write the collected tasks to (the official layout).
        work: the folder holding the raw runs (resumable).
        jobs: parallel stacks.
        variants: include the variant folders (`<id>_v<n>`) of the selected splits.
        overrides: extra `NODE.PARAM=VALUE` parameters for the stack.
        conditions: reliable or paper (homiebot.conditions); under paper a step the failure model fails differs
            from its design, so its task is left out like any other that did not go as designed.
        ray: run the tasks on a Ray cluster instead of `jobs` local stacks (homiebot.ray_runner).
    """

    tasks: str = "all"
    data_dir: Path = Path("data")
    out: Path = Path("collected")
    work: Path = Path("collected/runs")
    jobs: int = 1
    variants: bool = True
    overrides: tuple[str, ...] = ()
    conditions: str = DEFAULT_CONDITIONS
    ray: RayOptions | None = None

    def __post_init__(self) -> None:
        check_conditions(self.conditions)
        if self.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, got {self.jobs}")
        if self.out.resolve() == self.data_dir.resolve():
            raise ValueError("--out must differ from --data: collect never overwrites the designed tasks")


@dataclass(frozen=True)
class Difference:
    """One step whose collected outcome differs from its design."""

    task_id: str
    index: int
    designed: str
    got: str

    def __str__(self) -> str:
        return f"task {self.task_id} step {self.index}: designed {self.designed!r}, got {self.got!r}"


def selected_tasks(config: CollectConfig) -> dict[str, Task]:
    """The designed tasks to collect, by id.

    Raises:
        CollectError: for unknown ids or an empty selection.
    """
    return designed_tasks(config.data_dir, config.tasks, config.variants)


def designed_tasks(data_dir: Path, selection: str, variants: bool = True) -> dict[str, Task]:
    """The tasks of `data_dir` that `selection` ("train", "test", "all" or ids) names, variants included or not.

    Raises:
        CollectError: for unknown ids or an empty selection.
    """
    available = load_tasks(data_dir, "all")
    if selection in ("train", "test", "all"):
        splits = ("train", "test") if selection == "all" else (selection,)
        chosen = {task_id: task for task_id, task in available.items() if task.split in splits
                  and (variants or task_id.isdigit())}
    else:
        wanted = [item.strip() for item in selection.split(",") if item.strip()]
        missing = [task_id for task_id in wanted if task_id not in available]
        if missing:
            raise CollectError(f"unknown task id(s) {', '.join(missing)} in {data_dir}")
        chosen = {task_id: available[task_id] for task_id in wanted}
    if not chosen:
        raise CollectError(f"no tasks selected by {selection!r} in {data_dir}")
    return chosen


def compare(task_id: str, design: InfoTrajectory, steps: Sequence[Step]) -> list[Difference]:
    """The steps of a collected run that differ from the design (subtask, feedback, or a missing step)."""
    differences = []
    executed = [step for step in steps if step.action]
    for block, step in zip(design.blocks, executed):
        designed = f"{block.subtask} -> {block.feedback}"
        got = f"{step.subtask} -> {step.feedback}"
        if str(block.subtask) != str(step.subtask) or (step.feedback or "") != block.feedback:
            differences.append(Difference(task_id, block.index, designed, got))
    for block in design.blocks[len(executed):]:
        differences.append(Difference(task_id, block.index, f"{block.subtask} -> {block.feedback}", "not executed"))
    return differences


def collected_info(design: InfoTrajectory, steps: Sequence[Step]) -> InfoTrajectory:
    """The design's blocks with the feedback and inventory the stack really returned."""
    executed = [step for step in steps if step.action]
    blocks = []
    for block, step in zip(design.blocks, executed):
        inventory = " ".join(step.inventory) if step.inventory else "None"
        blocks.append(replace(block, feedback=step.feedback or "None", inventory=inventory))
    return InfoTrajectory(task=design.task, blocks=tuple(blocks))


def write_collected(task: Task, run_dir: Path, out: Path) -> list[Difference]:
    """Write one collected task (official layout) from its run folder; returns its differences from the design."""
    run = read_trajectory(run_dir / TRAJECTORY_FILE, task.task_id, str(RUN))
    steps = list(run.steps)
    target = out / task.split / task.task_id
    target.mkdir(parents=True, exist_ok=True)
    for stale in target.glob("subtask*_*.png"):
        stale.unlink()
    (target / INFO_FILE).write_text(format_info(collected_info(task.info, steps)), encoding="utf-8")
    for name in (KEYPATH_FILE, SCENE_FILE):
        if (task.directory / name).is_file():
            shutil.copyfile(task.directory / name, target / name)
    differences = compare(task.task_id, task.info, steps)
    executed = [step for step in steps if step.action]
    for name, key in ((VISIBLE_FILE, "visible"), (LOCATIONS_FILE, "locations")):
        table = {str(step.step): dict(getattr(step, key)) for step in executed if getattr(step, key) is not None}
        (target / name).write_text(json.dumps(table, indent=0), encoding="utf-8")
    for index in range(1, len(executed) + 1):
        for view in VIEWS:
            source = run_dir / image_name(index, view)
            if source.is_file():
                shutil.copyfile(source, target / image_name(index, view))
            else:
                differences.append(Difference(task.task_id, index, f"{view} view", "no image recorded"))
    return differences


def collect(config: CollectConfig, report: Callable[[str], None] = print,
            on_progress: Callable[[Any, str], None] | None = None) -> list[Difference]:
    """Run the selected tasks through the stack and write them; returns every step that differs from its design.

    Raises:
        CollectError: when the selection is empty or the stack cannot run.
    """
    from homiebot.run_config import RunnerConfig, RunnerError
    from homiebot.runner import run_benchmark

    tasks = selected_tasks(config)
    runner = RunnerConfig(tasks=",".join(tasks), out=config.work, runs=1, planner="expert", data_dir=config.data_dir,
                          jobs=config.jobs, max_steps=max(len(task.info.blocks) for task in tasks.values()) + 1,
                          overrides=("planner.expert_source=replay", *config.overrides), record_videos=False,
                          conditions=config.conditions, ray=config.ray)
    try:
        run_benchmark(runner, report=report, on_progress=on_progress)
    except RunnerError as error:
        raise CollectError(str(error)) from error
    differences: list[Difference] = []
    for task_id, task in tasks.items():
        run_dir = config.work / task_id / str(RUN)
        if not (run_dir / TRAJECTORY_FILE).is_file():
            differences.append(Difference(task_id, 0, "a recorded run", "no run"))
            continue
        found = write_collected(task, run_dir, config.out)
        if found:  # a trajectory that did not happen as designed would teach the wrong next step
            shutil.rmtree(config.out / task.split / task.task_id)
        differences.extend(found)
    return differences


@dataclass(frozen=True)
class DaggerCollectConfig:
    """What `homiebot collect --dagger` does: run the student with the re-planning expert beside it.

    Attributes:
        tasks: "train" or comma-separated train task ids (variants `<id>_v<n>` included with "train").
        data_dir: the data folder holding the tasks.
        out: the round's folder: `rows/` (the training rows) and `runs/` (the raw runs, for resuming).
        model: the student's adapter folder (HomieBot-135M's shipped one when "").
        beta: probability that a step executes the oracle's answer instead of the student's.
        seed: seed of those draws.
        exclude: task ids kept out (the validation tasks, with their variants).
        jobs: parallel stacks.
        setting, conditions: as for `homiebot run`.
        overrides: extra `NODE.PARAM=VALUE` parameters for the stack.
        ray: run on a Ray cluster instead of `jobs` local stacks.
    """

    out: Path
    tasks: str = "train"
    data_dir: Path = Path("data")
    model: str = ""
    beta: float = 0.0
    seed: int = 0
    exclude: tuple[str, ...] = ()
    jobs: int = 1
    setting: str = DEFAULT_SETTING
    conditions: str = DEFAULT_CONDITIONS
    overrides: tuple[str, ...] = ()
    ray: RayOptions | None = None

    def __post_init__(self) -> None:
        check_conditions(self.conditions)
        check_setting(self.setting)
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"--beta must be in [0, 1], got {self.beta}")
        if self.jobs < 1:
            raise ValueError(f"--jobs must be at least 1, got {self.jobs}")

    @property
    def rows_dir(self) -> Path:
        """Where the planner nodes write the rows."""
        return self.out / "rows"


def collect_dagger(config: DaggerCollectConfig, report: Callable[[str], None] = print,
                   on_progress: Callable[[Any, str], None] | None = None) -> list[str]:
    """Run the student on the selected train tasks with the oracle answering every step; returns the task ids run.

    Resumable: the runner skips runs that have a score. The rows land in `config.rows_dir`.

    Raises:
        CollectError: for a selection with a test task, an empty selection, or a stack failure.
    """
    from homiebot.run_config import RunnerConfig, RunnerError
    from homiebot.runner import run_benchmark

    tasks = designed_tasks(config.data_dir, config.tasks)
    test = sorted(task_id for task_id, task in tasks.items() if task.split != "train")
    if test:
        raise CollectError(f"on-policy data comes from train tasks only; {', '.join(test)} belong to the test split")
    held = set(config.exclude)
    chosen = [task_id for task_id in tasks if task_id.split("_v")[0] not in held]
    if not chosen:
        raise CollectError(f"--exclude {','.join(config.exclude)} leaves no task to collect")
    overrides = (f"planner.dagger_rows_dir={config.rows_dir.resolve()}", f"planner.dagger_beta={config.beta}",
                 f"planner.dagger_seed={config.seed}", *config.overrides)
    runner = RunnerConfig(tasks=",".join(chosen), out=config.out / "runs", runs=1, planner="homiebot",
                          model=config.model, data_dir=config.data_dir, jobs=config.jobs, overrides=overrides,
                          record_videos=False, setting=config.setting, conditions=config.conditions, ray=config.ray)
    try:
        run_benchmark(runner, report=report, on_progress=on_progress)
    except RunnerError as error:
        raise CollectError(str(error)) from error
    return chosen
