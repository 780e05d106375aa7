"""The error-detection monitor's core: the checks before execution and the watch during and after it.

`ErrorMonitor.verdict` runs the benchmark's checks (homiebot_executor.checks) on a scene snapshot and answers what
/emmoe/check_subtask answers (`CheckVerdict`: pass or the failed check with its exact feedback, and on a pass what
the executor needs from the scene: the instances the skill will act on, their canonical entries and the hand); `ExecutionWatcher` follows one execution sample by sample (the held object, contact
forces, the step budget) and reports incidents: the object left the gripper when it should not have, the robot
pressed against something harder than the contact limit (5 N in the release), the step budget ran out. The skill
policies feed it every control step in simulated time; the monitor node feeds it /sim/query_scene samples while a
/subtask goal runs. `ErrorReport` is one detected error as /emmoe/errors carries it (emmoe_interfaces/ExecutionError).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Sequence

from emmoe_core.protocol import ERROR_CATEGORY, ERROR_TYPES, SubtaskText, echoed, feedback_for, format_subtask
from emmoe_core.robot.scene import SceneSnapshot

from homiebot_executor.checks import CheckConfig, CheckOutcome, check_subtask, held_names
from emmoe_core.robot.naming import NameResolver
from emmoe_core.validation import require_positive
from homiebot_executor.skills import SKILL_OF_ACTION

INCIDENT_KINDS: tuple[str, ...] = ("drop", "contact", "timeout")
ERROR_SOURCES: tuple[str, ...] = ("check", "execution", "watch")
# Code of a fault outside the benchmark (ExecuteSubtask's INTERNAL_ERROR).
FAULT = "INTERNAL_ERROR"


@dataclass(frozen=True)
class ErrorReport:
    """One detected error, as the monitor and the executor publish it on /emmoe/errors.

    Attributes:
        request: the subtask concerned (fields as written; all empty when unknown).
        code: the EMMOE error type ("F1".."E3"), "INTERNAL_ERROR" for a fault, or a watch incident's kind
            ("drop", "contact", "timeout").
        feedback: the exact EMMOE feedback string ("" for faults and incidents).
        detail: explanation for logs.
        source: "check" (before execution), "execution" (after it) or "watch" (an incident while it ran).
        attempt: the execution attempt concerned (the number that ran, for "execution"); 0 before execution.
    """

    request: SubtaskText
    code: str
    feedback: str = ""
    detail: str = ""
    source: str = "check"
    attempt: int = 0

    def __post_init__(self) -> None:
        if self.source not in ERROR_SOURCES:
            raise ValueError(f"ErrorReport.source: expected one of {', '.join(ERROR_SOURCES)}, got {self.source!r}")
        if self.code not in (*ERROR_TYPES, FAULT, *INCIDENT_KINDS):
            raise ValueError(f"ErrorReport.code: expected an EMMOE error type, {FAULT} or an incident kind, "
                             f"got {self.code!r}")

    @property
    def error_type(self) -> str:
        """The EMMOE error type or the incident kind; "" for a fault."""
        return "" if self.code == FAULT else self.code

    @property
    def subtask(self) -> str:
        """The subtask in bracket notation ("[Pick, apple]"), "" when unknown."""
        return subtask_text(self.request) if self.request.action.strip() else ""

    @property
    def category(self) -> str:
        """"format", "logical", "distance" or "execution" (the paper's Figure 3); "" for faults and incidents."""
        return ERROR_CATEGORY.get(self.code, "")


def subtask_text(request: SubtaskText) -> str:
    """The bracket notation of a request, arguments as written (each cut at MAX_ECHOED characters)."""
    return format_subtask(echoed(request.action.strip()), echoed(request.target.strip()), echoed(request.place.strip()))


@dataclass(frozen=True)
class CheckVerdict:
    """The checks' answer for one subtask (what /emmoe/check_subtask returns).

    Attributes:
        error_type: "" when every check passed, else "F1".."D2".
        feedback: the exact feedback string of the failed check ("" when passed).
        detail: explanation of the failed check ("" when passed).
        target: instance the skill acts on: the object to pick, the held object to put, the door or drawer to open
            or close, the goal of a Go to ("" unless passed).
        place: Put only: the receptacle (or drawer) receiving the object.
        distance: planar distance from the robot to the checked target (metres); -1 when it was not resolved.
        note: how the verdict was reached when it matters, e.g. "checked by the executor (...)" when the monitor
            was unavailable ("" otherwise).
        target_canonical: the alias-table canonical entry of `target` ("" when empty or unknown).
        place_canonical: the canonical entry of `place`.
        target_kind: "object" when `target` is a movable object, "place" otherwise (a Go to's navigation kind).
        held: the object in the gripper when the checks ran ("" empty).
        held_canonical: the canonical entry of `held`.
    """

    error_type: str = ""
    feedback: str = ""
    detail: str = ""
    target: str = ""
    place: str = ""
    distance: float = -1.0
    note: str = ""
    target_canonical: str = ""
    place_canonical: str = ""
    target_kind: str = "place"
    held: str = ""
    held_canonical: str = ""

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return not self.error_type

    def canonical_of(self, name: str) -> str | None:
        """The canonical entry of an instance the verdict names (target, place or held object); None for another."""
        known = {self.held: self.held_canonical, self.place: self.place_canonical, self.target: self.target_canonical}
        return known.get(name) if name else None


class ErrorMonitor:
    """Runs the checks and builds error reports (pure: no ROS)."""

    def __init__(self, config: CheckConfig | None = None, resolver: NameResolver | None = None) -> None:
        """Use the given check settings and name resolver (defaults: the benchmark's)."""
        self.config = config or CheckConfig()
        self.resolver = resolver or NameResolver()

    def check(self, request: SubtaskText, snapshot: SceneSnapshot, inventory: Sequence[str] = ()) -> CheckOutcome:
        """The checks on one subtask against the current scene (and the planner's inventory, for L1/L2 when they
        read it)."""
        return check_subtask(request, snapshot, self.resolver, self.config, inventory)

    def verdict(self, request: SubtaskText, snapshot: SceneSnapshot,
                inventory: Sequence[str] | None = None) -> CheckVerdict:
        """The checks' verdict with the instance names the skill will act on.

        `inventory` (what the planner believes it holds) is quoted in the detail of a failed check when it
        disagrees with the simulator's hand; L1/L2 read it under `hand_source="inventory"`. A Put that passes on
        the inventory while the gripper is empty has nothing to put: E2 (the object is missing).
        """
        outcome = self.check(request, snapshot, inventory or ())
        resolved = outcome.target
        distance = resolved.distance if resolved is not None and math.isfinite(resolved.distance) else -1.0
        if not outcome.passed:
            detail = outcome.detail
            mismatch = inventory_mismatch(inventory, snapshot) if inventory is not None else ""
            if mismatch:
                detail = f"{detail}; {mismatch}" if detail else mismatch
            return CheckVerdict(outcome.error_type, outcome.feedback, detail, distance=distance)
        if resolved is None:  # End: nothing to act on
            return CheckVerdict(distance=distance)
        skill = SKILL_OF_ACTION[request.verb]
        if skill == "put" and snapshot.hand_empty:
            return CheckVerdict("E2", feedback_for("E2", request.action), f"the planner's inventory is "
                                f"{held_names(inventory or ())} but the gripper is empty", distance=distance)
        if skill == "put":
            return passed_verdict(snapshot, snapshot.held_object, resolved.name, distance)
        if skill in ("open", "close") and resolved.container is not None:
            return passed_verdict(snapshot, resolved.container.name, "", distance)
        return passed_verdict(snapshot, resolved.name, "", distance)

    @staticmethod
    def report(request: SubtaskText, error_type: str, feedback: str, detail: str = "",
               source: str = "check", attempt: int = 0) -> ErrorReport:
        """An error report for a failed check or execution."""
        return ErrorReport(request, error_type, feedback, detail, source, attempt)


def passed_verdict(snapshot: SceneSnapshot, target: str, place: str, distance: float) -> CheckVerdict:
    """A pass for `target` (and a Put's `place`) with what the executor needs from the snapshot: the canonical
    entries, the navigation kind of the target and the hand."""
    item = snapshot.object(target)
    return CheckVerdict(target=target, place=place, distance=distance, target_canonical=_canonical(snapshot, target),
                        place_canonical=_canonical(snapshot, place),
                        target_kind="object" if item is not None and item.kind == "object" else "place",
                        held=snapshot.held_object, held_canonical=snapshot.held_canonical())


def _canonical(snapshot: SceneSnapshot, name: str) -> str:
    """The canonical entry of an instance or articulated part ("" when the name is empty or unknown)."""
    if not name:
        return ""
    item = snapshot.object(name) or snapshot.container(name)
    return item.canonical if item is not None else ""


def inventory_mismatch(inventory: Sequence[str], snapshot: SceneSnapshot) -> str:
    """A note when the planner's inventory and the simulator's hand disagree about whether something is held."""
    names = held_names(inventory)
    if names and snapshot.hand_empty:
        return f"the planner's inventory is {names} but the gripper is empty"
    if not names and not snapshot.hand_empty:
        return f"the planner's inventory is empty but the gripper holds {snapshot.held_object}"
    return ""


@dataclass(frozen=True)
class Incident:
    """Something the watcher saw.

    Attributes:
        kind: "drop", "contact" or "timeout".
        step: the sample (simulation step) at which it happened.
        detail: what exactly.
    """

    kind: str
    step: int
    detail: str

    def __post_init__(self) -> None:
        if self.kind not in INCIDENT_KINDS:
            raise ValueError(f"Incident.kind: expected one of {', '.join(INCIDENT_KINDS)}, got {self.kind!r}")


@dataclass
class ExecutionWatcher:
    """Follows one execution and records incidents (each kind once, at its first occurrence).

    Attributes:
        held_at_start: instance in the gripper when the execution starts ("" empty).
        step_budget: samples (simulation steps) allowed; 0 means no limit.
        contact_limit: contact force above which the robot is colliding (newtons).
        release_allowed: whether the object may leave the gripper (set during a Put's release phase).
    """

    held_at_start: str = ""
    step_budget: int = 0
    contact_limit: float = 5.0
    release_allowed: bool = False
    incidents: list[Incident] = field(default_factory=list)
    held: str = field(init=False)
    peak_contact_force: float = field(init=False, default=0.0)
    last_step: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        require_positive("ExecutionWatcher.contact_limit", self.contact_limit)
        if self.step_budget < 0:
            raise ValueError(f"ExecutionWatcher.step_budget: expected >= 0, got {self.step_budget}")
        self.held = self.held_at_start

    def observe(self, step: int, held_object: str, contact_force: float) -> list[Incident]:
        """Record one sample; returns the new incidents it caused (each kind is reported once)."""
        self.last_step = step
        self.peak_contact_force = max(self.peak_contact_force, contact_force)
        found: list[Incident | None] = []
        if self.held and held_object != self.held and not self.release_allowed:
            found.append(self._add("drop", step, f"{self.held} left the gripper at step {step}"))
        if contact_force > self.contact_limit:
            found.append(self._add("contact", step, f"contact force {contact_force:.1f} N above "
                                                    f"{self.contact_limit:g} N at step {step}"))
        if self.step_budget and step >= self.step_budget:
            found.append(self._add("timeout", step, f"step budget {self.step_budget} used up"))
        self.held = held_object
        return [incident for incident in found if incident is not None]

    def saw(self, kind: str) -> bool:
        """Whether an incident of this kind was recorded."""
        return any(incident.kind == kind for incident in self.incidents)

    def _add(self, kind: str, step: int, detail: str) -> Incident | None:
        if self.saw(kind):
            return None
        incident = Incident(kind, step, detail)
        self.incidents.append(incident)
        return incident
