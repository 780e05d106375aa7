"""Benchmark: score 10,000 synthetic 20-step EMMOE runs (goal: all of them in under 2 s).

    python bench/bench_metrics.py [--runs 10000] [--steps 20] [--tasks 100] [--repeats 3] [--no-disk]

Prints runs/s for scoring in memory (every registered measure, bootstrap CIs with 1000 resamples included) in the
default and the official mode, and, unless --no-disk, for reading the same runs from trajectory.jsonl files first.
Writes bench/results/metrics.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import tempfile
import time
from pathlib import Path

from emmoe_eval.dataset import InfoBlock, InfoTrajectory, Task
from emmoe_eval.experiments import load_experiment
from emmoe_eval.metrics import ScoringConfig, evaluate
from emmoe_core.protocol import SubtaskText, feedback_for
from emmoe_eval.runs import Run, Step, write_trajectory

OBJECTS = ["apple", "red_apple", "bowl", "red bowl", "green_can", "sugar_box", "banana", "mug", "pear"]
PLACES = ["fridge", "refrigerator", "kitchen_counter", "sink", "brown_table", "table", "sofa", "tv_stand"]
ERRORS = ["E1", "E2", "D1", "L1", "F2"]


def synthetic_task(task_id: str, rng: random.Random) -> Task:
    """A task with two keypaths of 6-10 nodes (Go to / Open / Pick / Go to / Put pairs, ending in End)."""
    keypaths = []
    for _ in range(2):
        nodes: list[SubtaskText] = []
        while len(nodes) < rng.randint(5, 9):
            item, source, goal = rng.choice(OBJECTS), rng.choice(PLACES), rng.choice(PLACES)
            nodes += [SubtaskText("Go to", source), SubtaskText("Pick", item), SubtaskText("Go to", goal),
                      SubtaskText("Put", item, goal)]
        keypaths.append((*nodes, SubtaskText("End")))
    blocks = tuple(InfoBlock(index, node) for index, node in enumerate(keypaths[0], start=1))
    return Task(task_id, "train", Path("."), InfoTrajectory("synthetic task", blocks), tuple(keypaths))


def synthetic_run(task: Task, run_id: str, steps: int, rng: random.Random) -> Run:
    """A run that follows one keypath with alias-renamed targets, random failures and re-plans, 70 % without End."""
    path = [node for node in rng.choice(task.keypaths) if node.action != "End"]
    result: list[Step] = []
    position = 0
    while len(result) < steps - 1:
        node = path[position % len(path)] if rng.random() < 0.8 else SubtaskText("Go to", rng.choice(PLACES))
        success = rng.random() < 0.7
        feedback = "None" if success else feedback_for(rng.choice(ERRORS), node.action, node.target)
        result.append(Step(len(result) + 1, node.action, node.target, node.place, "RT-1-X", success, feedback))
        position += success
    if rng.random() < 0.3:
        result.append(Step(len(result) + 1, "End", model="None"))
    else:
        result.append(Step(len(result) + 1, "Go to", rng.choice(PLACES), model="NoMaD"))
    return Run(task.task_id, run_id, result)


def time_best(function, repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-disk", action="store_true", help="skip the trajectory.jsonl reading benchmark")
    args = parser.parse_args()

    rng = random.Random(0)
    tasks = {str(number): synthetic_task(str(number), rng) for number in range(1, args.tasks + 1)}
    task_ids = list(tasks)
    runs = [synthetic_run(tasks[task_ids[index % len(task_ids)]], str(index // len(task_ids) + 1), args.steps, rng)
            for index in range(args.runs)]
    results: dict[str, object] = {"runs": args.runs, "steps_per_run": args.steps, "tasks": args.tasks,
                                  "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
                                  "python": platform.python_version()}
    print(f"{args.runs} runs x {args.steps} steps over {args.tasks} tasks (2 keypaths each), "
          f"best of {args.repeats}:")
    for compat in ("default", "official"):
        config = ScoringConfig(compat=compat)
        summary = evaluate(runs, tasks, config).summary
        best, times = time_best(lambda: evaluate(runs, tasks, config), args.repeats)
        results[f"memory_{compat}"] = {"seconds": best, "runs_per_second": args.runs / best,
                                       "all_seconds": times, "SR": summary["SR"], "TP": summary["TP"]}
        print(f"  score in memory ({compat:8}): {best:6.3f} s  {args.runs / best:9.0f} runs/s  "
              f"(SR {100 * summary['SR']:.2f} %, TP {100 * summary['TP']:.2f} %)")
    if not args.no_disk:
        with tempfile.TemporaryDirectory() as folder:
            for run in runs:
                write_trajectory(Path(folder) / run.task_id / run.run_id / "trajectory.jsonl", run.steps)

            def read_and_score() -> None:
                evaluate(load_experiment(folder).runs, tasks, ScoringConfig())

            best, times = time_best(read_and_score, args.repeats)
        results["disk_default"] = {"seconds": best, "runs_per_second": args.runs / best, "all_seconds": times}
        print(f"  read trajectory.jsonl + score: {best:6.3f} s  {args.runs / best:9.0f} runs/s")
    goal = results["memory_default"]["seconds"] < 2.0  # type: ignore[index]
    print(f"goal (all {args.runs} runs scored in under 2 s): {'met' if goal else 'NOT met'}")
    out = Path(__file__).parent / "results" / "metrics.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
