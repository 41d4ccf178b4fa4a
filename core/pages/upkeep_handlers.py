"""The pages log's handlers for upkeep (issue 37; spec 003 "Upkeep"), their give-backs, and the words they share.

`knowledge.gap` keeps one question the bank could not answer (nothing above the floor: `ask` and `recall_knowledge`
found no hit), keyed by its fold, so the same question asked again counts again (`gap_asks`). `upkeep.issue`
keeps an issue upkeep filed — for a knowledge gap, or for a convention it archived — with where it was filed
(a Plane issue's reference and URL, or a page under a space's GAPS folder), once per subject (`upkeep_issues`).
Each handler refuses before its first write.
"""
from __future__ import annotations

from typing import Any

from ..log import Record
from ..replica.appliers import Refuse
from ..replica.kinds import CannotSay, Related
from ..store import Connection
from .give_back import _rec

Candidates = tuple[list[Record], str]

VIAS = ("ask", "recall_knowledge")          # where a question the bank could not answer was asked
GAP, CONVENTION = "gap", "convention"       # what an upkeep issue is about
ISSUE_KINDS = (GAP, CONVENTION)
MAX_QUESTION_CHARS = 2000                   # as core/ask/answer.py: a longer question is never asked
_TRAILING = "?!.。？！ \t"


def fold_text(text: str) -> str:
    """What "the same" question or review finding is judged by: whitespace folded to single spaces, case folded,
    trailing punctuation dropped ("Why is X?" and "why is x" are one). Exact after that: a reworded one is another."""
    return " ".join(text.split()).casefold().rstrip(_TRAILING)


def gap_ask(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    question, via = " ".join(p["question"].split()), p["via"]
    if not question or not fold_text(question):
        raise Refuse("invalid_question", "a knowledge gap is a question: this one is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise Refuse("invalid_question", f"a question is at most {MAX_QUESTION_CHARS} characters")
    if via not in VIAS:
        raise Refuse("invalid_via", f"a gap is asked through {' or '.join(VIAS)}, not {via!r}")
    key = fold_text(question)
    conn.execute("INSERT INTO gap_asks (op_id, gap_key, question, via, actor, at) VALUES (?,?,?,?,?,?)",
                 (rec.op_id, key, question, via, rec.actor, rec.at))
    count = conn.execute("SELECT count(*) FROM gap_asks WHERE gap_key = ?", (key,)).fetchone()[0]
    return {"gap": key, "count": count}


def upkeep_issue(conn: Connection, rec: Record) -> dict[str, Any]:
    p = rec.payload
    subject, kind = p["subject"].strip(), p["kind"]
    if kind not in ISSUE_KINDS:
        raise Refuse("invalid_issue", f"an upkeep issue is about a {' or a '.join(ISSUE_KINDS)}, not {kind!r}")
    if not subject or not p["title"].strip() or not p["ref"].strip() or not p["space"].strip():
        raise Refuse("invalid_issue", "an upkeep issue needs a subject, a title, a space and a reference")
    filed = conn.execute("SELECT ref FROM upkeep_issues WHERE subject = ?", (subject,)).fetchone()
    if filed is not None:
        # two nodes' duties filing at once: the second is refused on every node (its issue is said to be a repeat)
        raise Refuse("issue_filed", f"{subject} has its issue already: {filed['ref']}")
    conn.execute("INSERT INTO upkeep_issues (op_id, subject, kind, space, title, ref, url, page, actor, at) "
                 "VALUES (?,?,?,?,?,?,?,?,?,?)", (rec.op_id, subject, kind, p["space"], p["title"], p["ref"],
                                                  p.get("url"), p.get("page"), rec.actor, rec.at))
    return {"subject": subject, "ref": p["ref"]}


# -- a repair's give-back: each record is read off the row it wrote ---------------------------------------------

def give_back_gap_ask(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    row = conn.execute("SELECT * FROM gap_asks WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        raise CannotSay("its question's row is no longer in the database")
    return [_rec(op, row["actor"], row["at"], {"question": row["question"], "via": row["via"]})], ""


def give_back_issue(conn: Any, seq: int, op: Any, related: Related) -> Candidates:
    row = conn.execute("SELECT * FROM upkeep_issues WHERE op_id = ?", (op["op_id"],)).fetchone()
    if row is None:
        raise CannotSay("its issue's row is no longer in the database")
    payload: dict[str, Any] = {"subject": row["subject"], "kind": row["kind"], "space": row["space"],
                               "title": row["title"], "ref": row["ref"]}
    for key in ("url", "page"):
        if row[key] is not None:
            payload[key] = row[key]
    return [_rec(op, row["actor"], row["at"], payload)], ""
