"""A page's entries, under its body on the page screen: those in use (kind, tier, age and the body's first line),
those waiting for a person (proposed or disputed: a person opens one to accept, verify, dispute or archive it), and
a count of those out of use (superseded or archived), listed on demand. Enter on an entry posts `EntryChosen`.

The rows are read in one background call (`read_entries`); a refresh that reads the same rows again leaves the
list as it is, so a refresh on applied records does not move the person's place in it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.containers import ScrollableContainer
from textual.geometry import Region
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from core.bank.trust import GROUNDED, TIER_RANK, trust_tier
from core.pages.entry_model import IN_USE, OUT_OF_USE

from ..entry_words import list_row, now_ms

if TYPE_CHECKING:
    from core.bank.entries import Entry, EntryBank

SHOWN = 100       # rows a section lists at most; the rest are counted (`crewlet entries REF` lists them all)
OUT_OF_USE_ID = "out-of-use"


@dataclass
class EntriesView:
    """A page's entries as the page screen shows them, with the page's entry policy."""

    page_id: str
    policy: str
    in_use: list[Entry] = field(default_factory=list)
    waiting: list[Entry] = field(default_factory=list)     # proposed or disputed: a person's to decide
    out_of_use: list[Entry] = field(default_factory=list)


def read_entries(bank: EntryBank, page_id: str, actor: str | None) -> EntriesView:
    """One read of a page's entries, every status, and its policy (verified and grounded first, then newest). A
    grounded entry's tier is the one it is served at: each cited file looked at on its branch head, and one changed
    since its last check makes it UNGROUNDED (as EntryBank.show(at_head=True) does for one entry)."""
    every = bank.entries(page_id, statuses=None, actor=actor)
    view = EntriesView(page_id, bank.policy(page_id, actor=actor))
    for entry in every:
        if entry.tier == GROUNDED:
            heads = bank.head_blobs([c.citation for c in entry.citations],
                                    {c.index: c.anchor for c in entry.citations})
            entry.tier = trust_tier(entry.status, entry.verified_by, entry.citations, heads)
        if entry.status in IN_USE:
            view.in_use.append(entry)
        elif entry.status in OUT_OF_USE:
            view.out_of_use.append(entry)
        else:
            view.waiting.append(entry)
    view.in_use.sort(key=lambda e: (TIER_RANK[e.tier], -e.created_at, e.id))   # a tier the head moved
    return view


class EntryList(OptionList):
    """The page's entries as a list (see the module)."""

    class EntryChosen(Message):
        def __init__(self, entry_id: str) -> None:
            super().__init__()
            self.entry_id = entry_id

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view: EntriesView | None = None
        self.show_out_of_use = False
        self._shown: list[tuple[str | None, str]] = []

    def show(self, view: EntriesView) -> None:
        """Show `view`; the same rows as shown already (a refresh that found nothing new) change nothing."""
        if self.view is None or self.view.page_id != view.page_id:
            self.show_out_of_use = False
        self.view = view
        options = self._rows(view, now_ms())
        shown = [(o.id if o else None, o.prompt.plain if o and isinstance(o.prompt, Text) else "") for o in options]
        if shown == self._shown:
            return
        self._shown = shown
        keep = self.highlighted_option.id if self.highlighted_option is not None else None
        self.clear_options()
        self.add_options(options)
        ids = [o.id for o in options if o is not None]
        if keep is not None and keep in ids:
            self.highlighted = self.get_option_index(keep)

    def _rows(self, view: EntriesView, now: int) -> list[Option | None]:
        out: list[Option | None] = []

        def section(title: str, entries: list[Entry], *, with_status: bool, empty: str | None) -> None:
            out.append(Option(Text(f"{title} ({len(entries):,})", style="bold"), disabled=True))
            for entry in entries[:SHOWN]:
                out.append(Option(list_row(entry, now, with_status=with_status), id=f"entry:{entry.id}"))
            if len(entries) > SHOWN:
                out.append(Option(Text(f"… {len(entries) - SHOWN:,} more: crewlet entries {view.page_id}",
                                       style="dim"), disabled=True))
            if not entries and empty:
                out.append(Option(Text(empty, style="dim"), disabled=True))

        section("In use", view.in_use, with_status=False,
                empty="none yet (agents add them over MCP)")
        if view.waiting:
            section("Waiting for a person", view.waiting, with_status=True, empty=None)
        if view.out_of_use:
            n = len(view.out_of_use)
            if self.show_out_of_use:
                section("Out of use", view.out_of_use, with_status=True, empty=None)
                out.append(Option(Text("enter hides those out of use", style="dim"), id=OUT_OF_USE_ID))
            else:
                out.append(Option(Text(f"{n:,} out of use: enter lists {'it' if n == 1 else 'them'}", style="dim"),
                                  id=OUT_OF_USE_ID))
        return out

    @property
    def entry_count(self) -> int:
        """How many entries the list shows as rows."""
        return sum(1 for item in self._shown if item[0] and item[0].startswith("entry:"))

    def scroll_to_highlight(self, top: bool = False) -> None:
        """The highlighted row in view: the list is as tall as its rows, under the page's body in the page's
        scroll, so it is that scroll that moves (OptionList scrolls only itself)."""
        super().scroll_to_highlight(top)
        container, index = self.parent, self.highlighted
        if not isinstance(container, ScrollableContainer) or index is None or not self.is_mounted:
            return
        try:
            y, height = self._index_to_line[index], self._heights[index]
        except (KeyError, IndexError):
            return
        region = Region(0, self.virtual_region.y + y, self.size.width, height)
        container.scroll_to_region(region, animate=False, immediate=True, top=top)

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if option_id == OUT_OF_USE_ID:
            self.show_out_of_use = not self.show_out_of_use
            if self.view is not None:
                self.show(self.view)
                self.highlighted = self.get_option_index(OUT_OF_USE_ID)
        elif option_id.startswith("entry:"):
            self.post_message(self.EntryChosen(option_id[len("entry:"):]))
