"""Rich progress bars for long CLI work: one bar per task, shown only once the work reports progress."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress


class ProgressBars:
    """A callable `(task, done, total, label)`; a total of 0 is work of unknown size (a spinner-like
    bar). Nothing is drawn when disabled (`--json`, or output that is not a terminal)."""

    def __init__(self, console: Console, *, enabled: bool) -> None:
        self.console = console
        self.enabled = enabled
        self._progress: Progress | None = None
        self._tasks: dict[tuple[str, str], Any] = {}

    def __call__(self, task: str, done: int, total: int, label: str = "") -> None:
        if not self.enabled:
            return
        if self._progress is None:
            # imported when a bar is first drawn: a command that finishes before any progress never pays for it
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      _rate_column(), TimeElapsedColumn(), TimeRemainingColumn(),
                                      console=self.console, transient=False)
            self._progress.start()
        key = (task, label)
        if key not in self._tasks:
            self._tasks[key] = self._progress.add_task(label or task, total=total or None)
        self._progress.update(self._tasks[key], completed=done, total=total or None)

    def bar(self, label: str) -> Any:
        """A `(done, total)` callable for one piece of work (an index build, an import)."""
        return lambda done, total: self(label, done, total, label)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._tasks.clear()


def _rate_column() -> Any:
    """Items a second (pages embedded, pages indexed), from rich's own estimate over the recent updates."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:.1f}/s" if speed else "–/s", style="progress.data.speed")

    return RateColumn()
