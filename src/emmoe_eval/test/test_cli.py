"""`emmoe-eval score` on the hand-made data set (see conftest.py) against values computed by hand."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from emmoe_eval.cli import main
from emmoe_eval.conversation import conversation_from_steps, write_conversation
from emmoe_eval.runs import read_trajectory

# Hand computation for the six runs of conftest.py (TP, success, ended, L, L*, re-plans):
#   3/1  TP 1    success  End  L 8  L* 7  re-plans 1 (step 4 after the D1 Pick)
#   3/2  TP 2/6  -        -    L 6        re-plans 3 (steps 3, 5, 6)
#   3/3  TP 3/6  -        End  L 5        re-plans 1 (End after the F1 Fetch)
#   91/1 TP 1    success  End  L 5  L* 5  re-plans 0
#   91/2 TP max(2/5, 2/4) = 1/2, End, re-plans 2 (step 4 after D1, End after E2)
#   91/3 corrupt: TP 0, no steps
SR = 2 / 6                                   # 3/1 and 91/1
TP = (1 + 2 / 6 + 3 / 6 + 1 + 1 / 2 + 0) / 6  # = (10/3) / 6 = 5/9
SER = 2 / 4                                  # 2 successful of the 4 runs ending with End (3/1, 3/3, 91/1, 91/2)
SRR = (1 + 0) / (1 + 3 + 1 + 0 + 2 + 0)      # re-plans in successful runs / all re-plans = 1/7
PLWSR = (7 / 8 + 5 / 5) / 6                  # (L*/max(L, L*) over successful runs) / all runs = 0.3125


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_score_json_matches_the_hand_computed_values(handmade, capsys):
    status, out, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                               "--json")
    assert status == 0
    result = json.loads(out)
    for name, expected in {"SR": SR, "TP": TP, "SER": SER, "SRR": SRR, "PLWSR": PLWSR}.items():
        assert result[name] == pytest.approx(expected), name
    assert (result["runs"], result["tasks"], result["corrupt_runs"], result["split"], result["compat"]) == \
        (6, 2, 1, "all", "default")
    # Task attributes (release lists): 3 is long-horizon, logical, human style; 91 is typical, human style.
    attributes = result["per_attribute"]
    assert attributes["typical"] == {"tasks": 1, "runs": 3, "SR": pytest.approx(1 / 3), "TP": pytest.approx(0.5)}
    assert attributes["long-horizon"]["TP"] == pytest.approx((1 + 2 / 6 + 3 / 6) / 3)   # 11/18
    assert attributes["human style"]["runs"] == 6 and attributes["open-ended"]["SR"] is None
    # Table 4. Executions = successes + E1/E2/E3 failures:
    #   Go to: 9 successes (3 + 2 + 1 + 2 + 1) -> SR 1;  Pick: 4 successes + 3 E1 -> SR 4/7;
    #   Put: 2 successes + 1 E2 -> SR 2/3;  Open: 3 successes.  Execution errors: 3 E1 + 1 E2 = 4 -> P Pick 3/4, Put 1/4.
    actions = result["per_action"]
    assert (actions["Go to"]["executions"], actions["Go to"]["SR"]) == (9, 1.0)
    assert (actions["Pick"]["steps"], actions["Pick"]["executions"]) == (8, 7)
    assert actions["Pick"]["SR"] == pytest.approx(4 / 7) and actions["Pick"]["P"] == 0.75
    assert actions["Put"]["SR"] == pytest.approx(2 / 3) and actions["Put"]["P"] == 0.25
    assert (actions["Open"]["SR"], actions["Close"]["SR"], actions["Close"]["P"]) == (1.0, None, 0.0)
    # Errors: successful runs hold the D1 of 3/1; failed runs hold 3 E1 (3/2), F1 (3/3), D1 and E2 (91/2).
    errors = result["errors"]
    assert {kind: counts for kind, counts in errors["by_type"].items() if any(counts.values())} == {
        "F1": {"successful_runs": 0, "failed_runs": 1}, "D1": {"successful_runs": 1, "failed_runs": 1},
        "E1": {"successful_runs": 0, "failed_runs": 3}, "E2": {"successful_runs": 0, "failed_runs": 1}}
    assert errors["by_category"]["execution"] == {"successful_runs": 0, "failed_runs": 4}
    assert errors["total"] == {"successful_runs": 1, "failed_runs": 6}
    # Bootstrap over the two tasks: SR is 1/3 in every resample; TP is 1/2 (91, 91), 11/18 (3, 3) or 5/9 (mixed),
    # and each pure pair has probability 1/4 > 2.5 %, so the interval spans [1/2, 11/18].
    intervals = result["confidence_intervals"]
    assert intervals["SR"] == pytest.approx([1 / 3, 1 / 3])
    assert intervals["TP"] == pytest.approx([1 / 2, 11 / 18])
    per_task = result["per_task"]
    assert [run["TP"] for run in per_task["3"]["run_results"]] == pytest.approx([1, 1 / 3, 1 / 2])
    assert per_task["91"]["run_results"][2]["corrupt"] is True
    assert "91/3/trajectory.jsonl:2: truncated or corrupt line" in err


def test_score_prints_the_paper_table_in_percent(handmade, capsys):
    status, out, _ = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == ("EMMOE scores: 6 runs of 2 tasks (split all, compat default; setting background, "
                        "conditions reliable (not recorded))")
    assert lines[2].split() == ["SR", "PLWSR", "TP", "SRR", "SER"]
    assert lines[3].split() == ["33.33", "31.25", "55.56", "14.29", "50.00", "(percent)"]
    assert "95% bootstrap CI over tasks (1000 resamples): SR 33.33-33.33, TP 50.00-61.11" in out


def test_score_names_the_recorded_conditions_and_their_scoring(handmade, capsys):
    (handmade.runs_dir / "setting.json").write_text(json.dumps({"setting": "background", "conditions": "paper"}))
    try:
        _, out, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir))
        assert out.splitlines()[0].endswith("(split all, compat default; setting background, conditions paper)")
        assert "holds runs made under conditions paper, which score with --compat official" in err
        _, out, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                              "--compat", "official", "--split", "all")
        assert "compat official; setting background, conditions paper" in out and "conditions paper" not in err
    finally:
        (handmade.runs_dir / "setting.json").unlink()


def test_split_selection(handmade, capsys):
    _, out, _ = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                        "--json", "--split", "test")
    result = json.loads(out)
    # test split = task 91 only: SR 1/3, TP (1 + 1/2 + 0)/3 = 1/2, PLWSR (5/5)/3, SER 1/2, SRR 0/2
    assert (result["runs"], result["tasks"]) == (3, 1)
    assert (result["SR"], result["TP"], result["SER"], result["SRR"]) == (pytest.approx(1 / 3), 0.5, 0.5, 0.0)
    assert result["PLWSR"] == pytest.approx(1 / 3)


def test_task_selection(handmade, capsys):
    _, out, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                          "--json", "--tasks", "91")
    # The same runs as the test split (task 91 alone), and no warning about the other tasks having no runs.
    result = json.loads(out)
    assert (result["runs"], result["tasks"], result["SR"], result["TP"]) == (3, 1, pytest.approx(1 / 3), 0.5)
    assert "have no runs" not in err
    status, _, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                             "--tasks", "91,4242")
    assert status == 2 and "--tasks: 4242 not among the all tasks" in err


def test_compat_official_reproduces_the_release(handmade, capsys):
    _, out, _ = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                        "--json", "--compat", "official")
    result = json.loads(out)
    # Quirk 4: train split only -> task 3. Quirk 1: 3/2 has no End, so its last step (Go to kitchen_counter) is lost:
    # L 5 and re-plans 2 (steps 3 and 5). TP unchanged (2/6): the lost step matched nothing.
    # SR 1/3; TP (1 + 2/6 + 3/6)/3 = 11/18; SER 1/2 (3/1 of 3/1 and 3/3); SRR 1/(1 + 2 + 1) = 1/4; PLWSR (7/8)/3.
    assert (result["split"], result["compat"], result["runs"]) == ("train", "official", 3)
    assert result["SR"] == pytest.approx(1 / 3) and result["TP"] == pytest.approx(11 / 18)
    assert (result["SER"], result["SRR"]) == (0.5, 0.25)
    assert result["PLWSR"] == pytest.approx(7 / 24)
    assert [run["steps"] for run in result["per_task"]["3"]["run_results"]] == [8, 5, 5]


def test_compat_official_rejects_keypath_names_outside_the_alias_table(handmade, capsys):
    keypath_file = handmade.data_dir / "train" / "3" / "keypath.json"
    keypath_file.write_text(json.dumps([["[Go to, pantry]", "[End]"]]), encoding="utf-8")
    status, out, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                               "--compat", "official")
    assert status == 2 and out == ""
    assert err.strip().splitlines()[-1].startswith("emmoe-eval: error: task 3: keypath 1, node 1 ([Go to, pantry]): "
                                                   "'pantry' is not in the alias table")
    status, out, _ = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                             "--json")
    assert status == 0 and json.loads(out)["per_task"]["3"]["TP"] == 0.0    # default: a plain name, unmatched


def test_conversation_files_score_like_the_trajectories(handmade, capsys):
    for run_dir in sorted(handmade.runs_dir.glob("*/*")):
        steps = read_trajectory(run_dir / "trajectory.jsonl").steps
        if run_dir != handmade.corrupt_run.parent:
            write_conversation(run_dir / "conversation.json", conversation_from_steps("instruction", steps))
    _, out, _ = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                        "--json", "--source", "conversation")
    result = json.loads(out)
    # 91/3 has no conversation.json (5 runs). The only information conversation.json lacks is the outcome of 3/2's
    # last step (no End): scored as not successful, so Go to has 8 executions instead of 9; TP is unchanged because
    # that step matched nothing. SR 2/5, TP (10/3)/5 = 2/3, SER 2/4, SRR 1/7, PLWSR (7/8 + 1)/5.
    assert result["runs"] == 5
    assert (result["SR"], result["TP"], result["SER"]) == (pytest.approx(2 / 5), pytest.approx(2 / 3), 0.5)
    assert (result["SRR"], result["PLWSR"]) == (pytest.approx(1 / 7), pytest.approx(1.875 / 5))
    assert result["per_action"]["Go to"]["executions"] == 8


def test_custom_alias_table_and_attributes(handmade, tmp_path, capsys):
    # With a table that does not know "refrigerator", the keypath node [Go to, refrigerator] only matches itself, so
    # no run of task 3 gets past node 1: 3/1, 3/2, 3/3 all have TP 0 and task 3's SR drops to 0.
    aliases = tmp_path / "aliases.txt"
    aliases.write_text("fridge:\nfridge\n\n013_apple:\napple/red_apple\n\nkitchen_counter:\nkitchen counter/sink\n",
                       encoding="utf-8")
    attributes = tmp_path / "attributes.json"
    attributes.write_text(json.dumps({"mine": [3]}), encoding="utf-8")
    _, out, _ = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir), "--json",
                        "--split", "train", "--alias-table", str(aliases), "--attributes", str(attributes))
    result = json.loads(out)
    assert (result["SR"], result["TP"]) == (0.0, 0.0)
    assert result["per_attribute"] == {"mine": {"tasks": 1, "runs": 3, "SR": 0.0, "TP": 0.0}}


@pytest.mark.parametrize(("argv", "message"), [
    (["score", "--data", "{tmp}/nowhere", "--runs", "{tmp}"], "not an EMMOE data folder"),
    (["score", "--data", "{data}", "--runs", "{tmp}/missing"], "no such experiment folder"),
    (["score", "--data", "{data}", "--runs", "{runs}", "--resamples", "0"], "bootstrap_resamples must be >= 1"),
    (["score-bag", "{tmp}/none.mcap", "--data", "{data}"], "no such bag"),
])
def test_user_errors_print_one_line_and_exit_2(handmade, tmp_path, capsys, argv, message):
    values = {"tmp": str(tmp_path), "data": str(handmade.data_dir), "runs": str(handmade.runs_dir)}
    status, out, err = run_cli(capsys, *(part.format(**values) for part in argv))
    assert status == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("emmoe-eval: error: ") and message in last
    assert "Traceback" not in err


def test_an_alias_table_that_is_not_text_is_named(handmade, tmp_path, capsys):
    aliases = tmp_path / "aliases.txt"
    aliases.write_bytes(b"\xff\xfe apple: red_apple")
    status, out, err = run_cli(capsys, "score", "--data", str(handmade.data_dir), "--runs", str(handmade.runs_dir),
                               "--alias-table", str(aliases))
    assert (status, out, err) == (2, "", f"emmoe-eval: error: {aliases}: cannot read the alias table: not UTF-8 text "
                                         "(invalid start byte at byte 0)\n")


@pytest.mark.skipif(shutil.which("emmoe-eval") is None, reason="the emmoe-eval entry point is not on PATH (env.sh)")
def test_installed_entry_point(handmade):
    completed = subprocess.run(["emmoe-eval", "score", "--data", str(handmade.data_dir), "--runs",
                                str(handmade.runs_dir), "--json", "--split", "train"],
                               capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["SR"] == pytest.approx(1 / 3)


@pytest.mark.skipif(shutil.which("emmoe-eval") is None, reason="the emmoe-eval entry point is not on PATH (env.sh)")
def test_a_reader_that_goes_away_ends_the_command_quietly(handmade):
    """`emmoe-eval score --json | head` (issue 40): the pipe is closed before the scores are written; the command
    ends with SIGPIPE's status and no BrokenPipeError traceback."""
    process = subprocess.Popen(["emmoe-eval", "score", "--data", str(handmade.data_dir), "--runs",
                                str(handmade.runs_dir), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert "BrokenPipe" not in err and "Traceback" not in err, err
