"""What one skill attempt is asked to do and what it reports, independent of ROS.

A skill is one of "navigate", "pick", "put", "open", "close". Every attempt starts by moving the arm to its rest
pose (the benchmark resets the arm before each attempt), then runs the skill's policy within a simulation step
budget (500 for navigation, 200 for the others, as the release). The ROS skill servers translate these types to
and from emmoe_interfaces/action/Navigate and Manipulate.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

SKILLS: tuple[str, ...] = ("navigate", "pick", "put", "open", "close")
# Skill of each EMMOE action (lower-cased verb).
SKILL_OF_ACTION: dict[str, str] = {"go to": "navigate", "pick": "pick", "put": "put", "open": "open",
                                   "close": "close"}
DEFAULT_STEP_BUDGET: dict[str, int] = {"navigate": 500, "pick": 200, "put": 200, "open": 200, "close": 200}


class SkillStatus(str, Enum):
    """Why an attempt ended (mirrors the error codes of the Navigate and Manipulate actions)."""

    SUCCEEDED = "succeeded"
    UNKNOWN_TARGET = "unknown_target"
    NO_PATH = "no_path"
    UNREACHABLE = "unreachable"
    COLLISION = "collision"
    GRASP_FAILED = "grasp_failed"
    OBJECT_DROPPED = "object_dropped"
    PLACE_FAILED = "place_failed"
    JOINT_NOT_MOVED = "joint_not_moved"
    TIMEOUT = "timeout"
    INJECTED_FAILURE = "injected_failure"
    POLICY_UNAVAILABLE = "policy_unavailable"
    PRIVILEGED_REFUSED = "privileged_refused"
    CANCELED = "canceled"
    INTERNAL_ERROR = "internal_error"

    @property
    def is_fault(self) -> bool:
        """Whether the attempt could not run at all (not a skill failure the benchmark would count)."""
        return self in (SkillStatus.POLICY_UNAVAILABLE, SkillStatus.PRIVILEGED_REFUSED, SkillStatus.INTERNAL_ERROR)


@dataclass(frozen=True)
class SkillGoal:
    """One skill attempt.

    Attributes:
        skill: one of SKILLS.
        target: instance name of the object, furniture or part (a drawer) to act on.
        place: Put only: instance name of the receptacle (or drawer).
        target_kind: navigation only: "object" (PixNav-style small object) or "place" (NoMaD-style).
        instruction: natural-language instruction for language-conditioned policies ("pick the apple").
        max_sim_steps: step budget; 0 uses the skill's default.
        attempt: 1-based attempt of the subtask execution (the failure model's unit "execution" draws at 1).
    """

    skill: str
    target: str
    place: str = ""
    target_kind: str = "place"
    instruction: str = ""
    max_sim_steps: int = 0
    attempt: int = 1

    def __post_init__(self) -> None:
        if self.skill not in SKILLS:
            raise ValueError(f"SkillGoal.skill: expected one of {', '.join(SKILLS)}, got {self.skill!r}")
        if self.target_kind not in ("object", "place"):
            raise ValueError(f"SkillGoal.target_kind: expected 'object' or 'place', got {self.target_kind!r}")
        if self.max_sim_steps < 0:
            raise ValueError(f"SkillGoal.max_sim_steps: expected >= 0, got {self.max_sim_steps}")
        if self.attempt < 1:
            raise ValueError(f"SkillGoal.attempt: expected >= 1, got {self.attempt}")

    @property
    def step_budget(self) -> int:
        """The budget in simulation steps (the skill's default when max_sim_steps is 0)."""
        return self.max_sim_steps or DEFAULT_STEP_BUDGET[self.skill]


@dataclass(frozen=True)
class SkillOutcome:
    """What one attempt reports.

    Attributes:
        status: why it ended.
        message: detail for logs ("" on success).
        held_object: instance name in the gripper afterwards ("" empty); None when the skill does not report it.
        sim_steps: simulation steps used.
        distance_to_goal: navigation only: remaining planar distance (metres), NaN when unknown.
    """

    status: SkillStatus
    message: str = ""
    held_object: str | None = None
    sim_steps: int = 0
    distance_to_goal: float = float("nan")

    @property
    def success(self) -> bool:
        """Whether the skill's success rule held."""
        return self.status is SkillStatus.SUCCEEDED


def instruction_for(skill: str, target: str, place: str = "") -> str:
    """A plain instruction for language-conditioned policies: "pick the apple", "put the apple in the fridge"."""
    if skill == "navigate":
        return f"go to the {target}"
    if skill == "put":
        return f"put the {target} on the {place}" if place else f"put the {target} down"
    return f"{skill} the {target}"
