"""StepRecord messages (emmoe_interfaces/msg/StepRecord) as trajectory steps: the one conversion used everywhere
(the evaluator, bag scoring and the planner's own record of a run).

The functions read attributes only, so they accept both rclpy messages (the evaluator node) and the dataclasses the
`rosbags` library deserialises bags into (`emmoe-eval score-bag`); this module never imports rclpy. The views are
decoded by emmoe_core.convert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from emmoe_core.convert import PICTURE_ENCODINGS, image_to_array
from emmoe_core.protocol import SUCCESS_FEEDBACK, VIEWS

from emmoe_eval.dataset import image_name
from emmoe_eval.runs import Step


@dataclass(frozen=True)
class RunInfo:
    """The run-level fields of a StepRecord.

    Attributes:
        episode_id: the task id or generated episode id.
        run_index: 1-based run of the task.
        instruction: the natural-language instruction.
        planner: planner backend and model.
        observation_mode: "images" or "text".
    """

    episode_id: str
    run_index: int
    instruction: str = ""
    planner: str = ""
    observation_mode: str = ""

    @property
    def key(self) -> tuple[str, int]:
        """(episode_id, run_index): identifies the run."""
        return (self.episode_id, self.run_index)

    def to_json(self) -> dict[str, Any]:
        """run.json content."""
        return {"episode_id": self.episode_id, "run_index": self.run_index, "instruction": self.instruction,
                "planner": self.planner, "observation_mode": self.observation_mode}


def run_info_from_record(record: Any) -> RunInfo:
    """The run a StepRecord belongs to."""
    return RunInfo(episode_id=record.episode_id, run_index=int(record.run_index), instruction=record.instruction,
                   planner=record.planner, observation_mode=record.observation_mode)


def is_end_marker(record: Any) -> bool:
    """Whether a StepRecord is a run-end marker (empty subtask action): not an executed step."""
    return not record.subtask.action


def end_reason_of(record: Any) -> str | None:
    """The record's end reason (set on a run's last record only), None when empty or absent (older bags)."""
    return getattr(record, "end_reason", "") or None


def step_from_record(record: Any) -> Step:
    """The trajectory step of a StepRecord (not for run-end markers: see `is_end_marker`).

    `inventory` is the inventory after the step; the timing fields go to `extra`; `images` names the four view files
    (`subtask{step}_{view}.png`) when the record carries views; the resolved target and place and the end reason are
    copied when the record has them (records of older bags lack these fields), and so are the names visible when the
    step was planned.
    """
    subtask = record.subtask
    feedback = record.feedback or (SUCCESS_FEEDBACK if record.success else None)
    views = len(record.views)
    return Step(
        step=int(record.step), action=subtask.action, target=subtask.target, place=subtask.place,
        model=subtask.model, success=bool(record.success), feedback=feedback,
        analysis=record.analysis or None, raw_output=record.raw_output or None,
        inventory=tuple(record.inventory_after), error_type=record.error_type or None,
        images=tuple(image_name(int(record.step), view) for view in VIEWS[:views]),
        extra={"planning_seconds": float(record.planning_seconds),
               "execution_seconds": float(record.execution_seconds)},
        target_instance=getattr(record, "target_instance", ""),
        target_canonical=getattr(record, "target_canonical", ""),
        place_instance=getattr(record, "place_instance", ""), place_canonical=getattr(record, "place_canonical", ""),
        end_reason=end_reason_of(record),
        visible={item.view: tuple(item.names) for item in getattr(record, "visible", ())} or None,
        locations=_locations(getattr(record, "visible", ())),
    )


def _locations(visible: Any) -> dict[str, tuple[str, ...]] | None:
    """View -> the locations parallel to its names; None for records written before locations existed."""
    locations = {item.view: tuple(getattr(item, "locations", ())) for item in visible}
    return locations if any(locations.values()) else None


def view_arrays(record: Any) -> list[np.ndarray]:
    """The record's views (front, left, back, right order) as 8-bit RGB or grey arrays.

    Raises:
        ImageEncodingError: (emmoe_core.convert) for a view that is not an 8-bit picture or does not fit its size.
    """
    return [image_to_array(view, PICTURE_ENCODINGS) for view in record.views]
