"""`homiebot tasks fuzz` end to end: a few fuzzed tasks replayed in MuJoCo (in-process and over two processes)."""

from __future__ import annotations

import json

import pytest
import yaml

from homiebot import cli
from homiebot.task_definitions import load_definitions

pytest.importorskip("mujoco")


def test_fuzz_replays_the_tasks_and_writes_the_report_and_the_tasks(tmp_path, capsys):
    # A first run of two tasks, stopped by a crash while it wrote the third line; the second run replays only the
    # third task (the cut line is dropped) and reports all three.
    cli.main(["tasks", "fuzz", "--n", "2", "--seed", "1", "--out", str(tmp_path / "one")])
    outcomes = tmp_path / "one" / "outcomes.jsonl"
    assert [json.loads(line)["index"] for line in outcomes.read_text().splitlines()] == [0, 1]
    with outcomes.open("a") as log:
        log.write('{"seed": 1, "setting": "backgr')
    capsys.readouterr()
    status = cli.main(["tasks", "fuzz", "--n", "3", "--seed", "1", "--out", str(tmp_path / "one")])
    printed = capsys.readouterr().out
    assert "2 already replayed" in printed and "task 1:0 " not in printed and "[3/3] task 1:2 " in printed
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    assert report["seed"] == 1 and report["setting"] == "background" and report["tasks"] == 3
    assert status == (0 if report["as_designed"] == 3 else 1)
    assert f"{report['as_designed']} of 3 fuzzed tasks as designed" in printed
    reached = sum(entry["total"] for entry in report["per_action"].values())
    assert reached >= 3 and sum(len(cases) for cases in report["causes"].values()) == 3 - report["as_designed"]
    for cases in report["causes"].values():
        assert all(case["seed"] == 1 and 0 <= case["index"] < 3 for case in cases)
    # The tasks file is a definition file: `homiebot tasks check --definitions` replays any of them again.
    written = yaml.safe_load((tmp_path / "one" / "tasks.yaml").read_text())
    assert sorted(written) == [1, 2, 3] and sorted(load_definitions(tmp_path / "one" / "tasks.yaml")) == [1, 2, 3]

    cli.main(["tasks", "fuzz", "--n", "3", "--seed", "1", "--jobs", "2", "--out", str(tmp_path / "two")])
    assert json.loads((tmp_path / "two" / "report.json").read_text()) == report


def test_fuzz_refuses_to_mix_another_seed_into_an_output_folder(tmp_path, capsys):
    out = tmp_path / "fuzz"
    out.mkdir()
    (out / "outcomes.jsonl").write_text(json.dumps({"seed": 1, "setting": "background", "index": 0, "kind": "fetch",
                                                    "setup_error": "", "steps": []}) + "\n")
    assert cli.main(["tasks", "fuzz", "--n", "1", "--seed", "2", "--out", str(out)]) == 2
    assert "holds the outcomes of seed 1, setting background" in capsys.readouterr().err


def test_fuzz_refuses_an_empty_run(capsys):
    assert cli.main(["tasks", "fuzz", "--n", "0"]) == 2
    assert "--n and --jobs of at least 1" in capsys.readouterr().err
