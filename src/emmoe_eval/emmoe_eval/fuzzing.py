"""Seeded mutations of run folders and data folders, and what their readers make of each (the fuzz test of the
default suite in test/test_hostile_files.py, and bench/bench_fuzz_runs.py).

`lay_out` writes one task's data folder (info.txt, keypath.json, scene.json, copied) and one run of it as the
evaluator records it (trajectory.jsonl, run.json, conversation.json, score.json). Each trial of `fuzz` puts a mutation
in one file's place (truncated, bytes flipped, a line deleted or duplicated, a JSON value of another type, a 4,400-digit
number, deep nesting, another encoding, empty; or a FIFO, a symlink loop, a dangling symlink, a link to a device or a
directory), reads it as its users do, under a watchdog, and puts the file back. The readers:

- trajectory.jsonl, run.json, info.txt, keypath.json: `emmoe-eval score` (in process);
- conversation.json: `emmoe-eval score --source conversation`;
- score.json: `homiebot run`'s resume (`runs.planner_result`);
- scene.json: the task's scene as the planner loads it (`Task.scene`).

Outcomes (OUTCOMES): `unchanged` (the same result and problems), `named` (a new problem names the file), `unnamed`
(new problems, none naming it), `silent_valid` (another result without a word, and the file still parses: a valid file
with other content), `silent_invalid` (the same, but the file does not parse), `traceback`, `hang`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import shutil
import signal
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import FrameType
from typing import Any

from emmoe_eval.conversation import CONVERSATION_FILE, ConversationError, read_conversation
from emmoe_eval.dataset import INFO_FILE, KEYPATH_FILE, SCENE_FILE, DatasetError, find_task, read_info, read_keypaths
from emmoe_core.json_text import JSONTextError, TextFileError, decode_json, read_text_file
from emmoe_eval.records import RunInfo
from emmoe_eval.runs import (END_REASONS, RUN_INFO_FILE, SCORE_FILE, TRAJECTORY_FILE, Step, parse_trajectory,
                             planner_result)

FILE_KINDS: tuple[str, ...] = (TRAJECTORY_FILE, RUN_INFO_FILE, SCORE_FILE, CONVERSATION_FILE, INFO_FILE, KEYPATH_FILE,
                               SCENE_FILE)
CONTENT_MUTATIONS: tuple[str, ...] = ("truncate", "flip_bytes", "delete_line", "duplicate_line", "change_type",
                                      "huge_number", "deep_nesting", "wrong_encoding", "empty")
PLACE_MUTATIONS: tuple[str, ...] = ("fifo", "symlink_loop", "dangling_symlink", "device", "directory")
MUTATIONS = CONTENT_MUTATIONS + PLACE_MUTATIONS
OUTCOMES: tuple[str, ...] = ("unchanged", "named", "unnamed", "silent_valid", "silent_invalid", "traceback", "hang")
TASK_ID = "91"
_OTHER_TYPES: tuple[Any, ...] = (None, True, 0, -1, 2.5, "", "x", [], {}, [[]], {"a": None})


@dataclass(frozen=True)
class Layout:
    """The folders of `lay_out`: `files` maps each file kind to the file."""

    data_dir: Path
    runs_dir: Path
    files: dict[str, Path]


@dataclass(frozen=True)
class Trial:
    """One mutation of one file and its outcome (one of OUTCOMES); `detail`: the traceback's last line, or the new
    problems of an `unnamed` outcome."""

    kind: str
    mutation: str
    outcome: str
    detail: str = ""


Reading = tuple[Any, list[str]]  # (the result a user sees, the problems reported)


def lay_out(root: Path, task_dir: Path) -> Layout:
    """Copy a test task folder under `root/data/test/` and record its expert trajectory (info.txt) as run 1 of it with
    the evaluator's recorder under `root/exp/`."""
    from emmoe_eval.recorder import Evaluator, EvaluatorConfig

    data_dir = root / "data"
    task = data_dir / "test" / TASK_ID
    task.mkdir(parents=True)
    for name in (INFO_FILE, KEYPATH_FILE, SCENE_FILE):
        shutil.copyfile(task_dir / name, task / name)
    info = read_info(task / INFO_FILE)
    evaluator = Evaluator(EvaluatorConfig(out_dir=root / "exp", data_dir=data_dir, record_bag=False,
                                          write_views=False))
    run = RunInfo(TASK_ID, 1, info.task, "expert", "text")
    for number, block in enumerate(info.blocks, start=1):
        step = Step(number, block.subtask.action, block.subtask.target, block.subtask.place, block.model,
                    block.succeeded, block.feedback)
        evaluator.handle(run, step, end_reason="end" if number == len(info.blocks) else "")
    run_dir = root / "exp" / TASK_ID / "1"
    files = {name: run_dir / name for name in (TRAJECTORY_FILE, RUN_INFO_FILE, SCORE_FILE, CONVERSATION_FILE)}
    files.update({name: task / name for name in (INFO_FILE, KEYPATH_FILE, SCENE_FILE)})
    return Layout(data_dir, root / "exp", files)


