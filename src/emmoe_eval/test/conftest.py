"""A small hand-made EMMOE data set and experiment, used by the metric, CLI, report and bag tests.

Tasks (official layout under data/):
- train/3 "find a cold apple and put it on the kitchen_counter": info.txt with 7 blocks (L* = 7, one failed block);
  one keypath of 6 nodes written with aliases (refrigerator, red_apple, kitchen counter, sink).
- test/91 "put the red bowl on the brown table": info.txt with 5 blocks (L* = 5); keypaths K1 (5 nodes) and
  K2 (4 nodes, no second Go to).

Runs (exp/<task>/<run>/trajectory.jsonl), x = failed step:
- 3/1: Go to fridge, Open refrigerator, x Pick apple (D1), Go to apple, Pick red_apple, Go to kitchen counter,
       Put apple kitchen_counter, End                                   -> TP 1, success, L 8, 1 re-plan
- 3/2: Go to fridge, x Pick apple (E1), Open fridge, x Pick apple (E1), x Pick apple (E1), Go to kitchen_counter
       (no End, stopped)                                                -> TP 2/6, 3 re-plans
- 3/3: Go to fridge, Open fridge, Pick apple, x Fetch apple (F1), End   -> TP 3/6, 1 re-plan
- 91/1: Go to bowl, Pick bowl, Go to brown_table, Put bowl brown_table, End -> TP 1, success, L 5
- 91/2: Go to bowl, Pick bowl, x Put bowl brown_table (D1), x Put bowl brown_table (E2), End
                                                                        -> TP max(2/5, 2/4) = 1/2, 2 re-plans
- 91/3: a trajectory.jsonl whose second line is cut off mid-write      -> corrupt: TP 0, failed
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from emmoe_eval.dataset import InfoBlock, InfoTrajectory, write_task
from emmoe_core.protocol import feedback_for, parse_subtask
from emmoe_eval.runs import Step, write_trajectory


def block(index: int, subtask: str, model: str = "", feedback: str = "None", inventory: str = "None",
          analysis: str = "") -> InfoBlock:
    """An info.txt block from its bracketed subtask."""
    return InfoBlock(index, parse_subtask(subtask), model, analysis or f"step {index}", feedback, inventory)


def ok(number: int, subtask: str, model: str = "", inventory: tuple[str, ...] = ()) -> Step:
    """A successful step."""
    parts = parse_subtask(subtask)
    return Step(number, parts.action, parts.target, parts.place, model, True, "None", inventory=inventory)


def fail(number: int, subtask: str, error_type: str, model: str = "", inventory: tuple[str, ...] = ()) -> Step:
    """A failed step with the protocol's feedback string for its error type."""
    parts = parse_subtask(subtask)
    feedback = feedback_for(error_type, parts.action, parts.place or parts.target)
    return Step(number, parts.action, parts.target, parts.place, model, False, feedback, inventory=inventory)


def end(number: int) -> Step:
    """An End step."""
    return Step(number, "End", model="None")


TASK_3_INFO = InfoTrajectory("find a cold apple and put it on the kitchen_counter", (
    block(1, "[Go to, fridge]", "NoMaD"),
    block(2, "[Open, fridge]", "octo"),
    block(3, "[Pick, apple]", "RT-1-X", feedback="Unable to pick, the target is far away"),
    block(4, "[Pick, apple]", "RT-1-X", inventory="apple"),
    block(5, "[Go to, kitchen_counter]", "NoMaD", inventory="apple"),
    block(6, "[Put, apple, kitchen_counter]", "RT-1-X"),
    block(7, "[End]"),
))
TASK_3_KEYPATHS = [tuple(parse_subtask(node) for node in (
    "[Go to, refrigerator]", "[Open, fridge]", "[Pick, red_apple]", "[Go to, kitchen counter]", "[Put, apple, sink]",
    "[End]"))]
TASK_91_INFO = InfoTrajectory("put the red bowl on the brown table", (
    block(1, "[Go to, bowl]", "PixNav"),
    block(2, "[Pick, bowl]", "RT-1-X", inventory="bowl"),
    block(3, "[Go to, brown_table]", "NoMaD", inventory="bowl"),
    block(4, "[Put, bowl, brown_table]", "RT-1-X"),
    block(5, "[End]"),
))
TASK_91_KEYPATHS = [
    tuple(parse_subtask(node) for node in ("[Go to, red_bowl]", "[Pick, red bowl]", "[Go to, table]",
                                            "[Put, bowl, brown table]", "[End]")),
    tuple(parse_subtask(node) for node in ("[Go to, bowl]", "[Pick, bowl]", "[Put, bowl, brown_table]", "[End]")),
]

