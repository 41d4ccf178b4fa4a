"""The pages log's records, built in one place — a builder per kind — and the ids they carry: `KnowledgeBase`,
the node's container documents, the trash reaper and the importer all write through these, so a payload has
one shape whoever writes it: the shape its kind declares (pages/kinds.py), which its handler
(pages/handlers.py) reads exactly.

Builders check nothing — the writer has asked the rules, and the applier decides what depends on order.
They only shape: a note is stripped and left out when empty, labels are trimmed, lower-cased,
de-duplicated and sorted (what the applier stores, and what Confluence answers with).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from ..log import Record

SYSTEM_ACTOR = "crewlet"           # who writes what the configuration says (the container documents)
REAPER = "trash-reaper"            # who purges what stayed in the trash past its term


def _shaped(raw: str, at: int) -> str:
    """16 hex digits shaped as a uuid4's first 16: the 13th is its version digit, 4."""
    return raw[at:at + 12] + "4" + raw[at + 13:at + 16]


def new_id() -> str:
    """A fresh page (or comment) id."""
    return _shaped(os.urandom(8).hex(), 0)


def new_ids() -> Iterator[str]:
    """Fresh ids shaped as `new_id`'s, drawn in bulk (the importer's thousands) in ascending runs: a random
    36-bit prefix and a 24-bit counter (16.7 million ids before the next prefix). A bulk of creates then
    lands at the end of every index keyed by page id (the id's own, the revisions', a level's parent ids)
    instead of all over it: at a million pages, random ids made each commit rewrite most of those indexes'
    leaves. Two runs share a prefix once in 2^36 (an id drawn alone stays wholly random)."""
    while True:
        prefix = f"{int.from_bytes(os.urandom(5), 'big') >> 4:09x}"
        for count in range(1 << 24):
            raw = f"{prefix}{count:06x}"
            yield raw[:12] + "4" + raw[12:]


def normalise_labels(labels: Iterable[str]) -> list[str]:
    return sorted({str(lab).strip().lower() for lab in labels if str(lab).strip()})


def _note(payload: dict[str, Any], message: str | None) -> dict[str, Any]:
    if message and message.strip():
        payload["message"] = message.strip()
    return payload


def page_create(actor: str, *, page_id: str, container: str, title: str, body: str, parent_id: str | None,
                message: str | None = None, labels: Iterable[str] = (), op_id: str | None = None) -> Record:
    payload: dict[str, Any] = {"page_id": page_id, "container": container, "title": title, "body": body,
                               "parent_id": parent_id}
    _note(payload, message)
    shaped = normalise_labels(labels)
    if shaped:
        payload["labels"] = shaped
    return Record.new("page.create", actor, payload, op_id=op_id)


def page_save(actor: str, *, page_id: str, base_revision: int, body: str, message: str | None = None,
              op_id: str | None = None) -> Record:
    payload = _note({"page_id": page_id, "base_revision": int(base_revision), "body": body}, message)
    return Record.new("page.save", actor, payload, op_id=op_id)


def page_rename(actor: str, *, page_id: str, title: str, op_id: str | None = None) -> Record:
    return Record.new("page.rename", actor, {"page_id": page_id, "title": title}, op_id=op_id)


def page_labels(actor: str, *, page_id: str, labels: Iterable[str], op_id: str | None = None) -> Record:
    """Attach labels (never detaches: the applier adds them to those the page has)."""
    return Record.new("page.labels", actor, {"page_id": page_id, "labels": normalise_labels(labels)}, op_id=op_id)


def container_declare(*, key: str, name: str, purpose: str, lead: str | None, chart_epoch: int) -> Record:
    """A declared space as the configuration activated at `chart_epoch` says it."""
    return Record.new("container.declare", SYSTEM_ACTOR, {"key": key, "name": name, "purpose": purpose, "lead": lead,
                                                         "chart_epoch": chart_epoch})


def page_move(actor: str, *, page_id: str, parent_id: str | None) -> Record:
    return Record.new("page.move", actor, {"page_id": page_id, "parent_id": parent_id})


def page_trash(actor: str, *, page_id: str) -> Record:
    return Record.new("page.trash", actor, {"page_id": page_id})


def page_restore(actor: str, *, page_id: str) -> Record:
    return Record.new("page.restore", actor, {"page_id": page_id})


def page_purge(actor: str, *, page_id: str, reason: str, cutoff: int | None = None, op_id: str | None = None) -> Record:
    """An admin's purge, or the reaper's (`cutoff`: purged only if still trashed since before it, decided
    again when it applies; its op_id fixed by the page and the trash it was reaped from)."""
    payload: dict[str, Any] = {"page_id": page_id, "reason": reason}
    if cutoff is not None:
        payload["cutoff"] = cutoff
    return Record.new("page.purge", actor, payload, op_id=op_id)


def comment_add(actor: str, *, comment_id: str, page_id: str, body: str) -> Record:
    return Record.new("comment.add", actor, {"comment_id": comment_id, "page_id": page_id, "body": body})


