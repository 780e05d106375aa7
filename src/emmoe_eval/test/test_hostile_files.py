"""Hostile and broken input never ends in a traceback: every reader reports the file and goes on.

The reader fuzz tests run FUZZ_EXAMPLES generated files each (200 by default; 10,000 with
`HOMIEBOT_FUZZ_EXAMPLES=10000 python -m pytest src/emmoe_eval/test/test_hostile_files.py`); the command-line test
runs at most 15 (each writes a report). The folder fuzz test mutates real files instead: a recorded run folder and
its task folder, 1,000 seeded mutations of each file kind (emmoe_eval.fuzzing; bench/bench_fuzz_runs.py runs more).
"""

from __future__ import annotations

import json
import os
import shutil
import string
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emmoe_eval.bags import BagError, read_bag_runs
from emmoe_eval.cli import main
from emmoe_eval.conversation import read_conversation_run
from emmoe_eval.dataset import DatasetError, load_tasks, parse_info, parse_keypaths
from emmoe_eval.fuzzing import FILE_KINDS, fuzz, lay_out, read
from emmoe_core.json_text import JSONTextError, decode_json
from emmoe_eval.runs import read_trajectory

ROOT = Path(__file__).resolve().parents[3]
FUZZ_EXAMPLES = int(os.environ.get("HOMIEBOT_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
_step_keys = st.sampled_from(["step", "action", "object", "target", "success", "feedback", "model", "analysis",
                              "visible", "locations", "end_reason", "planner"])
_step_like = st.dictionaries(_step_keys, _json_values, max_size=8)
_line = st.one_of(
    _step_like.map(json.dumps),
    _json_values.map(json.dumps),
    st.text(alphabet=string.printable, max_size=60),
    st.integers(min_value=1, max_value=200_000).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(min_value=4_400, max_value=6_000).map(lambda digits: '{"step": ' + "7" * digits + "}"),
)


def test_decode_json_has_one_error_type_for_every_hostile_text():
    for text in ("[" * 100_000 + "]" * 100_000, '{"step": ' + "9" * 5_000 + "}", '{"a": ', "\x00"):
        with pytest.raises(JSONTextError):
            decode_json(text)


@FUZZ
@given(lines=st.lists(_line, max_size=6), run_json=st.one_of(st.none(), _line))
def test_any_trajectory_and_run_json_is_read_without_raising(tmp_path_factory, lines, run_json):
    run_dir = tmp_path_factory.mktemp("exp") / "91" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / "trajectory.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if run_json is not None:
        (run_dir / "run.json").write_text(run_json, encoding="utf-8")
    run = read_trajectory(run_dir / "trajectory.jsonl")
    assert run.corrupt or all(step.step >= 1 for step in run.steps)
    for problem in run.problems:
        assert str(run_dir) in problem and len(problem) < 2_000


@FUZZ
@given(entries=st.one_of(_line, st.lists(st.text(max_size=120), max_size=4).map(json.dumps)))
def test_any_conversation_json_is_read_without_raising(tmp_path_factory, entries):
    run_dir = tmp_path_factory.mktemp("exp") / "91" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / "conversation.json").write_text(entries, encoding="utf-8")
    run = read_conversation_run(run_dir / "conversation.json")
    assert run.corrupt or not run.problems or all(str(run_dir) in problem for problem in run.problems)


@FUZZ
@given(info=st.text(max_size=300), keypath=_line)
def test_info_and_keypath_files_fail_only_with_a_dataset_error(info, keypath):
    for parse in (lambda: parse_info(info, "info.txt"), lambda: parse_keypaths(decode_json(keypath), "keypath.json")):
        try:
            parse()
        except (DatasetError, JSONTextError):
            pass


@FUZZ
@given(data=st.binary(max_size=400), prefix=st.sampled_from([b"", b"\x89MCAP0\r\n"]))
def test_any_bag_bytes_are_reported_not_raised(tmp_path_factory, data, prefix):
    path = tmp_path_factory.mktemp("bags") / "episode.mcap"
    path.write_bytes(prefix + data)
    try:
        found = read_bag_runs([path])
    except BagError:
        return
    assert all(run.corrupt or run.steps or run.problems for run in found.runs)


def _data_with_two_tasks(tmp_path: Path) -> Path:
    data = tmp_path / "data" / "test"
    for task in ("91", "92"):
        shutil.copytree(ROOT / "data" / "test" / task, data / task)
    return tmp_path / "data"


def test_one_malformed_task_is_reported_and_the_others_are_scored(tmp_path, capsys):
    data = _data_with_two_tasks(tmp_path)
    (data / "test" / "92" / "keypath.json").write_text('{"not": "a list"}')
    problems: list[str] = []
    assert list(load_tasks(data, "all", problems=problems)) == ["91"]
    assert len(problems) == 1 and "92/keypath.json" in problems[0]
    with pytest.raises(DatasetError, match="keypath.json"):
        load_tasks(data, "all")
    runs = tmp_path / "exp"
    for task in ("91", "92"):
        (runs / task / "1").mkdir(parents=True)
        (runs / task / "1" / "trajectory.jsonl").write_text(
            json.dumps({"step": 1, "action": "End", "object": None, "target": None, "success": True,
                        "feedback": "None", "model": None, "analysis": ""}) + "\n")
    assert main(["score", "--data", str(data), "--runs", str(runs), "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert (summary["runs"], summary["malformed_tasks"]) == (1, 1)
    assert "92/keypath.json" in captured.err and "task 92 run 1" in captured.err


@settings(FUZZ, max_examples=min(FUZZ_EXAMPLES, 15))  # a report takes about a second
@given(lines=st.lists(_line, min_size=1, max_size=4))
def test_score_and_report_end_with_a_status_for_any_run_file(tmp_path_factory, lines):
    root = tmp_path_factory.mktemp("cli")
    data = _data_with_two_tasks(root)
    run_dir = root / "exp" / "91" / "1"
    run_dir.mkdir(parents=True)
    (run_dir / "trajectory.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["score", "--data", str(data), "--runs", str(root / "exp"), "--json"]) == 0
    assert main(["report", str(root / "exp"), "--data", str(data), "--out", str(root / "report")]) == 0


def test_fuzzed_run_and_data_folders_are_reported_never_raised_nor_hung(tmp_path):
    """Issue 40: 1,000 seeded mutations of each file kind of a recorded run folder and of its task folder (truncated,
    bytes flipped, lines deleted or duplicated, JSON types changed, huge numbers, deep nesting, other encodings, empty;
    FIFOs, symlink loops, dangling links, devices and directories in the file's place), each read as its users read
    it under a 5 s watchdog: no traceback, no hang, every rejected file named, and a result changed without a word
    only where the file still parses (a valid file with other content). About 10 s on two busy cores."""
    layout = lay_out(tmp_path, ROOT / "data" / "test" / "91")
    assert {kind: read(layout, kind)[1] for kind in FILE_KINDS} == {kind: [] for kind in FILE_KINDS}
    trials = fuzz(layout, per_kind=1_000, seed=0)
    assert [trial for trial in trials if trial.outcome in ("traceback", "hang", "unnamed", "silent_invalid")] == []
    named = Counter(trial.kind for trial in trials if trial.outcome == "named")
    assert len(trials) == 7_000 and all(named[kind] > 500 for kind in FILE_KINDS)  # the mutations reach the readers
