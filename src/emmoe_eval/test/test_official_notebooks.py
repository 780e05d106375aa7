"""`emmoe-eval score --compat official` reproduces what the released notebooks compute (issue 11, "Must hold").

The run folder holds release-style conversation.json files, written the way the release's eval loop writes them
(`scripts/eval/eval_*.py`: a round is logged only when its output parsed; the history grows by
`({round}) {subtask}({signal}) `; the next round's `Feedback:` carries the previous round's feedback). The expected
values below are worked out by hand from the notebooks' rules (count_TP, ser, plw_sr, srr, analysis .ipynb):
- the run is the last round's history, plus End when the last entry contains "End";
- names: the notebooks' `mapping_dict` (one canonical per alias, the last listing wins: `box` -> 009_gelatin_box,
  `can` -> 010_potted_meat_can, `refrigerator` -> `fridge`); step names lower-cased, keypath names as written;
- SR: TP == 1; SER: successes among runs whose last entry says End; PLWSR: L = len(conversation), L* = info.txt
  lines with "Subtask"; SRR: one run index at a time, a failure right before End is not a re-plan, a failure followed
  by a last non-End round is;
- Table 4: history steps with the next round's feedback; F/L/D feedback skipped, any other non-None feedback fails.

Tasks (train: 5, 7; test: 92):
- 5: keypath [Go to, table] [Pick, cracker_box] [Go to, fridge] [Put, cracker_box, fridge] [End]; L* 6.
- 7: K1 [Go to, sofa] [Pick, green_can] [Put, green_can, tvstand] [End];
     K2 [Pick, green_can] [Go to, tvstand] [Put, green_can, tvstand] [End]; L* 5.
- 92: [Go to, sofa] [End]; L* 2.

Runs (x = failed; the last round's outcome is never logged):
- 5/1: Go to table, Pick box, Go to fridge, Put box fridge, End. `box` is 009_gelatin_box, not cracker_box
       (003): only node 1 matches -> TP 1/5. Ended. Re-plans 0.
- 5/2: Go to brown table, x Pick cracker box (E1), Pick cracker_box, Go to fridge, x Put cracker_box fridge (L3),
       Open fridge, Put cracker_box refrigerator, End -> TP 1, success; L 8 -> PLW 6/8. Re-plans: history of 7,
       failures among its first 6: 2.
- 5/3: Go to table, Pick cracker_box, x Go to fridge (E1), x Go to fridge (E1), then a last round Go to fridge
       (then the planner gave up: not logged) -> history of 4 -> TP 2/5, not ended. Re-plans 2 (both failures:
       the last one is followed by the last, non-End round).
- 5/4: a fourth run (End at once): the notebooks read runs 1-3 only -> skipped.
- 7/1: Go to sofa, Pick can, Go to tvstand, Put can tv stand, End: `can` is 010_potted_meat_can = green_can
       -> TP 1 (K1 and K2), success, L 5 -> PLW 1. Re-plans 0.
- 7/2: x Pick green_can (D1), Go to sofa, Pick green_can, x Put green_can tvstand (D1), End -> K1 2/4, K2 1/4:
       TP 1/2, ended, not successful. Re-plans 1 (the failure right before End is not counted).
- 7/3: Go to sofa, x Pick green can (E1), Pick green_can, Go to tvstand, x Put green_can tvstand (E3),
       Put green_can tvstand, End -> TP 1, success, L 7 -> PLW 5/7. Re-plans 2 (failures among the first 5 of 6).
- 92/1: Go to sofa, End -> TP 1 (test split: only with --split test/all).

Train split, runs 1-3 (six runs):
  TP = (1/5 + 1 + 2/5 + 1 + 1/2 + 1) / 6 = 4.1/6;  SR = 3/6;  SER = 3/5 (5/3 did not end);
  PLWSR = (6/8 + 5/5 + 5/7) / 6;  SRR by run: 1: 0/0 (None), 2: 2/(2+1) = 2/3, 3: 2/(2+2) = 1/2; pooled 4/7.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emmoe_eval.cli import main
from emmoe_eval.conversation import LIVE_REQUEST_LINE, format_round
from emmoe_eval.dataset import InfoBlock, InfoTrajectory, write_task
from emmoe_core.protocol import parse_subtask

TASKS = {
    ("train", "5"): ("put the red box into the fridge", 6,
                     [["[Go to, table]", "[Pick, cracker_box]", "[Go to, fridge]", "[Put, cracker_box, fridge]",
                       "[End]"]]),
    ("train", "7"): ("put the green can on the tv stand", 5,
                     [["[Go to, sofa]", "[Pick, green_can]", "[Put, green_can, tvstand]", "[End]"],
                      ["[Pick, green_can]", "[Go to, tvstand]", "[Put, green_can, tvstand]", "[End]"]]),
    ("test", "92"): ("go to the sofa", 2, [["[Go to, sofa]", "[End]"]]),
}
E1 = "Unable to {}, the subtask is too difficult to perform"
OK = ("success", "None")
# Per run: (subtask text as the planner wrote it, model, (signal, feedback)) for every logged round.
RUNS: dict[tuple[str, str], list[tuple[str, str, tuple[str, str]]]] = {
    ("5", "1"): [("Go to, table", "NoMaD", OK), ("Pick, box", "RT-1-X", OK), ("Go to, fridge", "NoMaD", OK),
                 ("Put, box, fridge", "RT-1-X", OK), ("End", "None", OK)],
    ("5", "2"): [("Go to, brown table", "NoMaD", OK), ("Pick, cracker box", "RT-1-X", ("fail", E1.format("pick"))),
                 ("Pick, cracker_box", "RT-1-X", OK), ("Go to, fridge", "NoMaD", OK),
                 ("Put, cracker_box, fridge", "RT-1-X",
                  ("fail", "Unable to put, the fridge is closed, you should open it first")),
                 ("Open, fridge", "octo", OK), ("Put, cracker_box, refrigerator", "RT-1-X", OK), ("End", "None", OK)],
    ("5", "3"): [("Go to, table", "NoMaD", OK), ("Pick, cracker_box", "RT-1-X", OK),
                 ("Go to, fridge", "NoMaD", ("fail", E1.format("go to"))),
                 ("Go to, fridge", "NoMaD", ("fail", E1.format("go to"))), ("Go to, fridge", "NoMaD", OK)],
    ("5", "4"): [("End", "None", OK)],
    ("7", "1"): [("Go to, sofa", "NoMaD", OK), ("Pick, can", "RT-1-X", OK), ("Go to, tvstand", "NoMaD", OK),
                 ("Put, can, tv stand", "RT-1-X", OK), ("End", "None", OK)],
    ("7", "2"): [("Pick, green_can", "RT-1-X", ("fail", "Unable to pick, the target is far away")),
                 ("Go to, sofa", "NoMaD", OK), ("Pick, green_can", "RT-1-X", OK),
                 ("Put, green_can, tvstand", "RT-1-X", ("fail", "Unable to put, the target is far away")),
                 ("End", "None", OK)],
    ("7", "3"): [("Go to, sofa", "NoMaD", OK), ("Pick, green can", "RT-1-X", ("fail", E1.format("pick"))),
                 ("Pick, green_can", "RT-1-X", OK), ("Go to, tvstand", "NoMaD", OK),
                 ("Put, green_can, tvstand", "RT-1-X", ("fail", "Unable to put, time out")),
                 ("Put, green_can, tvstand", "RT-1-X", OK), ("End", "None", OK)],
    ("92", "1"): [("Go to, sofa", "NoMaD", OK), ("End", "None", OK)],
}


def release_conversation(task: str, rounds: list[tuple[str, str, tuple[str, str]]]) -> list[str]:
    """conversation.json entries as the release's loop logs them (inventory left at None: it plays no part)."""
    entries = []
    history = ""
    feedback = ""
    for number, (subtask, model, (signal, next_feedback)) in enumerate(rounds, start=1):
        shown_history = history or "None"
        shown_feedback = feedback if history else "None"
        instruction = (f"Task: {task}\nInventory: None\nHistorical Execution: {shown_history}\n"
                       f"Feedback: {shown_feedback}\n{LIVE_REQUEST_LINE}\n")
        output = f"Analysis: step {number} of the plan.\nSubtask: [{subtask}]\nModel: {model}"
        entries.append(format_round(instruction, output))
        history += f"({number}) {subtask}({signal}) "
        feedback = next_feedback
    return entries


