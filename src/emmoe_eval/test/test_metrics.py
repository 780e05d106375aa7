"""Hand-computed cases for every EMMOE metric, in default and --compat official modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from emmoe_eval.dataset import InfoBlock, InfoTrajectory, Task, TaskAttributes
from emmoe_eval.metrics import (KeypathMatcher, NameIndex, ScoringConfig, ScoringError, evaluate, score_run,
                                step_error_type)
from emmoe_core.names import default_alias_table
from emmoe_core.protocol import parse_subtask
from emmoe_eval.runs import Run, Step

NO_ATTRIBUTES = TaskAttributes({})


def keypath(*nodes: str) -> tuple:
    return tuple(parse_subtask(node) for node in nodes)


def make_task(task_id: str, keypaths: list[tuple], expert_length: int = 4) -> Task:
    # Only the number of blocks (L*) matters for scoring.
    info = InfoTrajectory("task", tuple(InfoBlock(index, parse_subtask("[Go to, sofa]"))
                                        for index in range(1, expert_length + 1)))
    return Task(task_id, "train", Path("/nonexistent"), info, tuple(keypaths))


def progress(keypaths: list[tuple], steps: list[Step]) -> float:
    return KeypathMatcher("t", keypaths, NameIndex(default_alias_table())).progress(steps)


def test_tp_of_a_run_counts_the_names_the_executor_resolved():
    # Moved from the planner (which no longer computes task progress): the evaluator's RunScore is the only one.
    path = keypath("[Go to, fridge]", "[Open, fridge]", "[End]")
    steps = [Step(1, "Go to", "refrigerator", success=True), Step(2, "Open", "fridge", success=False)]
    assert progress([path], steps) == pytest.approx(1 / 3)
    # A written "box" that opened the fridge matches [Open, fridge].
    resolved = [*steps, Step(3, "Open", "box", success=True, target_instance="fridge_0", target_canonical="fridge")]
    assert progress([path], resolved) == pytest.approx(2 / 3)


def test_tp_matches_aliases_and_ignores_case_and_underscores(kit):
    # keypath: refrigerator / red_apple / "Kitchen Counter" / sink; run: fridge / apple / kitchen_counter
    path = keypath("[Go to, refrigerator]", "[Pick, red_apple]", "[Put, apple, sink]", "[End]")
    steps = [kit.ok(1, "[Go to, Fridge]"), kit.ok(2, "[Pick, APPLE]"), kit.ok(3, "[Put, red apple, kitchen_counter]"),
             kit.end(4)]
    assert progress([path], steps) == 1.0


def test_tp_counts_only_successful_steps_in_order(kit):
    path = keypath("[Go to, fridge]", "[Open, fridge]", "[Pick, apple]", "[End]")
    # The failed Open does not match; the successful Pick before the Open cannot match out of order; the Open at
    # step 4 matches node 2, the Pick at 5 fails -> matched 2 of 4 = 0.5.
    steps = [kit.ok(1, "[Go to, fridge]"), kit.fail(2, "[Open, fridge]", "E1"), kit.ok(3, "[Pick, apple]"),
             kit.ok(4, "[Open, fridge]"), kit.fail(5, "[Pick, apple]", "E1")]
    assert progress([path], steps) == 0.5


def test_tp_compares_actions_exactly_and_put_place(kit):
    path = keypath("[Put, apple, fridge]", "[End]")
    assert progress([path], [kit.ok(1, "[put, apple, fridge]")]) == 0.0        # action case matters
    assert progress([path], [kit.ok(1, "[Put, apple, sofa]")]) == 0.0          # wrong place
    assert progress([path], [kit.ok(1, "[Put, apple, refrigerator]")]) == 0.5  # 1 of 2


def test_tp_is_the_best_keypath(kit):
    long_path = keypath("[Go to, bowl]", "[Pick, bowl]", "[Go to, table]", "[Put, bowl, table]", "[End]")
    short_path = keypath("[Go to, bowl]", "[Pick, bowl]", "[Put, bowl, table]", "[End]")
    steps = [kit.ok(1, "[Go to, bowl]"), kit.ok(2, "[Pick, bowl]")]
    # long: 2/5 = 0.4, short: 2/4 = 0.5 -> 0.5
    assert progress([long_path, short_path], steps) == 0.5


def test_a_run_without_end_never_reaches_full_progress(kit):
    path = keypath("[Go to, fridge]", "[Open, fridge]", "[End]")
    steps = [kit.ok(1, "[Go to, fridge]"), kit.ok(2, "[Open, fridge]")]
    assert progress([path], steps) == pytest.approx(2 / 3)
    task = make_task("1", [path], expert_length=3)
    outcome, _ = score_run(Run("1", "1", steps), task, KeypathMatcher("1", [path], NameIndex(default_alias_table())),
                           ScoringConfig(), NO_ATTRIBUTES)
    assert (outcome.success, outcome.ended, outcome.length) == (False, False, 2)


def test_greedy_matching_takes_the_first_match(kit):
    # Greedy: the first successful "Go to, fridge" matches node 1; the second is then compared to node 2 (Pick) and
    # skipped. Nodes are never skipped, so the run gets 2/3 (Go to, Pick) even though End is missing.
    path = keypath("[Go to, fridge]", "[Pick, apple]", "[End]")
    steps = [kit.ok(1, "[Go to, fridge]"), kit.ok(2, "[Go to, fridge]"), kit.ok(3, "[Pick, apple]")]
    assert progress([path], steps) == pytest.approx(2 / 3)


def test_unknown_names_match_only_themselves_by_default_and_raise_in_official_mode(kit):
    path = keypath("[Go to, pantry shelf]", "[End]")
    names = NameIndex(default_alias_table())
    matcher = KeypathMatcher("7", [path], names)
    assert matcher.progress([kit.ok(1, "[Go to, Pantry_Shelf]"), kit.end(2)]) == 1.0
    # "fridge" is not "pantry shelf": node 1 stays unmatched, and End cannot match node 2 before node 1 -> 0
    assert matcher.progress([kit.ok(1, "[Go to, fridge]"), kit.end(2)]) == 0.0
    with pytest.raises(ScoringError, match="task 7: keypath 1, node 1 .*'pantry shelf' is not in the alias table"):
        KeypathMatcher("7", [path], names, reject_unknown=True)


def test_steps_after_end_are_ignored_by_default_and_kept_by_the_release(kit):
    path = keypath("[Go to, fridge]", "[End]")
    task = make_task("1", [path], expert_length=2)
    steps = [kit.ok(1, "[Go to, fridge]"), kit.end(2), kit.fail(3, "[Pick, apple]", "E1"), kit.ok(4, "[Pick, apple]")]
    matcher = KeypathMatcher("1", [path], NameIndex(default_alias_table()))
    default, problems = score_run(Run("1", "1", steps), task, matcher, ScoringConfig(), NO_ATTRIBUTES)
    # default: the run is [Go to, End]: TP 1, success, ended, L 2, no re-plans, no errors
    assert (default.task_progress, default.success, default.ended, default.length, default.replans) == (1.0, True, True, 2, 0)
    assert problems == ["task 1 run 1: 2 step(s) after End ignored"]
    official, _ = score_run(Run("1", "1", steps), task, matcher, ScoringConfig(compat="official"), NO_ATTRIBUTES)
    # release: the history holds steps 1-3, the last output (Pick) has no "End": [Go to, End, x Pick] ->
    # TP 1 (counts for SR) but the last action is not End (does not count for SER/PLWSR); 1 re-plan? no: the failed
    # Pick is the last step, so no step follows it -> 0 re-plans.
    assert (official.task_progress, official.success, official.end_success, official.ended, official.length) == \
        (1.0, True, False, False, 3)


def test_release_reconstruction_drops_the_last_executed_subtask(kit):
    path = keypath("[Go to, fridge]", "[Open, fridge]", "[End]")
    task = make_task("1", [path], expert_length=3)
    matcher = KeypathMatcher("1", [path], NameIndex(default_alias_table()))
    capped = [kit.ok(1, "[Go to, fridge]"), kit.fail(2, "[Pick, apple]", "E1"), kit.ok(3, "[Open, fridge]")]
    default, _ = score_run(Run("1", "1", capped), task, matcher, ScoringConfig(), NO_ATTRIBUTES)
    official, _ = score_run(Run("1", "1", capped), task, matcher, ScoringConfig(compat="official"), NO_ATTRIBUTES)
    # default: Go to + Open matched = 2/3, one re-plan (step 3). release: the Open (last) is lost: 1/3; srr.ipynb
    # counts the failed Pick as a re-plan: it is followed by a last round (the lost Open) that is not End (issue 11).
    assert (default.task_progress, default.replans, default.length) == (pytest.approx(2 / 3), 1, 3)
    assert (official.task_progress, official.replans, official.length) == (pytest.approx(1 / 3), 1, 2)


def test_error_types_come_from_the_recorded_type_then_feedback_then_unclassified(kit):
    assert step_error_type(kit.fail(1, "[Pick, apple]", "L1")) == "L1"  # a release log: no recorded type
    # The executor's recorded type owns the fact, whatever the feedback string reads as.
    far = kit.fail(1, "[Pick, apple]", "D1").feedback
    assert step_error_type(Step(1, "Pick", "apple", success=False, feedback=far, error_type="E1")) == "E1"
    assert step_error_type(Step(1, "Pick", "apple", success=False, feedback="robot fell over")) == "unclassified"
    assert step_error_type(Step(1, "Pick", "apple", success=False, feedback="???", error_type="E3")) == "E3"
    assert step_error_type(Step(1, "Pick", "apple", success=False, feedback=None)) is None  # outcome not recorded
    assert step_error_type(kit.ok(1, "[Pick, apple]")) is None


def small_set(kit) -> tuple[dict[str, Task], list[Run]]:
    """Two tasks, four runs, hand-checked below.

    Task A (L* 3, keypath [Go to, fridge] [Open, fridge] [End]); task B (L* 2, keypath [Go to, sofa] [End]).
    A/1: Go to fridge, Open fridge, End                      -> TP 1, success, L 3, 0 re-plans
    A/2: Go to fridge, x Open fridge (E1), Open fridge, x Pick apple (L1), End
                                                             -> TP 1, success, L 5, re-plans 2 (steps 3 and 5)
    B/1: x Go to sofa (E1), End                              -> TP 0, ended, 1 re-plan
    B/2: Go to sofa (no End)                                 -> TP 1/2, not ended, 0 re-plans
    """
    tasks = {"A": make_task("A", [keypath("[Go to, fridge]", "[Open, fridge]", "[End]")], expert_length=3),
             "B": make_task("B", [keypath("[Go to, sofa]", "[End]")], expert_length=2)}
    runs = [
        Run("A", "1", [kit.ok(1, "[Go to, fridge]"), kit.ok(2, "[Open, fridge]"), kit.end(3)]),
        Run("A", "2", [kit.ok(1, "[Go to, fridge]"), kit.fail(2, "[Open, fridge]", "E1"), kit.ok(3, "[Open, fridge]"),
                       kit.fail(4, "[Pick, apple]", "L1"), kit.end(5)]),
        Run("B", "1", [kit.fail(1, "[Go to, sofa]", "E1"), kit.end(2)]),
        Run("B", "2", [kit.ok(1, "[Go to, sofa]")]),
    ]
    return tasks, runs


def test_headline_metrics_by_hand(kit):
    tasks, runs = small_set(kit)
    summary = evaluate(runs, tasks, ScoringConfig(bootstrap_resamples=200), NO_ATTRIBUTES).summary
    assert summary["runs"] == 4 and summary["tasks"] == 2
    assert summary["SR"] == pytest.approx(2 / 4)                      # A/1, A/2
    assert summary["TP"] == pytest.approx((1 + 1 + 0 + 0.5) / 4)      # 0.625
    assert summary["SER"] == pytest.approx(2 / 3)                     # ended: A/1, A/2, B/1
    assert summary["SRR"] == pytest.approx(2 / 3)                     # re-plans: A/2 2, B/1 1
    assert summary["PLWSR"] == pytest.approx((3 / 3 + 3 / 5) / 4)     # A/1: L* 3, L 3; A/2: L* 3, L 5 -> 0.4
    errors = summary["errors"]["by_type"]
    assert errors["E1"] == {"successful_runs": 1, "failed_runs": 1}
    assert errors["L1"] == {"successful_runs": 1, "failed_runs": 0}
    assert summary["errors"]["total"] == {"successful_runs": 2, "failed_runs": 1}
    assert summary["errors"]["by_category"]["execution"] == {"successful_runs": 1, "failed_runs": 1}
    # Table 4: Go to: 3 successes + 1 E1 = 4 executions, SR 3/4; Open: 2 successes + 1 E1 -> SR 2/3;
    # Pick: only an L1 (not an execution) -> no executions. Execution errors: 2 (Go to 1, Open 1) -> P 1/2 each.
    actions = summary["per_action"]
    assert (actions["Go to"]["executions"], actions["Go to"]["SR"], actions["Go to"]["P"]) == (4, 0.75, 0.5)
    assert (actions["Open"]["executions"], actions["Open"]["SR"], actions["Open"]["P"]) == (3, pytest.approx(2 / 3), 0.5)
    assert (actions["Pick"]["steps"], actions["Pick"]["executions"], actions["Pick"]["SR"]) == (1, 0, None)


def test_release_ser_and_plwsr_require_end_while_sr_does_not(kit):
    # A keypath without End is invalid on disk, but Task objects may carry one; then TP 1 is possible without End.
    tasks = {"C": make_task("C", [keypath("[Go to, sofa]")], expert_length=1)}
    runs = [Run("C", "1", [kit.ok(1, "[Go to, sofa]"), kit.fail(2, "[Pick, apple]", "E1")])]
    default = evaluate(runs, tasks, ScoringConfig(), NO_ATTRIBUTES).summary
    official = evaluate(runs, tasks, ScoringConfig(compat="official"), NO_ATTRIBUTES).summary
    # default: TP 1 -> success; L 2, L* 1 -> PLWSR 1/2; no run ended -> SER undefined
    assert (default["SR"], default["PLWSR"], default["SER"]) == (1.0, 0.5, None)
    # official: the last executed subtask is dropped (run = [Go to, sofa]); SR counts TP 1, PLWSR needs End -> 0
    assert (official["SR"], official["PLWSR"], official["SER"]) == (1.0, 0.0, None)


def test_zero_denominators_give_none(kit):
    tasks = {"B": make_task("B", [keypath("[Go to, sofa]", "[End]")], expert_length=2)}
    summary = evaluate([Run("B", "1", [kit.ok(1, "[Go to, sofa]")])], tasks, ScoringConfig(), NO_ATTRIBUTES).summary
    assert (summary["SER"], summary["SRR"]) == (None, None)           # nothing ended, no re-plans
    empty = evaluate([], tasks, ScoringConfig(), NO_ATTRIBUTES)
    assert (empty.summary["SR"], empty.summary["TP"], empty.summary["runs"]) == (None, None, 0)
    assert empty.summary["confidence_intervals"]["SR"] is None
    assert empty.problems == ["1 task(s) of the selection have no runs: B"]


def test_corrupt_runs_and_unknown_tasks(kit):
    tasks = {"B": make_task("B", [keypath("[Go to, sofa]", "[End]")], expert_length=2)}
    corrupt = Run("B", "2", [kit.ok(1, "[Go to, sofa]"), kit.end(2)], corrupt=True, problems=["bad line"])
    evaluation = evaluate([corrupt, Run("Z", "1", [kit.end(1)])], tasks, ScoringConfig(), NO_ATTRIBUTES)
    # the corrupt run is scored as failed with TP 0 even though its readable steps would complete the task
    assert (evaluation.summary["runs"], evaluation.summary["SR"], evaluation.summary["TP"]) == (1, 0.0, 0.0)
    assert evaluation.summary["corrupt_runs"] == 1
    assert evaluation.problems[0] == "bad line"
    assert "task Z run 1: the task is not among the evaluated tasks" in evaluation.problems[1]


def test_per_attribute_pools_runs_of_tasks_with_the_attribute(kit):
    tasks, runs = small_set(kit)
    tasks = {"1": tasks["A"], "2": tasks["B"]}
    runs = [Run("1" if run.task_id == "A" else "2", run.run_id, run.steps) for run in runs]
    attributes = TaskAttributes({"typical": frozenset({1}), "logical": frozenset({1, 2}), "open-ended": frozenset()})
    table = evaluate(runs, tasks, ScoringConfig(), attributes).summary["per_attribute"]
    assert table["typical"] == {"tasks": 1, "runs": 2, "SR": 1.0, "TP": 1.0}
    assert table["logical"] == {"tasks": 2, "runs": 4, "SR": 0.5, "TP": 0.625}
    assert table["open-ended"] == {"tasks": 0, "runs": 0, "SR": None, "TP": None}


def test_bootstrap_interval_by_hand(kit):
    tasks, runs = small_set(kit)
    intervals = evaluate(runs, tasks, ScoringConfig(bootstrap_resamples=2000), NO_ATTRIBUTES).summary[
        "confidence_intervals"]
    # Resampling 2 tasks: (A, A) SR 1, (B, B) SR 0, mixed SR 1/2, each pure pair with probability 1/4 > 2.5 %:
    # the 95 % interval is [0, 1]. TP: (B, B) = 0.25, (A, A) = 1 -> [0.25, 1].
    assert intervals["SR"] == [0.0, 1.0]
    assert intervals["TP"] == [0.25, 1.0]
    assert intervals["level"] == 0.95 and intervals["unit"] == "task"
    again = evaluate(list(reversed(runs)), tasks, ScoringConfig(bootstrap_resamples=2000), NO_ATTRIBUTES)
    assert again.summary["confidence_intervals"] == intervals        # seeded, order-independent


def test_scoring_config_validation():
    with pytest.raises(ValueError, match="compat must be one of default, official"):
        ScoringConfig(compat="paper")
    with pytest.raises(ValueError, match="bootstrap_resamples must be >= 1"):
        ScoringConfig(bootstrap_resamples=0)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        ScoringConfig(confidence=1.0)
