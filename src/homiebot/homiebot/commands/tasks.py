"""`homiebot tasks build|check`: write the simulator's EMMOE task folders from their definitions, or replay them.

`build` writes data/{train,test}/<id>/ (tasks 1-90 train, 91-100 test); with `--variants N` it also writes N seeded
variants of every selected train task as data/train/<id>_v<n>/ (test tasks never get variants); with
`--check-variants` each variant's expert is replayed in the simulator first and a draw whose steps differ from their
design is drawn again (`--redraws` times at most, then the variant is left out). `check` replays
every selected expert trajectory in the simulator (in-process) and reports each step whose outcome differs from its
design (exit status 1 then); `--setting no_background` replays them with the sensor-only skills instead of M3.
`fuzz` generates `--n` tasks of `--seed` over the catalog's combinations (`homiebot.task_fuzz`), replays their
experts over `--jobs` processes and writes the failure rates and causes to `--out` (`homiebot.fuzz_replay`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from homiebot.task_definitions import TaskDefinition

HELP = ("build data/<split>/<id>/{scene.json,keypath.json,info.txt} from the task definitions, check them, or fuzz "
        "the skills with generated tasks")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot tasks`."""
    from homiebot.benchmark_tasks import DEFAULT_DEFINITIONS
    from homiebot.setting import DEFAULT_SETTING, SETTINGS, add_perception_argument

    parser.add_argument("action", choices=["build", "check", "fuzz"], help="what to do")
    parser.add_argument("--definitions", type=Path, nargs="+", default=list(DEFAULT_DEFINITIONS),
                        help="task definition YAML files (default: %(default)s)")
    parser.add_argument("--data", type=Path, default=Path("data"), help="data folder holding train/ and test/")
    parser.add_argument("--split", choices=["train", "test", "all"], default="all",
                        help="tasks to build or check: 1-90 train, 91-100 test (default: %(default)s)")
    parser.add_argument("--tasks", default="", help="comma-separated task ids to restrict to (default: all)")
    parser.add_argument("--variants", type=int, default=0,
                        help="build: also write this many seeded variants of each selected train task")
    parser.add_argument("--seed", type=int, default=0, help="build: seed of the variants; fuzz: seed of the tasks (default: %(default)s)")
    parser.add_argument("--check-variants", action="store_true",
                        help="build: replay each variant's expert in the simulator (M3 skills) and draw it again "
                             "when a step differs from its design")
    parser.add_argument("--redraws", type=int, default=4,
                        help="build with --check-variants: draws after the first before a variant is left out "
                             "(0-9, default: %(default)s)")
    parser.add_argument("--setting", choices=SETTINGS, default=DEFAULT_SETTING,
                        help="check, fuzz: the skills that replay the experts, background (privileged M3) or "
                             "no_background (sensor-only); default: %(default)s")
    add_perception_argument(parser)
    parser.add_argument("--n", type=int, default=40, help="fuzz: tasks to generate (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=1, help="fuzz: replaying processes (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None,
                        help="fuzz: folder of report.json, tasks.yaml and outcomes.jsonl; a run started again with "
                             "the same folder replays only the tasks not yet in it (default: "
                             "runs/fuzz/seed<SEED>_<setting>)")


def _selected(args: argparse.Namespace, known: list[int]) -> list[int]:
    from homiebot.benchmark_tasks import split_of
    from homiebot.cli import UsageError

    if args.tasks:
        try:
            wanted = [int(part) for part in args.tasks.split(",") if part.strip()]
        except ValueError as error:
            raise UsageError(f"--tasks: expected comma-separated task ids, got {args.tasks!r}") from error
        missing = sorted(set(wanted) - set(known))
        if missing:
            raise UsageError(f"--tasks: no definition for task {', '.join(map(str, missing))}")
    else:
        wanted = known
    return [task_id for task_id in wanted if args.split == "all" or split_of(task_id) == args.split]


def run(args: argparse.Namespace) -> int:
    """Validate the definitions and write (or replay) the selected tasks."""
    from homiebot.benchmark_tasks import TaskDefinitionError, build_tasks, load_all, split_of
    from homiebot.cli import UsageError

    if args.action == "fuzz":
        return _fuzz(args)
    try:
        definitions = load_all(args.definitions)
        chosen = {task_id: definitions[task_id] for task_id in _selected(args, sorted(definitions))}
        if args.action == "check":
            return _check(chosen, args.setting, args.perception)
        if args.variants and args.tasks and any(split_of(task_id) == "test" for task_id in chosen):
            raise TaskDefinitionError("--variants: test tasks never get variants; select train tasks only")
        written = build_tasks(chosen, args.data)
        if args.variants:
            written += _variants(chosen, args)
    except TaskDefinitionError as error:
        raise UsageError(str(error)) from error
    for directory in written:
        print(f"wrote {directory}")
    return 0


def _variants(definitions: dict[int, TaskDefinition], args: argparse.Namespace) -> list[Path]:
    """Build the variants, replaying each draw first with --check-variants (the variants left out are printed)."""
    from homiebot.benchmark_tasks import build_variants, split_of, variant_id

    if not args.check_variants:
        return build_variants(definitions, args.data, args.variants, args.seed)
    from habitat_bridge.backends.mujoco_backend import MujocoBackend

    backend = MujocoBackend()

    def check(definition: TaskDefinition, scene: Mapping[str, Any]) -> list[str]:
        problems = _problems(definition, scene, "background", backend)
        print(f"task {definition.task_id} variant draw: "
              + ("as designed" if not problems else f"{len(problems)} differ, drawn again: {problems[0]}"), flush=True)
        return problems

    try:
        written = build_variants(definitions, args.data, args.variants, args.seed, check=check, redraws=args.redraws)
    finally:
        backend.close()
    wanted = [variant_id(task_id, number) for task_id in sorted(definitions) if split_of(task_id) == "train"
              for number in range(1, args.variants + 1)]
    missing = sorted(set(wanted) - {path.name for path in written})
    if missing:
        print(f"left out (no draw of {1 + args.redraws} replayed as designed): {', '.join(missing)}", flush=True)
    return written


def _problems(definition: TaskDefinition, scene: Mapping[str, Any], setting: str, backend: Any = None,
              perception: str | None = None) -> list[str]:
    """What differs from the definition in a drawn scene: misplaced objects, then replayed steps not as designed."""
    from homiebot.expert_check import misplaced_objects, replay

    return misplaced_objects(definition, scene) + [check.describe() for check in
                                                   replay(definition, scene, backend, setting, perception)
                                                   if not check.as_designed]


def _check(definitions: dict[int, TaskDefinition], setting: str, perception: str | None = None) -> int:
    from homiebot.benchmark_tasks import TaskDefinitionError, scene_for

    differing = 0
    for task_id, definition in sorted(definitions.items()):
        try:
            scene = scene_for(definition)
        except TaskDefinitionError as error:
            differing += 1
            print(f"task {task_id}: {error}", flush=True)
            continue
        problems = _problems(definition, scene, setting, perception=perception)
        differing += len(problems)
        print(f"task {task_id}: " + ("as designed" if not problems else f"{len(problems)} differ"), flush=True)
        for line in problems:
            print(f"  {line}", flush=True)
    return 1 if differing else 0


def _fuzz(args: argparse.Namespace) -> int:
    """Replay `--n` fuzzed tasks and print the summary (exit status 1 when a task differs from its design)."""
    from homiebot.cli import UsageError
    from homiebot.fuzz_replay import FuzzOutError, fuzz
    from homiebot.task_fuzz import summary_lines

    if args.n < 1 or args.jobs < 1:
        raise UsageError(f"fuzz: expected --n and --jobs of at least 1, got {args.n} and {args.jobs}")
    out = args.out or Path("runs/fuzz") / f"seed{args.seed}_{args.setting}"
    try:
        report = fuzz(args.n, args.seed, args.setting, args.jobs, out, echo=lambda line: print(line, flush=True))
    except FuzzOutError as error:
        raise UsageError(f"fuzz: {error}") from error
    for line in summary_lines(report):
        print(line)
    print(f"report: {out / 'report.json'}")
    return 0 if report["as_designed"] == report["tasks"] else 1
