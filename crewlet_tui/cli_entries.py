"""`crewlet entries` and `crewlet entry …`: a page's entries (spec 003, "Entries") read and decided by people.

Each command is a thin reading of `core.bank.entries.EntryBank`: the bank asks who acts (`--as` or CREWLET_AS;
the operator by default), checks the body, the scope and every citation, and refuses with one line; this module
turns its answers into words, and its refusals into one line on stderr that says what to do from a shell.

Exit codes: 0 done (an exact repeat included: it was counted as a corroboration); 1 refused or failed (one line
on stderr; with `--json` the error as JSON on stdout); 2 usage.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from core.errors import CrewletError

from .cli_common import (JSON_OPT, STATE, actor, console, emit_json, fail, handle_errors, open_node, read_body,
                         refuse_elsewhere)
from .fmt import plural
from .sanitize import clean_text, markup_safe

if TYPE_CHECKING:
    from core.bank.entries import Entry, EntryBank
    from core.bank.trust import CitationState

app = typer.Typer()             # `crewlet entries` (cli_root adds it to `crewlet`)
entry_app = typer.Typer(help="One entry of the knowledge bank, one fact under a page: show, add, supersede, edit, "
                             "accept, verify, dispute, archive, recheck.", no_args_is_help=True)
app.add_typer(entry_app, name="entry")

REF_ARG = typer.Argument(..., metavar="REF", help="Page id or CONTAINER/Title.")
ID_ARG = typer.Argument(..., metavar="ID", help="The entry's id (`crewlet entries REF` lists a page's).")
REASON_OPT = typer.Option(None, "--reason", metavar="TEXT", help="Why, for the entry's history.")
BODY_FILE_OPT = typer.Option(None, "--body-file", metavar="FILE", help="Read the body from a file, or - for stdin.")
KIND_HELP = "FACT (the default), DECISION, CONVENTION or GOTCHA."
SCOPE_HELP = "A folder it applies to: apps/server, or NAME:apps/server where several repositories are configured."
CITE_HELP = ('A citation as JSON (repeat for more, at most 10): code {"repository": NAME, "path": P, "lines": '
             '[START, END], "commit": SHA, "quote"?: TEXT} or a link {"link": URL-or-ref, "kind": issue|'
             'pull_request|comment|run}.')
CITATIONS_FILE_HELP = "A file holding the citations as one JSON list (or - for stdin)."

# what a person can do next with an entry in each status (said under a listing and after a write)
NEXT_STEP = {"PROPOSED": "accept|verify|archive", "DISPUTED": "accept|archive", "STANDING": "verify|dispute|archive",
             "CONSOLIDATED": "verify|dispute|archive"}


# -- opening the bank, and its refusals in a shell's words ----------------------------------------------------

@contextmanager
def entry_bank(what: str = "entries") -> Iterator[EntryBank]:
    """The node's entries, for the actor of --as (the configured operator without it); the repositories it
    opened to read citations are closed with it. Entries live under this node's own pages: on a company whose
    knowledge lives on a remote site, refused in one line naming `what` (as `crewlet pages` is)."""
    from core.bank.entries import EntryBank

    with open_node() as node, EntryBank(node) as bank, said_for_a_shell():
        refuse_elsewhere(node, what)
        yield bank


def acting_as() -> str:
    """How this command was told who acts: `--as eng-bot` or `CREWLET_AS=eng-bot`."""
    return f"CREWLET_AS={STATE.actor}" if STATE.actor_from_env else f"--as {STATE.actor}"


@contextmanager
def said_for_a_shell() -> Iterator[None]:
    """The bank's refusals with the step a person at this shell takes: who acted, when an agent was refused a
    person's action (it acts only because --as or CREWLET_AS named it); how to open a LOCKED page."""
    try:
        yield
    except CrewletError as exc:
        if exc.code in ("forbidden", "locked") and STATE.actor:
            leave = "unset CREWLET_AS" if STATE.actor_from_env else "leave out --as"
            if exc.code == "locked":
                note = (f" (acting as {acting_as()}: a person adds it — {leave} or name a person — or opens the page "
                        "with `crewlet page policy REF curated`)")
            else:
                note = f" (acting as {acting_as()}: {leave}, or name a person, to act as one)"
            raise exc.with_note(note) from exc
        raise


