"""The episode loop without ROS: typed run ends, the executor's inventory, faults and cancellation."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from homiebot_planner.backends import BackendError, MockBackend
from homiebot_planner.planner import Decision, Observation, Planner, PlannerConfig
from homiebot_planner.rollout import (
    EndReason,
    EpisodeCancelled,
    EpisodeFault,
    EpisodeStep,
    Execution,
    FaultSource,
    Observed,
    run_episode,
)

GO = "Analysis: go.\nSubtask: [Go to, fridge]\nModel: NoMaD"
PICK = "Analysis: pick.\nSubtask: [Pick, apple]\nModel: RT-1-X"
END = "Analysis: done.\nSubtask: [End]\nModel: None"
GARBAGE = "I am not sure what to do."


class ScriptedExecutor:
    """Answers every subtask with success; a Pick puts the executor's own name for the object in the hand."""

    def __init__(self, fault_at: int = 0, cancel_at: int = 0) -> None:
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.fault_at = fault_at
        self.cancel_at = cancel_at

    def execute(self, decision: Decision, inventory: Sequence[str]) -> Execution:
        self.calls.append((str(decision.subtask), tuple(inventory)))
        if len(self.calls) == self.cancel_at:
            raise EpisodeCancelled("cancelled")
        if len(self.calls) == self.fault_at:
            return Execution(success=False, inventory=tuple(inventory), error_code=22,
                             fault="executor timeout: /subtask gave no result within 1 s")
        held = ("apple_0",) if decision.subtask.action == "Pick" else tuple(inventory)
        return Execution(success=True, inventory=held, target_instance=f"{decision.subtask.target}_0")


class CountingObserver:
    """Gives empty observations with numbered views; faults after `fail_after` observations when set."""

    def __init__(self, fail_after: int = 0) -> None:
        self.count = 0
        self.fail_after = fail_after

    def observe(self) -> Observed:
        if self.fail_after and self.count >= self.fail_after:
            raise EpisodeFault(FaultSource.SIMULATOR, "get_observation: no answer within 30 s")
        self.count += 1
        return Observed(Observation(), views=(f"views{self.count}",))


class ListRecorder:
    def __init__(self) -> None:
        self.steps: list[EpisodeStep] = []

    def record(self, step: EpisodeStep) -> None:
        self.steps.append(step)


def _run(outputs: Sequence[str], max_steps: int = 20, executor: ScriptedExecutor | None = None,
         observer: CountingObserver | None = None, cancel: threading.Event | None = None):
    planner = Planner(MockBackend(list(outputs)), "put the apple in the fridge", PlannerConfig())
    recorder = ListRecorder()
    executor = executor or ScriptedExecutor()
    result = run_episode(planner, executor, observer or CountingObserver(), recorder, max_steps, cancel)
    return result, recorder.steps, planner, executor


def test_end_is_the_agents_and_only_the_last_record_carries_the_reason() -> None:
    result, steps, _planner, executor = _run([GO, PICK, END])
    assert (result.end_reason, result.steps, result.ended_by_agent) == (EndReason.END, 3, True)
    assert [step.end_reason for step in steps] == [None, None, EndReason.END]
    assert all(step.executed for step in steps) and [step.number for step in steps] == [1, 2, 3]
    assert [call[0] for call in executor.calls] == ["[Go to, fridge]", "[Pick, apple]"]
    # End is not sent to the executor and keeps the views seen before it.
    assert [step.views for step in steps] == [("views2",), ("views3",), ("views3",)]


def test_the_executors_inventory_is_the_one_source_of_truth() -> None:
    _result, steps, planner, executor = _run([PICK, GO, END])
    assert executor.calls[1] == ("[Go to, fridge]", ("apple_0",))
    assert planner.memory.inventory == ["apple_0"]
    assert steps[0].execution is not None and steps[0].execution.inventory == ("apple_0",)
    assert steps[1].inventory_before == ("apple_0",)


