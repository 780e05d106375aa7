"""`PrivilegedSkills`: one M3 attempt (the arm reset, then the skill, or a failure drawn by the failure model)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from emmoe_eval.robot.interface import SimulatedRobot
from emmoe_eval.robot.state import BackendError, UnknownNameError

from homiebot_executor.failure_model import FailureModel
from homiebot_executor.monitor import ExecutionWatcher
from homiebot_executor.policies.m3.arm import reset_arm
from homiebot_executor.policies.m3.articulate import close_part, open_part
from homiebot_executor.policies.m3.context import Attempt, PrivilegedConfig, Progress, SkillContext, Stop
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
        ctx = self.context
        contact_limit = ctx.config.contact_limit
        attempt = Attempt(goal, ExecutionWatcher(contact_limit=contact_limit), should_cancel, progress)
        ctx.attempt = attempt
        try:
            reset_arm(ctx)
            attempt.steps = 0
            attempt.watcher = ExecutionWatcher(held_at_start=ctx.held(), step_budget=goal.step_budget,
                                               contact_limit=contact_limit)
            injected = self.failure_model.draw(goal.skill) if self.failure_model is not None else None
            if injected is not None:
                status, message = self._injected(goal, injected.drop_object)
            else:
                status, message = SKILL_FUNCTIONS[goal.skill](ctx, goal)
        except Stop as stop:
            status, message = stop.status, stop.message
        except UnknownNameError as error:
            status, message = SkillStatus.UNKNOWN_TARGET, str(error)
        except BackendError as error:
            status, message = SkillStatus.INTERNAL_ERROR, f"simulator: {error}"
        finally:
            ctx.attempt = None
        try:
            with ctx.lock:
                ctx.backend.set_base_velocity(0.0, 0.0)
                held_after: str | None = ctx.backend.held_object() or ""
        except BackendError:
            held_after = None
        return SkillOutcome(status, message, held_after, attempt.steps, attempt.distance)

    def _injected(self, goal: SkillGoal, drop: bool) -> tuple[SkillStatus, str]:
        """A failure drawn by the failure model: nothing moves, except a dropped object for Put."""
        ctx = self.context
        held = ctx.held()
        if drop and held:
            ctx.allow_release()
            with ctx.lock:
                ctx.backend.open_gripper()
            ctx.tick(5)
            return SkillStatus.INJECTED_FAILURE, f"failure model: {held} dropped"
        return SkillStatus.INJECTED_FAILURE, f"failure model: {goal.skill} attempt failed"
