"""Wall time of the expert planner on EMMOE tasks with `--jobs 1`, `--jobs 2` and `--ray` on a two-worker cluster,
back to back on this machine, and whether the Ray experiment matches the local one run for run.

The Ray cluster is local: a head with no CPUs (it schedules nothing itself) and two worker nodes of one CPU each,
all on 127.0.0.1 (`homiebot.ray_runner.loopback_cluster`, as the tests use). Each mode runs into its own experiment folder; the per-run
results (steps, success, task progress) and the `emmoe-eval score --json` output of the Ray folder are compared with
the `--jobs 2` folder's.

    python bench/bench_ray_scaling.py [--tasks test] [--runs 1] [--modes jobs1,jobs2,ray]

Prints the figures and writes bench/results/ray_scaling.json. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from homiebot.ray_runner import loopback_cluster

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "ray_scaling.json"


def per_run(out: Path) -> dict[str, list[Any]]:
    """[steps, success, task progress] of every run folder of an experiment, by `task/run`."""
    found = {}
    for score_file in sorted(out.glob("*/*/score.json")):
        score = json.loads(score_file.read_text())
        found[f"{score_file.parent.parent.name}/{score_file.parent.name}"] = [
            score["steps"], score["success"], score["task_progress"]]
    return found


def scores(out: Path, tasks: str) -> dict[str, Any]:
    """`emmoe-eval score --json` of an experiment folder."""
    selection = [] if tasks in ("train", "test", "all") else ["--tasks", tasks]
    split = ["--split", tasks] if tasks in ("train", "test", "all") else []
    result = subprocess.run(["emmoe-eval", "score", "--data", "data", "--runs", str(out), "--json", *split,
                             *selection], capture_output=True, text=True, cwd=ROOT, check=True)
    return dict(json.loads(result.stdout))


def timed_run(out: Path, tasks: str, runs: int, extra: list[str]) -> float:
    """Seconds `homiebot run` with the expert takes; raises when it fails."""
    command = ["homiebot", "run", "--planner", "expert", "--tasks", tasks, "--runs", str(runs), "--out", str(out),
               *extra]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="test")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--modes", default="jobs1,jobs2,ray", help="comma-separated: jobs1, jobs2, ray")
    args = parser.parse_args()
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    root = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    wall: dict[str, float] = {}
    with loopback_cluster(workers=2) if "ray" in modes else nullcontext("") as address:
        extra = {"jobs1": ["--jobs", "1"], "jobs2": ["--jobs", "2"], "ray": ["--ray", address]}
        for mode in modes:
            wall[mode] = timed_run(root / mode, args.tasks, args.runs, extra[mode])
            print(f"{mode:6s} {wall[mode]:8.1f} s", flush=True)
    figures: dict[str, Any] = {"tasks": args.tasks, "runs": args.runs, "cpus": os.cpu_count(), "wall_s": wall,
                               "runs_done": {mode: len(per_run(root / mode)) for mode in modes}}
    if "jobs1" in wall:
        figures["speedup_vs_jobs1"] = {mode: wall["jobs1"] / seconds for mode, seconds in wall.items()}
    if {"ray", "jobs2"} <= set(wall):
        figures["ray_per_run_equals_jobs2"] = per_run(root / "ray") == per_run(root / "jobs2")
        figures["ray_scores_equal_jobs2"] = scores(root / "ray", args.tasks) == scores(root / "jobs2", args.tasks)
    for key, value in figures.items():
        print(f"{key}: {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"experiment folders in {root}; figures in {RESULTS}")
    return 0 if figures.get("ray_per_run_equals_jobs2", True) and figures.get("ray_scores_equal_jobs2", True) else 1


if __name__ == "__main__":
    sys.exit(main())