def parse_cites(cites: list[str] | None, citations_file: str | None) -> list[dict[str, Any]] | None:
    """--cite JSON (each one object) or --citations-file F (one JSON list); None when neither is given. JSON that
    does not parse is a usage error naming the option; what a citation must hold is the bank's to check."""
    if cites and citations_file:
        raise typer.BadParameter("give --cite or --citations-file, not both", param_hint="--cite")
    if citations_file is not None:
        return read_citations_file(citations_file)
    if not cites:
        return None
    out = []
    for i, text in enumerate(cites, 1):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"citation {i} is not JSON ({exc.msg} at column {exc.colno}): quote it whole, "
                                     """e.g. --cite '{"link": "acme/api#12", "kind": "issue"}'""",
                                     param_hint="--cite") from None
        if not isinstance(value, dict):
            raise typer.BadParameter(f"citation {i} is JSON but not an object: give one {{...}} per --cite",
                                     param_hint="--cite")
        out.append(value)
    return out


def read_citations_file(path: str) -> list[dict[str, Any]]:
    """The citations in a file (or stdin): one JSON list of objects. Refused in one line naming the file."""
    name = "standard input" if path == "-" else path
    if path != "-" and not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise CrewletError(f"--citations-file {path} {what}", fix="give a file holding a JSON list of citations",
                           code="invalid_citations")
    text = read_body(path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CrewletError(f"{name} is not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})",
                           fix="give a JSON list of citations", code="invalid_citations") from None
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise CrewletError(f"{name} is not a JSON list of objects", fix="write [{...}, {...}], one object a citation",
                           code="invalid_citations")
    return value


def body_of(body: str | None, body_file: str | None, *, required: bool = True) -> str | None:
    """BODY or --body-file F (- for stdin), exactly one of them (none for an edit that keeps the body)."""
    if body is not None and body_file is not None:
        raise typer.BadParameter("give the BODY or --body-file, not both", param_hint="--body-file")
    if body_file is not None:
        return read_body(body_file)
    if body is None and required:
        raise typer.BadParameter("give the entry's BODY, or --body-file F (- reads stdin)", param_hint="BODY")
    return body


# -- words ----------------------------------------------------------------------------------------------------

def now_ms() -> int:
    from core.clock import calendar_now_ms

    return calendar_now_ms()


def age(ms: int | None, now: int) -> str:
    from core.bank.trust import ago

    return ago(now - ms) if ms else ""


def entry_json(entry: Entry, now: int) -> dict[str, Any]:
    return entry.to_json(now) | {"age": age(entry.created_at, now)}


def cited(state: CitationState) -> str:
    """A citation as a person reads it: `server:src/cache.py:1-4 @1a2b3c4 "quote"`, or `acme/api#12 (issue)`;
    where a recheck re-anchored it, where it stands now."""
    c = state.citation
    if "link" in c:
        return f"{c['link']} ({c.get('kind', 'link')}{', external' if c.get('external') else ''})"
    if "path" not in c:
        return "(no citation)"
    lines = c.get("lines") or ["?", "?"]
    text = f"{c.get('repository')}:{c['path']}:{lines[0]}-{lines[-1]} @{str(c.get('commit', ''))[:7]}"
    if c.get("quote"):
        text += f' "{c["quote"]}"'
    anchor = state.anchor or {}
    if anchor and (anchor.get("path") != c["path"] or anchor.get("lines") != c.get("lines")):
        now_lines = anchor.get("lines") or ["?", "?"]
        text += f" → now {anchor.get('path')}:{now_lines[0]}-{now_lines[-1]}"
    return text


def print_entry(entry: Entry, now: int, *, indent: str = "") -> None:
    """An entry's head line, body, scope, citations (each with its last check and its age) and corroborations."""
    head = (f"{indent}[bold]{markup_safe(entry.id)}[/]  {entry.kind} · {entry.status} · [bold]{entry.tier}[/] · "
            f"added {age(entry.created_at, now)} by {markup_safe(entry.author)}")
    console.print(head, soft_wrap=True)
    for line in clean_text(entry.body).split("\n"):
        console.print(f"{indent}  {markup_safe(line)}", soft_wrap=True)
    more = []
    if entry.scope:
        more.append(f"scope {markup_safe(entry.scope)}")
    if entry.supersedes:
        more.append(f"corrects {markup_safe(entry.supersedes)}")
    if entry.superseded_by:
        more.append(f"superseded by {markup_safe(entry.superseded_by)}")
    if entry.corroborations:
        more.append(f"corroborated {entry.corroborations}× by {markup_safe(', '.join(entry.corroborated_by))}")
    if entry.status in ("DISPUTED", "ARCHIVED") and entry.status_reason:
        more.append(f"{entry.status.lower()}: {markup_safe(entry.status_reason)}")
    if more:
        console.print(f"{indent}  [dim]{' · '.join(more)}[/]", soft_wrap=True)
    if not entry.citations:
        console.print(f"{indent}  [dim]cites nothing[/]")
    for c in entry.citations:
        console.print(f"{indent}  [{c.index}] {markup_safe(cited(c))} — {markup_safe(c.said(now))}", soft_wrap=True)


# -- crewlet entries ------------------------------------------------------------------------------------------

@app.command("entries")
@handle_errors
def entries_cmd(
    ref: str | None = typer.Argument(None, metavar="[REF]", help="Page id or CONTAINER/Title."),
    all_: bool = typer.Option(False, "--all", help="Every entry of the page: those out of use (proposed, "
                              "disputed, superseded, archived) too."),
    needs_person: bool = typer.Option(False, "--needs-person", help="No REF: every entry a person must look at "
                                      "(proposed, disputed, or its cited code changed or went), each with why."),
    as_json: bool = JSON_OPT,
) -> None:
    """A page's entries in use, or every entry that waits for a person (--needs-person).

    Each with its kind, status, trust tier, age, corroborations, and each citation's last check and its age.

    Grounded and verified entries come first. Each cited file is read at its branch head: one changed since says so."""
    if needs_person:
        if ref is not None or all_:
            raise typer.BadParameter("--needs-person lists every page's: give no REF and no --all",
                                     param_hint="--needs-person")
        return print_needs_person(as_json)
    if ref is None:
        raise typer.BadParameter("give a page REF, or --needs-person for what waits on a person", param_hint="REF")
    from core.pages.entry_model import IN_USE

    with entry_bank() as bank:
        page = bank.kb.resolve(ref, actor=actor())
        policy = bank.policy(page.id, actor=actor())
        listed = bank.entries(page.id, statuses=None if all_ else IN_USE, at_head=True, actor=actor())
    now = now_ms()
    if as_json:
        emit_json({"page": {"id": page.id, "container": page.container, "title": page.title}, "policy": policy,
                   "all": all_, "entries": [entry_json(e, now) for e in listed]})
        return
    what = plural(len(listed), "entry", "entries") + ("" if all_ else " in use")
    console.print(f"[bold]{markup_safe(page.container)}/{markup_safe(page.title)}[/] — {what} · "
                  f"policy {policy}", soft_wrap=True)
    if not listed:
        hint = "" if all_ else " (--all shows those out of use too)"
        console.print(f"[dim]no entries{'' if all_ else ' in use'}{hint}; `crewlet entry add {markup_safe(ref)} BODY` "
                      "adds one[/]", soft_wrap=True)
    for entry in listed:
        console.print()
        print_entry(entry, now)


def print_needs_person(as_json: bool) -> None:
    with entry_bank() as bank:
        waiting = bank.needs_person(actor=actor())
    now = now_ms()
    if as_json:
        emit_json({"needs_person": [{"entry": entry_json(n.entry, now), "reasons": n.reasons} for n in waiting]})
        return
    if not waiting:
        console.print("[dim]nothing waits for a person[/]")
        return
    console.print(f"[bold]{plural(len(waiting), 'entry needs', 'entries need')} a person[/]")
    for n in waiting:
        console.print()
        console.print(f"[dim]under[/] {markup_safe(n.entry.page)}", soft_wrap=True)
        print_entry(n.entry, now)
        for why in n.reasons:
            console.print(f"  [yellow]why:[/] {markup_safe(why)}", soft_wrap=True)
        steps = NEXT_STEP.get(n.entry.status, "archive")
        console.print(f"  [dim]decide: crewlet entry {steps} {markup_safe(n.entry.id)}[/]", soft_wrap=True)


# -- crewlet entry show -----------------------------------------------------------------------------------------

@entry_app.command("show")
@handle_errors
def entry_show(entry_id: str = ID_ARG, as_json: bool = JSON_OPT) -> None:
    """One entry, with every check of its citations, its corroborations and its history.

    Its page, kind, status, tier, author and age. Each cited file is read at its branch head.

    Then triage's latest decision about it (`crewlet triage show ID` says what that decision read)."""
    from core.bank.review import latest_decision

    from .cli_triage import print_decision

    with entry_bank() as bank:
        entry = bank.show(entry_id, at_head=True, actor=actor())
        decision = latest_decision(bank.conn, entry.id)
    now = now_ms()
    if as_json:
        emit_json(entry_json(entry, now) | {"triage": decision.to_json() if decision is not None else None})
        return
    console.print(f"[dim]under[/] {markup_safe(entry.page)} [dim]({markup_safe(entry.page_id)})[/]", soft_wrap=True)
    print_entry(entry, now)
    if entry.verified_by:
        console.print(f"  verified by {markup_safe(entry.verified_by)} {age(entry.verified_at, now)}")
    for c in entry.citations:
        if len(c.checks) > 1:
            console.print(f"  [dim]citation {c.index}, every check:[/]")
            for check in c.checks:
                at = f" at {str(check['commit'])[:7]}" if check.get("commit") else ""
                note = f": {check['message']}" if check.get("message") else ""
                console.print(f"    [dim]{age(check['checked_at'], now)}[/] {check['result']}{at}"
                              f"{markup_safe(note)}", soft_wrap=True)
    if entry.history:
        console.print("  [bold]history[/]")
        for h in entry.history:
            moved = h.get("to_status") != h.get("from_status")
            move = f"{h['from_status'] or '—'} → {h['to_status']}" if moved else ""
            why = f": {h['reason']}" if h.get("reason") else ""
            console.print(f"    {age(h['at'], now)} {markup_safe(h['actor'])} ({h['actor_kind']}) {h['action']} "
                          f"{move}{markup_safe(why)}", soft_wrap=True)
    print_decision(decision, now, waiting=entry.status == "PROPOSED")
    steps = NEXT_STEP.get(entry.status)
    if steps:
        console.print(f"  [dim]decide: crewlet entry {steps} {markup_safe(entry.id)}[/]", soft_wrap=True)


# -- writes ---------------------------------------------------------------------------------------------------

def said_written(entry: Entry, verb: str, as_json: bool) -> None:
    """What a write left: the entry as it stands, or, for an exact repeat, the entry it was counted for."""
    now = now_ms()
    if as_json:
        emit_json(entry_json(entry, now))
        return
    if entry.folded:
        console.print(f"not written: it repeats entry [bold]{markup_safe(entry.id)}[/] under "
                      f"{markup_safe(entry.page)}, and was counted as a corroboration of it "
                      f"({entry.corroborations} in all)", soft_wrap=True)
        return
    console.print(f"{verb} [bold]{markup_safe(entry.id)}[/] under {markup_safe(entry.page)}", soft_wrap=True)
    print_entry(entry, now, indent="  ")
    if entry.status == "PROPOSED":
        console.print(f"  [dim]proposed: a person decides (`crewlet entry accept {markup_safe(entry.id)}`)[/]",
                      soft_wrap=True)


def print_similar(similar: list[tuple[Entry, float]], as_json: bool, exc: CrewletError) -> None:
    """The entries that say nearly the same (nothing was written), then one line on how to go on: exit 1."""
    now = now_ms()
    message = (f"not written: {plural(len(similar), 'entry says', 'entries say')} nearly the "
               "same — supersede one (`crewlet entry supersede ID BODY`), or pass --distinct if yours is another fact")
    if as_json:
        fail(message, as_json=True, payload={"error": exc.code, "message": message, "similar": [
            {"entry": entry_json(e, now), "similarity": round(score, 4)} for e, score in similar]})
    for entry, score in similar:
        console.print(f"[dim]similarity {score:.2f}, under[/] {markup_safe(entry.page)}", soft_wrap=True)
        print_entry(entry, now, indent="  ")
    fail(message)


@entry_app.command("add")
@handle_errors
def entry_add(
    ref: str = REF_ARG,
    body: str | None = typer.Argument(None, metavar="[BODY]", help="The one fact (or --body-file)."),
    body_file: str | None = BODY_FILE_OPT,
    kind: str = typer.Option("FACT", "--kind", metavar="KIND", help=KIND_HELP),
    scope: str | None = typer.Option(None, "--scope", metavar="FOLDER", help=SCOPE_HELP),
    cite: list[str] | None = typer.Option(None, "--cite", metavar="JSON", help=CITE_HELP),
    citations_file: str | None = typer.Option(None, "--citations-file", metavar="FILE", help=CITATIONS_FILE_HELP),
    distinct: bool = typer.Option(False, "--distinct", help="Write it even though entries nearly the same exist: "
                                  "yours is another fact."),
    as_json: bool = JSON_OPT,
) -> None:
    """Add one fact under a page: a person's is STANDING, an agent's (--as) PROPOSED.

    Each citation is read in its repository first: one that does not hold refuses the write, naming it.

    An exact repeat of an entry is not written: it is counted as that entry's corroboration.

    Entries near it by meaning are listed and nothing is written, unless --distinct says yours is another fact."""
    if body_file == "-" and citations_file == "-":
        raise typer.BadParameter("only one of --body-file and --citations-file can read stdin", param_hint="-")
    text = body_of(body, body_file)
    citations = parse_cites(cite, citations_file)
    from core.bank.entries import SimilarEntries

    with entry_bank() as bank:
        try:
            entry = bank.add(ref, text or "", kind=kind, scope=scope, citations=citations, distinct=distinct,
                             actor=actor())
        except SimilarEntries as exc:
            print_similar(exc.similar, as_json, exc)
            return
    said_written(entry, "added", as_json)


@entry_app.command("supersede")
@handle_errors
def entry_supersede(
    entry_id: str = ID_ARG,
    body: str | None = typer.Argument(None, metavar="[BODY]", help="What is true instead (or --body-file)."),
    body_file: str | None = BODY_FILE_OPT,
    kind: str | None = typer.Option(None, "--kind", metavar="KIND", help=KIND_HELP + " Default: the old entry's."),
    scope: str | None = typer.Option(None, "--scope", metavar="FOLDER", help=SCOPE_HELP + " Default: the old entry's."),
    cite: list[str] | None = typer.Option(None, "--cite", metavar="JSON", help=CITE_HELP),
    citations_file: str | None = typer.Option(None, "--citations-file", metavar="FILE", help=CITATIONS_FILE_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Correct an entry: a new entry under the same page that supersedes it.

    A person's correction retires the old entry at once; an agent's waits, the old one in use, for a person."""
    if body_file == "-" and citations_file == "-":
        raise typer.BadParameter("only one of --body-file and --citations-file can read stdin", param_hint="-")
    text = body_of(body, body_file)
    citations = parse_cites(cite, citations_file)
    with entry_bank() as bank:
        entry = bank.supersede(entry_id, text or "", kind=kind, scope=scope, citations=citations, actor=actor())
    said_written(entry, f"added a correction of {entry_id}:", as_json)
    if not as_json and entry.status != "PROPOSED":
        console.print(f"  {markup_safe(entry_id)} is SUPERSEDED: kept for the record", soft_wrap=True)
    elif not as_json:
        console.print(f"  {markup_safe(entry_id)} stays in use until a person accepts the correction", soft_wrap=True)


@entry_app.command("edit")
@handle_errors
def entry_edit(
    entry_id: str = ID_ARG,
    body: str | None = typer.Argument(None, metavar="[BODY]", help="The new body (or --body-file; none keeps it)."),
    body_file: str | None = typer.Option(None, "--body-file", metavar="FILE",
                                         help="Read the new body from a file, or - for stdin."),
    kind: str | None = typer.Option(None, "--kind", metavar="KIND", help=KIND_HELP),
    scope: str | None = typer.Option(None, "--scope", metavar="FOLDER", help=SCOPE_HELP + " '' removes it."),
    reason: str | None = REASON_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Change what an entry says, its kind or its scope (what is not given stays).

    Its citations stay: new evidence is a correction (crewlet entry supersede).

    An agent changes only its own entry, and only while it is proposed."""
    text = body_of(body, body_file, required=False)
    if text is None and kind is None and scope is None:
        raise typer.BadParameter("give a new BODY (or --body-file), --kind or --scope", param_hint="BODY")
    with entry_bank() as bank:
        entry = bank.edit(entry_id, body=text, kind=kind, scope=scope, reason=reason, actor=actor())
    said_written(entry, "edited", as_json)


def decide(entry_id: str, action: str, reason: str | None, as_json: bool) -> None:
    """accept, verify, dispute, archive: the entry as it stands after, and what it retired."""
    from core.bank.review import Review

    with entry_bank() as bank:
        # through the review, as `crewlet review accept` goes: the bank's action, then triage's agreement settled
        # (a person's action on a triaged entry is a verdict, and may move a type's back-off)
        entry = getattr(Review(bank), action)(entry_id, reason=reason, actor=actor())
        retired = bank.show(entry.supersedes, actor=actor()) if entry.supersedes else None
    now = now_ms()
    if as_json:
        emit_json(entry_json(entry, now) | {"retired": entry_json(retired, now)
                                            if retired is not None and retired.status == "SUPERSEDED" else None})
        return
    done = {"accept": "accepted", "verify": "verified", "dispute": "disputed", "archive": "archived"}[action]
    console.print(f"{done} [bold]{markup_safe(entry.id)}[/]: {entry.status} · {entry.tier}", soft_wrap=True)
    if retired is not None and retired.status == "SUPERSEDED":
        console.print(f"  it corrects {markup_safe(retired.id)}, now SUPERSEDED: kept for the record", soft_wrap=True)


@entry_app.command("accept")
@handle_errors
def entry_accept(entry_id: str = ID_ARG, reason: str | None = REASON_OPT, as_json: bool = JSON_OPT) -> None:
    """Put a proposed (or disputed, or archived) entry in use: STANDING.

    A person's decision; a correction accepted retires the entry it corrects."""
    decide(entry_id, "accept", reason, as_json)


@entry_app.command("verify")
@handle_errors
def entry_verify(entry_id: str = ID_ARG, reason: str | None = REASON_OPT, as_json: bool = JSON_OPT) -> None:
    """Confirm an entry: HUMAN_VERIFIED (a proposed one is accepted too). A person's."""
    decide(entry_id, "verify", reason, as_json)


@entry_app.command("dispute")
@handle_errors
def entry_dispute(entry_id: str = ID_ARG, reason: str | None = REASON_OPT, as_json: bool = JSON_OPT) -> None:
    """Hold an entry back: it contradicts the code or another entry (DISPUTED).

    A person's decision; it stays held back until a person accepts or archives it."""
    decide(entry_id, "dispute", reason, as_json)


@entry_app.command("archive")
@handle_errors
def entry_archive(entry_id: str = ID_ARG, reason: str | None = REASON_OPT, as_json: bool = JSON_OPT) -> None:
    """Take an entry out of use: ARCHIVED, kept for the record.

    A person's decision, or an agent's on its own entry while proposed."""
    decide(entry_id, "archive", reason, as_json)


__all__ = ["app", "entry_app"]
