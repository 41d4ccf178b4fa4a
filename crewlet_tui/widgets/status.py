"""The status line every screen shows above its footer: who you act as, that the log is damaged (while it
is, in place of the index), how far this node's keyword index is ("index up to date", "indexing… 40 of
120" with a bar while it builds) and how much can be searched by meaning ("meaning: 812 of 1,000 pages",
"embedding… 40 of 120" while the embedding duty fills it; a warning below 95%). On a narrow terminal
each says it shortly rather than be cut off."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from ..sanitize import clean_line


@dataclass(frozen=True)
class IndexState:
    """How far this node's keyword index is, as the app's background worker last saw it (the app holds
    one in a reactive)."""

    phase: str = "starting"   # starting | indexing | current | waiting | failed | off
    done: int = 0
    total: int = 0
    indexed_seq: int = 0
    applied_seq: int = 0
    message: str = ""

    def describe(self, short: bool = False) -> str:
        """In words a newcomer reads at once; `short` for a narrow terminal."""
        if self.phase == "indexing":
            if self.total:
                return f"indexing… {self.done:,} of {self.total:,}"
            return "indexing…"
        if self.phase == "current":
            behind = max(0, self.applied_seq - self.indexed_seq)
            line = f"index {behind:,} change{'s' if behind != 1 else ''} behind" if behind else "index up to date"
            return line + (f" · {self.message}" if self.message and not short else "")
        if self.phase == "waiting":
            return "not searchable yet" if short else f"not searchable yet: {self.message}"
        if self.phase == "failed":
            return "indexing failed" if short else f"indexing failed: {self.message}"
        if self.phase == "off":
            return self.message or "no background indexer"
        return "index: starting…"


COVERAGE_WARNING = 0.95


@dataclass(frozen=True)
class MeaningState:
    """How much of this node's copy can be searched by meaning (the embedding duty's coverage)."""

    phase: str = "starting"   # starting | embedding | training | current | off | failed
    covered: int = 0
    total: int = 0
    done: int = 0             # this run's progress while the duty fills (embedding)
    goal: int = 0
    message: str = ""

    @property
    def share(self) -> float:
        return self.covered / self.total if self.total else 1.0

    @property
    def warning(self) -> bool:
        return self.phase in ("current", "embedding", "training") and self.share < COVERAGE_WARNING

    def describe(self, short: bool = False) -> str:
        """How much can be searched by meaning; `short` for a narrow terminal."""
        if self.phase == "off":
            return "meaning: off"
        if self.phase == "failed":
            return "embedding failed" if short else f"embedding failed: {self.message}"
        if self.phase == "starting":
            return ""
        if self.phase == "training":
            step = f" ({self.message})" if self.message and not short else ""
            return f"{'' if short else 'semantic index: '}training… {self.done:,} of {self.goal:,}{step}"
        if self.phase == "embedding" and self.goal:
            return f"embedding… {self.done:,} of {self.goal:,}"
        line = f"meaning: {self.covered:,} of {self.total:,}{'' if short else ' pages'}"
        if self.phase == "embedding":
            line = f"embedding… {line}"
        return line + (f" · {self.message}" if self.message and not short else "")


class StatusLine(Horizontal):
    """Reads the app's `index_state`, `meaning_state` and `actor_line`; nothing here touches the node.

    Its progress bar is mounted (last, where it always sits) the first time a long work wants it: every
    screen has a status line, and most never show a bar — four widgets fewer to mount and style on each
    screen's first paint, the app's launch included."""

    def compose(self) -> ComposeResult:
        yield Static(id="status-who")
        yield Static(id="status-index")
        yield Static(id="status-meaning")

    def on_mount(self) -> None:
        self.watch(self.app, "index_state", self._show)
        self.watch(self.app, "meaning_state", self._show)
        self.watch(self.app, "log_state", self._show)

    def on_resize(self) -> None:
        self._show()

    def _show(self, _state: object = None) -> None:
        if not self.query("#status-meaning"):  # not composed yet: the next change shows it
            self.call_after_refresh(self._show)
            return
        index: IndexState = self.app.index_state  # type: ignore[attr-defined]
        meaning: MeaningState = self.app.meaning_state  # type: ignore[attr-defined]
        who = clean_line(getattr(self.app, "actor_line", ""))
        texts = (who, clean_line(index.describe()), clean_line(meaning.describe()))
        if self._too_long(texts):   # a narrow terminal: the short forms, never a line cut to nonsense
            texts = (who.replace(" · this node's copy", "").removeprefix("as "),
                     clean_line(index.describe(short=True)), clean_line(meaning.describe(short=True)))
        self.query_one("#status-who", Static).update(Text(texts[0], style="dim"))
        style = {"failed": "bold red", "indexing": "yellow", "waiting": "yellow", "current": "dim"}.get(index.phase, "dim")
        damaged = getattr(self.app, "log_state", "")
        if damaged:  # over a damaged log the index is never "current": say the damage instead
            self.query_one("#status-index", Static).update(Text(clean_line(damaged), style="bold red", no_wrap=True,
                                                                overflow="ellipsis"))
        else:
            self.query_one("#status-index", Static).update(Text(texts[1], style=style, no_wrap=True,
                                                                overflow="ellipsis"))
        mstyle = "bold red" if meaning.phase == "failed" else "yellow" if meaning.warning else "dim"
        # over a damaged log the duties' failures are that damage again: the one line says it
        said = "" if damaged and meaning.phase == "failed" else texts[2]
        self.query_one("#status-meaning", Static).update(Text(said, style=mstyle))
        # a bar for the two long works: the keyword index's build, the semantic index's training
        if index.phase == "indexing" and index.total > 0:
            self._bar().update(total=index.total, progress=index.done)
        elif meaning.phase == "training" and meaning.goal > 0:
            self._bar().update(total=meaning.goal, progress=meaning.done)
        else:
            for bar in self.query("#status-progress"):
                bar.display = False

    def _too_long(self, texts: tuple[str, str, str]) -> bool:
        """Would the three texts (with the margins between them and a bar that may show) overflow the line's
        content width?"""
        width = self.size.width or self.app.size.width - 2
        bar = 14 if any(b.display for b in self.query("#status-progress")) else 0
        return sum(len(t) for t in texts) + 2 * 2 + bar > width

    def _bar(self) -> Any:
        """The progress bar, shown (mounted on first use)."""
        from textual.widgets import ProgressBar

        found = self.query("#status-progress")
        bar = found.first() if found else None
        if bar is None:
            bar = ProgressBar(total=100, show_eta=False, show_percentage=False, id="status-progress")
            self.mount(bar)
        bar.display = True
        return bar
