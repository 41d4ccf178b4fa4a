"""One entry (spec 003): its body, kind, status, trust tier, scope, author, when it was written, its corroborations,
what it supersedes or is superseded by, each citation with what its last check found and how long ago, and its
history. Read as a serve reads it: each cited file is looked at on its branch head, so a file changed since its
last check says so here and the tier falls to UNGROUNDED (core.bank EntryBank.show(at_head=True)).

A person accepts, verifies, disputes or archives it here (each asks for an optional reason, each a write in a
thread worker). Those are a person's: when the app runs as an agent, the engine refuses it in one line, as the CLI
is refused — an agent may archive only its own entry while proposed, which the engine decides too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from core.pages.entry_model import ACCEPT, ACTIONS, AGENT, ARCHIVE, DISPUTE, IN_USE, VERIFY

from ..entry_words import age, citation_lines, first_line, now_ms, refusal_words, status_text, tier_text
from ..fmt import when
from ..sanitize import clean_line, clean_text
from . import registry
from .base import COMMON_BINDINGS, CrewletScreen, error_text
from .modals import InputModal

if TYPE_CHECKING:
    from core.bank.entries import Entry

# an action's words: (its key's description, what it is said as when done, the reason dialog's question)
WORDS = {
    ACCEPT: ("Accept", "accepted", "Accept it: it goes into use (STANDING), and a correction retires what it "
                                   "supersedes."),
    VERIFY: ("Verify", "verified", "Verify it: you confirmed it yourself (HUMAN_VERIFIED)."),
    DISPUTE: ("Dispute", "disputed", "Dispute it: it contradicts the code or another entry, and is held back "
                                     "until a person resolves it (DISPUTED)."),
    ARCHIVE: ("Archive", "archived", "Archive it: out of use, kept for the record (ARCHIVED)."),
}


class EntryScreen(CrewletScreen):
    CSS_PATH = "entry.tcss"
    BINDINGS = [
        Binding("a", "act('accept')", "Accept"),
        Binding("v", "act('verify')", "Verify"),
        Binding("d", "act('dispute')", "Dispute"),
        Binding("x", "act('archive')", "Archive"),
        Binding("tab", "app.focus_next", "Links"),
        Binding("j", "scroll('down')", "Down", show=False),
        Binding("k", "scroll('up')", "Up", show=False),
        Binding("g", "scroll('home')", "Top", show=False),
        Binding("G", "scroll('end')", "Bottom", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self, entry_id: str) -> None:
        super().__init__(classes="entry-screen")
        self.entry_id = entry_id
        self.entry: Entry | None = None
        self.sub_title = "entry"

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with VerticalScroll(id="entry-main", classes="main"):
            yield Static(Text(f"Entry {clean_line(self.entry_id)}: loading…", style="dim"), id="entry-title",
                         classes="screen-title")
            yield Static(id="entry-notice", classes="notice")
            yield Static(id="entry-head")
            yield Static(id="entry-body")
            yield Static(id="entry-meta")
            yield OptionList(id="entry-links")
            yield Static(id="entry-citations")
            yield Static(id="entry-history")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        self.query_one("#entry-notice", Static).display = False
        self.query_one("#entry-main").focus()
        self.reload()

    # -- reading ---------------------------------------------------------------------------------
    def reload(self) -> None:
        self.call_in_background(self.session.bank.show, self.entry_id, at_head=True, actor=self.session.handle,
                                what="entry", on_done=self._show_entry, on_fail=self._not_read)

    def refresh_rows(self) -> None:
        self.reload()

    def on_screen_resume(self) -> None:
        if self.entry is not None:
            self.reload()

    def _not_read(self, error: BaseException) -> None:
        self.query_one("#entry-title", Static).update(
            Text(f"cannot open entry {clean_line(self.entry_id)}: {error_text(error)}", style="bold red"))

    def _show_entry(self, entry: Entry) -> None:
        self.entry = entry
        now = now_ms()
        title = Text()
        title.append("Entry ", style="bold")
        title.append(entry.id, style="bold")
        title.append(" under ", style="dim")
        title.append(clean_line(entry.page), style="bold")
        self.query_one("#entry-title", Static).update(title)

        head = Text()
        head.append(entry.kind, style="bold")
        head.append("  ·  ", style="dim")
        head.append_text(status_text(entry.status))
        head.append("  ·  ", style="dim")
        head.append_text(tier_text(entry.tier))
        if entry.status not in IN_USE:
            head.append("  (not served to agents)", style="dim")
        self.query_one("#entry-head", Static).update(head)
        self.query_one("#entry-body", Static).update(Text(clean_text(entry.body)))
        self.query_one("#entry-meta", Static).update(self._meta(entry, now))
        self._show_links(entry)

        cites = Text()
        cites.append(f"Citations ({len(entry.citations)})\n", style="bold")
        for state in entry.citations:
            cites.append_text(citation_lines(state, now))
        if not entry.citations:
            cites.append("none: it cites nothing it rests on" + (
                "" if entry.verified_by else ", so it is UNGROUNDED unless a person verifies it") + "\n", style="dim")
        cites.rstrip()
        self.query_one("#entry-citations", Static).update(cites)
        self.query_one("#entry-history", Static).update(self._history(entry, now))
        self.refresh_bindings()   # what can be done follows the status

    @staticmethod
    def _meta(entry: Entry, now: int) -> Text:
        meta = Text()

        def row(label: str, value: str | Text, style: str = "") -> None:
            meta.append(f"{label:<14}", style="dim")
            meta.append_text(value if isinstance(value, Text) else Text(value, style=style))
            meta.append("\n")

        row("scope", clean_line(entry.scope) if entry.scope else "none: served for every query",
            "" if entry.scope else "dim")
        row("author", f"{clean_line(entry.author)} ({entry.author_kind})")
        row("created", f"{when(entry.created_at)} ({age(entry.created_at, now)})")
        if entry.status_by and entry.status_at:
            said = f"{clean_line(entry.status_by)}, {age(entry.status_at, now)}"
            if entry.status_reason:
                said += f": {clean_line(entry.status_reason)}"
            row("status set by", said)
        if entry.verified_by:
            row("verified by", f"{clean_line(entry.verified_by)}, {age(entry.verified_at, now)}", "green")
        if entry.corroborations:
            row("corroborated", f"{entry.corroborations} time{'s' if entry.corroborations != 1 else ''}, by "
                + ", ".join(clean_line(a) for a in entry.corroborated_by))
        else:
            row("corroborated", "not yet", "dim")
        meta.rstrip()
        return meta

    def _show_links(self, entry: Entry) -> None:
        links = self.query_one("#entry-links", OptionList)
        keep = links.highlighted
        links.clear_options()
        options = [Option(Text.assemble(("↑ the page ", "dim"), (clean_line(entry.page), "bold")),
                          id=f"page:{entry.page_id}")]
        if entry.supersedes:
            options.append(Option(Text.assemble(("supersedes ", "dim"), (entry.supersedes, "bold"),
                                                (" (it stays in use until a person accepts this one)"
                                                 if entry.status not in IN_USE else "", "dim")),
                                  id=f"entry:{entry.supersedes}"))
        if entry.superseded_by:
            options.append(Option(Text.assemble(("superseded by ", "dim"), (entry.superseded_by, "bold")),
                                  id=f"entry:{entry.superseded_by}"))
        links.add_options(options)
        links.highlighted = keep if keep is not None and keep < len(options) else 0

    @staticmethod
    def _history(entry: Entry, now: int) -> Text:
        out = Text()
        out.append(f"History ({len(entry.history)})\n", style="bold")
        for h in entry.history:
            out.append(f"{when(h.get('at'))} ", style="dim")
            out.append(f"{age(h.get('at'), now):<11}", style="dim")
            out.append(f"{h.get('action')}", style="bold")
            if h.get("to_status") and h.get("to_status") != h.get("from_status"):
                out.append(f" → {h['to_status']}")
            out.append(f"  {clean_line(str(h.get('actor')))} ({h.get('actor_kind')})", style="dim")
            if h.get("reason"):
                out.append(f"\n{' ' * 28}{first_line(str(h['reason']))}", style="italic")
            out.append("\n")
        out.rstrip()
        return out

    # -- following ---------------------------------------------------------------------------------
    @on(OptionList.OptionSelected, "#entry-links")
    def _link(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        target = event.option.id or ""
        if target.startswith("page:"):
            page_id = target[len("page:"):]
            stack = self.app.screen_stack
            below = stack[-2] if len(stack) > 1 and stack[-1] is self else None
            if registry.is_showing(below, "page") and getattr(getattr(below, "page", None), "id", None) == page_id:
                self.finish()       # the page this entry was opened from: back to it, not a second copy
            else:
                self.crewlet.open_page(page_id)
        elif target.startswith("entry:"):
            self.crewlet.open_entry(target[len("entry:"):])

    def action_scroll(self, where: str) -> None:
        main = self.query_one("#entry-main", VerticalScroll)
        {"down": main.scroll_down, "up": main.scroll_up, "home": main.scroll_home, "end": main.scroll_end}[where]()

    # -- a person's actions --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers what the entry's status allows now (dimmed while it loads): accept a proposed,
        disputed or archived entry; verify one in the bank not yet verified; dispute or archive one in the bank."""
        if action != "act":
            return True
        entry = self.entry
        if entry is None:
            return None
        name = str(parameters[0])
        sources = ACTIONS[name][0]
        if name == VERIFY and entry.verified_by and entry.status in IN_USE:
            return False
        return entry.status in sources

    def action_act(self, action: str) -> None:
        entry = self.entry
        if entry is None or action not in WORDS:
            return
        who = self.session.who()
        if who is not None and who.is_agent and AGENT not in ACTIONS[action][2]:
            # a person's action: the engine refuses the agent in one line (its words, as the CLI says them),
            # before anybody types a reason it would never keep
            self._write(action, None)
            return
        label, _done, question = WORDS[action]

        def reason(text: str | None) -> None:
            if text is not None:
                self._write(action, text.strip() or None)

        self.app.push_screen(InputModal(f"{label} entry {entry.id}", f"{question} A reason (optional):", ok=label,
                                        allow_empty=True, id="entry-reason"), reason)

    def _write(self, action: str, reason: str | None) -> None:
        bank = self.session.bank
        call = {ACCEPT: bank.accept, VERIFY: bank.verify, DISPUTE: bank.dispute, ARCHIVE: bank.archive}[action]
        self.call_in_background(call, self.entry_id, actor=self.session.handle, reason=reason,
                                what=f"entry {WORDS[action][1]}", on_done=self._acted, on_fail=self._refused,
                                on_gone=self._acted_words, writes=True)

    def _acted(self, entry: Entry) -> None:
        self._say("")
        self.notify(f"entry {entry.id}: {entry.status}, {entry.tier}", markup=False)
        self._show_entry(entry)
        self.reload()       # read again at the branch heads, as the screen reads it

    def _acted_words(self, entry: Entry) -> str:
        return f"entry {entry.id}: {entry.status}"

    def _refused(self, error: BaseException) -> None:
        words = refusal_words(error, self.session.handle)
        self._say(words)
        self.notify(words, severity="error", markup=False, timeout=8)

    def _say(self, words: str) -> None:
        notice = self.query_one("#entry-notice", Static)
        notice.update(Text(words, style="bold"))
        notice.display = bool(words)
