"""`crewlet review`: the review queue (spec 003, "The review queue") — what waits for a person, and a person's
decisions on it.

`crewlet review [--reason R]` lists, in the spec's order, the open consolidation proposals (decided with
`crewlet review proposal ID accept|decline`, cli_consolidate.py), every proposed entry with the reasons it waits for a
person and triage's recorded decision, then the open audits of what triage did alone.

`crewlet review accept|dispute|verify|archive ID` and `crewlet review audit DECISION_ID agree|disagree` are a
person's decisions (core.bank.review.Review): the store refuses each of them to an agent (`--as` naming one),
in one line, and writes nothing. Each decision on an entry triage decided about is a verdict on triage, and
may change whether a type of decision acts alone (`crewlet triage status`).

Exit codes: 0 done; 1 refused or failed (one line on stderr; with `--json` the error as JSON on stdout); 2 usage.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from core.pages.triage_model import ANSWERS, REASONS, SHADOW

from .cli_common import JSON_OPT, actor, console, emit_json, handle_errors
from .cli_entries import ID_ARG, entry_bank, entry_json, now_ms, print_entry
from .cli_triage import decided, decision_line, print_decision
from .fmt import plural
from .sanitize import markup_safe

if TYPE_CHECKING:
    from core.bank.review import QueuedEntry, ReviewQueue

app = typer.Typer()          # `crewlet review …` (cli_root adds it to `crewlet`)
review_app = typer.Typer(help="The review queue: what waits for a person (proposed entries with their reasons, "
                              "open audits of triage), and a person's decisions on it.")
app.add_typer(review_app, name="review")

FILTER_OPT = typer.Option(None, "--reason", metavar="REASON", help="Only the entries waiting for this reason: "
                          + ", ".join(REASONS) + ".")
WHY_OPT = typer.Option(None, "--reason", metavar="TEXT", help="Why, for the entry's history.")
AUDIT_ARG = typer.Argument(..., metavar="DECISION_ID", help="The audited decision's id (`crewlet review` lists them).")
ANSWER_ARG = typer.Argument(..., metavar="ANSWER", help="agree (keep what triage did) or disagree (undo it).")
DONE = {"accept": "accepted", "verify": "verified", "dispute": "disputed", "archive": "archived"}


def known_reason(reason: str | None) -> str | None:
    """--reason as the spec's table names it (any case); a name not in the table is a usage error naming them."""
    if reason is None:
        return None
    name = reason.strip().upper()
    if name not in REASONS:
        raise typer.BadParameter(f"{reason!r} is no escalation reason: give one of {', '.join(REASONS)}",
                                 param_hint="--reason")
    return name


# -- crewlet review: the queue ---------------------------------------------------------------------------------

@review_app.callback(invoke_without_command=True)
@handle_errors
def review_queue(ctx: typer.Context, reason: str | None = FILTER_OPT, as_json: bool = JSON_OPT) -> None:
    """What waits for a person: consolidation proposals, proposed entries with the reasons they wait and triage's
    recorded decision, then open audits of what triage did alone.

    Decide from here: `crewlet review accept|dispute|verify|archive ID`, `crewlet review audit DECISION_ID agree|disagree`."""
    if ctx.invoked_subcommand is not None:
        if reason is not None or as_json:
            raise typer.BadParameter(f"before a command they filter and print the listing: give them after it "
                                     f"(`crewlet review {ctx.invoked_subcommand} … --reason TEXT --json`)",
                                     param_hint="--reason/--json")
        return
    name = known_reason(reason)
    from core.bank.review import Review

    with entry_bank() as bank:
        queue = Review(bank).queue(reason=name, actor=actor())
    if as_json:
        emit_json(queue.to_json())
        return
    print_queue(queue, name)


def waits_for(q: QueuedEntry) -> str:
    """Why the entry waits: its reasons; with none, what keeps it waiting (triage off or in shadow, or not yet)."""
    if q.reasons:
        return ", ".join(q.reasons)
    if q.decision is None:
        return "a person (triage has not decided yet)"
    if q.decision.mode == SHADOW:
        return "a person (triage runs in shadow: it recorded what it would do)"
    return "a person"


