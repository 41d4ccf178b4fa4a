""""Does knowledge help?" as a panel (spec 003, "The holdout"; core/bank/helps.py): the agent runs given knowledge
beside the holdout, one row a measure — the finished runs first, then checks, review and PRs merged, each with its
95% interval, and the cost per run — under a title, with the verdict ("too few runs to tell") below. The Diaries
screen, where the agents are, shows it; the words are the CLI's (crewlet_tui/helps_words.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from ..helps_words import HOLDOUT_HEAD, TREATMENT_HEAD, helps_notes, helps_rows, helps_title

if TYPE_CHECKING:
    from core.bank.helps import Helps


class KnowledgeHelps(Vertical):
    """The report's title, its rows in a table, its verdict."""

    DEFAULT_CSS = """
    KnowledgeHelps { height: auto; margin-top: 1; }
    KnowledgeHelps > DataTable { height: auto; }
    KnowledgeHelps > .helps-verdict { color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        yield Static(Text("Does knowledge help?", style="bold"), classes="helps-title")
        yield DataTable(cursor_type="none", zebra_stripes=True, show_cursor=False)
        yield Static(Text("reading the agent runs…", style="dim"), classes="helps-verdict")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("", TREATMENT_HEAD, HOLDOUT_HEAD)

    def show(self, report: Helps) -> None:
        self.query_one(".helps-title", Static).update(Text(helps_title(report), style="bold"))
        table = self.query_one(DataTable)
        table.clear()
        for measure, treatment, holdout in helps_rows(report):
            table.add_row(Text(measure, style="bold"), Text(treatment), Text(holdout), key=measure)
        self.query_one(".helps-verdict", Static).update(Text("  ".join(helps_notes(report)), style="dim"))

    def failed(self, words: str) -> None:
        self.query_one(DataTable).clear()
        self.query_one(".helps-verdict", Static).update(Text(words, style="red"))