def comment_edit(actor: str, *, comment_id: str, body: str) -> Record:
    return Record.new("comment.edit", actor, {"comment_id": comment_id, "body": body})


def comment_remove(actor: str, *, comment_id: str) -> Record:
    return Record.new("comment.remove", actor, {"comment_id": comment_id})


def knowledge_read(actor: str, *, via: str, query: str | None, pages: list[dict[str, Any]], backend: str = "native",
                   turn: str | None = None, phase: str | None = None) -> Record:
    """One act of an agent's reading (a get_page, a search): the pages it was shown, with their rank."""
    payload: dict[str, Any] = {"via": via, "query": query, "pages": pages, "backend": backend}
    if turn:
        payload["turn"] = turn
    if phase:
        payload["phase"] = phase
    return Record.new("knowledge.read", actor, payload)


def onboarding_mark(agent: str, *, chain_hash: str) -> Record:
    return Record.new("onboarding.mark", agent, {"agent_id": agent, "chain_hash": chain_hash})


# -- entries (spec 003, issue 35): one fact each, under a page ---------------------------------------------------
# `by` is the writer's actor kind (person | agent | system), asked of the configuration when the record is
# built: the applier decides from it what depends on who wrote (a person's entry is STANDING, an agent's
# PROPOSED; accept and verify are a person's) and on order (an agent archives only its own entry still proposed).

def entry_add(actor: str, *, entry_id: str, page_id: str, kind: str, body: str, by: str, scope: str | None = None,
              citations: list[dict[str, Any]] | None = None, checks: list[dict[str, Any]] | None = None,
              supersedes: str | None = None, budget: int | None = None, op_id: str | None = None) -> Record:
    """A new entry. `checks`: what the writer's read of each citation said ({index, result, commit?, blob?,
    message?}); `budget`: the proposed entries one actor may leave on a CURATED page (the writer's setting,
    carried so every node decides alike; left out: no budget)."""
    payload: dict[str, Any] = {"entry_id": entry_id, "page_id": page_id, "kind": kind, "body": body, "by": by,
                               "scope": scope, "citations": list(citations or [])}
    if checks:
        payload["checks"] = list(checks)
    if supersedes:
        payload["supersedes"] = supersedes
    if budget is not None:
        payload["budget"] = int(budget)
    return Record.new("entry.add", actor, payload, op_id=op_id)


def entry_status(actor: str, *, entry_id: str, action: str, by: str, reason: str | None = None,
                 expect: str | None = None, op_id: str | None = None) -> Record:
    """accept | verify | dispute | archive an entry (handlers.ENTRY_ACTIONS says from which statuses). `expect`:
    the status the writer decided on (a duty's look): the record changes nothing if the entry is no longer in it
    when the record applies — a person's accept appended between the look and the write wins."""
    payload: dict[str, Any] = {"entry_id": entry_id, "action": action, "by": by}
    if reason and reason.strip():
        payload["reason"] = reason.strip()
    if expect is not None:
        payload["expect"] = expect
    return Record.new("entry.status", actor, payload, op_id=op_id)


def entry_edit(actor: str, *, entry_id: str, body: str, kind: str, scope: str | None, by: str,
               reason: str | None = None, op_id: str | None = None) -> Record:
    """What an entry says, changed (body, kind, scope: all three, as they are to be): an agent's own entry while
    proposed, or a person's edit. Its citations stay: new evidence is a correction (supersede)."""
    payload: dict[str, Any] = {"entry_id": entry_id, "body": body, "kind": kind, "scope": scope, "by": by}
    if reason and reason.strip():
        payload["reason"] = reason.strip()
    return Record.new("entry.edit", actor, payload, op_id=op_id)


def entry_corroborate(actor: str, *, entry_id: str, op_id: str | None = None) -> Record:
    """An exact repeat of entry `entry_id`, folded into it: it counts once more, with who repeated it."""
    return Record.new("entry.corroborate", actor, {"entry_id": entry_id}, op_id=op_id)


def entry_citation_check(actor: str, *, entry_id: str, index: int, result: str, commit: str | None = None,
                         blob: str | None = None, anchor: dict[str, Any] | None = None, message: str | None = None,
                         op_id: str | None = None) -> Record:
    """What a read of citation `index` (1-based) of an entry found: held | shifted | moved | changed | gone |
    not_read_yet, at `commit`, the cited file's `blob`, where it stands now (`anchor`: {path, lines})."""
    payload: dict[str, Any] = {"entry_id": entry_id, "index": int(index), "result": result, "commit": commit,
                               "blob": blob}
    if anchor is not None:
        payload["anchor"] = anchor
    if message:
        payload["message"] = message
    return Record.new("entry.citation_check", actor, payload, op_id=op_id)


def page_policy(actor: str, *, page_id: str, policy: str, by: str, op_id: str | None = None) -> Record:
    """A page's entry policy (OPEN | CURATED | LOCKED): a person's to set."""
    return Record.new("page.policy", actor, {"page_id": page_id, "policy": policy, "by": by}, op_id=op_id)