RUNS: dict[tuple[str, str], list[Step]] = {
    ("3", "1"): [ok(1, "[Go to, fridge]", "NoMaD"), ok(2, "[Open, refrigerator]", "octo"),
                 fail(3, "[Pick, apple]", "D1", "RT-1-X"), ok(4, "[Go to, apple]", "PixNav"),
                 ok(5, "[Pick, red_apple]", "RT-1-X", ("red_apple",)),
                 ok(6, "[Go to, kitchen counter]", "NoMaD", ("red_apple",)),
                 ok(7, "[Put, apple, kitchen_counter]", "RT-1-X"), end(8)],
    ("3", "2"): [ok(1, "[Go to, fridge]", "NoMaD"), fail(2, "[Pick, apple]", "E1", "RT-1-X"),
                 ok(3, "[Open, fridge]", "octo"), fail(4, "[Pick, apple]", "E1", "RT-1-X"),
                 fail(5, "[Pick, apple]", "E1", "RT-1-X"), ok(6, "[Go to, kitchen_counter]", "NoMaD")],
    ("3", "3"): [ok(1, "[Go to, fridge]", "NoMaD"), ok(2, "[Open, fridge]", "octo"),
                 ok(3, "[Pick, apple]", "RT-1-X", ("apple",)), fail(4, "[Fetch, apple]", "F1", "RT-1-X", ("apple",)),
                 end(5)],
    ("91", "1"): [ok(1, "[Go to, bowl]", "PixNav"), ok(2, "[Pick, bowl]", "RT-1-X", ("bowl",)),
                  ok(3, "[Go to, brown_table]", "NoMaD", ("bowl",)), ok(4, "[Put, bowl, brown_table]", "RT-1-X"),
                  end(5)],
    ("91", "2"): [ok(1, "[Go to, bowl]", "PixNav"), ok(2, "[Pick, bowl]", "RT-1-X", ("bowl",)),
                  fail(3, "[Put, bowl, brown_table]", "D1", "RT-1-X", ("bowl",)),
                  fail(4, "[Put, bowl, brown_table]", "E2", "RT-1-X"), end(5)],
}


@dataclass
class Handmade:
    """Paths of the hand-made data set and experiment."""

    data_dir: Path
    runs_dir: Path
    corrupt_run: Path


def write_handmade(root: Path) -> Handmade:
    """Write the data set and the experiment under `root`."""
    data_dir = root / "EMMOE-100" / "data"
    write_task(data_dir, "train", "3", TASK_3_INFO, TASK_3_KEYPATHS, scene={"episodes": []})
    write_task(data_dir, "test", "91", TASK_91_INFO, TASK_91_KEYPATHS, scene={"episodes": []})
    runs_dir = root / "exp"
    for (task_id, run_id), steps in RUNS.items():
        write_trajectory(runs_dir / task_id / run_id / "trajectory.jsonl", steps)
    corrupt = runs_dir / "91" / "3" / "trajectory.jsonl"
    corrupt.parent.mkdir(parents=True)
    first = json.dumps(ok(1, "[Go to, bowl]", "PixNav").to_json())
    corrupt.write_text(first + "\n" + first[: len(first) // 2], encoding="utf-8")
    return Handmade(data_dir, runs_dir, corrupt)


@pytest.fixture
def handmade(tmp_path: Path) -> Handmade:
    """The hand-made data set and experiment in a temporary folder."""
    return write_handmade(tmp_path)


@pytest.fixture
def kit() -> SimpleNamespace:
    """The step and block builders of this module, for tests (test modules cannot import conftest)."""
    return SimpleNamespace(ok=ok, fail=fail, end=end, block=block, runs=RUNS, write_handmade=write_handmade,
                           task_3_info=TASK_3_INFO, task_3_keypaths=TASK_3_KEYPATHS,
                           task_91_info=TASK_91_INFO, task_91_keypaths=TASK_91_KEYPATHS)
