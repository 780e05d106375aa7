"""The progress bar of the long-running commands (`homiebot run`, `homiebot collect`), on stderr."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def progress_bar(console: Any, label: str) -> Iterator[Callable[[Any, str], None]]:
    """A transient bar of `label` on `console` (rich); yields the `on_progress(progress, summary)` callback that
    moves it to `progress.done` of `progress.total` and prints the summary line above it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        bar_task = bar.add_task(label, total=None)

        def on_progress(progress: Any, summary: str) -> None:
            bar.update(bar_task, total=progress.total, completed=progress.done)
            console.print(summary)

        yield on_progress
