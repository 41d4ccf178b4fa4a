"""The status line every screen shows above its footer: who you act as, and how far this node's search
index is (\"indexing… 40 of 120\" with a bar while the background indexer runs)."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar, Static

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

    def describe(self) -> str:
        if self.phase == "indexing":
            if self.total:
                return f"indexing… {self.done:,} of {self.total:,}"
            return "indexing…"
        if self.phase == "current":
            behind = max(0, self.applied_seq - self.indexed_seq)
            through = f"index through record {self.indexed_seq:,} of {self.applied_seq:,}"
            through += f" ({behind:,} behind)" if behind else ""
            return through + (f" · {self.message}" if self.message else "")
        if self.phase == "waiting":
            return f"not searchable yet: {self.message}"
        if self.phase == "failed":
            return f"indexing failed: {self.message}"
        if self.phase == "off":
            return self.message or "no background indexer"
        return "index: starting…"


class StatusLine(Horizontal):
    """Reads the app's `index_state` and `actor_line`; nothing here touches the node."""

    def compose(self) -> ComposeResult:
        yield Static(id="status-who")
        yield Static(id="status-index")
        yield ProgressBar(total=100, show_eta=False, show_percentage=False, id="status-progress")

    def on_mount(self) -> None:
        self.watch(self.app, "index_state", self._show_index)

    def _show_index(self, state: IndexState) -> None:
        if not self.query("#status-progress"):  # not composed yet: the next change shows it
            self.call_after_refresh(self._show_index, self.app.index_state)  # type: ignore[attr-defined]
            return
        self.query_one("#status-who", Static).update(Text(clean_line(getattr(self.app, "actor_line", "")), style="dim"))
        style = {"failed": "bold red", "indexing": "yellow", "waiting": "yellow", "current": "dim"}.get(state.phase, "dim")
        self.query_one("#status-index", Static).update(Text(clean_line(state.describe()), style=style))
        bar = self.query_one("#status-progress", ProgressBar)
        showing = state.phase == "indexing" and state.total > 0
        bar.display = showing
        if showing:
            bar.update(total=state.total, progress=state.done)