def page_about(actor: str, *, page_id: str, item_kind: str, item: str, linked: bool = True,
               op_id: str | None = None) -> Record:
    """A page is about an item (a module's scope, a space's key, another page's id), or no longer (`linked` False)."""
    return Record.new("page.about", actor, {"page_id": page_id, "item_kind": item_kind, "item": item,
                                            "linked": bool(linked)}, op_id=op_id)


def entry_serve(actor: str, *, via: str, entries: list[dict[str, Any]], query: str | None = None,
                run: str | None = None) -> Record:
    """One act of serving entries to `actor` (a tool: load_context, recall_knowledge, get_page …), each with its
    rank ({entry_id, rank}): what decay and the runs' outcomes read. As a knowledge.read, on the log."""
    payload: dict[str, Any] = {"via": via, "query": query, "entries": entries}
    if run:
        payload["run"] = run
    return Record.new("entry.serve", actor, payload)


def triage_decide(actor: str, *, entry_id: str, entry_version: int, mode: str, decision: str, acted: bool,
                  reasons: list[str], held: list[str], fold_into: str | None, refusal: str | None,
                  inputs: dict[str, Any], audited: bool, op_id: str | None = None) -> Record:
    """What triage decided about a proposed entry at `entry_version` (spec 003, "Triage and escalation"), with
    what it read (`inputs`: neighbours, citations, judgments, rules): recorded in shadow, acted on in mode on
    (`acted`). Its op_id is the decision's id, which the audit draw hashes (`audited`)."""
    payload: dict[str, Any] = {"entry_id": entry_id, "entry_version": int(entry_version), "mode": mode,
                               "decision": decision, "acted": bool(acted), "reasons": list(reasons),
                               "held": list(held), "fold_into": fold_into, "refusal": refusal,
                               "inputs": dict(inputs), "audited": bool(audited)}
    return Record.new("triage.decide", actor, payload, op_id=op_id)


def triage_audit(actor: str, *, decision_id: str, answer: str, by: str, op_id: str | None = None) -> Record:
    """A person's answer to an audit of decision `decision_id`: agree keeps what triage did, disagree undoes it.
    `by` is the writer's actor kind (only a person answers)."""
    return Record.new("triage.audit", actor, {"decision_id": decision_id, "answer": answer, "by": by}, op_id=op_id)


def triage_state(actor: str, *, decision_type: str, state: str, figures: dict[str, Any],
                 op_id: str | None = None) -> Record:
    """A decision type's back-off state changed (acting | escalating), with the figures it was made on (kappa,
    verdicts, floor, min_samples, window_days)."""
    return Record.new("triage.state", actor, {"decision_type": decision_type, "state": state,
                                              "figures": dict(figures)}, op_id=op_id)


# -- agent runs (spec 003, "What agents get", "The holdout"; issue 37) -------------------------------------------

def run_start(actor: str, *, run_id: str, agent: str, modules: list[str], arm: str, holdout_rate: float,
              issue: str | None = None, op_id: str | None = None) -> Record:
    """An agent run begun: its id (the runtime's), its agent, the issue and modules it works on, and its arm as
    drawn from its id at `holdout_rate` (core/pages/run_model.py)."""
    payload: dict[str, Any] = {"run_id": run_id, "agent": agent, "modules": list(modules), "arm": arm,
                               "holdout_rate": float(holdout_rate)}
    if issue:
        payload["issue"] = issue
    return Record.new("run.start", actor, payload, op_id=op_id)


def run_finish(actor: str, *, run_id: str, checks: str, review: str, pr: str, cost: float | None = None,
               findings: list[dict[str, Any]] | None = None, op_id: str | None = None) -> Record:
    """A run's outcomes, from the script or CI that knows them: its checks and review (passed | failed), its pull
    request (merged | closed | none), what it cost (USD) and the reviewer's findings ({module, text})."""
    payload: dict[str, Any] = {"run_id": run_id, "checks": checks, "review": review, "pr": pr,
                               "findings": list(findings or [])}
    if cost is not None:
        payload["cost"] = float(cost)
    return Record.new("run.finish", actor, payload, op_id=op_id)


# -- upkeep (spec 003, "Upkeep"; issue 37) --------------------------------------------------------------------

def gap_ask(actor: str, *, question: str, via: str, op_id: str | None = None) -> Record:
    """A question `actor` asked through `via` (ask | recall_knowledge) that the bank could not answer."""
    return Record.new("knowledge.gap", actor, {"question": question, "via": via}, op_id=op_id)


def upkeep_issue(actor: str, *, subject: str, kind: str, space: str, title: str, ref: str, url: str | None = None,
                 page: str | None = None, op_id: str | None = None) -> Record:
    """An issue upkeep filed about `subject` (gap:<fold> or convention:<entry>:<archive>): in Plane (`ref`, `url`)
    or as a page under the space's GAPS folder (`ref` its address, `page` its id)."""
    payload: dict[str, Any] = {"subject": subject, "kind": kind, "space": space, "title": title, "ref": ref}
    if url:
        payload["url"] = url
    if page:
        payload["page"] = page
    return Record.new("upkeep.issue", actor, payload, op_id=op_id)
