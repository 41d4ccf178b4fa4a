"""The pages log's record kinds: one declaration each (core/replica/kinds.py `RecordKind`).

Everything the house keeps per kind is read off these: the shapes and handlers the applier registers
(pages/applier.py `PAGES`), the tables a repair's replay compares (`KINDS.tables`), how a repair gives a lost
record back (core/recover.py dispatches on `give_back`) and which keys relate records (core/repair.py
`_related`); tests/test_record_kinds.py holds them against a freshly migrated database and the content digest.

To add a kind (spec 003's entries, issue 35, were the first: `entry.add` … `entry.serve` below):

1. its table, if it has one: a migration (core/store/migrations.py) and the table's line in the digest's
   `TABLES` (core/store/digest.py: its replicated columns, in a fixed order); and, if its rows sit under a page,
   what a purge does to them (`PURGED_WITH_PAGE`, before the declarations);
2. its builder in records.py, its handler in handlers.py, its give-back in give_back.py;
3. its declaration below, as

       RecordKind("entry.add", build.entry_add, writes=("entries",),
                  shape={"entry_id": _ID, "page_id": _ID, "body": need(TEXT), "scope": may(TEXT, NONE), ...},
                  handle=do.entry_add, give_back=back.entry_add, related=("page_id", "entry_id")),

   Nothing else registers it: forget a part and the declaration does not import; forget the digest, or a
   table's line, or what a purge does to rows under a page, and tests/test_record_kinds.py fails naming it;
4. its tests: the tests that walk every kind read the declarations and fail naming the new one until it has a
   sample record in tests/test_engine_rules.py `_every_page_kind` (its worst shapes are refused) and a step in
   tests/test_log_repair.py `_every_kind_history` (a flipped byte in it is given back by its give-back).

The payload shapes are what the builders write (a key the applier has always read with a default, `p.get`,
may be missing, as before); a payload of another shape is refused as malformed before its handler runs.
"""
from __future__ import annotations

from ..replica.kinds import LOST_GIVE_BACK, LOST_SHAPE, LogKinds, RecordKind, tombstone
from ..replica.shapes import BOOL, DICT, INT, LIST, NONE, TEXT, may, need
from . import entry_give_back as entry_back
from . import entry_handlers as entry_do
from . import give_back as back
from . import handlers as do
from . import records as build
from . import triage_give_back as triage_back
from . import triage_handlers as triage_do
from . import run_handlers as run_do
from . import upkeep_handlers as upkeep_do
from . import consolidation_handlers as consolidation_do
from . import generated_handlers as generated_do

_ID = need(TEXT)
_FLOAT = (float,)                       # exact, as every shape's types: an integer is not a rate here
_PAGE_ROWS = ("pages", "revisions")     # a change to what a page says writes its row and a revision
# an entry's triage rows (issue 36): they reference the entry ON DELETE CASCADE, so they go with it
_TRIAGE_ROWS = ("triage_decisions", "triage_audits", "triage_verdicts")
# what triage acting on an entry, or a person undoing it, writes of the entry's own rows
_ENTRY_CHANGE = ("entries", "entry_history", "entry_corroborations")


# What a page's purge does to the rows under it, table by table: a statement run with the page's id before its
# row is deleted, or BY_FOREIGN_KEY (the table's page_id references pages ON DELETE CASCADE), or KEPT (with the
# reason). tests/test_record_kinds.py fails on a table whose rows name a page (a page_id column, or a foreign
# key to pages) that is not here: its rows would outlive their page. Trash writes no row but the page's own.
BY_FOREIGN_KEY = "by its foreign key"
PURGED_WITH_PAGE: dict[str, str] = {
    "page_links": "DELETE FROM page_links WHERE src = ?",    # this node's backlinks from it (the indexer's)
    "revisions": BY_FOREIGN_KEY,
    "comments": BY_FOREIGN_KEY,
    # an entry's own rows (its history, corroborations, checks, serves) reference the entry ON DELETE CASCADE: they
    # go with it
    "entries": BY_FOREIGN_KEY,
    "page_policies": BY_FOREIGN_KEY,
    "page_about": BY_FOREIGN_KEY,
    "consolidation_proposals": BY_FOREIGN_KEY,      # and each proposal's decisions, by theirs
    "generated_pages": BY_FOREIGN_KEY,      # a generated page's question and state (m019)
    "generated_builds": BY_FOREIGN_KEY,     # its builds' sections
    "generated_changes": BY_FOREIGN_KEY,    # its makes, questions and takeover
    "deleted_pages": "KEPT: the purge marker itself (a replayed create can never bring the page back)",
}


