"""The console of the long-running commands (`homiebot run`, `homiebot collect`), on stderr: the progress bar and the
lines of untrusted text (run summaries, planner and server errors, folder names), shown as written."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rich.text import Text

# Terminal control characters (C0 but newline and tab, DEL, C1): shown as \xNN escapes, never sent to the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The most characters of one untrusted text printed on the console (the run files keep all of it).
CONSOLE_TEXT_CHARS = 2000


def console_text(text: str) -> Text:
    """Untrusted `text` as rich Text, shown as written (never read as markup): cut to CONSOLE_TEXT_CHARS, terminal
    control characters but newline and tab shown as `\\xNN` escapes."""
    from rich.text import Text

    if len(text) > CONSOLE_TEXT_CHARS:
        text = f"{text[:CONSOLE_TEXT_CHARS]}... ({len(text) - CONSOLE_TEXT_CHARS} more characters)"
    return Text(_CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text))


def print_untrusted(console: Any, text: str, markup: str = "") -> None:
    """Print untrusted `text` (a run's summary, a planner's or server's error) as written on `console` (rich), after
    `markup`, the caller's own (e.g. "[red]error[/red]: ")."""
    from rich.text import Text

    console.print(Text.from_markup(markup) + console_text(text))


@contextmanager
def progress_bar(console: Any, label: str) -> Iterator[Callable[[Any, str], None]]:
    """A transient bar of `label` on `console` (rich); yields the `on_progress(progress, summary)` callback that
    moves it to `progress.done` of `progress.total` and prints the (untrusted) summary line above it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        bar_task = bar.add_task(label, total=None)

        def on_progress(progress: Any, summary: str) -> None:
            bar.update(bar_task, total=progress.total, completed=progress.done)
            print_untrusted(console, summary)

        yield on_progress


T = TypeVar("T")


def with_progress(console: Any, label: str, work: Callable[[Callable[[str], None], Callable[[Any, str], None]], T],
                  errors: tuple[type[Exception], ...]) -> T:
    """Run `work(report, on_progress)` under a progress bar of `label`, its lines printed as untrusted text; the
    `errors` become one-line usage errors (exit 2)."""
    from homiebot.cli import UsageError

    with progress_bar(console, label) as on_progress:
        try:
            return work(lambda line: print_untrusted(console, line), on_progress)
        except errors as error:
            raise UsageError(str(error)) from error
