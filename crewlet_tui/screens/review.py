"""The review queue (spec 003, "The review queue"): what waits for a person, in the spec's order — the open page
proposals (docs/consolidation.md: a accepts one, x declines it, as `crewlet review proposal`), then every proposed entry
with the reasons for its escalation and what triage decided about it, then the open audits — with the triage
panel above ("Can triage decide alone?").

A person acts on the highlighted row: accept, verify, dispute or archive an entry (each asks for an optional
reason, as on the entry screen), agree or disagree with an audit (a disagreement undoes what triage did, so it asks
first). Each is a write in a thread worker through `core.bank.review.Review`, and what the store answered — the
entry's new status, or its refusal in one line — is said on the screen. The entries filter by reason (f).

Everything here is read and decided in core: the screen lists `Review.queue()` and `Review.status()`, and the store
refuses an agent each of these actions (the screen asks an agent for no reason it would never keep).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from core.pages.entry_model import ACCEPT, ACTIONS, AGENT, ARCHIVE, DISPUTE, ENTRY_KINDS, IN_USE, PROPOSED, VERIFY
from core.pages.triage_model import (ACCEPT as DECIDED_ACCEPT, AGREE, AUDIT, BROAD_SCOPE, CITATION_FAILED,
                                     CONTRADICTS_LOCKED, CONTRADICTS_VERIFIED, CORROBORATE, DISAGREE, ESCALATE,
                                     EXTERNAL_INPUT, HARMFUL_SIGNAL, JUDGES_DISAGREE, LOW_AGREEMENT, NO_LLM, OFF,
                                     PIN_REQUEST, REASONS, REFUSE, SUPERSEDE_REQUEST, UNGROUNDED, UNKNOWN_SOURCE)

from ..entry_words import age, first_line, now_ms, refusal_words, status_text
from ..sanitize import clean_line
from ..widgets.triage_panel import TriagePanel
from .base import COMMON_BINDINGS, CrewletScreen, error_text, footer
from .entry import WORDS
from .modals import ConfirmModal, InputModal

if TYPE_CHECKING:
    from core.bank.entries import Entry
    from core.bank.review import DecisionView, OpenAudit, QueuedEntry, Review, ReviewQueue, TriageStatus

KIND_WIDTH = max(len(k) for k in (*ENTRY_KINDS, "AUDIT")) + 2     # the rows' first column, CONVENTION and a gap
SHOWN = 500           # rows a section lists at most; the rest are counted (`crewlet review` lists them all)

# each escalation reason in spec 003's words ("Escalation reasons"), for the detail under the list and the filter
REASON_WORDS = {
    CONTRADICTS_VERIFIED: "it contradicts an entry a person verified",
    CONTRADICTS_LOCKED: "it contradicts an entry on a locked page",
    UNGROUNDED: "it cites nothing",
    CITATION_FAILED: "a citation does not hold, or was not read yet",
    PIN_REQUEST: "a convention, which every run in its modules gets: a person decides",
    SUPERSEDE_REQUEST: "it replaces an entry: only a person's acceptance retires the old one",
    BROAD_SCOPE: "its scope reaches more modules than one fact should",
    JUDGES_DISAGREE: "the two model judgments did not agree",
    NO_LLM: "a model was needed, and none is configured",
    EXTERNAL_INPUT: "it rests on text from outside the company",
    UNKNOWN_SOURCE: "an agent wrote it: nothing an agent writes is accepted alone yet",
    HARMFUL_SIGNAL: "runs given it went wrong where it applies",
    AUDIT: "a sample of what triage did alone, for a person to check",
    LOW_AGREEMENT: "people disagreed with this type of decision lately, so a person decides",
}

# what triage did alone, as an audit names it; and what a disagreement undoes
DONE_ALONE = {DECIDED_ACCEPT: "accepted alone", CORROBORATE: "folded in alone", REFUSE: "refused alone"}
UNDONE = {DECIDED_ACCEPT: "the entry is archived", CORROBORATE: "the entry is put into use",
          REFUSE: "the entry is put into use"}


@dataclass(frozen=True)
class ReviewView:
    """One read of the review queue as the screen shows it."""

    queue: ReviewQueue
    status: TriageStatus
    reason: str | None                 # the filter it was read with (None: every reason)
    counts: dict[str, int]             # how many waiting entries carry each reason, over the whole queue


def read_review(review: Review, reason: str | None, actor: str | None) -> ReviewView:
    """The queue (filtered by `reason`), the counts the filter offers (over the whole queue), and the triage
    status, read at once in the screen's background call."""
    queue = review.queue(reason=reason, actor=actor)
    every = queue if reason is None else review.queue(actor=actor)
    counts = Counter(r for queued in every.entries for r in queued.reasons)
    return ReviewView(queue, review.status(), reason, dict(counts))


