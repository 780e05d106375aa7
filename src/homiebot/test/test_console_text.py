"""Untrusted text on the console of `homiebot run` / `collect`: shown as written, never read as markup or terminal
control, never aborting the benchmark."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from homiebot.commands._progress import CONSOLE_TEXT_CHARS, console_text, print_untrusted, progress_bar

# What a planner server's reply (and so a run's error) may carry, and how the console shows it.
HOSTILE = {
    "closing tag [/] in a reply": "closing tag [/] in a reply",
    "[bold]loud[/bold] and [/bold] unopened": "[bold]loud[/bold] and [/bold] unopened",
    "key: [redacted]; check $OPENAI_API_KEY": "key: [redacted]; check $OPENAI_API_KEY",
    "clear \x1b[2J screen \x1b]0;title\x07 bell": "clear \\x1b[2J screen \\x1b]0;title\\x07 bell",
    "over\rwritten\x00 \x7f\x9b": "over\\x0dwritten\\x00 \\x7f\\x9b",
    "trailing backslash \\": "trailing backslash \\",
    "a newline\nstays": "a newline\nstays",
    ":cross_mark: stays text": ":cross_mark: stays text",
}
LONG = "x" * 100_000  # a 100 kB reply with no space to wrap at


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=CONSOLE_TEXT_CHARS + 100), out


def _shown(out: io.StringIO) -> str:
    return out.getvalue()


@pytest.mark.parametrize(("text", "shown"), HOSTILE.items())
def test_print_untrusted_shows_the_text_as_written(text: str, shown: str) -> None:
    console, out = _console()
    print_untrusted(console, text, "[red]error[/red]: ")
    assert _shown(out) == f"error: {shown}\n"


def test_no_control_character_reaches_the_terminal() -> None:
    console, out = _console()
    for text in HOSTILE:
        print_untrusted(console, text)
    print_untrusted(console, "a\ttab")
    shown = _shown(out)
    assert not {char for char in shown if ord(char) < 32 and char not in "\n\t"}
    assert "a       tab" in shown and "\\x09" not in shown and "\\x0a" not in shown  # tabs and newlines stay


def test_a_100_kb_reply_is_cut_quickly() -> None:
    console, out = _console()
    started = time.monotonic()
    summary = f"task 1 run 1: 0 steps, error (error: {LONG})"
    print_untrusted(console, summary)
    assert time.monotonic() - started < 5.0
    shown = _shown(out)
    assert shown.startswith("task 1 run 1: 0 steps, error (error: xxxx")
    assert shown.endswith(f"x... ({len(summary) - CONSOLE_TEXT_CHARS} more characters)\n") and len(shown) < 2100
    assert console_text("x" * CONSOLE_TEXT_CHARS).plain == "x" * CONSOLE_TEXT_CHARS


def test_the_progress_callback_prints_hostile_summaries() -> None:
    console, out = _console()
    with progress_bar(console, "runs") as on_progress:
        for done, text in enumerate([*HOSTILE, LONG], start=1):
            on_progress(SimpleNamespace(total=len(HOSTILE) + 1, done=done), f"task 9 run 1: error ({text})")
    shown = _shown(out)
    for text in HOSTILE.values():
        assert f"task 9 run 1: error ({text})" in shown
    assert "x" * 100 in shown and "\x1b[2J" not in shown


def test_hostile_text_never_aborts_homiebot_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Every line `homiebot run` prints from the runs (report, progress, warnings, missing runs) takes hostile text."""
    from emmoe_eval import cli as emmoe_eval_cli

    from homiebot import cli, run_folders, runner
    from homiebot.run_config import Progress

    texts = [*HOSTILE, LONG]

    def fake_benchmark(config: Any, report: Any, on_progress: Any, echo_nodes: bool) -> Progress:
        progress = Progress(total=len(texts))
        for text in texts:
            report(text)
            progress.done += 1
            progress.failed.append(f"task [/] run 1: {text}")
            on_progress(progress, f"task [/] run 1: 0 steps, error (error: {text})")
        return progress

    monkeypatch.setenv("COLUMNS", str(CONSOLE_TEXT_CHARS + 100))
    monkeypatch.setattr(runner, "run_benchmark", fake_benchmark)
    monkeypatch.setattr(runner, "select_tasks", lambda data, tasks: ["[/]"])
    monkeypatch.setattr(run_folders, "without_result", lambda out, task_ids, runs: ["[/]/1", "\x1b[2J/2"])
    monkeypatch.setattr(emmoe_eval_cli, "main", lambda argv: 0)
    status = cli.main(["run", "--out", str(tmp_path / "runs"), "--data", str(tmp_path), "--planner", "mock"])
    assert status == 1  # runs without a planner result; not 2, an abort
    err = capsys.readouterr().err
    for text in HOSTILE.values():
        assert text in err and f"warning: task [/] run 1: {text}" in err
    assert "retry them): [/]/1, \\x1b[2J/2\n" in err
    assert "\x1b" not in err and "\r" not in err
