"""`SensorSkills`: one sensor-only attempt (the arm reset, then the skill), for the no_background setting.

The skills of the servers the planner's model choice names: NoMaD and PixNav (navigate), RT-1-X (pick, put), Octo
(open, close). They drive an emmoe_core.robot.interface.Robot only; in the simulation stack that robot is the
bridge's sensor-only view of the backend, which refuses every privileged query (habitat_bridge.sensor_only).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from emmoe_core.robot.interface import Robot

from homiebot_executor.failure_model import FailureModel
from emmoe_core.perception.detector import Detector
from homiebot_executor.policies.arm_motion import reset_arm
from homiebot_executor.policies.attempt import Progress, run_attempt
from homiebot_executor.policies.sensor.context import SensorConfig, SensorContext
from homiebot_executor.policies.sensor.articulate import close_part, open_part
from homiebot_executor.policies.sensor.manipulate import pick, put
from homiebot_executor.policies.sensor.navigate import navigate
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


SKILL_FUNCTIONS: dict[str, Callable[[SensorContext, SkillGoal], tuple[SkillStatus, str]]] = {
    "navigate": navigate, "pick": pick, "put": put, "open": open_part, "close": close_part}


class SensorSkills:
    """The sensor-only skills on one robot (see the module docstring)."""

    def __init__(self, robot: Robot, config: SensorConfig | None = None, detector: Detector | None = None,
                 failure_model: FailureModel | None = None, lock: AbstractContextManager[object] | None = None) -> None:
        """Drive `robot`, finding things with `detector` (the segmentation stand-in by default)."""
        self.context = SensorContext(robot, config or SensorConfig(), detector, lock)
        self.failure_model = failure_model

    def run(self, goal: SkillGoal, should_cancel: Callable[[], bool] = lambda: False,
            progress: Progress = lambda phase, steps, distance: None) -> SkillOutcome:
        """Run one attempt of `goal`: reset the arm, then the skill. Skill failures never raise."""
        return run_attempt(self.context, goal, SKILL_FUNCTIONS, reset_arm, self.failure_model, should_cancel,
                           progress)