def decision_words(queued: QueuedEntry) -> Text:
    """Triage's decision in a word or two, for a row: its type, "held" when a hold kept it from acting, "stale" when
    the entry changed since (triage decides again)."""
    decision = queued.decision
    if decision is None:
        return Text("not triaged", style="dim")
    out = Text(decision.decision, style="cyan")
    if queued.stale:
        out.append(" (stale)", style="dim")
    elif decision.held:
        out.append(" (held)", style="dim")
    return out


def reasons_short(reasons: list[str]) -> Text:
    """The first reason and how many more (the detail under the list names them all)."""
    if not reasons:
        return Text("no reason", style="dim")
    out = Text(reasons[0], style="yellow")
    if len(reasons) > 1:
        out.append(f" +{len(reasons) - 1}", style="dim")
    return out


def entry_row(queued: QueuedEntry) -> Text:
    row = Text(no_wrap=True, overflow="ellipsis")
    row.append(f"{queued.entry.kind:<{KIND_WIDTH}}", style="bold")
    row.append_text(decision_words(queued))
    if queued.decision is not None:
        row.append("  ")
        row.append_text(reasons_short(queued.reasons))
    row.append("  " + first_line(queued.entry.body))
    return row


def audit_row(audit: OpenAudit) -> Text:
    row = Text(no_wrap=True, overflow="ellipsis")
    row.append(f"{'AUDIT':<{KIND_WIDTH}}", style="bold magenta")
    row.append(DONE_ALONE.get(audit.decision.decision, audit.decision.decision), style="cyan")
    row.append("  " + first_line(audit.entry.body))
    return row


