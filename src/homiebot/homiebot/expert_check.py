"""Replay a task's expert trajectory in the simulator, in-process (no ROS), and compare every step with its design.

The executor core (`homiebot_executor.subtask.SubtaskExecutor`) runs the privileged (M3) skills on the MuJoCo
backend, exactly the logic the /subtask action runs, so a designed failure must come back with its designed error
type and feedback string and every other step must succeed. `homiebot tasks check` runs this over the definitions;
`homiebot collect` does the same through the ROS 2 stack.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from homiebot.task_definitions import ExpertStep, TaskDefinition


@dataclass(frozen=True)
class StepCheck:
    """One replayed expert step.

    Attributes:
        index: 1-based step number (the info.txt block).
        step: the designed step.
        code: the error type the executor returned ("" on success).
        feedback: the feedback the executor returned.
        detail: the executor's explanation (for reports).
    """

    index: int
    step: ExpertStep
    code: str
    feedback: str
    detail: str = ""

    @property
    def as_designed(self) -> bool:
        """Whether the outcome is the designed one (same error type and the exact feedback string)."""
        return bool(self.code == self.step.expect and self.feedback == self.step.feedback)

    def describe(self) -> str:
        """One report line for a step that differs from its design."""
        designed = self.step.expect or "success"
        got = self.code or "success"
        return (f"step {self.index} {self.step.subtask}: designed {designed} ({self.step.feedback!r}), got {got} "
                f"({self.feedback!r}) {self.detail}").rstrip()


def misplaced_objects(definition: TaskDefinition, scene: Mapping[str, Any]) -> list[str]:
    """Required objects the generator could not put where the definition asks (it falls back to anywhere)."""
    receptacle_kind: dict[str, str] = {}
    for piece in scene["furniture"]:
        receptacle_kind[piece["name"]] = piece["canonical"]
        for part in piece.get("articulations", ()):
            receptacle_kind[part["name"]] = piece["canonical"]
    problems = []
    for item, placed in zip(definition.objects, scene["objects"]):
        wanted = {item.receptacle} | ({"kitchen_counter"} if item.receptacle == "kitchen_counter" else set())
        region_ok = (not item.region or placed["surface"] == item.region
                     or (item.region == "drawer" and placed["surface"].startswith("drawer")))
        if placed["canonical"] != item.canonical or receptacle_kind.get(placed["receptacle"]) not in wanted \
                or not region_ok:
            problems.append(f"{item.canonical} wanted on {item.receptacle} {item.region}".rstrip()
                            + f", placed on {placed['receptacle']} {placed['surface']}")
    return problems


def replay(definition: TaskDefinition, scene: Mapping[str, Any], backend: Any = None,
           setting: str = "background", perception: str | None = None) -> Iterator[StepCheck]:
    """Run the expert steps in the scene and yield each outcome (the backend is reset to the scene first).

    `setting` "no_background" runs the sensor-only skills on the backend's sensor-only view instead of M3, finding
    objects with `perception` (homiebot.setting; None: the setting's default, the learned detector)."""
    from emmoe_core.robot.scene import snapshot_of
    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.scene_spec import SceneSpec
    from habitat_bridge.sensor_only import SensorOnlyRobot
    from homiebot_executor.policies.m3 import PrivilegedSkills
    from homiebot_executor.policies.sensor import SensorSkills
    from homiebot_executor.subtask import SubtaskExecutor

    from emmoe_core.perception import create_detector

    from homiebot.setting import perception_of

    own = backend is None
    sim = MujocoBackend() if own else backend
    try:
        sim.reset(SceneSpec.from_dict(scene))
        skills: Any = (PrivilegedSkills(sim) if setting == "background" else
                       SensorSkills(SensorOnlyRobot(sim), detector=create_detector(perception_of(setting, perception))))
        executor = SubtaskExecutor(lambda: snapshot_of(sim), lambda route, goal, attempt: skills.run(goal))
        inventory: tuple[str, ...] = ()
        for index, step in enumerate(definition.expert, start=1):
            request = type(step.subtask)(step.subtask.action, step.subtask.target, step.subtask.place,
                                         step.model or "None")
            result = executor.execute(request, inventory)
            inventory = result.inventory
            yield StepCheck(index, step, "" if result.success else result.code, result.feedback, result.detail)
    finally:
        if own:
            sim.close()
