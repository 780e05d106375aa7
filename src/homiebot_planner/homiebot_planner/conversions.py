"""Conversions between ROS messages and the planner core's types (message modules only, no rclpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from emmoe_interfaces.msg import StepRecord, Subtask
from emmoe_interfaces.srv import GetObservation
from sensor_msgs.msg import Image

from homiebot_planner.planner import Decision, Observation
from homiebot_planner.prompts import VIEW_ORDER

_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4}


def image_to_array(message: Image) -> np.ndarray:
    """An rgb8/bgr8/rgba8/bgra8 Image as an HxWx3 uint8 RGB array.

    Raises:
        ValueError: for another encoding or a buffer that does not fit the size.
    """
    channels = _CHANNELS.get(message.encoding)
    if channels is None:
        raise ValueError(f"unsupported image encoding {message.encoding!r}; expected one of {', '.join(_CHANNELS)}")
    height, width, step = message.height, message.width, message.step or message.width * channels
    data = np.frombuffer(bytes(message.data), dtype=np.uint8)
    if data.size < height * step or step < width * channels:
        raise ValueError(f"image buffer of {data.size} bytes does not fit {width}x{height} {message.encoding}")
    pixels = data[:height * step].reshape(height, step)[:, :width * channels].reshape(height, width, channels)
    if message.encoding.startswith("bgr"):
        pixels = pixels[:, :, 2::-1]
    return np.ascontiguousarray(pixels[:, :, :3])


def observation_from_response(response: GetObservation.Response) -> Observation:
    """The planner's observation from a GetObservation answer (views with no pixels are left out).

    Raises:
        ValueError: when a view cannot be decoded.
    """
    images = {}
    for view in VIEW_ORDER:
        message = getattr(response, view)
        if message.height and message.width:
            images[view] = image_to_array(message)
    visible = {item.view: list(item.names) for item in response.visible if item.view in VIEW_ORDER}
    return Observation(images=images, visible=visible)


def step_record(
    *,
    episode_id: str,
    instruction: str,
    run_index: int,
    decision: Decision,
    planner_name: str,
    observation_mode: str,
    inventory_before: Sequence[str],
    inventory_after: Sequence[str],
    success: bool,
    error_code: int,
    error_type: str,
    feedback: str,
    execution_seconds: float,
    views: Sequence[Image] = (),
) -> StepRecord:
    """The StepRecord of one finished step."""
    record = StepRecord()
    record.episode_id = episode_id
    record.instruction = instruction
    record.run_index = run_index
    record.step = decision.round_number
    record.planner = planner_name
    record.observation_mode = observation_mode
    record.raw_output = decision.raw_output
    record.analysis = decision.analysis
    record.subtask = Subtask(action=decision.subtask.action, target=decision.subtask.target,
                             place=decision.subtask.place, model=decision.model)
    record.inventory_before = list(inventory_before)
    record.inventory_after = list(inventory_after)
    record.success = success
    record.error_code = error_code
    record.error_type = error_type
    record.feedback = feedback
    record.planning_seconds = float(decision.planning_seconds)
    record.execution_seconds = float(execution_seconds)
    record.views = list(views)
    return record
