"""The error-detection monitor's core: the checks before execution and the watch during and after it.

`ErrorMonitor.check` runs the benchmark's checks (homiebot_executor.checks) and turns failures into `ErrorReport`s;
`ExecutionWatcher` follows one execution sample by sample (the held object, contact forces, the step budget) and
reports incidents: the object left the gripper when it should not have, the robot pressed against something harder
than the contact limit (5 N in the release), the step budget ran out. The skill policies feed it every control
step in simulated time; the monitor node feeds it /sim/query_scene samples while a /subtask goal runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from emmoe_eval.protocol import ERROR_CATEGORY, format_subtask

from homiebot_executor.checks import CheckConfig, CheckOutcome, SubtaskRequest, check_subtask
from homiebot_executor.naming import NameResolver
from homiebot_executor.scene import SceneSnapshot

INCIDENT_KINDS: tuple[str, ...] = ("drop", "contact", "timeout")


@dataclass(frozen=True)
class ErrorReport:
    """One detected error, as the monitor publishes it.

    Attributes:
        error_type: "F1".."E3".
        feedback: the exact EMMOE feedback string.
        subtask: the subtask in bracket notation ("[Pick, apple]").
        model: the model the planner chose.
        detail: explanation for logs.
        source: "check" (before execution) or "execution" (after it).
    """

    error_type: str
    feedback: str
    subtask: str
    model: str = ""
    detail: str = ""
    source: str = "check"

    @property
    def category(self) -> str:
        """"format", "logical", "distance" or "execution" (the paper's Figure 3)."""
        return ERROR_CATEGORY[self.error_type]


def subtask_text(request: SubtaskRequest) -> str:
    """The bracket notation of a request, arguments as written."""
    return format_subtask(request.action.strip(), request.target.strip(), request.place.strip())


class ErrorMonitor:
    """Runs the checks and builds error reports (pure: no ROS)."""

    def __init__(self, config: CheckConfig | None = None, resolver: NameResolver | None = None) -> None:
        """Use the given check settings and name resolver (defaults: the benchmark's)."""
        self.config = config or CheckConfig()
        self.resolver = resolver or NameResolver()

    def check(self, request: SubtaskRequest, snapshot: SceneSnapshot) -> CheckOutcome:
        """The checks on one subtask against the current scene."""
        return check_subtask(request, snapshot, self.resolver, self.config)

    @staticmethod
    def report(request: SubtaskRequest, error_type: str, feedback: str, detail: str = "",
               source: str = "check") -> ErrorReport:
        """An error report for a failed check or execution."""
        return ErrorReport(error_type, feedback, subtask_text(request), request.model, detail, source)


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
        if self.contact_limit <= 0:
            raise ValueError(f"ExecutionWatcher.contact_limit: expected a positive force, got {self.contact_limit}")
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
