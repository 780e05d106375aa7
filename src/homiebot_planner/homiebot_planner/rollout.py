"""The EMMOE episode loop without ROS: observe -> decide -> execute -> record, until the run ends with a reason.

`run_episode` is what the planner node runs for every RunTask goal, and what tests run with plain Python stand-ins.
The loop owns the episode: it counts steps against the limit, feeds the executor's answer (feedback and the
inventory after the step, the one source of truth for what the robot holds) back into the planner's memory, and
gives every run a typed end (`EndReason`). The last record of a run carries that reason; when the run ends before
executing anything more (the planner gave up after its samples, the goal was cancelled, a fault stopped it) the
last record is a run-end marker with no subtask, never a fake End step: the release stops such a run without
logging the round, so it gets no End credit and does not count as ended by the agent.

Faults outside the planner's control (simulator down, executor time-out, planner server unreachable) end the run
with `EndReason.ERROR` and the cause; they are never scored as the planner's result.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from homiebot_planner.backends.base import BackendError
from homiebot_planner.planner import Decision, Observation, Planner


class EndReason(str, Enum):
    """Why a run ended (the values of StepRecord's END_REASON_* constants)."""

    END = "end"
    STEP_LIMIT = "step_limit"
    GAVE_UP = "gave_up"
    CANCELLED = "cancelled"
    ERROR = "error"


class FaultSource(str, Enum):
    """Which part of the stack an infrastructure fault came from."""

    SIMULATOR = "simulator"
    EXECUTOR = "executor"
    PLANNER = "planner"


class EpisodeFault(Exception):
    """An infrastructure fault: the run cannot go on, and it is not the planner's result."""

    def __init__(self, source: FaultSource, message: str) -> None:
        super().__init__(message)
        self.source = source


class EpisodeCancelled(Exception):
    """The run was cancelled while waiting on the simulator or the executor."""


@dataclass(frozen=True)
class Observed:
    """One observation: what the planner sees, and the raw views to record with the step (opaque here)."""

    observation: Observation
    views: Sequence[Any] = ()


@dataclass(frozen=True)
class Execution:
    """What the executor answered for one subtask.

    Attributes:
        success: the subtask succeeded.
        inventory: held objects after the step, as the planner names them (the executor's answer).
        error_code: the executor's result code (0 = success; the ExecuteSubtask constants).
        error_type: EMMOE error type of a failed step ("F1".."E3"), "" otherwise.
        feedback: the EMMOE feedback string ("None" on success).
        target_instance, target_canonical, place_instance, place_canonical: what the written names resolved to.
        seconds: wall time of the execution.
        fault: an infrastructure fault detail (executor time-out, fault outside the EMMOE errors): ends the run
            with EndReason.ERROR; "" when the step was executed normally.
    """

    success: bool
    inventory: tuple[str, ...]
    error_code: int = 0
    error_type: str = ""
    feedback: str = "None"
    target_instance: str = ""
    target_canonical: str = ""
    place_instance: str = ""
    place_canonical: str = ""
    seconds: float = 0.0
    fault: str = ""


@dataclass(frozen=True)
class EpisodeStep:
    """One record of a run: an executed step, or the run-end marker (decision or execution None).

    Attributes:
        number: 1-based planner step (a marker takes the next number).
        decision: the planner's decision (None when the marker comes before any decision of its round; on a
            give-up marker it is the unparsable last sample's decision).
        execution: the executor's answer (None on a marker).
        inventory_before: held objects before the step.
        views: the views after the step (those seen before it for End and markers).
        visible: the names visible per view (canonical) in the observation the step was planned on.
        locations: parallel to `visible`: where each small object rested ("on <canonical>", "in ...", "").
        end_reason: the run's end reason when this is its last record, None otherwise.
        error_msg: the fault's detail when the run ended with EndReason.ERROR, "" otherwise.
    """

    number: int
    decision: Decision | None
    execution: Execution | None
    inventory_before: tuple[str, ...]
    views: Sequence[Any] = ()
    visible: Mapping[str, Sequence[str]] = field(default_factory=dict)
    locations: Mapping[str, Sequence[str]] = field(default_factory=dict)
    end_reason: EndReason | None = None
    error_msg: str = ""

    @property
    def executed(self) -> bool:
        """Whether this record is an executed step (End included) rather than a run-end marker."""
        return self.decision is not None and self.execution is not None


@dataclass(frozen=True)
class EpisodeResult:
    """How a run ended.

    Attributes:
        end_reason: why.
        steps: executed steps (End included; the marker is not a step).
        message: a human-readable account of the end.
        fault_source: where the fault came from when end_reason is ERROR, None otherwise.
    """

    end_reason: EndReason
    steps: int
    message: str
    fault_source: FaultSource | None = None

    @property
    def ended_by_agent(self) -> bool:
        """Whether the agent ended the run with its own End."""
        return self.end_reason is EndReason.END


class Observer(Protocol):
    """Reads the robot's observation (the simulator's or the robot's views and visible names)."""

    def observe(self) -> Observed:
        """The current observation. Raises EpisodeFault or EpisodeCancelled."""


class SubtaskRunner(Protocol):
    """Executes one subtask (the /subtask action in the stack)."""

    def execute(self, decision: Decision, inventory: Sequence[str]) -> Execution:
        """Run the decision's subtask. Raises EpisodeCancelled; faults come back in `Execution.fault`."""


class StepRecorder(Protocol):
    """Records every step of the run as it finishes (StepRecords on /emmoe/steps in the stack)."""

    def record(self, step: EpisodeStep) -> None:
        """Record one step or the run-end marker."""


def run_episode(planner: Planner, executor: SubtaskRunner, observer: Observer, recorder: StepRecorder,
                max_steps: int, cancel: threading.Event | None = None) -> EpisodeResult:
    """Run one EMMOE episode to its end.

    Args:
        planner: the planner of this episode (its memory starts empty).
        executor: executes the subtasks.
        observer: gives the observation before each step.
        recorder: receives every step, the last one with the end reason.
        max_steps: the planner step limit (EMMOE: 20).
        cancel: set to stop the run between and during phases.

    Returns:
        The end of the run; never raises for faults or cancellation (they become end reasons).

    Raises:
        ValueError: for max_steps < 1.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    loop = _EpisodeLoop(planner, executor, observer, recorder, cancel or threading.Event())
    return loop.run(max_steps)


class _EpisodeLoop:
    """The state of one run_episode call."""

    def __init__(self, planner: Planner, executor: SubtaskRunner, observer: Observer, recorder: StepRecorder,
                 cancel: threading.Event) -> None:
        self.planner = planner
        self.executor = executor
        self.observer = observer
        self.recorder = recorder
        self.cancel = cancel
        self.steps = 0
        self.views: Sequence[Any] = ()
        self.visible: Mapping[str, Sequence[str]] = {}
        self.locations: Mapping[str, Sequence[str]] = {}

    def run(self, max_steps: int) -> EpisodeResult:
        try:
            observed = self.observer.observe()
        except EpisodeFault as fault:
            return self._marker(None, EndReason.ERROR, str(fault), fault.source)
        except EpisodeCancelled:
            return self._marker(None, EndReason.CANCELLED, "cancelled while observing")
        while True:
            self.views = observed.views
            self.visible = observed.observation.visible
            self.locations = observed.observation.locations
            if self.cancel.is_set():
                return self._marker(None, EndReason.CANCELLED, "cancelled")
            inventory_before = tuple(self.planner.memory.inventory)
            try:
                decision = self.planner.decide(observed.observation, self.cancel)
            except BackendError as error:
                if self.cancel.is_set():
                    return self._marker(None, EndReason.CANCELLED, "cancelled during inference")
                return self._marker(None, EndReason.ERROR, str(error), FaultSource.PLANNER)
            if self.cancel.is_set():
                return self._marker(decision, EndReason.CANCELLED, "cancelled during inference")
            if decision.gave_up:
                return self._marker(decision, EndReason.GAVE_UP,
                                    f"no usable answer in {decision.samples} samples: the planner gave up")
            result, next_observed = self._step(decision, inventory_before, max_steps)
            if result is not None:
                return result
            observed = next_observed or observed

    def _step(self, decision: Decision, inventory_before: tuple[str, ...],
              max_steps: int) -> tuple[EpisodeResult | None, Observed | None]:
        """Execute one decision, record it, and say whether the run ended (or give the next observation)."""
        if decision.is_end:
            execution = Execution(success=True, inventory=inventory_before)
        else:
            try:
                execution = self.executor.execute(decision, inventory_before)
            except EpisodeCancelled:
                return self._marker(decision, EndReason.CANCELLED, "cancelled during execution"), None
        self.steps += 1
        self.planner.record_result(decision, execution.success, execution.feedback, execution.inventory,
                                   execution.error_type or None)
        end: tuple[EndReason, str, FaultSource | None] | None = None
        observed: Observed | None = None
        views: Sequence[Any] = self.views
        if execution.fault:
            end = (EndReason.ERROR, execution.fault, FaultSource.EXECUTOR)
        elif decision.is_end:
            end = (EndReason.END, "the agent ended the run", None)
        else:
            try:
                observed = self.observer.observe()
                views = observed.views
            except EpisodeFault as fault:
                end, views = (EndReason.ERROR, str(fault), fault.source), ()
            except EpisodeCancelled:
                end, views = (EndReason.CANCELLED, "cancelled while observing", None), ()
            if end is None and self.steps >= max_steps:
                end = (EndReason.STEP_LIMIT, f"step limit {max_steps} reached", None)
        reason, message, source = end if end is not None else (None, "", None)
        self.recorder.record(EpisodeStep(
            number=decision.round_number, decision=decision, execution=execution, inventory_before=inventory_before,
            views=views, visible=self.visible, locations=self.locations, end_reason=reason,
            error_msg=message if reason is EndReason.ERROR else ""))
        if reason is None:
            return None, observed
        return EpisodeResult(reason, self.steps, message, source), None

    def _marker(self, decision: Decision | None, reason: EndReason, message: str,
                source: FaultSource | None = None) -> EpisodeResult:
        """Record the run-end marker (no executed step) and end the run."""
        inventory = tuple(self.planner.memory.inventory)
        self.recorder.record(EpisodeStep(
            number=self.planner.memory.next_round if decision is None else decision.round_number,
            decision=decision, execution=None, inventory_before=inventory, views=self.views, visible=self.visible,
            locations=self.locations, end_reason=reason,
            error_msg=message if reason is EndReason.ERROR else ""))
        return EpisodeResult(reason, self.steps, message, source)
