"""Training rows from on-policy collection (backends.dagger), aggregated with earlier rounds and the SFT rows.

Each row file holds one run: per step the student's exact messages and the oracle's answer. A step whose answer
was generated more than once (the planner re-sampled) keeps its last row. The records have the columns of the SFT
dataset (`id, task_id, variant, step, messages`; task_id is the episode, `12_v1` for a scene variant, variant 0:
no paraphrase), so `homiebot train` takes the aggregate like any SFT data and holds
out its validation tasks by `task_id`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from homiebot_planner.backends.dagger import ROWS_SUFFIX


class DaggerRowsError(ValueError):
    """A row file is malformed or a folder holds none; the message names the file."""


@dataclass(frozen=True)
class RowCounts:
    """What an aggregation read and kept."""

    files: int
    rows: int
    student_agreed: int
    executed_by_oracle: int

    def summary(self) -> str:
        """One line for the console and the training summary."""
        agreed = 100.0 * self.student_agreed / self.rows if self.rows else 0.0
        return (f"{self.rows} on-policy rows from {self.files} runs; the student already gave the oracle's subtask in "
                f"{self.student_agreed} ({agreed:.1f} %); {self.executed_by_oracle} steps executed the oracle's answer")


def read_rows(folders: Sequence[Path]) -> tuple[list[dict[str, object]], RowCounts]:
    """SFT-shaped records from every row file under `folders`, with counts.

    Raises:
        DaggerRowsError: a folder holds no row file, or a line is not a row.
    """
    records: list[dict[str, object]] = []
    files = agreed = by_oracle = 0
    for folder in folders:
        paths = sorted(Path(folder).glob(f"*{ROWS_SUFFIX}"))
        if not paths:
            raise DaggerRowsError(f"{folder}: no on-policy row files (*{ROWS_SUFFIX}); run `homiebot collect --dagger`")
        for path in paths:
            files += 1
            for row in _last_row_per_step(path):
                messages = [item for item in row["messages"] if item["role"] != "system"]
                records.append({"id": f"dagger/{path.stem}/{row['step']}", "task_id": str(row["episode_id"]), "variant": 0,
                                "step": int(row["step"]),
                                "messages": [*messages, {"role": "assistant", "content": row["answer"]}]})
                agreed += _subtask_line(str(row["student_answer"])) == _subtask_line(str(row["answer"]))
                by_oracle += row["executed_by"] == "oracle"
    return records, RowCounts(files, len(records), agreed, by_oracle)


def _last_row_per_step(path: Path) -> Iterable[dict]:  # type: ignore[type-arg]
    steps: dict[int, dict] = {}  # type: ignore[type-arg]
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            steps[int(row["step"])] = row
            for key in ("episode_id", "messages", "answer", "student_answer", "executed_by"):
                row[key]  # noqa: B018 - a missing key is a malformed row
        except (ValueError, KeyError, TypeError) as error:
            raise DaggerRowsError(f"{path}:{number}: not an on-policy row ({error})") from None
    return [steps[step] for step in sorted(steps)]


def _subtask_line(answer: str) -> str:
    """The `Subtask: [...]` line of an answer, spaces removed and lower-cased ("" when it has none)."""
    for line in answer.splitlines():
        if line.strip().lower().startswith("subtask:"):
            return "".join(line.split(":", 1)[1].split()).lower()
    return ""


def write_aggregate(rows: Sequence[Path], sft: Sequence[Path], out: Path) -> tuple[int, RowCounts]:
    """Write one Hugging Face dataset (save_to_disk) of the on-policy rows of every round and the SFT datasets.

    Returns:
        (records written, the on-policy counts).

    Raises:
        DaggerRowsError: for a missing or malformed input.
    """
    import datasets  # type: ignore[import-untyped]

    records, counts = read_rows(rows)
    for folder in sft:
        try:
            dataset = datasets.load_from_disk(str(folder))
        except (FileNotFoundError, ValueError) as error:
            raise DaggerRowsError(f"{folder}: not a Hugging Face SFT dataset ({error})") from None
        records += [{"id": item["id"], "task_id": item["task_id"], "variant": int(item["variant"]),
                     "step": int(item["step"]), "messages": item["messages"]} for item in dataset]
    datasets.Dataset.from_list(records).save_to_disk(str(out))
    return len(records), counts