def purge_statements() -> list[str]:
    """The statements a purge runs, in order, for the rows under the purged page."""
    return [s for s in PURGED_WITH_PAGE.values() if s.startswith("DELETE ")]


KINDS = LogKinds("pages", own_tables=("applied_ops",), kinds=[
    RecordKind("container.declare", build.container_declare, writes=("containers",),
               shape={"key": need(TEXT), "name": need(TEXT), "purpose": may(TEXT), "lead": may(TEXT, NONE),
                      "chart_epoch": may(INT)},
               handle=do.container_declare, give_back=back.container_declare, related=("key",)),
    RecordKind("page.create", build.page_create, writes=_PAGE_ROWS,
               shape={"page_id": _ID, "container": need(TEXT), "title": need(TEXT), "body": may(TEXT),
                      "parent_id": may(TEXT, NONE), "message": may(TEXT, NONE), "labels": may(LIST, items=TEXT)},
               handle=do.page_create, give_back=back.page_create, related=("page_id",)),
    RecordKind("page.save", build.page_save, writes=_PAGE_ROWS,
               shape={"page_id": _ID, "base_revision": need(INT), "body": need(TEXT), "message": may(TEXT, NONE)},
               handle=do.page_save, give_back=back.page_save, related=("page_id",)),
    RecordKind("page.rename", build.page_rename, writes=_PAGE_ROWS,
               shape={"page_id": _ID, "title": need(TEXT), "message": may(TEXT, NONE)},
               handle=do.page_rename, give_back=back.page_rename, related=("page_id",)),
    RecordKind("page.move", build.page_move, writes=("pages",), shape={"page_id": _ID, "parent_id": may(TEXT, NONE)},
               handle=do.page_move, give_back=back.page_move, related=("page_id",)),
    RecordKind("page.trash", build.page_trash, writes=("pages",), shape={"page_id": _ID},
               handle=do.page_trash, give_back=back.page_trash, related=("page_id",)),
    RecordKind("page.restore", build.page_restore, writes=("pages",), shape={"page_id": _ID},
               handle=do.page_restore, give_back=back.page_restore, related=("page_id",)),
    # a purge deletes the page and what PURGED_WITH_PAGE says, and keeps a marker; every intact purge is related
    # to a lost record (it re-filed the purged page's children)
    RecordKind("page.purge", build.page_purge, writes=("pages", "revisions", "comments", "deleted_pages", "entries",
                                                    "entry_history", "entry_corroborations", "citation_checks",
                                                    "entry_serves", "page_policies", *_TRIAGE_ROWS,
                                                    "consolidation_proposals", "consolidation_decisions",
                                                    "generated_pages", "generated_builds", "generated_changes"),
               shape={"page_id": _ID, "reason": may(TEXT), "cutoff": may(INT, NONE)},
               handle=do.purging(purge_statements()), give_back=back.page_purge, related=("page_id",), related_all=True),
    RecordKind("page.labels", build.page_labels, writes=("pages",),
               shape={"page_id": _ID, "labels": need(LIST, items=TEXT)},
               handle=do.page_labels, give_back=back.page_labels, related=("page_id",)),
    RecordKind("comment.add", build.comment_add, writes=("comments",),
               shape={"comment_id": _ID, "page_id": _ID, "body": need(TEXT)},
               handle=do.comment_add, give_back=back.comment_add, related=("page_id", "comment_id")),
    RecordKind("comment.edit", build.comment_edit, writes=("comments",), shape={"comment_id": _ID, "body": need(TEXT)},
               handle=do.comment_edit, give_back=back.comment_edit, related=("comment_id",)),
    RecordKind("comment.remove", build.comment_remove, writes=("comments",), shape={"comment_id": _ID},
               handle=do.comment_remove, give_back=back.comment_remove, related=("comment_id",)),
    RecordKind("knowledge.read", build.knowledge_read, writes=("knowledge_reads",),
               shape={"via": need(TEXT), "query": may(TEXT, NONE), "pages": may(LIST, items=DICT),
                      "backend": may(TEXT), "turn": may(TEXT, NONE), "phase": may(TEXT, NONE)},
               handle=do.knowledge_read, give_back=back.knowledge_read),
    # its outcome names no agent: every intact mark is related to a lost one
    RecordKind("onboarding.mark", build.onboarding_mark, writes=("agent_onboarding_markers",),
               shape={"agent_id": need(TEXT), "chain_hash": need(TEXT)},
               handle=do.onboarding_mark, give_back=back.onboarding_mark, related_all=True),
    # spec 003's entries (issue 35): each under a page; `by` is the writer's actor kind (entry_model.WRITERS)
    RecordKind("entry.add", build.entry_add, writes=("entries", "entry_history", "entry_corroborations",
                                                      "citation_checks"),
               shape={"entry_id": _ID, "page_id": _ID, "kind": need(TEXT), "body": need(TEXT), "by": need(TEXT),
                      "scope": may(TEXT, NONE), "citations": may(LIST, items=DICT), "checks": may(LIST, items=DICT),
                      "supersedes": may(TEXT, NONE), "budget": may(INT, NONE)},
               handle=entry_do.entry_add, give_back=entry_back.entry_add, related=("page_id", "entry_id")),
    # what an entry says, changed; what it said before is kept in its history (a repair reads the add back there)
    RecordKind("entry.edit", build.entry_edit, writes=("entries", "entry_history"),
               shape={"entry_id": _ID, "body": need(TEXT), "kind": need(TEXT), "scope": may(TEXT, NONE),
                      "by": need(TEXT), "reason": may(TEXT, NONE)},
               handle=entry_do.entry_edit, give_back=entry_back.entry_edit, related=("entry_id",)),
    # an accepted correction retires what it supersedes: the status record writes both entries' rows; a person's
    # action on an entry triage decided about is a verdict on the decision (triage_handlers.action_verdict)
    RecordKind("entry.status", build.entry_status, writes=("entries", "entry_history", "triage_verdicts"),
               shape={"entry_id": _ID, "action": need(TEXT), "by": need(TEXT), "reason": may(TEXT, NONE),
                      "expect": may(TEXT, NONE)},
               handle=entry_do.entry_status, give_back=entry_back.entry_status, related=("entry_id",)),
    RecordKind("entry.corroborate", build.entry_corroborate, writes=("entry_corroborations",),
               shape={"entry_id": _ID},
               handle=entry_do.entry_corroborate, give_back=entry_back.entry_corroborate, related=("entry_id",)),
    RecordKind("entry.citation_check", build.entry_citation_check, writes=("citation_checks",),
               shape={"entry_id": _ID, "index": need(INT), "result": need(TEXT), "commit": may(TEXT, NONE),
                      "blob": may(TEXT, NONE), "anchor": may(DICT, NONE), "message": may(TEXT, NONE)},
               handle=entry_do.entry_citation_check, give_back=entry_back.entry_citation_check,
               related=("entry_id",)),
    RecordKind("page.policy", build.page_policy, writes=("page_policies",),
               shape={"page_id": _ID, "policy": need(TEXT), "by": need(TEXT)},
               handle=entry_do.page_policy, give_back=entry_back.page_policy, related=("page_id",)),
    RecordKind("page.about", build.page_about, writes=("page_about",),
               shape={"page_id": _ID, "item_kind": need(TEXT), "item": need(TEXT), "linked": need(BOOL)},
               handle=entry_do.page_about, give_back=entry_back.page_about, related=("page_id",)),
    # as knowledge.read: an act of serving, on the log (decay and the runs' outcomes read it on every node)
    RecordKind("entry.serve", build.entry_serve, writes=("entry_serves",),
               shape={"via": need(TEXT), "query": may(TEXT, NONE), "entries": need(LIST, items=DICT),
                      "run": may(TEXT, NONE)},
               handle=entry_do.entry_serve, give_back=entry_back.entry_serve),
    # spec 003's triage (issue 36): what it decided about a proposed entry (acting on it in mode on), a person's
    # answer to an audit of an acted decision (disagree undoes it), a decision type's back-off state
    RecordKind("triage.decide", build.triage_decide,
               writes=("triage_decisions", "triage_audits", *_ENTRY_CHANGE),
               shape={"entry_id": _ID, "entry_version": need(INT), "mode": need(TEXT), "decision": need(TEXT),
                      "acted": need(BOOL), "reasons": need(LIST, items=TEXT), "held": need(LIST, items=TEXT),
                      "fold_into": need(TEXT, NONE), "refusal": need(TEXT, NONE), "inputs": need(DICT),
                      "audited": need(BOOL)},
               handle=triage_do.triage_decide, give_back=triage_back.triage_decide, related=("entry_id",)),
    RecordKind("triage.audit", build.triage_audit, writes=("triage_audits", "triage_verdicts", *_ENTRY_CHANGE),
               shape={"decision_id": _ID, "answer": need(TEXT), "by": need(TEXT)},
               handle=triage_do.triage_audit, give_back=triage_back.triage_audit),
    RecordKind("triage.state", build.triage_state, writes=("triage_states",),
               shape={"decision_type": need(TEXT), "state": need(TEXT), "figures": need(DICT)},
               handle=triage_do.triage_state, give_back=triage_back.triage_state),
    # agent runs (issue 37): a run begun with its arm; its outcomes, counted for the entries it was given
    RecordKind("run.start", build.run_start, writes=("runs",),
               shape={"run_id": _ID, "agent": need(TEXT), "modules": need(LIST, items=TEXT), "arm": need(TEXT),
                      "holdout_rate": need(_FLOAT), "issue": may(TEXT, NONE)},
               handle=run_do.run_start, give_back=run_do.give_back_start, related=("run_id",)),
    RecordKind("run.finish", build.run_finish, writes=("runs", "run_findings", "entry_outcomes"),
               shape={"run_id": _ID, "checks": need(TEXT), "review": need(TEXT), "pr": need(TEXT),
                      "cost": may(_FLOAT, NONE), "findings": need(LIST, items=DICT)},
               handle=run_do.run_finish, give_back=run_do.give_back_finish, related=("run_id",)),
    # upkeep (issue 37): a question the bank could not answer; an issue upkeep filed (a gap's, an archived convention's)
    RecordKind("knowledge.gap", build.gap_ask, writes=("gap_asks",), shape={"question": need(TEXT), "via": need(TEXT)},
               handle=upkeep_do.gap_ask, give_back=upkeep_do.give_back_gap_ask),
    RecordKind("upkeep.issue", build.upkeep_issue, writes=("upkeep_issues",),
               shape={"subject": need(TEXT), "kind": need(TEXT), "space": need(TEXT), "title": need(TEXT),
                      "ref": need(TEXT), "url": may(TEXT), "page": may(TEXT)},
               handle=upkeep_do.upkeep_issue, give_back=upkeep_do.give_back_issue),
    # consolidation (issue 37): a proposal to fold a page's entries into its body; a person's decision on it, whose
    # accept (and revert, and the revert undone) saves the page and moves the entries in one record
    RecordKind("consolidation.propose", build.consolidation_propose, writes=("consolidation_proposals",),
               shape={"proposal_id": _ID, "page_id": _ID, "base_revision": need(INT), "body": need(TEXT),
                      "entries": need(LIST, items=TEXT), "by": need(TEXT), "message": may(TEXT, NONE)},
               handle=consolidation_do.consolidation_propose, give_back=consolidation_do.give_back_propose,
               related=("page_id", "proposal_id")),
    RecordKind("consolidation.decide", build.consolidation_decide,
               writes=("consolidation_proposals", "consolidation_decisions", *_PAGE_ROWS, "entries", "entry_history"),
               shape={"proposal_id": _ID, "action": need(TEXT), "by": need(TEXT)},
               handle=consolidation_do.consolidation_decide, give_back=consolidation_do.give_back_decide,
               related=("proposal_id",)),
    # generated pages (issue 37): made, asked a new question or taken over; a build saved with its sections
    RecordKind("page.generated", generated_do.page_generated, writes=("generated_pages", "generated_changes"),
               shape={"page_id": _ID, "action": need(TEXT), "question": need(TEXT, NONE), "by_kind": need(TEXT)},
               handle=generated_do.handle_page_generated,
               give_back=generated_do.give_back_generated,
               related=("page_id",)),
    RecordKind("page.build", generated_do.page_build, writes=(*_PAGE_ROWS, "generated_builds", "generated_pages"),
               shape={"page_id": _ID, "base_revision": need(INT), "body": need(TEXT), "sections": need(LIST, items=DICT),
                      "question_no": need(INT), "digest": need(TEXT), "built_at": need(INT),
                      "message": may(TEXT, NONE)},
               handle=generated_do.handle_page_build,
               give_back=generated_do.give_back_build,
               related=("page_id",)),
    # a repair's tombstone (core/recover.py): it carries its own outcome (the applier's verdict stores it)
    RecordKind("log.lost", tombstone, writes=(), shape=LOST_SHAPE, verdict=do.lost, give_back=LOST_GIVE_BACK),
])
