"""add_entry: one fact under a page, checked against the code it cites (spec 003, "Entries").

Written, it comes back with its status and tier and each citation's check. An exact repeat is not written: it is
counted as a corroboration of the entry that says it, and the reply says which. Entries that say nearly the same
(core/bank/entries.py `SimilarEntries`, found by core/bank/neighbours.py) are not an error either: nothing is written, and the reply lists them
— each a serve, recorded — with what to do next. Every refusal (a credential, several claims, more than ten
citations, a citation that does not hold, a LOCKED page, the CURATED page's budget) is the bank's one line, as a
tool error.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from ...bank.context import served_json
from ...bank.entries import Entry
from ...clock import calendar_now_ms
from ...pages.entry_model import MAX_ENTRY_BODY, MAX_ENTRY_CITATIONS
from ..session import Session
from .base import REF_HELP, Args, Reply, Tool

VIA = "add_entry"

KIND_HELP = ("FACT (something true about the system; the default), DECISION (a choice that was made, and why), "
             "CONVENTION (how things are done here: a rule a newcomer would not guess) or GOTCHA (something that cost "
             "somebody time).")
SCOPE_HELP = ("The folder it applies to, e.g. 'apps/server' (or 'NAME:apps/server' where the company has several "
              "repositories); it then serves work in apps/server/prisma and in apps. Leave it out for a fact about "
              "everything.")
CITATIONS_HELP = (
    f"What it rests on, at most {MAX_ENTRY_CITATIONS}. Code: {{\"repository\": NAME, \"path\": \"src/cache.py\", "
    "\"lines\": [start, end] (1-based, inclusive), \"commit\": the full or abbreviated commit id you read, "
    "\"quote\"?: a few words from those lines}. Or where it was decided: {\"link\": URL or 'owner/repo#12', "
    "\"kind\": \"issue\" | \"pull_request\" | \"comment\" | \"run\", \"external\"?: true when it came from outside "
    "the company}. The server reads each cited file at that commit: a citation that does not hold refuses the write.")

HINT_DISTINCT = ("Nothing was written. If one of these says your fact, leave it (it is in the bank already); if yours "
                 "corrects one, call supersede_entry with its id; if yours is a different fact, call add_entry again "
                 "with distinct: true.")


class AddEntryArgs(Args):
    page: str = Field(description="The page the fact belongs under. " + REF_HELP)
    body: str = Field(description=(
        f"One fact, in a sentence or three (at most {MAX_ENTRY_BODY} characters), that still makes sense out of "
        "context: 'The session cache holds for ten minutes (CACHE_TTL in src/cache.py)'. A list, a summary or "
        "several claims is refused: one entry per fact. Never a secret (refused): say where it is kept instead."))
    kind: str | None = Field(default=None, description=KIND_HELP)
    scope: str | None = Field(default=None, description=SCOPE_HELP)
    citations: list[dict[str, Any]] | None = Field(default=None, description=CITATIONS_HELP)
    distinct: bool = Field(default=False, description=(
        "true once add_entry has shown you entries that say nearly the same and yours is a different fact: it is "
        "then written without that check."))


def citation_checks(entry: Entry, now: int) -> list[str]:
    from ...bank.context import citation_words

    return [f"  [{c.index}] {citation_words(c.citation)}: {c.said(now)}" for c in entry.citations]


def written_reply(entry: Entry, *, supersedes: str | None = None) -> Reply:
    """A written entry (or the one an exact repeat was folded into) in words and as data."""
    now = calendar_now_ms()
    data: dict[str, Any] = {"written": not entry.folded, "entry": served_json(entry, now)}
    if entry.folded:
        data["corroborations"] = entry.corroborations
        lines = [f"Not written: entry {entry.id} under {entry.page} already says exactly this ({entry.status}, "
                 f"{entry.tier}), so your add was counted as a corroboration of it — {entry.corroborations} so far."]
    else:
        waits = (" It waits for a person to accept it: until then it is not served to agents."
                 if entry.status == "PROPOSED" else "")
        fix = (f" It corrects entry {supersedes}, which stays in use until a person accepts the correction."
               if supersedes and entry.status == "PROPOSED" else
               f" It replaces entry {supersedes}, now SUPERSEDED." if supersedes else "")
        lines = [f"Added entry {entry.id} under {entry.page}: {entry.kind}, {entry.status}, {entry.tier}"
                 + (f", scope {entry.scope}" if entry.scope else ", every area") + "." + waits + fix]
    checks = citation_checks(entry, now)
    if checks:
        lines.append("Its citations:")
        lines += checks
    return Reply("\n".join(lines), data)


def similar_reply(session: Session, similar: list[tuple[Entry, float]]) -> Reply:
    """Neighbours found before writing: nothing written, each shown (and recorded as served) with its similarity."""
    now = calendar_now_ms()
    entries = [e for e, _ in similar]
    if not session.holdout:       # a holdout run records no use (it is still shown what stopped its write)
        session.bank.record_serve(session.handle, VIA, entries, run=session.run)
    listed = [served_json(e, now) | {"similarity": round(s, 3)} for e, s in similar]
    lines = [f"{len(similar)} entr{'y says' if len(similar) == 1 else 'ies say'} nearly the same:"]
    for e, s in similar:
        lines.append(f"- entry {e.id} · similarity {s:.2f} · {e.tier} · {e.kind} · {e.status} · under {e.page}: "
                     f"{e.body}")
    lines.append(HINT_DISTINCT)
    return Reply("\n".join(lines), {"written": False, "similar": listed, "hint": HINT_DISTINCT})


def run(session: Session, args: AddEntryArgs) -> Reply:
    from ...bank.entries import SimilarEntries

    try:
        entry = session.bank.add(args.page, args.body, kind=args.kind or "FACT", scope=args.scope,
                                 citations=args.citations, distinct=args.distinct, actor=session.handle)
    except SimilarEntries as near:
        return similar_reply(session, near.similar)
    return written_reply(entry)


TOOL = Tool(
    name="add_entry",
    title="Add one fact to the knowledge bank",
    description=(
        "Add one fact under a page of the knowledge bank, with the code or the issue it rests on, so that later "
        "work (yours and others') can rely on it: a decision and its reason, a convention, a gotcha. The server "
        "reads each cited file at the commit you name and refuses a citation that does not hold. An agent's entry "
        "waits for a person (PROPOSED); a person's is in use at once. Returns the entry's id, status and trust "
        "tier, and each citation's check. An exact repeat of an entry is not written but counted for it; entries "
        "that say nearly the same come back instead, with nothing written (supersede one, or say distinct: true). "
        "Refused, in one line: a list or several claims, a secret, more than ten citations, a citation that does "
        "not hold, a LOCKED page, too many of your entries waiting on one page. Use it when you learned something "
        "the code does not say and the next person or agent working there would need: one fact a call."),
    hint=("add one fact you learned (a decision, a convention, a gotcha) under a page, citing the code lines it "
          "rests on"),
    args=AddEntryArgs, run=run, on_remote=False)
