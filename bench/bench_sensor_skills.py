"""Wall time per skill attempt of the sensor-only skills (no_background setting) beside the privileged M3 skills
(background setting), on the expert trajectories of EMMOE tasks, in-process on the MuJoCo backend.

Each selected task's expert steps run through the executor core (`homiebot.expert_check.replay`, the logic /subtask
runs) once per setting; every skill attempt's wall time is recorded by skill, with the subtask outcomes. Printed per
setting and skill: attempts, median and 90th-percentile wall time (the goal: median under 5 s), and per action the
executions (steps that passed the pre-checks) and their success rates, plain and as the paper's Table 4 computes
them (s / (3f + 2s)). The sensor-only median over the M3 median is printed as the ratio. The map of the last
sensor-only task is written as docs/images/sensor_map.png (grey unknown, white free, black occupied, the robot's
look positions in red).

    python bench/bench_sensor_skills.py [--tasks test] [--settings background,no_background]

Writes bench/results/sensor_skills.json. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from homiebot.benchmark_tasks import DEFAULT_DEFINITIONS, TEST_IDS, TRAIN_IDS, scene_for
from homiebot.expert_check import replay
from homiebot.task_definitions import load_all
from homiebot_executor.policies.m3 import skills as m3_skills
from homiebot_executor.policies.sensor import skills as sensor_skills

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "sensor_skills.json"
MAP_IMAGE = ROOT / "docs" / "images" / "sensor_map.png"
ACTIONS = ("Go to", "Pick", "Put", "Open", "Close")


def timed(policy_class: Any, sink: dict[str, list[float]], contexts: list[Any]) -> Any:
    """Wrap a policy class's `run` so every attempt's wall time lands in sink[skill]; keep its contexts."""
    original = policy_class.run

    def run(self: Any, goal: Any, *args: Any, **kwargs: Any) -> Any:
        if not contexts or contexts[-1] is not self.context:
            contexts.append(self.context)
        start = time.perf_counter()
        outcome = original(self, goal, *args, **kwargs)
        sink[goal.skill].append(time.perf_counter() - start)
        return outcome

    policy_class.run = run
    return original


def select(tasks: str) -> list[int]:
    """Task ids of a split name or a comma-separated list."""
    if tasks in ("test", "train", "all"):
        return sorted({"test": TEST_IDS, "train": TRAIN_IDS, "all": (*TRAIN_IDS, *TEST_IDS)}[tasks])
    return [int(item) for item in tasks.split(",")]


def run_setting(setting: str, task_ids: list[int], definitions: dict[int, Any]) -> dict[str, Any]:
    """Replay the tasks in one setting; attempt times by skill and execution counts by action."""
    times: dict[str, list[float]] = defaultdict(list)
    contexts: list[Any] = []
    policy_class = sensor_skills.SensorSkills if setting == "no_background" else m3_skills.PrivilegedSkills
    original = timed(policy_class, times, contexts)
    successes: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    try:
        for task_id in task_ids:
            definition = definitions[task_id]
            outcomes = []
            for check in replay(definition, scene_for(definition), setting=setting):
                action = check.step.subtask.action
                if action in ACTIONS and check.code in ("", "E1", "E2", "E3"):
                    (successes if not check.code else failures)[action] += 1
                outcomes.append(check.code or "ok")
            print(f"  {setting} task {task_id}: {' '.join(outcomes)}", flush=True)
    finally:
        policy_class.run = original
    if setting == "no_background" and contexts:
        save_map(contexts[-1])
    return {"times": dict(times), "successes": dict(successes), "failures": dict(failures)}


def save_map(context: Any) -> None:
    """The online map of a sensor-only context as a PNG, look positions marked."""
    import numpy as np
    from PIL import Image

    online = context.map
    picture = online.image().copy()
    rows = online.shape[0]
    for x, y in context.looked_from:
        column = int((x - online.origin[0]) / online.config.resolution)
        row = rows - 1 - int((y - online.origin[1]) / online.config.resolution)
        picture[max(0, row - 1):row + 2, max(0, column - 1):column + 2] = (220, 30, 30)
    known = np.argwhere((picture != 150).any(axis=-1))
    (r0, c0), (r1, c1) = known.min(axis=0), known.max(axis=0)
    crop = picture[max(0, r0 - 5):r1 + 6, max(0, c0 - 5):c1 + 6]
    MAP_IMAGE.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(crop).resize((crop.shape[1] * 3, crop.shape[0] * 3), Image.NEAREST).save(MAP_IMAGE)


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """Per skill: attempts, median and p90 wall time; per action: executions, SR, SR as the paper computes it."""
    skills = {skill: {"attempts": len(values), "median_s": statistics.median(values),
                      "p90_s": sorted(values)[int(0.9 * (len(values) - 1))]}
              for skill, values in sorted(result["times"].items())}
    actions = {}
    for action in ACTIONS:
        s, f = result["successes"].get(action, 0), result["failures"].get(action, 0)
        actions[action] = {"executions": s + f, "SR": 100 * s / (s + f) if s + f else None,
                           "SR_paper": 100 * s / (3 * f + 2 * s) if s + f else None}
    return {"skills": skills, "actions": actions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default="test", help="test, train, all or task ids (default: test)")
    parser.add_argument("--settings", default="background,no_background")
    args = parser.parse_args()
    definitions = load_all([ROOT / path for path in DEFAULT_DEFINITIONS])
    task_ids = select(args.tasks)
    report: dict[str, Any] = {"tasks": args.tasks}
    for setting in args.settings.split(","):
        print(f"{setting}: {len(task_ids)} tasks", flush=True)
        report[setting] = summary(run_setting(setting, task_ids, definitions))
    for setting in args.settings.split(","):
        print(f"\n{setting}: wall time per skill attempt (s)")
        for skill, figures in report[setting]["skills"].items():
            print(f"  {skill:9s} attempts {figures['attempts']:3d}  median {figures['median_s']:5.2f}  "
                  f"p90 {figures['p90_s']:5.2f}")
        print(f"{setting}: executions per action (SR plain / as the paper's Table 4: s/(3f+2s))")
        for action, figures in report[setting]["actions"].items():
            if figures["executions"]:
                print(f"  {action:6s} {figures['executions']:3d}  SR {figures['SR']:6.2f}  "
                      f"SR_paper {figures['SR_paper']:6.2f}")
    if {"background", "no_background"} <= set(report):
        for skill, figures in report["no_background"]["skills"].items():
            base = report["background"]["skills"].get(skill)
            if base:
                print(f"ratio sensor-only / M3 median, {skill}: {figures['median_s'] / base['median_s']:.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}" + (f" and {MAP_IMAGE.relative_to(ROOT)}"
                                                  if "no_background" in report else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
