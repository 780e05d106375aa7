"""Conversions between ROS messages and the planner core's types (message modules only, no rclpy).

Subtasks and images go through emmoe_core.convert, the one conversion of each."""

from __future__ import annotations

from collections.abc import Sequence

from emmoe_core.convert import image_to_rgb, subtask_message
from emmoe_interfaces.msg import StepRecord, VisibleObjects
from emmoe_interfaces.srv import GetObservation
from sensor_msgs.msg import Image

from homiebot_planner.planner import Observation
from homiebot_planner.prompts import VIEW_ORDER
from homiebot_planner.rollout import EpisodeStep


def observation_from_response(response: GetObservation.Response, decode_images: bool = True) -> Observation:
    """The planner's observation from a GetObservation answer (views with no pixels are left out).

    Args:
        response: the simulator's answer.
        decode_images: decode the four views into arrays; a text-only planner does not look at them (False).

    Raises:
        ValueError: when a view cannot be decoded.
    """
    images = {}
    for view in VIEW_ORDER if decode_images else ():
        message = getattr(response, view)
        if message.height and message.width:
            images[view] = image_to_rgb(message)
    seen = [item for item in response.visible if item.view in VIEW_ORDER]
    return Observation(images=images, visible={item.view: list(item.names) for item in seen},
                       locations={item.view: list(item.locations) for item in seen})


def step_record(episode_id: str, instruction: str, run_index: int, planner_name: str, observation_mode: str,
                step: EpisodeStep, views: Sequence[Image] = ()) -> StepRecord:
    """The StepRecord of one step of the episode loop (a run-end marker has an empty subtask)."""
    record = StepRecord()
    record.episode_id = episode_id
    record.instruction = instruction
    record.run_index = run_index
    record.step = step.number
    record.planner = planner_name
    record.observation_mode = observation_mode
    record.inventory_before = list(step.inventory_before)
    record.end_reason = step.end_reason.value if step.end_reason is not None else ""
    record.error_msg = step.error_msg
    record.views = list(views)
    record.visible = [VisibleObjects(view=view, names=list(step.visible.get(view, ())),
                                     locations=list(step.locations.get(view, ())))
                      for view in VIEW_ORDER if view in step.visible]
    decision, execution = step.decision, step.execution
    if decision is not None:
        record.raw_output = decision.raw_output
        record.analysis = decision.analysis
        record.planning_seconds = float(decision.planning_seconds)
    if decision is None or execution is None:
        record.inventory_after = list(step.inventory_before)
        return record
    record.subtask = subtask_message(decision.subtask, decision.model)
    record.inventory_after = list(execution.inventory)
    record.success = execution.success
    record.error_code = execution.error_code
    record.error_type = execution.error_type
    record.feedback = execution.feedback
    record.target_instance = execution.target_instance
    record.target_canonical = execution.target_canonical
    record.place_instance = execution.place_instance
    record.place_canonical = execution.place_canonical
    record.execution_seconds = float(execution.seconds)
    return record