def test_step_limit_ends_on_the_last_allowed_step() -> None:
    result, steps, _planner, _executor = _run([GO], max_steps=3)
    assert (result.end_reason, result.steps, len(steps)) == (EndReason.STEP_LIMIT, 3, 3)
    assert steps[-1].end_reason is EndReason.STEP_LIMIT and steps[-1].executed


def test_giving_up_is_a_run_end_marker_not_an_end_step() -> None:
    result, steps, planner, executor = _run([GO, GARBAGE])
    assert (result.end_reason, result.steps, result.ended_by_agent) == (EndReason.GAVE_UP, 1, False)
    marker = steps[-1]
    assert not marker.executed and marker.end_reason is EndReason.GAVE_UP and marker.number == 2
    assert marker.decision is not None and marker.decision.gave_up and marker.decision.raw_output == GARBAGE
    assert marker.decision.subtask.action == "" and not marker.decision.is_end
    # The give-up round is not logged (the release never logs it) and nothing more is executed.
    assert len(planner.memory.rounds) == 1 and len(executor.calls) == 1


def test_a_planner_that_never_parses_ends_with_no_step() -> None:
    result, steps, planner, executor = _run([GARBAGE])
    assert (result.end_reason, result.steps) == (EndReason.GAVE_UP, 0)
    assert len(steps) == 1 and not steps[0].executed and steps[0].number == 1
    assert planner.memory.rounds == [] and executor.calls == []


def test_an_executor_fault_ends_the_run_as_an_error() -> None:
    result, steps, _planner, _executor = _run([GO, PICK, END], executor=ScriptedExecutor(fault_at=2))
    assert (result.end_reason, result.fault_source, result.steps) == (EndReason.ERROR, FaultSource.EXECUTOR, 2)
    assert steps[-1].end_reason is EndReason.ERROR and "executor timeout" in steps[-1].error_msg


def test_a_simulator_fault_after_a_step_ends_on_that_step() -> None:
    result, steps, _planner, _executor = _run([GO, PICK, END], observer=CountingObserver(fail_after=1))
    assert (result.end_reason, result.fault_source, result.steps) == (EndReason.ERROR, FaultSource.SIMULATOR, 1)
    assert steps[-1].executed and steps[-1].views == () and "get_observation" in steps[-1].error_msg


def test_a_simulator_fault_before_the_first_step_is_recorded() -> None:
    class DeadObserver(CountingObserver):
        def observe(self) -> Observed:
            raise EpisodeFault(FaultSource.SIMULATOR, "service /sim/get_observation is not available")

    result, steps, _planner, _executor = _run([GO], observer=DeadObserver())
    assert (result.end_reason, result.steps, len(steps)) == (EndReason.ERROR, 0, 1)
    assert not steps[0].executed and "not available" in steps[0].error_msg


def test_a_planner_server_outage_is_an_error_not_a_planner_result() -> None:
    class DownBackend(MockBackend):
        def generate(self, request):  # type: ignore[no-untyped-def]
            raise BackendError("HTTP 500 from the planner server")

    planner = Planner(DownBackend([GO]), "task")
    recorder = ListRecorder()
    result = run_episode(planner, ScriptedExecutor(), CountingObserver(), recorder, 20)
    assert (result.end_reason, result.fault_source, result.steps) == (EndReason.ERROR, FaultSource.PLANNER, 0)
    assert recorder.steps[0].error_msg == "HTTP 500 from the planner server"


def test_cancel_during_execution_does_not_record_the_step() -> None:
    result, steps, _planner, _executor = _run([GO, PICK], executor=ScriptedExecutor(cancel_at=2))
    assert (result.end_reason, result.steps) == (EndReason.CANCELLED, 1)
    assert [step.executed for step in steps] == [True, False]


def test_cancel_before_the_first_step() -> None:
    cancel = threading.Event()
    cancel.set()
    result, steps, _planner, executor = _run([GO], cancel=cancel)
    assert (result.end_reason, result.steps, len(steps), executor.calls) == (EndReason.CANCELLED, 0, 1, [])


def test_max_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps"):
        _run([GO], max_steps=0)
