"""Reading and JSON decoding of untrusted run and task files: one error type for every way each can fail.

`json.loads` fails in three ways on hostile input: a syntax error (JSONDecodeError), nesting deeper than the
interpreter's recursion limit (RecursionError) and an integer longer than Python's digit limit (ValueError). Every
reader of this package decodes through `decode_json`, so none of them can end in a traceback. Files are read through
`read_text_file`, which opens without blocking and reads regular files only: a FIFO in a file's place would hang a
plain `open`, and a device (a link to /dev/zero) could be read forever.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

_MAX_SHOWN = 80
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class JSONTextError(ValueError):
    """A text that is not decodable JSON; `msg`, `lineno` and `colno` locate the problem (1-based)."""

    def __init__(self, msg: str, lineno: int = 1, colno: int = 1) -> None:
        super().__init__(f"{msg} (line {lineno}, column {colno})")
        self.msg, self.lineno, self.colno = msg, lineno, colno


class TextFileError(ValueError):
    """A file that cannot be read as UTF-8 text; `reason` says why, `missing` whether it does not exist."""

    def __init__(self, path: Path | str, reason: str, missing: bool = False) -> None:
        super().__init__(f"{path}: {reason}")
        self.reason, self.missing = reason, missing


def read_text_file(path: Path | str) -> str:
    """The UTF-8 text of a regular file (universal newlines, as `Path.read_text`), never blocking.

    Raises:
        TextFileError: the file is missing, unreadable (a symlink loop, no permission), not a regular file (a FIFO, a
            directory, a device) or not UTF-8.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise TextFileError(path, error.strerror or type(error).__name__, error.errno == errno.ENOENT) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")
            raise TextFileError(path, f"not a regular file but {kind}")
        with open(descriptor, encoding="utf-8", closefd=False) as file:
            return file.read()
    except UnicodeDecodeError as error:
        raise TextFileError(path, f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise TextFileError(path, error.strerror or type(error).__name__) from None
    finally:
        os.close(descriptor)


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


def string_lines(text: str) -> list[int]:
    """The 1-based line of every JSON string in `text`, in order (in a list of lists of strings: of each item)."""
    lines: list[int] = []
    line, counted = 1, 0
    for match in _JSON_STRING.finditer(text):
        line += text.count("\n", counted, match.start())
        counted = match.start()
        lines.append(line)
    return lines