@pytest.fixture
def release_experiment(tmp_path: Path) -> tuple[Path, Path]:
    data_dir = tmp_path / "EMMOE-100" / "data"
    for (split, task_id), (instruction, blocks, keypaths) in TASKS.items():
        info = InfoTrajectory(instruction, tuple(InfoBlock(index, parse_subtask("[Go to, sofa]"), "NoMaD", "why")
                                                 for index in range(1, blocks + 1)))
        write_task(data_dir, split, task_id, info, [tuple(parse_subtask(node) for node in path) for path in keypaths])
    exp = tmp_path / "exp" / "GPT4"
    for (task_id, run_id), rounds in RUNS.items():
        instruction = next(value[0] for key, value in TASKS.items() if key[1] == task_id)
        path = exp / task_id / run_id / "conversation.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(release_conversation(instruction, rounds), indent=4), encoding="utf-8")
    return data_dir, exp


def score(capsys, data_dir: Path, exp: Path, *extra: str) -> dict:
    assert main(["score", "--data", str(data_dir), "--runs", str(exp), "--compat", "official", "--json",
                 "--resamples", "20", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_official_headline_metrics_equal_the_notebooks(release_experiment, capsys):
    data_dir, exp = release_experiment
    result = score(capsys, data_dir, exp)
    assert (result["split"], result["runs"], result["tasks"]) == ("train", 6, 2)
    assert round(result["TP"], 4) == round(4.1 / 6, 4) == 0.6833
    assert round(result["SR"], 4) == 0.5
    assert round(result["SER"], 4) == 0.6
    assert round(result["PLWSR"], 4) == round((6 / 8 + 1 + 5 / 7) / 6, 4) == 0.4107
    assert result["SRR_by_run"] == {"1": None, "2": pytest.approx(2 / 3), "3": pytest.approx(1 / 2)}
    assert round(result["SRR"], 4) == round(4 / 7, 4)                 # pooled over the run indices
    runs = {(row["task_id"], row["run"]): row for task in result["per_task"].values() for row in task["run_results"]}
    assert {key: round(row["TP"], 4) for key, row in runs.items()} == {
        ("5", "1"): 0.2, ("5", "2"): 1.0, ("5", "3"): 0.4, ("7", "1"): 1.0, ("7", "2"): 0.5, ("7", "3"): 1.0}
    assert {key: row["replans"] for key, row in runs.items()} == {
        ("5", "1"): 0, ("5", "2"): 2, ("5", "3"): 2, ("7", "1"): 0, ("7", "2"): 1, ("7", "3"): 2}
    assert ("5", "4") not in runs


def test_official_srr_one_run_index_at_a_time_and_the_split_flag(release_experiment, capsys):
    data_dir, exp = release_experiment
    assert round(score(capsys, data_dir, exp, "--srr-run", "2")["SRR"], 4) == round(2 / 3, 4)
    assert score(capsys, data_dir, exp, "--srr-run", "3")["SRR"] == 0.5
    assert score(capsys, data_dir, exp, "--srr-run", "1")["SRR"] is None      # no re-plans: the notebook divides by 0
    # --split test: task 92 alone (TP 1, SR 1, SER 1, PLWSR 2/2; no re-plans); --split all adds it to the train runs.
    test = score(capsys, data_dir, exp, "--split", "test")
    assert (test["runs"], test["TP"], test["SR"], test["SER"], test["PLWSR"], test["SRR"]) == (1, 1.0, 1.0, 1.0, 1.0,
                                                                                               None)
    everything = score(capsys, data_dir, exp, "--split", "all")
    assert (everything["runs"], round(everything["SR"], 4), round(everything["TP"], 4)) == (7, round(4 / 7, 4),
                                                                                           round(5.1 / 7, 4))


def test_default_mode_differs_on_the_alias_cases(release_experiment, capsys):
    data_dir, exp = release_experiment
    assert main(["score", "--data", str(data_dir), "--runs", str(exp), "--json", "--split", "train",
                 "--resamples", "20"]) == 0
    result = json.loads(capsys.readouterr().out)
    runs = {(row["task_id"], row["run"]): row for task in result["per_task"].values() for row in task["run_results"]}
    # A written `box` may be any of four boxes: it matches neither the release's gelatin box nor cracker_box (5/1:
    # 1/5 either way). A written `can` may be any of four cans: 7/1 gets Go to sofa only -> K1 1/4.
    assert runs[("5", "1")]["TP"] == pytest.approx(1 / 5)
    assert runs[("7", "1")]["TP"] == pytest.approx(1 / 4)
    assert ("5", "4") in runs                                          # runs beyond 3 are read by default


def test_official_table_4_equals_the_analysis_notebook(release_experiment, capsys):
    data_dir, exp = release_experiment
    actions = score(capsys, data_dir, exp)["per_action"]
    # History steps of runs 1-3 (F/L/D feedback skipped): per run index successes s / execution failures f:
    #   Go to: run 1 4/0, run 2 3/0, run 3 3/2 -> s 10, f 2;  Pick: 2/0, 2/1, 2/1 -> 6, 2;  Put: 2/0, 1/0, 1/1 -> 4, 1;
    #   Open: 0/0, 1/0, 0/0 -> 1, 0;  Close: none.  Failures 5 in all.
    expected = {"Go to": (10, 2), "Pick": (6, 2), "Put": (4, 1), "Open": (1, 0), "Close": (0, 0)}
    for action, (wins, losses) in expected.items():
        row = actions[action]
        assert (row["successes"], row["execution_errors"]) == (wins, losses), action
        assert row["P"] == pytest.approx(losses / 5)
    assert actions["Go to"]["SR"] == pytest.approx(10 / 12)
    assert actions["Go to"]["SR_paper"] == pytest.approx(10 / (3 * 2 + 2 * 10))          # 0.3846
    assert actions["Pick"]["SR_retry"] == {"3f+s": pytest.approx(6 / 12), "3f+2s": pytest.approx(6 / 18),
                                           "3f+3s": pytest.approx(6 / 24)}
    assert actions["Put"]["SR_paper"] == pytest.approx(4 / 11)
    # Per run index s/max(0.001, s+f): a run index without executions counts 0, as in the notebook.
    assert actions["Go to"]["SR_by_run"] == {"1": 1.0, "2": 1.0, "3": pytest.approx(3 / 5)}
    assert actions["Go to"]["SR_range"] == [pytest.approx(3 / 5), 1.0]
    assert actions["Pick"]["SR_range"] == [pytest.approx(2 / 3), 1.0]
    assert actions["Open"]["SR_range"] == [0.0, 1.0]
    assert actions["Close"]["SR_range"] == [0.0, 0.0]
    assert actions["Close"]["SR"] is None
    # s/(3f+s) per run index: Go to 4/4, 3/3, 3/9 -> [1/3, 1]; Pick 2/2, 2/5, 2/5 -> [0.4, 1].
    assert actions["Go to"]["SR_retry_range"] == [pytest.approx(1 / 3), 1.0]
    assert actions["Pick"]["SR_retry_range"] == [pytest.approx(0.4), 1.0]


def test_official_expert_length_counts_info_lines_with_subtask(release_experiment, capsys):
    data_dir, exp = release_experiment
    info = data_dir / "train" / "7" / "info.txt"
    # plw_sr.ipynb counts every info.txt line containing "Subtask", an Analysis line that says it too.
    info.write_text(info.read_text().replace("Analysis: why", "Analysis: the next Subtask is easy", 1))
    result = score(capsys, data_dir, exp)
    # 7/1: L 5, L* 6 -> 6/6; 7/3: L 7, L* 6 -> 6/7; 5/2 unchanged 6/8.
    assert round(result["PLWSR"], 4) == round((6 / 8 + 1 + 6 / 7) / 6, 4)