def fuzz(layout: Layout, per_kind: int, seed: int = 0, kinds: Sequence[str] = FILE_KINDS,
         timeout_s: float = 5.0) -> list[Trial]:
    """`per_kind` seeded mutations of each file kind, each read under a `timeout_s` watchdog (main thread only)."""
    rng = random.Random(seed)
    trials = []
    for kind in kinds:
        path = layout.files[kind]
        original = path.read_bytes()
        baseline = read(layout, kind)
        for _ in range(per_kind):
            mutation = rng.choice(MUTATIONS)
            try:
                place(path, mutation, original, rng)
                trials.append(_trial(layout, kind, mutation, baseline, timeout_s))
            finally:
                _remove(path)
                path.write_bytes(original)
    return trials


def read(layout: Layout, kind: str) -> Reading:
    """What the users of a file kind see: (result, problems)."""
    path = layout.files[kind]
    if kind == SCORE_FILE:
        result, problem = planner_result(path)
        return result, [problem] if problem else []
    if kind == SCENE_FILE:
        try:
            task = find_task(layout.data_dir, TASK_ID)
            return (task.scene() if task else None), []
        except DatasetError as error:
            return None, [str(error)]
    source = "conversation" if kind == CONVERSATION_FILE else "auto"
    return _score(layout, source)


def _score(layout: Layout, source: str) -> Reading:
    """`emmoe-eval score --json --verbose`: the summary (or the exit status) and the warning and error lines."""
    from emmoe_eval import cli

    arguments = _score_arguments(str(layout.data_dir), str(layout.runs_dir), source)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = cli.run(arguments)
    result = json.loads(out.getvalue()) if status == 0 else f"exit status {status}"
    return result, [line for line in err.getvalue().splitlines() if line]


@lru_cache(maxsize=8)
def _score_arguments(data_dir: str, runs_dir: str, source: str) -> argparse.Namespace:
    """The parsed command line of `_score` (parsed once: building the parser takes longer than scoring one run)."""
    from emmoe_eval import cli

    return cli.build_parser().parse_args(["score", "--data", data_dir, "--runs", runs_dir, "--source", source,
                                          "--json", "--verbose", "--resamples", "1"])


class _Hang(BaseException):
    """The watchdog went off (a BaseException: no reader's `except Exception` may swallow it)."""


@contextmanager
def _watchdog(seconds: float) -> Iterator[None]:
    def expire(signal_number: int, frame: FrameType | None) -> None:
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _trial(layout: Layout, kind: str, mutation: str, baseline: Reading, timeout_s: float) -> Trial:
    path = layout.files[kind]
    try:
        with _watchdog(timeout_s):
            result, problems = read(layout, kind)
    except _Hang:
        return Trial(kind, mutation, "hang")
    except Exception:  # what the fuzzer looks for: a reader that raised
        return Trial(kind, mutation, "traceback", traceback.format_exc().strip().splitlines()[-1])
    new = [problem for problem in problems if problem not in baseline[1]]
    if any(str(path) in problem for problem in new):
        return Trial(kind, mutation, "named")
    if new:
        return Trial(kind, mutation, "unnamed", " | ".join(new)[:500])
    if result == baseline[0]:
        return Trial(kind, mutation, "unchanged")
    return Trial(kind, mutation, "silent_valid" if parses(kind, path) else "silent_invalid")


def parses(kind: str, path: Path) -> bool:
    """Whether a file of a kind follows its format (what a silently changed score is allowed for)."""
    try:
        if kind == TRAJECTORY_FILE:
            _, problems, corrupt = parse_trajectory(read_text_file(path), str(path))
            return not corrupt and not problems
        if kind == CONVERSATION_FILE:
            read_conversation(path)
        elif kind == INFO_FILE:
            read_info(path)
        elif kind == KEYPATH_FILE:
            read_keypaths(path)
        elif kind == SCORE_FILE:
            return os.path.lexists(path) and not planner_result(path)[1]
        else:
            value = decode_json(read_text_file(path))
            return kind != RUN_INFO_FILE or type(value) is dict and value.get("end_reason") in END_REASONS
    except (TextFileError, JSONTextError, DatasetError, ConversationError):
        return False
    return True


