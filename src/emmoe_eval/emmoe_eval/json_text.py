"""JSON decoding of untrusted run and task files: one error type for every way a text can fail to decode.

`json.loads` fails in three ways on hostile input: a syntax error (JSONDecodeError), nesting deeper than the
interpreter's recursion limit (RecursionError) and an integer longer than Python's digit limit (ValueError). Every
reader of this package decodes through `decode_json`, so none of them can end in a traceback.
"""

from __future__ import annotations

import json
from typing import Any

_MAX_SHOWN = 80


class JSONTextError(ValueError):
    """A text that is not decodable JSON; `msg`, `lineno` and `colno` locate the problem (1-based)."""

    def __init__(self, msg: str, lineno: int = 1, colno: int = 1) -> None:
        super().__init__(f"{msg} (line {lineno}, column {colno})")
        self.msg, self.lineno, self.colno = msg, lineno, colno


def decode_json(text: str) -> Any:
    """`json.loads(text)`, raising only JSONTextError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise JSONTextError(error.msg, error.lineno, error.colno) from None
    except RecursionError:
        raise JSONTextError("nested too deeply") from None
    except ValueError as error:  # an integer past sys.get_int_max_str_digits()
        raise JSONTextError(str(error).split(";")[0]) from None


def shown(value: Any) -> str:
    """repr(value) cut to a readable length, for error messages about untrusted values."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        return f"<{type(value).__name__}>"
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."
