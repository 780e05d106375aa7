"""Benchmark: the expert replayed on fuzzed tasks (issue 38's goal: >= 98 % as designed with the M3 skills, >= 85 %
with the sensor-only skills, on 500 tasks of a fixed seed).

    python bench/bench_task_fuzz.py [--n 500] [--seed 1] [--setting background|no_background] [--jobs 2]

Generates the tasks (`homiebot.task_fuzz`: every (object kind, start place) combination the catalog allows, dealt
out in the seed's order), replays them in MuJoCo (`homiebot.fuzz_replay`), prints the summary and the figures (tasks
as designed per kind, failure rate per action, the causes, how often each combination was drawn, seconds per task)
and writes bench/results/task_fuzz_<setting>.json (the report and the tasks also under runs/task_fuzz_<setting>/).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from homiebot.fuzz_replay import OUTCOMES_FILE, fuzz
from homiebot.task_fuzz import KINDS, combinations, generate, summary_lines

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="tasks (default 500)")
    parser.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    parser.add_argument("--setting", choices=("background", "no_background"), default="background")
    parser.add_argument("--jobs", type=int, default=2, help="replaying processes (default 2)")
    args = parser.parse_args()
    tasks = generate(args.n, args.seed)
    drawn = Counter((item["canonical"], item["receptacle"], item["region"])
                    for task in tasks for item in task.mapping["objects"][:1])
    kinds = Counter(task.kind for task in tasks)
    out = ROOT / "runs" / f"task_fuzz_{args.setting}"
    (out / OUTCOMES_FILE).unlink(missing_ok=True)  # the benchmark times every task: it never resumes a run
    started = time.perf_counter()
    report = fuzz(args.n, args.seed, args.setting, args.jobs, out, echo=lambda line: print(line, flush=True))
    seconds = time.perf_counter() - started
    print("\n".join(summary_lines(report, top=20)))
    every = len(combinations())
    print(f"combinations: {len(drawn)} of {every} drawn as the first object, each {min(drawn.values())}-"
          f"{max(drawn.values())} times; kinds: " + ", ".join(f"{kind} {kinds[kind]}" for kind in KINDS))
    print(f"{args.n} tasks in {seconds:.0f} s ({seconds / args.n:.2f} s per task, {args.jobs} jobs): "
          f"{100 * report['as_designed'] / report['tasks']:.1f} % as designed")
    figures = {"command": f"python bench/bench_task_fuzz.py --n {args.n} --seed {args.seed} --setting "
                          f"{args.setting} --jobs {args.jobs}", "seconds": round(seconds, 1),
               "combinations_drawn": len(drawn), "combinations": every, "kinds": dict(kinds), "report": report}
    results = ROOT / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"task_fuzz_{args.setting}.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
