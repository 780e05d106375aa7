"""The skill action servers: `/skills/<server>/navigate` (Navigate) and `/skills/<server>/manipulate` (Manipulate).

One `SkillServerNode` per server name (m3, nomad, pixnav, rt1x, octo) offers the action types that server's model
can run (homiebot_executor.routing.SERVER_SKILLS) and runs each goal through a policy: any object with
`run(goal, should_cancel, progress) -> SkillOutcome` (PrivilegedSkills, SensorSkills, RemotePolicy, or RefusingPolicy
for a server that is off in the chosen setting). The servers of one process share one robot: a goal is rejected
while any of them runs one. Progress becomes action feedback, cancel requests stop the policy at its next control
step, and no exception escapes a callback (INTERNAL_ERROR with the detail).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Protocol

from emmoe_core.topics import skill_action
from emmoe_interfaces.action import Manipulate, Navigate
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from homiebot_executor import messages
from homiebot_executor.routing import SERVER_SKILLS, SERVERS
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus


class SkillPolicy(Protocol):
    """What a skill server runs."""

    def run(self, goal: SkillGoal, should_cancel: Callable[[], bool],
            progress: Callable[[str, int, float], None]) -> SkillOutcome:
        """Run one attempt."""
        ...


class RefusingPolicy:
    """A server that is off in the chosen setting: every goal ends PRIVILEGED_REFUSED with `message`, untouched."""

    def __init__(self, message: str) -> None:
        """Refuse every goal with `message` (why, and what to use instead)."""
        self.message = message

    def run(self, goal: SkillGoal, should_cancel: Callable[[], bool],
            progress: Callable[[str, int, float], None]) -> SkillOutcome:
        """Refuse `goal` without moving the robot."""
        return SkillOutcome(SkillStatus.PRIVILEGED_REFUSED, self.message)


class RobotClaim:
    """One robot, one skill at a time: shared by the skill servers of a process.

    `control` is entered around every skill run (the simulation stack uses it to stop the bridge's free-running
    simulation while a skill steps the simulator itself).
    """

    def __init__(self, control: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        """`control()` gives the context entered while a skill runs."""
        self._lock = threading.Lock()
        self._busy = False
        self._control = control

    def try_claim(self) -> bool:
        """Claim the robot; False when a skill already runs."""
        with self._lock:
            if self._busy:
                return False
            self._busy = True
            return True

    def release(self) -> None:
        """Give the robot back."""
        with self._lock:
            self._busy = False

    @contextmanager
    def running(self) -> Iterator[None]:
        """The context a skill runs in (releases the claim at the end)."""
        try:
            with self._control():
                yield
        finally:
            self.release()


class SkillServerNode(Node):
    """The action servers of one skill server name."""

    def __init__(self, server: str, policy: SkillPolicy, claim: RobotClaim | None = None, **node_kwargs: Any) -> None:
        """Serve `/skills/<server>/...` with `policy`.

        Raises:
            ValueError: an unknown server name.
        """
        if server not in SERVERS:
            raise ValueError(f"unknown skill server {server!r}; expected one of {', '.join(SERVERS)}")
        super().__init__(f"skills_{server}", **node_kwargs)
        self.server = server
        self.policy = policy
        self.claim = claim or RobotClaim()
        group = ReentrantCallbackGroup()
        skills = SERVER_SKILLS[server]
        self._servers: list[ActionServer] = []
        if "navigate" in skills:
            self._servers.append(ActionServer(
                self, Navigate, skill_action(server, "navigate"), execute_callback=self._execute_navigate,
                goal_callback=self._accept, cancel_callback=lambda _: CancelResponse.ACCEPT, callback_group=group))
        if any(skill != "navigate" for skill in skills):
            self._servers.append(ActionServer(
                self, Manipulate, skill_action(server, "manipulate"), execute_callback=self._execute_manipulate,
                goal_callback=self._accept, cancel_callback=lambda _: CancelResponse.ACCEPT, callback_group=group))

    def _accept(self, _goal: Any) -> GoalResponse:
        if self.claim.try_claim():
            return GoalResponse.ACCEPT
        self.get_logger().warning("goal rejected: the robot is running another skill")
        return GoalResponse.REJECT

    def _execute_navigate(self, handle: ServerGoalHandle) -> Navigate.Result:
        try:
            goal = messages.skill_goal_from_navigate(handle.request)
        except ValueError as error:
            self.claim.release()
            handle.abort()
            return Navigate.Result(success=False, error_code=Navigate.Result.UNKNOWN_TARGET, error_msg=str(error))

        def feedback(phase: str, steps: int, distance: float) -> None:
            handle.publish_feedback(Navigate.Feedback(distance_remaining=float(distance), sim_steps=steps))

        outcome = self._run(handle, goal, feedback)
        result = messages.navigate_result(outcome)
        self._finish(handle, outcome)
        return result

    def _execute_manipulate(self, handle: ServerGoalHandle) -> Manipulate.Result:
        try:
            goal = messages.skill_goal_from_manipulate(handle.request)
            if goal.skill not in SERVER_SKILLS[self.server]:
                raise ValueError(f"server {self.server} does not run {goal.skill!r}; it runs "
                                 f"{', '.join(SERVER_SKILLS[self.server])}")
        except ValueError as error:
            self.claim.release()
            handle.abort()
            return Manipulate.Result(success=False, error_code=Manipulate.Result.UNKNOWN_TARGET, error_msg=str(error))

        def feedback(phase: str, steps: int, distance: float) -> None:
            handle.publish_feedback(Manipulate.Feedback(phase=phase, sim_steps=steps))

        outcome = self._run(handle, goal, feedback)
        result = messages.manipulate_result(outcome)
        self._finish(handle, outcome)
        return result

    def _run(self, handle: ServerGoalHandle, goal: SkillGoal,
             feedback: Callable[[str, int, float], None]) -> SkillOutcome:
        def progress(phase: str, steps: int, distance: float) -> None:
            try:
                feedback(phase, steps, distance)
            except Exception as error:  # feedback is best effort
                self.get_logger().debug(f"feedback not sent: {error}")

        try:
            with self.claim.running():
                return self.policy.run(goal, lambda: handle.is_cancel_requested, progress)
        except Exception as error:  # never let an exception escape: the client gets the detail
            self.get_logger().error(f"{goal.skill} {goal.target} failed: {type(error).__name__}: {error}")
            return SkillOutcome(SkillStatus.INTERNAL_ERROR, f"{type(error).__name__}: {error}")

    @staticmethod
    def _finish(handle: ServerGoalHandle, outcome: SkillOutcome) -> None:
        if outcome.status is SkillStatus.CANCELED and handle.is_cancel_requested:
            handle.canceled()
        elif outcome.success:
            handle.succeed()
        else:
            handle.abort()

    def destroy_node(self) -> None:
        """Destroy the action servers with the node."""
        for server in self._servers:
            server.destroy()
        super().destroy_node()