def print_queue(queue: ReviewQueue, reason: str | None) -> None:
    now = now_ms()
    # the open consolidation proposals first (`crewlet page consolidate` stores them; cli_consolidate decides them)
    if queue.proposals:
        console.print(f"[bold]{plural(len(queue.proposals), 'page proposal')}[/]")
    else:
        console.print("[dim]page proposals: none — a consolidation (`crewlet page consolidate`) proposes one[/]")
    for p in queue.proposals:
        stale = " [yellow](the page changed since: accepting it is refused)[/]" if p.get("stale") else ""
        console.print(f"  [bold]{markup_safe(str(p['id']))}[/] {markup_safe(str(p['title']))}: folds "
                      f"{plural(len(p['entries']), 'entry', 'entries')} into its body · by "
                      f"{markup_safe(str(p['proposed_by']))}{stale}", soft_wrap=True)
        console.print(f"  [dim]decide: crewlet review proposal {markup_safe(str(p['id']))} accept|decline[/]",
                      soft_wrap=True)
    console.print()
    which = f" waiting for {reason}" if reason else ""
    console.print(f"[bold]{plural(len(queue.entries), 'proposed entry', 'proposed entries')}{which}[/]",
                  soft_wrap=True)
    if not queue.entries:
        console.print("  [dim]none" + (" (`crewlet review` without --reason lists every one)" if reason else "")
                      + "[/]", soft_wrap=True)
    for q in queue.entries:
        console.print()
        console.print(f"[dim]under[/] {markup_safe(q.entry.page)}", soft_wrap=True)
        print_entry(q.entry, now)
        console.print(f"  [yellow]waits for:[/] {markup_safe(waits_for(q))}", soft_wrap=True)
        if q.decision is not None:
            console.print(f"  [bold]triage[/] {decision_line(q.decision, now)}", soft_wrap=True)
            if q.stale:
                console.print("  [dim]the entry changed since: triage decides again on its next run[/]")
        else:
            console.print("  [dim]triage: no decision yet[/]")
        console.print(f"  [dim]decide: crewlet review accept|dispute|verify|archive {markup_safe(q.entry.id)}[/]",
                      soft_wrap=True)
    console.print()
    console.print(f"[bold]{plural(len(queue.audits), 'open audit')}[/]")
    if not queue.audits:
        console.print("  [dim]none[/]")
    for a in queue.audits:
        console.print()
        console.print(f"[bold]{markup_safe(a.decision.id)}[/] {markup_safe(a.question)}", soft_wrap=True)
        print_entry(a.entry, now, indent="  ")
        print_decision(a.decision, now, indent="  ")
        console.print(f"  [dim]answer: crewlet review audit {markup_safe(a.decision.id)} agree|disagree[/]",
                      soft_wrap=True)
    # HARMFUL_SIGNAL (issue 37, core/bank/upkeep.py): listed only where there is one, so the queue reads as before
    for h in queue.harmful:
        console.print()
        done = ("archived by upkeep; accept to put it back" if h.archived_by_upkeep
                else "in use; archive it, or leave it")
        console.print(f"[bold]HARMFUL_SIGNAL[/] entry {markup_safe(h.entry_id)}: {h.harmful} harmful outcomes, "
                      f"{h.helpful} helpful — {done}", soft_wrap=True)


# -- a person's decisions ------------------------------------------------------------------------------------

def decide(entry_id: str, action: str, reason: str | None, as_json: bool) -> None:
    """accept, verify, dispute, archive through the review (the bank's action, then agreement settled)."""
    from core.bank.review import Review, latest_decision

    with entry_bank() as bank:
        entry = getattr(Review(bank), action)(entry_id, actor=actor(), reason=reason)
        view = latest_decision(bank.conn, entry.id)
    now = now_ms()
    if as_json:
        emit_json(entry_json(entry, now) | {"triage": view.to_json() if view is not None else None})
        return
    console.print(f"{DONE[action]} [bold]{markup_safe(entry.id)}[/]: {entry.status} · {entry.tier}", soft_wrap=True)
    if view is not None:
        console.print(f"  [dim]triage had decided: {markup_safe(decided(view))} ({view.mode}, decision "
                      f"{markup_safe(view.id)}) — `crewlet triage status` sets people's decisions against triage's[/]",
                      soft_wrap=True)


@review_app.command("accept")
@handle_errors
def review_accept(entry_id: str = ID_ARG, reason: str | None = WHY_OPT, as_json: bool = JSON_OPT) -> None:
    """Put a proposed entry in use (STANDING). A person's decision, refused to an agent."""
    decide(entry_id, "accept", reason, as_json)


@review_app.command("dispute")
@handle_errors
def review_dispute(entry_id: str = ID_ARG, reason: str | None = WHY_OPT, as_json: bool = JSON_OPT) -> None:
    """Hold an entry back: it contradicts the code or another entry (DISPUTED). A person's decision."""
    decide(entry_id, "dispute", reason, as_json)


@review_app.command("verify")
@handle_errors
def review_verify(entry_id: str = ID_ARG, reason: str | None = WHY_OPT, as_json: bool = JSON_OPT) -> None:
    """Confirm an entry: HUMAN_VERIFIED (a proposed one is accepted too). A person's decision."""
    decide(entry_id, "verify", reason, as_json)


@review_app.command("archive")
@handle_errors
def review_archive(entry_id: str = ID_ARG, reason: str | None = WHY_OPT, as_json: bool = JSON_OPT) -> None:
    """Take an entry out of use: ARCHIVED, kept for the record.

    A person's decision (an agent archives only its own proposed entries, with `crewlet entry archive`)."""
    decide(entry_id, "archive", reason, as_json)


@review_app.command("audit")
@handle_errors
def review_audit(decision_id: str = AUDIT_ARG, answer: str = ANSWER_ARG, as_json: bool = JSON_OPT) -> None:
    """Answer an audit of what triage did alone: agree keeps it, disagree undoes it.

    Undoing archives an accepted entry and puts a folded or refused one in use.

    A person's answer, refused to an agent."""
    said = answer.strip().lower()
    if said not in ANSWERS:
        raise typer.BadParameter(f"{answer!r}: answer agree or disagree", param_hint="agree|disagree")
    from core.bank.review import Review

    with entry_bank() as bank:
        view = Review(bank).answer_audit(decision_id, said, actor=actor())
        entry = bank.show(view.entry_id, actor=actor())
    now = now_ms()
    if as_json:
        emit_json({"answer": said, "decision": view.to_json(), "entry": entry_json(entry, now)})
        return
    console.print(f"{said}d: triage's {decision_line(view, now)}; entry [bold]{markup_safe(entry.id)}[/] is "
                  f"{entry.status}", soft_wrap=True)


__all__ = ["app", "review_app"]
