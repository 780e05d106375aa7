"""Message conversions (message classes only; no ROS graph)."""

from __future__ import annotations

import numpy as np
import pytest
from emmoe_interfaces.msg import VisibleObjects
from emmoe_interfaces.srv import GetObservation
from emmoe_core.protocol import SubtaskText
from sensor_msgs.msg import Image

from homiebot_planner.conversions import observation_from_response, step_record
from homiebot_planner.rollout import EndReason, EpisodeStep, Execution
from homiebot_planner.planner import Decision


def _image(pixels: np.ndarray, encoding: str, padding: int = 0) -> Image:
    height, width, channels = pixels.shape
    rows = [row.tobytes() + bytes(padding) for row in pixels]
    return Image(height=height, width=width, encoding=encoding, step=width * channels + padding, data=b"".join(rows))


def test_observation_from_response() -> None:
    response = GetObservation.Response()
    response.front = _image(np.zeros((4, 4, 3), np.uint8), "rgb8")
    response.visible = [VisibleObjects(view="front", names=["013_apple"], locations=["in fridge"]),
                        VisibleObjects(view="up", names=["x"])]
    observation = observation_from_response(response)
    assert list(observation.images) == ["front"] and observation.images["front"].shape == (4, 4, 3)
    assert observation.visible == {"front": ["013_apple"]} and observation.locations == {"front": ["in fridge"]}
    text_only = observation_from_response(response, decode_images=False)  # a text-only planner skips the pixels
    assert not text_only.images and text_only.visible == observation.visible
    response.left = Image(height=1, width=1, encoding="mono8", step=1, data=b"\x00")  # the planner takes colour only
    with pytest.raises(ValueError, match="unsupported image encoding 'mono8'"):
        observation_from_response(response)


def test_step_record_fields() -> None:
    decision = Decision(round_number=3, user_message="u", raw_output="raw", parsed=None,
                        subtask=SubtaskText("Put", "apple", "fridge"), model="RT-1-X", analysis="a", samples=2,
                        gave_up=False, valid=True, planning_seconds=1.5)
    execution = Execution(success=False, inventory=(), error_code=10, error_type="E2",
                          feedback="Unable to put, and the object is missing", target_instance="apple_0",
                          target_canonical="013_apple", place_instance="fridge_0", place_canonical="fridge",
                          seconds=2.0)
    step = EpisodeStep(number=3, decision=decision, execution=execution, inventory_before=("apple",),
                       visible={"front": ["frl_apartment_refrigerator", "013_apple"], "back": []},
                       locations={"front": ["", "in frl_apartment_refrigerator"], "back": []})
    record = step_record("91", "i", 2, "mock", "text", step)
    assert [(item.view, list(item.names), list(item.locations)) for item in record.visible] == [
        ("front", ["frl_apartment_refrigerator", "013_apple"], ["", "in frl_apartment_refrigerator"]),
        ("back", [], [])]
    assert (record.step, record.subtask.action, record.subtask.target, record.subtask.place, record.subtask.model) == (
        3, "Put", "apple", "fridge", "RT-1-X")
    assert (record.inventory_before, record.inventory_after, record.error_type) == (["apple"], [], "E2")
    assert record.planning_seconds == pytest.approx(1.5) and record.observation_mode == "text"
    assert (record.target_instance, record.target_canonical, record.place_instance, record.place_canonical) == (
        "apple_0", "013_apple", "fridge_0", "fridge")
    assert record.end_reason == "" and record.execution_seconds == pytest.approx(2.0)


def test_run_end_marker_record_has_no_subtask() -> None:
    step = EpisodeStep(number=4, decision=None, execution=None, inventory_before=("bowl",),
                       end_reason=EndReason.ERROR, error_msg="get_observation: no answer within 30 s")
    record = step_record("91", "i", 1, "mock", "text", step)
    assert (record.step, record.subtask.action, record.end_reason) == (4, "", "error")
    assert record.error_msg == "get_observation: no answer within 30 s" and record.inventory_after == ["bowl"]
