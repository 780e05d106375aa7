"""Training rows from on-policy collection (backends.dagger), aggregated with earlier rounds and the SFT rows.

Each row file holds one run: per step the student's exact messages and the oracle's answer. A step whose answer
was generated more than once (the planner re-sampled) keeps its last row. The records have the columns of the SFT
dataset (`id, task_id, variant, step, messages`; task_id is the episode, `12_v1` for a scene variant, variant 0:
no paraphrase), so `homiebot train` takes the aggregate like any SFT data and holds
out its validation tasks by `task_id`.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from emmoe_core.protocol import SUCCESS_FEEDBACK
from emmoe_eval.conversation import feedback_of

from homiebot_planner.backends.dagger import ROWS_SUFFIX

PACKED_SUFFIX = ".jsonl.gz"
# Which on-policy rows an aggregation keeps: every row, or the recovery focus (`keeps_for_recovery`).
FOCUSES = ("all", "recovery")
END_SUBTASK = "[end]"  # an End answer's subtask line as `_subtask_line` writes it


class DaggerRowsError(ValueError):
    """A row file is malformed or a folder holds none; the message names the file."""


@dataclass(frozen=True)
class RowCounts:
    """What an aggregation read and kept."""

    runs: int
    rows: int
    student_agreed: int
    executed_by_oracle: int

    def summary(self) -> str:
        """One line for the console and the training summary."""
        agreed = 100.0 * self.student_agreed / self.rows if self.rows else 0.0
        return (f"{self.rows} on-policy rows from {self.runs} runs; the student already gave the oracle's subtask in "
                f"{self.student_agreed} ({agreed:.1f} %); {self.executed_by_oracle} steps executed the oracle's answer")


def read_rows(sources: Sequence[Path], focus: str = "all") -> tuple[list[dict[str, object]], RowCounts]:
    """SFT-shaped records from row folders (`<round>/rows`, one file per run) or packed rounds (`*.jsonl.gz`, written
    by `pack_rows`), with counts of the rows kept; `focus` "recovery" keeps only `keeps_for_recovery` rows.

    Raises:
        DaggerRowsError: a source holds no rows, a line is not a row, or the focus is unknown.
    """
    if focus not in FOCUSES:
        raise DaggerRowsError(f"focus must be one of {', '.join(FOCUSES)}, got {focus!r}")
    records: list[dict[str, object]] = []
    agreed = by_oracle = 0
    runs: set[str] = set()
    for row in unique_rows(sources):
        oracle, student = _subtask_line(str(row["answer"])), _subtask_line(str(row["student_answer"]))
        if focus == "recovery" and not keeps_for_recovery(row, oracle, student):
            continue
        runs.add(str(row["run"]))
        messages = [item for item in row["messages"] if item["role"] != "system"]
        records.append({"id": f"dagger/{row['run']}/{row['step']}", "task_id": str(row["episode_id"]), "variant": 0,
                        "step": int(row["step"]),
                        "messages": [*messages, {"role": "assistant", "content": row["answer"]}]})
        agreed += oracle == student
        by_oracle += row["executed_by"] == "oracle"
    return records, RowCounts(len(runs), len(records), agreed, by_oracle)


def keeps_for_recovery(row: dict, oracle: str, student: str) -> bool:  # type: ignore[type-arg]
    """Whether a row teaches recovery or ending, given the subtask lines of the oracle's and the student's answers:
    its state follows a failed step (the prompt's Feedback is a failure string), the student or the oracle answered
    End, or the student already gave the oracle's subtask (rehearsal of what it does right in its own states). Left
    out: the student's other choices after a success, where the oracle follows its one annotated plan and a different
    valid order counts as a mistake."""
    return _after_failure(row["messages"]) or END_SUBTASK in (oracle, student) or oracle == student


def unique_rows(sources: Sequence[Path]) -> list[dict]:  # type: ignore[type-arg]
    """Every row of the sources, the last one per (run, step), each with its `run` (the row file's name when the row
    does not carry it), ordered by run and step.

    Raises:
        DaggerRowsError: a source holds no rows, or a line is not a row.
    """
    kept: dict[tuple[str, int], dict] = {}  # type: ignore[type-arg]
    for source in sources:
        source = Path(source)
        if source.is_dir():
            paths = sorted(source.glob(f"*{ROWS_SUFFIX}"))
        else:
            paths = [source] if source.is_file() else []
        if not paths:
            raise DaggerRowsError(f"{source}: no on-policy rows (a folder of *{ROWS_SUFFIX} or a packed *{PACKED_SUFFIX}); "
                                  "run `homiebot collect --dagger`")
        for path in paths:
            for number, line in enumerate(_lines(path), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    row.setdefault("run", path.name.removesuffix(PACKED_SUFFIX).removesuffix(ROWS_SUFFIX))
                    for key in ("episode_id", "messages", "answer", "student_answer", "executed_by"):
                        row[key]  # noqa: B018 - a missing key is a malformed row
                    kept[(str(row["run"]), int(row["step"]))] = row
                except (ValueError, KeyError, TypeError, AttributeError) as error:
                    raise DaggerRowsError(f"{path}:{number}: not an on-policy row ({error})") from None
    return [kept[key] for key in sorted(kept)]


def pack_rows(sources: Sequence[Path], out: Path) -> int:
    """Write the unique rows of the sources to one gzip JSON-lines file (a round kept small enough to commit);
    returns the rows written."""
    rows = unique_rows(sources)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as packed:
        for row in rows:
            packed.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


def _lines(path: Path) -> list[str]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as packed:
            return packed.read().splitlines()
    return path.read_text(encoding="utf-8").splitlines()


def _after_failure(messages: Sequence[dict]) -> bool:  # type: ignore[type-arg]
    """Whether the last user turn's `Feedback:` line holds a failure string (it is `None` after a success)."""
    user = next((item["content"] for item in reversed(messages) if item["role"] == "user"), "")
    feedback = feedback_of(str(user))
    return feedback is not None and feedback != SUCCESS_FEEDBACK


def _subtask_line(answer: str) -> str:
    """The `Subtask: [...]` line of an answer, spaces removed and lower-cased ("" when it has none)."""
    for line in answer.splitlines():
        if line.strip().lower().startswith("subtask:"):
            return "".join(line.split(":", 1)[1].split()).lower()
    return ""


def write_aggregate(rows: Sequence[Path], sft: Sequence[Path], out: Path, sft_fraction: float = 1.0,
                    seed: int = 0, focus: str = "all") -> tuple[int, RowCounts]:
    """Write one Hugging Face dataset (save_to_disk) of the on-policy rows of every round (those `focus` keeps, see
    `read_rows`) and the SFT datasets (`sft_fraction` of their rows, drawn with `seed`: a rehearsal share when the
    training budget is short).

    Returns:
        (records written, the on-policy counts).

    Raises:
        DaggerRowsError: for a missing or malformed input.
    """
    import datasets  # type: ignore[import-untyped]

    if not 0.0 <= sft_fraction <= 1.0:
        raise DaggerRowsError(f"sft_fraction must be in [0, 1], got {sft_fraction}")
    records, counts = read_rows(rows, focus)
    draws = random.Random(seed)
    for folder in sft:
        try:
            dataset = datasets.load_from_disk(str(folder))
        except (FileNotFoundError, ValueError) as error:
            raise DaggerRowsError(f"{folder}: not a Hugging Face SFT dataset ({error})") from None
        records += [{"id": item["id"], "task_id": item["task_id"], "variant": int(item["variant"]),
                     "step": int(item["step"]), "messages": item["messages"]} for item in dataset
                    if sft_fraction >= 1.0 or draws.random() < sft_fraction]
    datasets.Dataset.from_list(records).save_to_disk(str(out))
    return len(records), counts
