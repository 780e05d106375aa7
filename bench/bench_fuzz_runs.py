"""Benchmark: 10,000 seeded mutations of run-folder and data-folder files (goal: 0 tracebacks, 0 hangs, every rejected
file named, a result changed without a word only where the file still parses).

    python bench/bench_fuzz_runs.py [--mutations 10000] [--seed 1] [--timeout 5]

The mutations are spread evenly over the file kinds of emmoe_eval.fuzzing (trajectory.jsonl, run.json, score.json,
conversation.json, info.txt, keypath.json, scene.json; the default suite's test runs 1,000 of each with seed 0). Prints
each outcome per file kind and the totals; writes bench/results/fuzz_runs.json.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections import Counter
from pathlib import Path

from emmoe_eval.fuzzing import FILE_KINDS, OUTCOMES, fuzz, lay_out

ROOT = Path(__file__).resolve().parents[1]
FAILURES = ("traceback", "hang", "unnamed", "silent_invalid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=int, default=10_000, help="mutations in all (default 10,000)")
    parser.add_argument("--seed", type=int, default=1, help="seed (default 1; the suite's test uses 0)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds before a read counts as a hang")
    args = parser.parse_args()
    per_kind = math.ceil(args.mutations / len(FILE_KINDS))
    with tempfile.TemporaryDirectory() as folder:
        layout = lay_out(Path(folder), ROOT / "data" / "test" / "91")
        started = time.perf_counter()
        trials = fuzz(layout, per_kind, seed=args.seed, timeout_s=args.timeout)
        seconds = time.perf_counter() - started
    counts = Counter((trial.kind, trial.outcome) for trial in trials)
    totals = Counter(trial.outcome for trial in trials)
    print(f"{len(trials)} mutations ({per_kind} per file kind, seed {args.seed}) in {seconds:.1f} s")
    print(f"  {'file':<20}" + "".join(f"{outcome:>16}" for outcome in OUTCOMES))
    for kind in FILE_KINDS:
        print(f"  {kind:<20}" + "".join(f"{counts[kind, outcome]:>16}" for outcome in OUTCOMES))
    print(f"  {'all':<20}" + "".join(f"{totals[outcome]:>16}" for outcome in OUTCOMES))
    print(f"tracebacks {totals['traceback']}, hangs {totals['hang']}, rejected and named {totals['named']}, rejected "
          f"but not named {totals['unnamed']}, silent score changes: {totals['silent_valid']} where the file still "
          f"parses, {totals['silent_invalid']} where it does not; {totals['unchanged']} without effect")
    for trial in [trial for trial in trials if trial.outcome in FAILURES][:20]:
        print(f"  {trial.outcome}: {trial.kind} {trial.mutation}: {trial.detail}")
    failures = sum(totals[outcome] for outcome in FAILURES)
    print(f"goal (0 tracebacks, 0 hangs, every rejected file named, silent changes only to valid files): "
          f"{'met' if failures == 0 else 'NOT met'}")
    out = ROOT / "bench" / "results" / "fuzz_runs.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"mutations": len(trials), "seed": args.seed, "seconds": seconds,
                               "totals": {outcome: totals[outcome] for outcome in OUTCOMES},
                               "per_kind": {kind: {outcome: counts[kind, outcome] for outcome in OUTCOMES}
                                            for kind in FILE_KINDS}}, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
