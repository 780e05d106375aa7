"""End reasons (give-up, infrastructure failures) and matching on the executor's resolved identity (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from emmoe_eval.cli import main
from emmoe_eval.conversation import conversation_from_steps, write_conversation
from emmoe_eval.dataset import InfoBlock, InfoTrajectory, Task, TaskAttributes
from emmoe_eval.experiments import load_experiment
from emmoe_eval.metrics import KeypathMatcher, NameIndex, ScoringConfig, evaluate, release_name_table
from emmoe_core.names import default_alias_table
from emmoe_core.protocol import parse_subtask
from emmoe_eval.records import end_reason_of, is_end_marker, step_from_record
from emmoe_eval.runs import Run, Step, read_trajectory, write_trajectory

NO_ATTRIBUTES = TaskAttributes({})
SOFA = (parse_subtask("[Go to, sofa]"), parse_subtask("[End]"))


def sofa_task(task_id: str = "B") -> Task:
    info = InfoTrajectory("go to the sofa", (InfoBlock(1, SOFA[0]), InfoBlock(2, SOFA[1])))
    return Task(task_id, "train", Path("/nonexistent"), info, (SOFA,))


def go_to_sofa(number: int = 1) -> Step:
    return Step(number, "Go to", "sofa", model="NoMaD")


# ---- give-up ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("compat", ["default", "official"])
def test_a_planner_that_never_parses_scores_zero_and_is_not_in_ser(compat):
    # Three runs that gave up before any step (zero steps, reason gave_up), one run that went to the sofa and ended.
    runs = [Run("B", str(number), [], end_reason="gave_up") for number in (1, 2, 3)]
    summary = evaluate(runs, {"B": sofa_task()}, ScoringConfig(compat=compat, bootstrap_resamples=20),
                       NO_ATTRIBUTES).summary
    assert (summary["runs"], summary["TP"], summary["SR"], summary["PLWSR"]) == (3, 0.0, 0.0, 0.0)
    assert summary["SER"] is None                                      # no run ended: the denominator is empty
    assert summary["end_reasons"]["gave_up"] == 3
    ended = Run("B", "1", [go_to_sofa(), Step(2, "End", model="None")])
    mixed = evaluate([*runs[1:], ended], {"B": sofa_task()}, ScoringConfig(compat=compat, bootstrap_resamples=20),
                     NO_ATTRIBUTES).summary
    # SER = 1 success / 1 ended run (the give-ups are not in the denominator); SR 1/3; TP (1 + 0 + 0)/3.
    assert (mixed["SER"], mixed["SR"], mixed["TP"]) == (1.0, pytest.approx(1 / 3), pytest.approx(1 / 3))


def test_a_gave_up_run_gets_no_end_credit_even_with_an_old_placeholder_end():
    # Older planners logged a give-up as an End step with success. With the recorded reason gave_up it is dropped:
    # [Go to, sofa] matches node 1 of [Go to, sofa][End] -> TP 1/2, not successful, not ended.
    steps = [go_to_sofa(), Step(2, "End", model="None")]
    task = {"B": sofa_task()}
    gave_up = evaluate([Run("B", "1", steps, end_reason="gave_up")], task, ScoringConfig(bootstrap_resamples=20),
                       NO_ATTRIBUTES)
    assert (gave_up.summary["TP"], gave_up.summary["SR"], gave_up.summary["SER"]) == (0.5, 0.0, None)
    assert any("not the agent's End" in problem for problem in gave_up.problems)
    ended = evaluate([Run("B", "1", steps)], task, ScoringConfig(bootstrap_resamples=20), NO_ATTRIBUTES).summary
    assert (ended["TP"], ended["SR"], ended["SER"]) == (1.0, 1.0, 1.0)
    assert ended["end_reasons"]["end"] == 1                           # inferred: the last step is End


def test_gave_up_runs_on_disk_through_the_cli(tmp_path, capsys, kit):
    handmade = kit.write_handmade(tmp_path)
    # Task 91 gets a fourth and fifth run: one folder with only a run-end marker line, one with an empty
    # trajectory and run.json; both gave up before any step.
    marker = handmade.runs_dir / "91" / "4"
    write_trajectory(marker / "trajectory.jsonl", [])
    (marker / "trajectory.jsonl").write_text(json.dumps({"step": 1, "action": None, "end_reason": "gave_up"}) + "\n")
    empty = handmade.runs_dir / "91" / "5"
    write_trajectory(empty / "trajectory.jsonl", [])
    (empty / "run.json").write_text(json.dumps({"episode_id": "91", "run_index": 5, "end_reason": "gave_up"}))
    assert read_trajectory(marker / "trajectory.jsonl").end_reason == "gave_up"
    assert main(["score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir), "--json",
                 "--split", "test", "--resamples", "20"]) == 0
    result = json.loads(capsys.readouterr().out)
    # test split: 91/1 TP 1 (ended), 91/2 TP 1/2 (ended), 91/3 corrupt, 91/4 and 91/5 gave up (TP 0, not ended):
    # SR 1/5, TP 1.5/5, SER 1/2 as without the give-ups.
    assert (result["runs"], result["SR"], result["TP"], result["SER"]) == (5, 0.2, 0.3, 0.5)
    assert result["end_reasons"]["gave_up"] == 2


# ---- infrastructure failures -----------------------------------------------------------------------------------------

def test_infrastructure_failures_are_left_out_and_counted(tmp_path, capsys, kit):
    handmade = kit.write_handmade(tmp_path)
    # 3/2 (TP 2/6, 3 re-plans) was cut by a fault: run.json says error. Train split without it: 3/1 (TP 1, success,
    # 1 re-plan, L 8) and 3/3 (TP 1/2, ended, 1 re-plan): SR 1/2, TP 3/4, SER 1/2, SRR 1/2, PLWSR (7/8)/2.
    (handmade.runs_dir / "3" / "2" / "run.json").write_text(json.dumps(
        {"episode_id": "3", "run_index": 2, "end_reason": "error", "error_msg": "executor timed out"}))
    assert main(["score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir), "--json",
                 "--split", "train", "--resamples", "20"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert (result["runs"], result["SR"], result["TP"], result["SER"], result["SRR"]) == (2, 0.5, 0.75, 0.5, 0.5)
    assert (result["PLWSR"], result["infrastructure_failures"]) == (pytest.approx(7 / 16), 1)
    assert "task 3 run 2: infrastructure failure: executor timed out; not a planner result" in captured.err
    assert main(["score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir), "--split", "train",
                 "--resamples", "20"]) == 0
    assert "infrastructure failures: 1" in capsys.readouterr().out
    # On request they are scored as failed runs: back to the three runs of the hand-made set (SR 1/3).
    assert main(["score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir), "--json",
                 "--split", "train", "--resamples", "20", "--include-infrastructure-failures"]) == 0
    included = json.loads(capsys.readouterr().out)
    assert (included["runs"], included["SR"], included["infrastructure_failures"]) == (3, pytest.approx(1 / 3), 0)
    out = tmp_path / "report"
    assert main(["report", str(handmade.runs_dir), "--data", str(handmade.data_dir), "--out", str(out), "--split",
                 "train", "--resamples", "20"]) == 0
    assert "infrastructure failures: 1" in (out / "index.html").read_text()
    assert "infrastructure failures: 1" in (out / "summary.md").read_text()


def test_run_json_gives_the_end_reason_of_conversation_runs_too(tmp_path, kit):
    run_dir = tmp_path / "exp" / "3" / "1"
    write_conversation(run_dir / "conversation.json", conversation_from_steps("t", kit.runs[("3", "2")]))
    (run_dir / "run.json").write_text(json.dumps({"end_reason": "error", "error_msg": "simulator died"}))
    run = load_experiment(tmp_path / "exp", source="conversation").runs[0]
    assert (run.end_reason, run.error_msg, run.infrastructure_failure) == ("error", "simulator died", True)


def test_end_reason_comes_from_run_json_then_the_last_line(tmp_path, kit):
    path = tmp_path / "3" / "1" / "trajectory.jsonl"
    last = Step(2, "Go to", "sofa", end_reason="step_limit")
    write_trajectory(path, [kit.ok(1, "[Go to, fridge]"), last])
    run = read_trajectory(path)
    assert (run.end_reason, run.inferred_end_reason, run.steps[-1] == last) == ("step_limit", "step_limit", True)
    (path.parent / "run.json").write_text(json.dumps({"end_reason": "cancelled"}))
    assert read_trajectory(path).end_reason == "cancelled"
    (path.parent / "run.json").write_text(json.dumps({"end_reason": "tired"}))
    odd = read_trajectory(path)
    assert odd.end_reason is None and "unknown end reason 'tired'" in odd.problems[0]
    assert Run("3", "1", [kit.end(1)]).inferred_end_reason == "end"
    assert Run("3", "1", [kit.ok(1, "[Go to, fridge]")]).inferred_end_reason is None


def test_records_copy_the_resolved_identity_and_the_end_reason():
    subtask = SimpleNamespace(action="Pick", target="box", place="", model="RT-1-X")
    record = SimpleNamespace(step=3, subtask=subtask, feedback="None", success=True, analysis="", raw_output="",
                             inventory_after=["box"], error_type="", views=[], planning_seconds=0.5,
                             execution_seconds=1.0, target_instance="sugar_box_0", target_canonical="004_sugar_box",
                             place_instance="", place_canonical="", end_reason="")
    step = step_from_record(record)
    assert (step.target_instance, step.target_canonical, step.end_reason) == ("sugar_box_0", "004_sugar_box", None)
    assert Step.from_json(json.loads(json.dumps(step.to_json())), "x:1") == step
    assert step.to_json()["target_canonical"] == "004_sugar_box"
    marker = SimpleNamespace(subtask=SimpleNamespace(action="", target="", place="", model=""), end_reason="gave_up")
    assert (is_end_marker(marker), end_reason_of(marker), is_end_marker(record)) == (True, "gave_up", False)
    older = SimpleNamespace(**{key: value for key, value in vars(record).items()
                               if key not in ("target_instance", "target_canonical", "place_instance",
                                              "place_canonical", "end_reason")})
    assert (step_from_record(older).target_canonical, step_from_record(older).end_reason) == ("", None)


# ---- resolved identity -----------------------------------------------------------------------------------------------

def progress(nodes: list[str], steps: list[Step], official: bool = False) -> float:
    path = tuple(parse_subtask(node) for node in nodes)
    return KeypathMatcher("t", [path], NameIndex(default_alias_table()), official=official).progress(steps)


def pick(written: str, instance: str = "", canonical: str = "") -> Step:
    return Step(1, "Pick", written, target_instance=instance, target_canonical=canonical)


def test_tp_matches_the_object_the_executor_resolved():
    cracker = ["[Pick, cracker_box]", "[End]"]
    end = Step(2, "End")
    # The planner wrote "box"; the executor picked the sugar box: not the cracker box (was credited before).
    assert progress(cracker, [pick("box", "sugar_box_0", "004_sugar_box"), end]) == 0.0
    assert progress(cracker, [pick("box", "cracker_box_0", "003_cracker_box"), end]) == 1.0
    # A keypath name that is itself ambiguous denotes every entry listing it: any box the executor picked matches.
    assert progress(["[Pick, box]", "[End]"], [pick("box", "sugar_box_0", "004_sugar_box"), end]) == 1.0
    # The instance name, with or without its _<n> suffix, matches a name the alias table does not know.
    assert progress(["[Pick, pantry_box]", "[End]"], [pick("box", "pantry_box_2", ""), end]) == 1.0
    assert progress(["[Pick, pantry_box]", "[End]"], [pick("box", "pantry_box_2", "003_cracker_box"), end]) == 1.0
    # Without a resolved identity: "box" may be any box, so it matches neither cracker_box nor gelatin_box...
    assert progress(cracker, [pick("box"), end]) == 0.0
    assert progress(["[Pick, gelatin_box]", "[End]"], [pick("box"), end]) == 0.0
    # ...while the release's table maps box -> 009_gelatin_box: it credits gelatin_box, not cracker_box.
    assert progress(cracker, [pick("box"), end], official=True) == 0.0
    assert progress(["[Pick, gelatin_box]", "[End]"], [pick("box"), end], official=True) == 1.0
    # Official mode ignores the resolved identity (the release never recorded one).
    assert progress(cracker, [pick("box", "cracker_box_0", "003_cracker_box"), end], official=True) == 0.0
    # An unambiguous written name, and two names for the same two fridge entries, match as before.
    assert progress(cracker, [pick("Cracker Box"), end]) == 1.0


def test_put_places_match_on_the_resolved_place():
    nodes = ["[Put, apple, fridge]", "[End]"]
    into_fridge = Step(1, "Put", "apple", "refrigerator", target_canonical="013_apple", target_instance="apple_0",
                       place_instance="fridge_0", place_canonical="frl_apartment_refrigerator")
    on_counter = Step(1, "Put", "apple", "fridge", target_canonical="013_apple", target_instance="apple_0",
                      place_instance="kitchen_counter_0", place_canonical="kitchen_counter")
    assert progress(nodes, [into_fridge, Step(2, "End")]) == 1.0
    assert progress(nodes, [on_counter, Step(2, "End")]) == 0.0
    assert progress(["[Pick, apple]", "[End]"], [Step(1, "Pick", "apple", "fridge"), Step(2, "End")]) == 0.0


def test_the_release_table_is_one_canonical_per_alias_last_listing_wins():
    table = release_name_table(default_alias_table())
    assert (table["box"], table["can"], table["meat_can"]) == ("009_gelatin_box", "010_potted_meat_can",
                                                                "010_potted_meat_can")
    assert (table["refrigerator"], table["cracker_box"], table["TV"]) == ("fridge", "003_cracker_box",
                                                                          "frl_apartment_tv_screen")
    assert "003_cracker_box" not in table                              # canonicals are keys only when listed
    assert "Cracker_Box" not in table                                  # exact strings, no normalising
