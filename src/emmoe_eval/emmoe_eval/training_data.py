"""EMMOE-100's training files, `sft_train.json` (LLaVA-style SFT samples) and `dpo_train.json` (DPO rows).

Every malformed input raises `DatasetError` naming the file and the sample, row or field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emmoe_eval.dataset import DPO_FILE, SFT_FILE, DatasetError, read_json_file


def validate_sft(samples: Any, source: str = SFT_FILE) -> list[dict[str, Any]]:
    """Check LLaVA-style SFT samples: a list of objects whose `conversations` is a list of {from, value} strings.

    Other keys (`id`, `image`, ...) are kept as they are.

    Raises:
        DatasetError: naming the sample and field.
    """
    if not isinstance(samples, list):
        raise DatasetError(f"{source}: expected a JSON list of samples")
    for number, sample in enumerate(samples, start=1):
        if not isinstance(sample, dict):
            raise DatasetError(f"{source}: sample {number} must be an object")
        turns = sample.get("conversations")
        if not isinstance(turns, list) or not turns:
            raise DatasetError(f"{source}: sample {number}: 'conversations' must be a non-empty list")
        for turn_number, turn in enumerate(turns, start=1):
            if not (isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)):
                raise DatasetError(f"{source}: sample {number}, turn {turn_number}: expected "
                                   "{\"from\": \"human\"|\"gpt\", \"value\": \"...\"}")
    return samples


def validate_dpo(rows: Any, source: str = DPO_FILE) -> list[dict[str, Any]]:
    """Check DPO rows: a list of objects with string `prompt`, `chosen` and `rejected` (other keys kept).

    Raises:
        DatasetError: naming the row and field.
    """
    if not isinstance(rows, list):
        raise DatasetError(f"{source}: expected a JSON list of rows")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise DatasetError(f"{source}: row {number} must be an object")
        for key in ("prompt", "chosen", "rejected"):
            if not isinstance(row.get(key), str):
                raise DatasetError(f"{source}: row {number}: '{key}' must be a string")
    return rows


def read_sft(path: Path | str) -> list[dict[str, Any]]:
    """Read and validate sft_train.json."""
    path = Path(path)
    return validate_sft(read_json_file(path), str(path))


def write_sft(path: Path | str, samples: list[dict[str, Any]]) -> None:
    """Validate and write sft_train.json."""
    _write_json(Path(path), validate_sft(samples, str(path)))


def read_dpo(path: Path | str) -> list[dict[str, Any]]:
    """Read and validate dpo_train.json."""
    path = Path(path)
    return validate_dpo(read_json_file(path), str(path))


def write_dpo(path: Path | str, rows: list[dict[str, Any]]) -> None:
    """Validate and write dpo_train.json."""
    _write_json(Path(path), validate_dpo(rows, str(path)))


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
