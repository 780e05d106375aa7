"""A hand-made EMMOE-format data set (official layout) of three tasks, and helpers shared by the training tests.

Task 1: a failed Pick (target far away) followed by a successful re-plan, then Pick, Go to, Put and End.
Task 2: two failures in a row before the re-plan succeeds; ends with Put and End.
Task 3: a failure followed directly by End; the End block has no Feedback/Inventory lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

TASK_1 = """Task: Put the apple from the kitchen_counter into the fridge

Subtask1: [Go to, fridge] (NoMaD)
Analysis: The fridge must be opened before anything can go in, so I go there first.
Feedback: None
Inventory: None

Subtask2: [Open, fridge] (octo)
Analysis: I am in front of the fridge and my hand is empty, so I open it.
Feedback: None
Inventory: None

Subtask3: [Pick, apple] (RT-1-X)
Analysis: The fridge is open; now I need the apple.
Feedback: Unable to pick, the target is far away
Inventory: None

Subtask4: [Go to, kitchen_counter] (NoMaD)
Analysis: The apple is too far away, so I move to the kitchen_counter where it lies.
Feedback: None
Inventory: None

Subtask5: [Pick, apple] (RT-1-X)
Analysis: I am at the kitchen_counter and can reach the apple.
Feedback: None
Inventory: apple

Subtask6: [Go to, fridge] (NoMaD)
Analysis: I hold the apple and go back to the open fridge.
Feedback: None
Inventory: apple

Subtask7: [Put, apple, fridge] (RT-1-X)
Analysis: I put the apple into the fridge.
Feedback: None
Inventory: None

Subtask8: [End]
Analysis: The apple is in the fridge, so the task is complete.
Feedback: None
Inventory: None
"""

TASK_2 = """Task: Bring the green_can to the sofa

Subtask1: [Go to, green_can] (PixNav)
Analysis: I can see the green_can on the table, so I go to it.
Feedback: None
Inventory: None

Subtask2: [Pick, green_can] (RT-1-X)
Analysis: I am next to the green_can, so I pick it up.
Feedback: Unable to pick, the subtask is too difficult to perform
Inventory: None

Subtask3: [Pick, can] (RT-1-X)
Analysis: Maybe a shorter name works better for the grasp.
Feedback: can does not exist! Please choose another object
Inventory: None

Subtask4: [Pick, green_can] (RT-1-X)
Analysis: I try to pick the green_can again with its full name.
Feedback: None
Inventory: green_can

Subtask5: [Go to, sofa] (NoMaD)
Analysis: I hold the green_can and carry it to the sofa.
Feedback: None
Inventory: green_can

Subtask6: [Put, green_can, sofa] (RT-1-X)
Analysis: I am at the sofa and put the green_can on it.
Feedback: None
Inventory: None

Subtask7: [End]
Analysis: The green_can is on the sofa; nothing is left to do.
Feedback: None
Inventory: None
"""

TASK_3 = """Task: Close the fridge

Subtask1: [Go to, fridge] (NoMaD)
Analysis: The fridge door is open; I go to the fridge.
Feedback: None
Inventory: None

Subtask2: [Close, fridge] (octo)
Analysis: I am at the fridge with an empty hand, so I close it.
Feedback: None
Inventory: None

Subtask3: [Pick, bowl] (RT-1-X)
Analysis: I also want to tidy the bowl I see on the counter.
Feedback: Unable to pick, the target is far away
Inventory: None

Subtask4: [End]
Analysis: The fridge is closed, which was the task, so I stop here.
"""

TASKS = {"1": TASK_1, "2": TASK_2, "3": TASK_3}
STEPS_PER_TASK = {"1": 8, "2": 7, "3": 4}
VIEWS = ("front", "left", "back", "right")
VIEW_COLOURS = {"front": (200, 40, 40), "left": (40, 200, 40), "back": (40, 40, 200), "right": (200, 200, 40)}


def write_task(split_dir: Path, task_id: str, info: str, steps: int, images: bool = True) -> Path:
    """Write one task folder: info.txt and (optionally) four 256x256 PNG observations per step."""
    from PIL import Image

    folder = split_dir / task_id
    folder.mkdir(parents=True)
    (folder / "info.txt").write_text(info, encoding="utf-8")
    if images:
        for step in range(1, steps + 1):
            for view in VIEWS:
                colour = tuple(min(255, channel + 5 * step) for channel in VIEW_COLOURS[view])
                Image.new("RGB", (256, 256), colour).save(folder / f"subtask{step}_{view}.png")
    return folder / "info.txt"


@pytest.fixture
def emmoe_data(tmp_path: Path) -> Path:
    """EMMOE-100/data-like folder with train/1, train/2, train/3 (info.txt and images)."""
    data = tmp_path / "EMMOE-100" / "data"
    for task_id, info in TASKS.items():
        write_task(data / "train", task_id, info, STEPS_PER_TASK[task_id])
    return data


@pytest.fixture(scope="module", autouse=True)
def single_torch_thread() -> Iterator[None]:
    """Tiny models train fastest on one thread; on a busy 2-core machine two threads are 4x slower (spinning)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
