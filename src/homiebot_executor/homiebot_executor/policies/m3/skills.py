"""`PrivilegedSkills`: one M3 attempt (the arm reset, then the skill, or a failure drawn by the failure model)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from emmoe_core.robot.interface import SimulatedRobot

from homiebot_executor.failure_model import FailureModel
from homiebot_executor.policies.arm_motion import reset_arm
from homiebot_executor.policies.attempt import Progress, run_attempt
from homiebot_executor.policies.m3.articulate import close_part, open_part
from homiebot_executor.policies.m3.context import PrivilegedConfig, SkillContext
from homiebot_executor.policies.m3.navigate import navigate
from homiebot_executor.policies.m3.pick import pick
from homiebot_executor.policies.m3.place import put
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus

SKILL_FUNCTIONS: dict[str, Callable[[SkillContext, SkillGoal], tuple[SkillStatus, str]]] = {
    "navigate": navigate, "pick": pick, "put": put, "open": open_part, "close": close_part}


class PrivilegedSkills:
    """The M3 skills on one simulated robot (see homiebot_executor.policies.m3)."""

    def __init__(self, backend: SimulatedRobot, config: PrivilegedConfig | None = None,
                 failure_model: FailureModel | None = None, lock: AbstractContextManager[object] | None = None) -> None:
        """Drive `backend`; `lock` serialises backend access with other users (a fresh lock by default)."""
        self.context = SkillContext(backend, config or PrivilegedConfig(), lock)
        self.failure_model = failure_model

    def run(self, goal: SkillGoal, should_cancel: Callable[[], bool] = lambda: False,
            progress: Progress = lambda phase, steps, distance: None) -> SkillOutcome:
        """Run one attempt of `goal`: reset the arm, then the skill. Skill failures never raise."""
        return run_attempt(self.context, goal, SKILL_FUNCTIONS, reset_arm, self.failure_model, should_cancel,
                           progress)