# ---- mutations -------------------------------------------------------------------------------------------------------

def place(path: Path, mutation: str, original: bytes, rng: random.Random) -> None:
    """Put a mutation of `original` (one of MUTATIONS) in the place of `path`."""
    _remove(path)
    if mutation == "fifo":
        os.mkfifo(path)
    elif mutation == "symlink_loop":
        os.symlink(path.name, path)
    elif mutation == "dangling_symlink":
        os.symlink(path.name + ".gone", path)
    elif mutation == "device":
        os.symlink(os.devnull, path)
    elif mutation == "directory":
        path.mkdir()
    else:
        path.write_bytes(mutated(original, mutation, rng))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def mutated(data: bytes, mutation: str, rng: random.Random) -> bytes:
    """`data` changed by one of CONTENT_MUTATIONS."""
    lines = data.split(b"\n")
    if mutation == "truncate":
        return data[:rng.randrange(max(1, len(data)))]
    if mutation == "flip_bytes":
        changed = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(len(changed))
            changed[position] = rng.randrange(256) if rng.random() < 0.3 else changed[position] ^ 1 << rng.randrange(8)
        return bytes(changed)
    if mutation in ("delete_line", "duplicate_line"):
        index = rng.randrange(len(lines))
        lines[index:index + 1] = [] if mutation == "delete_line" else [lines[index]] * 2
        return b"\n".join(lines)
    if mutation in ("change_type", "huge_number", "deep_nesting"):
        return _replaced_value(data, mutation, rng)
    if mutation == "wrong_encoding":
        text, encoding = data.decode("utf-8", "replace"), rng.randrange(4)
        if encoding < 2:  # UTF-16, or Latin-1 with a character whose Latin-1 byte is no UTF-8
            return text.encode("utf-16") if encoding == 0 else (text + "é").encode("latin-1", "replace")
        return b"\xef\xbb\xbf" + data if encoding == 2 else _inserted(data, b"\xff\xfe\xc3", rng)  # BOM; bad bytes
    if mutation == "empty":
        return b""
    raise ValueError(f"unknown mutation {mutation!r}; expected one of {', '.join(CONTENT_MUTATIONS)}")


def _inserted(data: bytes, piece: bytes, rng: random.Random) -> bytes:
    position = rng.randrange(len(data) + 1)
    return data[:position] + piece + data[position:]


def _replaced_value(data: bytes, mutation: str, rng: random.Random) -> bytes:
    """One JSON value of the file (of one line, for JSON lines) replaced: by one of another type, a 4,400-6,000-digit
    integer, or nesting 1,000-100,000 deep. In a file that is not JSON the number replaces one of its numbers (a
    subtask index of info.txt), the other texts one of its lines."""
    if mutation == "huge_number":
        raw = "7" * rng.randint(4_400, 6_000)
    elif mutation == "deep_nesting":
        depth = rng.randint(1_000, 100_000)
        raw = "[" * depth + "]" * depth
    else:
        raw = json.dumps(rng.choice(_OTHER_TYPES))
    lines = data.split(b"\n")
    candidates = [index for index, line in enumerate(lines) if line.strip()] or [0]
    whole = _json_or_none(data)
    index = None if whole is not None else rng.choice(candidates)
    value = whole if index is None else _json_or_none(lines[index])
    if value is None:  # not JSON (info.txt)
        numbers = list(re.finditer(rb"\d+", data))
        if mutation == "huge_number" and numbers:
            number = rng.choice(numbers)
            return data[:number.start()] + raw.encode() + data[number.end():]
        lines[rng.choice(candidates)] = raw.encode()
        return b"\n".join(lines)
    marker = "\x00fuzz\x00"
    text = json.dumps(_with_marker(value, marker, rng), ensure_ascii=False).replace(json.dumps(marker), raw)
    if index is None:
        return text.encode()
    lines[index] = text.encode()
    return b"\n".join(lines)


def _json_or_none(data: bytes) -> Any:
    try:
        return decode_json(data.decode("utf-8"))
    except (UnicodeDecodeError, JSONTextError):
        return None


def _with_marker(value: Any, marker: str, rng: random.Random) -> Any:
    """`value` with one of its nodes (itself included) replaced by `marker`."""
    nodes: list[tuple[Any, Any]] = [(None, None)]  # (container, key); (None, None): the value itself
    stack = [value]
    while stack:
        container = stack.pop()
        keys: Sequence[Any] = list(container) if type(container) is dict else (
            range(len(container)) if type(container) is list else ())
        for key in keys:
            nodes.append((container, key))
            stack.append(container[key])
    container, key = rng.choice(nodes)
    if container is None:
        return marker
    container[key] = marker
    return value
