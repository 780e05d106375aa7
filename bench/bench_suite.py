"""Benchmark: how long a new user (and CI) waits, from a fresh clone: the set-up, the default test suite, the ten
slowest tests (goal on 2 cores: set-up under 2 minutes, suite under 6).

    python bench/bench_suite.py [--parallel "-n auto --dist worksteal"] [--keep]

Clones this checkout's HEAD into a temporary folder, times `bash scripts/setup.sh` there, then the default suite as
`make test` runs it (PARALLEL as given). Prints the figures; writes bench/results/suite.json. Run it on an otherwise
idle machine: the suite's time is the machine's.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pytest's --durations lines: "12.34s call     path::test".
_DURATION = re.compile(r"^(?P<seconds>\d+\.\d+)s (?P<phase>call|setup|teardown)\s+(?P<test>\S+)")
_SUMMARY = re.compile(r"=+ (?P<summary>.*(passed|failed).*) in (?P<seconds>[\d.]+)s")


def timed(command: list[str], cwd: Path, log: Path) -> tuple[float, int, str]:
    """Run `command` in `cwd` with its output in `log`: (wall seconds, exit status, output)."""
    started = time.perf_counter()
    with log.open("w") as out:
        status = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    return time.perf_counter() - started, status, log.read_text(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parallel", default="-n auto --dist worksteal", help="pytest-xdist options ('-n 0': serial)")
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="homiebot-bench-suite-"))
    clone = folder / "homiebot"
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        print(f"fresh clone of {ROOT} at {clone}", flush=True)
        setup_s, status, _ = timed(["bash", "scripts/setup.sh"], clone, folder / "setup.log")
        if status:
            sys.exit(f"set-up failed (exit {status}); see {folder / 'setup.log'}")
        print(f"set-up: {setup_s:.0f} s", flush=True)
        suite_s, status, output = timed(["make", "test", f"PARALLEL={args.parallel}", "PYTEST_ARGS=--durations=10"],
                                        clone, folder / "suite.log")
        summary = next((match for match in map(_SUMMARY.search, output.splitlines()) if match), None)
        slowest = [match.groupdict() for match in map(_DURATION.match, output.splitlines()) if match][:10]
        print(f"suite: {suite_s:.0f} s wall (pytest: {summary['seconds'] if summary else '?'} s; "
              f"{summary['summary'] if summary else 'no summary line'}), exit {status}")
        print("ten slowest:")
        for row in slowest:
            print(f"  {float(row['seconds']):7.2f} s  {row['phase']:<8} {row['test']}")
        results = ROOT / "bench" / "results" / "suite.json"
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps({"setup_s": setup_s, "suite_s": suite_s, "exit": status,
                                       "parallel": args.parallel, "summary": summary["summary"] if summary else None,
                                       "slowest": slowest}, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {results}")
    finally:
        if args.keep:
            print(f"kept {clone}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
