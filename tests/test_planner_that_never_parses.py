"""Through the whole ROS 2 stack: a planner whose answers never parse gets no task progress and no End credit."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.ros
def test_a_planner_that_never_parses_scores_nothing(tmp_path, ros_domain_id, openai_stub):
    openai_stub.default_answer = "I would like to help, but I am not sure what to do next."
    out = tmp_path / "exp"
    run = subprocess.run(["homiebot", "run", "--tasks", "91,92", "--runs", "1", "--planner", "openai",
                          "--base-url", openai_stub.url, "--model", "stub-4o", "--out", str(out), "--no-videos"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env={**os.environ, "OPENAI_API_KEY": "sk-test"})
    assert run.returncode == 0, run.stderr[-3000:]
    for task in ("91", "92"):
        run_dir = out / task / "1"
        score = json.loads((run_dir / "score.json").read_text())
        # Five unparsable samples on the first step: the planner gives up, nothing is executed.
        assert (score["end_reason"], score["steps"], score["task_progress"], score["success"],
                score["ended_with_end"]) == ("gave_up", 0, 0.0, False, False)
        lines = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
        assert lines == [{"step": 1, "action": None, "end_reason": "gave_up"}]
    assert len(openai_stub.requests) == 2 * 5
    scored = subprocess.run(["emmoe-eval", "score", "--data", "data", "--runs", str(out), "--json"],
                            capture_output=True, text=True, cwd=ROOT, check=True)
    metrics = json.loads(scored.stdout)
    # Both runs count for SR and TP (they are the planner's results) and neither is in SER's denominator.
    assert (metrics["runs"], metrics["SR"], metrics["TP"]) == (2, 0.0, 0.0)
    assert (metrics["SER"], metrics["end_reasons"]["gave_up"], metrics["end_reasons"]["end"]) == (None, 2, 0)
    from_bags = subprocess.run(["emmoe-eval", "score-bag", *sorted(str(path) for path in out.glob("*/*/episode.mcap")),
                                "--data", "data", "--json"], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(from_bags.stdout) == metrics
