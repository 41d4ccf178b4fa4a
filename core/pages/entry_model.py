"""Spec 003's entries as the pages log holds them: their kinds, statuses, page policies, who may do what to one,
and the fold an exact repeat is matched by. Read by the applier's entry handlers (entry_handlers.py), their
give-backs and the bank's API (core/bank), so the words are one set everywhere.
"""
from __future__ import annotations

import json
from typing import Any

from ..text.claims import MAX_ENTRY_CHARS

# what an entry says it is (spec 003, "Entries"); FACT when the writer names none
FACT, DECISION, CONVENTION, GOTCHA = "FACT", "DECISION", "CONVENTION", "GOTCHA"
ENTRY_KINDS = (FACT, DECISION, CONVENTION, GOTCHA)

PROPOSED, STANDING, CONSOLIDATED = "PROPOSED", "STANDING", "CONSOLIDATED"
SUPERSEDED, DISPUTED, ARCHIVED = "SUPERSEDED", "DISPUTED", "ARCHIVED"
STATUSES = (PROPOSED, STANDING, CONSOLIDATED, SUPERSEDED, DISPUTED, ARCHIVED)
IN_USE = (STANDING, CONSOLIDATED)                  # served to agents
OUT_OF_USE = (SUPERSEDED, ARCHIVED)                # kept for the record: a repeat of one is a new entry

OPEN, CURATED, LOCKED = "OPEN", "CURATED", "LOCKED"
POLICIES = (OPEN, CURATED, LOCKED)
DEFAULT_POLICY = CURATED

# who wrote a record, as the writer asked the configuration: a person, an agent, or crewlet itself (a duty)
PERSON, AGENT, SYSTEM = "person", "agent", "system"
WRITERS = (PERSON, AGENT, SYSTEM)
SYSTEM_ACTOR = "crewlet"      # who writes what a duty found (a recheck's result, decay)

# what a read of a citation found (core/repos: HOLDS at write is stored as held)
HELD, SHIFTED, MOVED, CHANGED, GONE, NOT_READ_YET = "held", "shifted", "moved", "changed", "gone", "not_read_yet"
CHECK_RESULTS = (HELD, SHIFTED, MOVED, CHANGED, GONE, NOT_READ_YET)
HOLDING = (HELD, SHIFTED, MOVED)

# One fact is a sentence or three (the one-claim check's bound, core/text/claims.py; docs/entries.md says why)
MAX_ENTRY_BODY = MAX_ENTRY_CHARS
MAX_ENTRY_CITATIONS = 10      # as core/repos MAX_CITATIONS

# action -> (the statuses it applies from, the status it leaves, who may take it). An agent may archive only its
# own entry while proposed (checked apart); verify keeps the status (a proposed entry verified is accepted too).
ACCEPT, VERIFY, DISPUTE, ARCHIVE = "accept", "verify", "dispute", "archive"
ACTIONS: dict[str, tuple[tuple[str, ...], str | None, tuple[str, ...]]] = {
    ACCEPT: ((PROPOSED, DISPUTED, ARCHIVED), STANDING, (PERSON,)),
    VERIFY: ((PROPOSED, STANDING, CONSOLIDATED), None, (PERSON,)),
    DISPUTE: ((PROPOSED, STANDING, CONSOLIDATED), DISPUTED, (PERSON, SYSTEM)),
    ARCHIVE: ((PROPOSED, STANDING, CONSOLIDATED, DISPUTED), ARCHIVED, (PERSON, SYSTEM, AGENT)),
}


def fold_body(body: str) -> str:
    """What an exact repeat is matched by: whitespace folded to single spaces, case folded."""
    return " ".join(body.split()).casefold()


_POLICY = "SELECT policy FROM page_policies WHERE page_id = ? ORDER BY seq DESC LIMIT 1"


def page_policy(conn: Any, page_id: str) -> str:
    """The entry policy in force on a page: the latest a person set, else CURATED."""
    row = conn.execute(_POLICY, (page_id,)).fetchone()
    return row[0] if row is not None else DEFAULT_POLICY


# what a page can be about (`crewlet page link`): a module's scope, a space's key, another page's id
ABOUT_KINDS = ("module", "space", "page")
_ABOUT = ("SELECT item_kind, item, linked FROM page_about WHERE page_id = ? AND seq IN (SELECT MAX(seq) FROM "
          "page_about WHERE page_id = ? GROUP BY item_kind, item)")


def about_links(conn: Any, page_id: str) -> set[tuple[str, str]]:
    """The items a page is linked to now: each item's latest link or unlink decides."""
    return {(r[0], r[1]) for r in conn.execute(_ABOUT, (page_id, page_id)) if r[2]}


def citations_of(row: Any) -> list[dict[str, Any]]:
    try:
        out = json.loads(row["citations"] or "[]")
    except ValueError:
        return []
    return out if isinstance(out, list) else []