class ReasonFilterModal(ModalScreen[str | None]):
    """Pick the reason the entries are filtered by: every reason in the spec's order, with how many waiting entries
    carry it. Answers the reason, "" for every reason, or None when cancelled."""
    CSS_PATH = "dialogs.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel"),
                Binding("ctrl+c", "app.help_quit", "Quit", show=False)]   # as every dialog

    def __init__(self, counts: dict[str, int], current: str | None) -> None:
        super().__init__(id="review-filter")
        self.counts, self.current = counts, current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-tall"):
            yield Static(Text("Filter the entries by reason", style="bold"), classes="dialog-title")
            options = [Option(Text.assemble(("every reason", "bold"),
                                            ("  (now)" if self.current is None else "", "cyan")), id="")]
            for reason in REASONS:
                n = self.counts.get(reason, 0)
                label = Text()
                label.append(reason, style="bold" if n else "dim")
                label.append(f"  {n:,}", style="" if n else "dim")
                if reason == self.current:
                    label.append("  (now)", style="cyan")
                label.append(f"\n  {REASON_WORDS[reason]}", style="dim")
                options.append(Option(label, id=reason))
            yield OptionList(*options, id="review-reasons")
        yield footer()

    def on_mount(self) -> None:
        choices = self.query_one(OptionList)
        choices.highlighted = choices.get_option_index(self.current or "")
        choices.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id or "")

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReviewScreen(CrewletScreen):
    CSS_PATH = "review.tcss"
    BINDINGS = [
        Binding("a", "act('accept')", "Accept"),
        Binding("v", "act('verify')", "Verify"),
        Binding("d", "act('dispute')", "Dispute"),
        Binding("x", "act('archive')", "Archive"),
        Binding("y", "answer('agree')", "Agree"),
        Binding("n", "answer('disagree')", "Disagree"),
        Binding("o", "open", "Open"),
        Binding("f", "filter", "Filter"),
        Binding("r", "refresh", "Refresh"),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
        Binding("g", "cursor('first')", "First", show=False),
        Binding("G", "cursor('last')", "Last", show=False),
        *COMMON_BINDINGS,
    ]

    def __init__(self) -> None:
        super().__init__(classes="review-screen")
        self.sub_title = "review"
        self.view: ReviewView | None = None
        self.reason: str | None = None          # the filter: entries carrying this reason
        self._review: Review | None = None
        self._entries: dict[str, QueuedEntry] = {}
        self._audits: dict[str, OpenAudit] = {}
        self._proposals: dict[str, dict[str, Any]] = {}

    @property
    def review(self) -> Review:
        if self._review is None:
            from core.bank.review import Review

            self._review = Review(self.session.bank)
        return self._review

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Vertical(id="review-main", classes="main"):
            yield Static(Text("Review: reading the queue…", style="dim"), id="review-title", classes="screen-title")
            yield TriagePanel(id="triage-panel")
            yield Static(id="review-notice", classes="notice")
            yield OptionList(id="review-rows")
            yield Static(id="review-detail")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        self.query_one("#review-notice", Static).display = False
        self.query_one("#review-rows", OptionList).focus()
        self.reload()

    # -- reading ---------------------------------------------------------------------------------------
    def reload(self) -> None:
        self.call_in_background(read_review, self.review, self.reason, self.session.handle, what="review queue",
                                on_done=self._show, on_fail=self._not_read)

    def refresh_rows(self) -> None:
        self.reload()

    def action_refresh(self) -> None:
        self.reload()

    def on_screen_resume(self) -> None:
        if self.view is not None:     # back from an entry's screen: what was done there shows here
            self.reload()

    def _not_read(self, error: BaseException) -> None:
        self.query_one("#review-title", Static).update(
            Text(f"cannot read the review queue: {error_text(error)}", style="bold red"))

    def _show(self, view: ReviewView) -> None:
        self.view = view
        queue = view.queue
        self._entries = {q.entry.id: q for q in queue.entries}
        self._audits = {a.decision.id: a for a in queue.audits}
        self._proposals = {str(p.get("id")): p for p in queue.proposals}
        self.query_one("#review-title", Static).update(self._title(view))
        self.query_one(TriagePanel).show(view.status)
        rows = self.query_one("#review-rows", OptionList)
        keep_id = rows.highlighted_option.id if rows.highlighted_option is not None else None
        keep_index = rows.highlighted
        rows.clear_options()
        rows.add_options(self._rows(view))
        self._highlight(rows, keep_id, keep_index)
        self._show_detail()
        self.refresh_bindings()
        self._keep_in_view()

    def _keep_in_view(self) -> None:
        """The highlighted row on the screen once the layout settles: a notice shown above the list makes it
        shorter after the highlight moved."""
        self.call_after_refresh(self.query_one("#review-rows", OptionList).scroll_to_highlight)

    @staticmethod
    def _title(view: ReviewView) -> Text:
        queue = view.queue
        n, m = len(queue.entries), len(queue.audits)
        title = Text()
        title.append("Review", style="bold")
        title.append(f"  {n:,} entr{'ies' if n != 1 else 'y'} waiting", style="bold" if n else "dim")
        title.append(f" · {m:,} open audit{'s' if m != 1 else ''}", style="bold" if m else "dim")
        if view.reason:
            title.append(f" · reason {view.reason}", style="yellow")
            title.append(" (f: every reason)", style="dim")
        return title

    def _rows(self, view: ReviewView) -> list[Option]:
        queue, out = view.queue, []
        if queue.proposals:
            out.append(Option(Text(f"Page proposals ({len(queue.proposals):,})", style="bold"), disabled=True))
            for proposal in queue.proposals[:SHOWN]:
                folds = len(proposal.get("entries") or [])
                line = (f"{proposal.get('page') or proposal.get('id')}: folds {folds} "
                        f"{'entry' if folds == 1 else 'entries'} into its body · by {proposal.get('proposed_by')}")
                out.append(Option(Text(clean_line(line), no_wrap=True, overflow="ellipsis"),
                                  id=f"proposal:{proposal.get('id')}"))
        else:
            # consolidation (spec 003) stores page proposals: a page's f, `crewlet page consolidate`, consolidate_page
            out.append(Option(Text("Page proposals: none (f on a page folds its entries into its body)", style="dim"),
                              disabled=True))
        heading = f"Entries waiting for a person ({len(queue.entries):,})"
        if view.reason:
            heading += f" with {view.reason}"
        out.append(Option(Text(heading, style="bold"), disabled=True))
        for queued in queue.entries[:SHOWN]:
            out.append(Option(entry_row(queued), id=f"entry:{queued.entry.id}"))
        if len(queue.entries) > SHOWN:
            out.append(Option(Text(f"… {len(queue.entries) - SHOWN:,} more: crewlet review"
                                   + (f" --reason {view.reason}" if view.reason else ""), style="dim"),
                              disabled=True))
        if not queue.entries:
            out.append(Option(Text(f"none with {view.reason} (f: another reason)" if view.reason
                                   else "none: nothing waits for a person", style="dim"), disabled=True))
        out.append(Option(Text(f"Open audits ({len(queue.audits):,})", style="bold"), disabled=True))
        for audit in queue.audits[:SHOWN]:
            out.append(Option(audit_row(audit), id=f"audit:{audit.decision.id}"))
        if len(queue.audits) > SHOWN:
            out.append(Option(Text(f"… {len(queue.audits) - SHOWN:,} more: crewlet review", style="dim"),
                              disabled=True))
        if not queue.audits:
            out.append(Option(Text("none: triage's acts drawn for audit wait here (triage on)", style="dim"),
                              disabled=True))
        return out

    @staticmethod
    def _highlight(rows: OptionList, keep_id: str | None, keep_index: int | None) -> None:
        """The row highlighted before, if it is still there; else the row now where it stood (a row acted on
        leaves the queue: the next one takes its place); else the first row that can be acted on."""
        if keep_id is not None:
            try:
                rows.highlighted = rows.get_option_index(keep_id)
                return
            except Exception:  # noqa: BLE001 - OptionDoesNotExist: it left the queue
                pass
        enabled = [i for i in range(rows.option_count) if not rows.get_option_at_index(i).disabled]
        if not enabled:
            rows.highlighted = None
            return
        start = keep_index if keep_index is not None else 0
        rows.highlighted = next((i for i in enabled if i >= start), enabled[-1])

    # -- the highlighted row -----------------------------------------------------------------------------
    def _selected(self) -> tuple[str, Any] | None:
        """("entry", QueuedEntry), ("audit", OpenAudit) or ("proposal", its JSON) for the highlighted row, or None."""
        rows = self.query_one("#review-rows", OptionList)
        option = rows.highlighted_option
        ident = option.id if option is not None else None
        if not ident:
            return None
        kind, _, key = ident.partition(":")
        found: Any = (self._entries.get(key) if kind == "entry" else self._audits.get(key) if kind == "audit"
                      else self._proposals.get(key) if kind == "proposal" else None)
        return (kind, found) if found is not None else None

    @on(OptionList.OptionHighlighted, "#review-rows")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_detail()
        self.refresh_bindings()     # what can be done follows the row

    @on(OptionList.OptionSelected, "#review-rows")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_open()

    def _show_detail(self) -> None:
        detail = self.query_one("#review-detail", Static)
        selected = self._selected()
        now = now_ms()
        if selected is None:
            detail.update(Text("↑ ↓ pick an entry or an audit · f filters the entries by reason", style="dim"))
            return
        kind, item = selected
        if kind == "entry":
            detail.update(self._entry_detail(item, now))
        elif kind == "proposal":
            detail.update(self._proposal_detail(item))
        else:
            detail.update(self._audit_detail(item, now))

    @staticmethod
    def _proposal_detail(proposal: dict[str, Any]) -> Text:
        entries = ", ".join(str(e) for e in proposal.get("entries") or [])
        out = Text(f"proposal {proposal.get('id')} · {proposal.get('page')} · by {proposal.get('proposed_by')}, "
                   f"against revision {proposal.get('base_revision')}", no_wrap=True, overflow="ellipsis")
        out.append(f"\nfolds {entries}" if entries else "\nfolds no entry", style="dim")
        if proposal.get("stale"):
            out.append("\nthe page changed since: accepting it is refused (decline it)", style="yellow")
        out.append("\na person decides: a accepts (saves the body, the entries CONSOLIDATED), x declines", style="bold")
        return out

    @staticmethod
    def _about(entry: Entry, now: int) -> Text:
        """Its id, page, author and age, then its body's first line (a proposed entry's status goes without saying;
        an audited one's is said: what triage left it as)."""
        out = Text()
        out.append(entry.id, style="bold")
        out.append(f" · {clean_line(entry.page)}", style="dim")
        if entry.status != PROPOSED:
            out.append(" · ", style="dim")
            out.append_text(status_text(entry.status))
        out.append(f" · {clean_line(entry.author)} ({entry.author_kind}), {age(entry.created_at, now)}", style="dim")
        out.append("\n" + first_line(entry.body))
        return out

    def _entry_detail(self, queued: QueuedEntry, now: int) -> Text:
        out = self._about(queued.entry, now)
        # the detail has five lines, two of them for the reasons: each in words, or past two the first in words and
        # the rest named on one line (f filters by any of them; help and the filter say each in words)
        worded = queued.reasons if len(queued.reasons) <= 2 else queued.reasons[:1]
        for reason in worded:
            out.append(f"\n{reason}", style="yellow")
            out.append(f": {REASON_WORDS.get(reason, '')}", style="dim")
        if len(queued.reasons) > len(worded):
            out.append("\nand ", style="dim")
            out.append(", ".join(queued.reasons[len(worded):]), style="yellow")
        decision = queued.decision
        out.append("\ntriage: ", style="dim")
        if decision is None:
            off = self.view is not None and self.view.status.mode == OFF
            out.append("off: a person decides every entry" if off else "not decided yet (its duty decides it next)",
                       style="dim")
        else:
            out.append(decision.decision, style="cyan")
            if decision.fold_into:
                out.append(f" into {decision.fold_into}")
            if decision.refusal:
                out.append(f" ({decision.refusal.replace('_', ' ')})")
            said = f", {decision.mode}, {age(decision.at, now)}"
            if queued.stale:
                said += "; the entry changed since: triage decides again"
            elif decision.held:
                said += "; held back by " + ", ".join(decision.held)
            elif decision.decision == ESCALATE:
                said += "; a person decides"
            elif not decision.acted:
                said += "; it changed nothing (shadow)"
            out.append(said, style="dim")
        return out

    def _audit_detail(self, audit: OpenAudit, now: int) -> Text:
        out = self._about(audit.entry, now)
        # the audit's one question (core's words), a sentence a line: each fits 80 columns, where the detail's lines
        # are cut rather than wrapped (the footer says the keys: y Agree, n Disagree)
        for sentence in re.split(r"(?<=\.) +", clean_line(audit.question))[:3]:
            out.append("\n" + sentence, style="bold")
        return out

    def action_cursor(self, where: str) -> None:
        rows = self.query_one("#review-rows", OptionList)
        {"down": rows.action_cursor_down, "up": rows.action_cursor_up, "first": rows.action_first,
         "last": rows.action_last}[where]()

    def action_open(self) -> None:
        selected = self._selected()
        if selected is not None:
            kind, item = selected
            self.crewlet.open_entry(item.entry.id)

    def action_filter(self) -> None:
        counts = self.view.counts if self.view is not None else {}

        def picked(reason: str | None) -> None:
            if reason is not None and (reason or None) != self.reason:
                self.reason = reason or None
                self.reload()

        self.app.push_screen(ReasonFilterModal(counts, self.reason), picked)

    # -- a person's actions --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers what the highlighted row allows: an entry's actions as its status allows them (as on
        the entry screen), an audit's two answers; open for either."""
        if action not in ("act", "answer", "open"):
            return True
        selected = self._selected()
        if selected is None:
            return False
        kind, item = selected
        if action == "open":
            return kind != "proposal"
        if action == "answer":
            return kind == "audit"
        if kind == "proposal":
            return str(parameters[0]) in (ACCEPT, ARCHIVE)      # a: accept it, x: decline it
        if kind != "entry":
            return False
        entry: Entry = item.entry
        name = str(parameters[0])
        if name == VERIFY and entry.verified_by and entry.status in IN_USE:
            return False
        return entry.status in ACTIONS[name][0]

    def _is_agent(self) -> bool:
        who = self.session.who()
        return who is not None and who.is_agent

    def action_act(self, action: str) -> None:
        selected = self._selected()
        if selected is not None and selected[0] == "proposal" and action in (ACCEPT, ARCHIVE):
            self._decide_proposal(str(selected[1].get("id")), "accept" if action == ACCEPT else "decline")
            return
        if selected is None or selected[0] != "entry" or action not in WORDS:
            return
        entry: Entry = selected[1].entry
        if self._is_agent() and AGENT not in ACTIONS[action][2]:
            # a person's action: the store refuses the agent in one line, before anybody types a reason
            self._write(entry.id, action, None)
            return
        label, _done, question = WORDS[action]

        def reason(text: str | None) -> None:
            if text is not None:
                self._write(entry.id, action, text.strip() or None)

        self.app.push_screen(InputModal(f"{label} entry {entry.id}", f"{question} A reason (optional):", ok=label,
                                        allow_empty=True, id="review-reason"), reason)

    def _write(self, entry_id: str, action: str, reason: str | None) -> None:
        review = self.review
        call = {ACCEPT: review.accept, VERIFY: review.verify, DISPUTE: review.dispute, ARCHIVE: review.archive}[action]
        self.call_in_background(call, entry_id, actor=self.session.handle, reason=reason,
                                what=f"entry {WORDS[action][1]}", on_done=self._acted, on_fail=self._refused,
                                on_gone=self._acted_words, writes=True)

    def _decide_proposal(self, proposal_id: str, decision: str) -> None:
        from core.bank.consolidation import Consolidation

        consolidation = Consolidation(self.review.bank)
        self.call_in_background(consolidation.decide, proposal_id, decision, actor=self.session.handle,
                                what=f"proposal {decision}d", on_done=self._proposal_decided, on_fail=self._refused,
                                on_gone=self._proposal_words, writes=True)

    @staticmethod
    def _proposal_words(proposal: Any) -> str:
        return f"proposal {proposal.id} for {proposal.page}: {proposal.state}"

    def _proposal_decided(self, proposal: Any) -> None:
        self._say(self._proposal_words(proposal))
        self.reload()

    def _acted(self, entry: Entry) -> None:
        self._say(f"entry {entry.id}: {entry.status}, {entry.tier}")
        self.reload()

    @staticmethod
    def _acted_words(entry: Entry) -> str:
        return f"entry {entry.id}: {entry.status}"

    def action_answer(self, answer: str) -> None:
        selected = self._selected()
        if selected is None or selected[0] != "audit" or answer not in (AGREE, DISAGREE):
            return
        audit: OpenAudit = selected[1]
        if answer == AGREE or self._is_agent():     # an agent: the store refuses it, unasked
            self._send_answer(audit.decision.id, answer)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._send_answer(audit.decision.id, answer)

        self.app.push_screen(ConfirmModal(f"Disagree with triage on {audit.entry.id}?", self._undo_words(audit),
                                          yes="Disagree, undo it", no="Cancel", id="review-disagree"), confirmed)

    @staticmethod
    def _undo_words(audit: OpenAudit) -> str:
        decision, body = audit.decision, f"“{first_line(audit.entry.body)}”"
        did = {DECIDED_ACCEPT: f"accepted {body}", CORROBORATE: f"folded {body} into {decision.fold_into}",
               REFUSE: f"refused {body}"}.get(decision.decision, f"decided {decision.decision} on {body}")
        undone = {DECIDED_ACCEPT: "it is archived (out of use)"}.get(decision.decision,
                                                                    "it is put into use (STANDING)")
        return f"Triage {did} on its own. Disagreeing undoes it: {undone}."

    def _send_answer(self, decision_id: str, answer: str) -> None:
        self.call_in_background(self.review.answer_audit, decision_id, answer, actor=self.session.handle,
                                what=f"audit answered ({answer})", on_done=self._answered, on_fail=self._refused,
                                on_gone=self._answered_words, writes=True)

    def _answered(self, decision: DecisionView) -> None:
        self._say(self._answered_words(decision))
        self.reload()

    def _answered_words(self, decision: DecisionView) -> str:
        if decision.answer == AGREE:
            return f"audit of entry {decision.entry_id}: agreed, triage's {decision.decision} stands"
        return f"audit of entry {decision.entry_id}: disagreed, " + UNDONE.get(decision.decision, "undone")

    def _refused(self, error: BaseException) -> None:
        words = refusal_words(error, self.session.handle)
        self._say(words)
        self.notify(words, severity="error", markup=False, timeout=8)

    def _say(self, words: str) -> None:
        notice = self.query_one("#review-notice", Static)
        notice.update(Text(words, style="bold"))
        notice.display = bool(words)
        self._keep_in_view()
