"""The content digest: what every node that applied the same log must hold, row for row.

It covers the replicated rows — pages, revisions, comments, purge markers, container documents, the
applier's outcomes, reads, onboarding markers, vectors and their sign codes — and leaves out what each
node keeps for itself (backlinks, its duties, the embedding duty's holds, when a migration ran) — and
agents' diaries, which are on no log at all: each node holds the diaries of the agents it runs
(docs/architecture.md, "An agent's own memory"), so two nodes at one position rightly differ there, and
`EXCLUDED` says so in every digest. The position rows are digested apart: two nodes agree on content only
at the same position."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Table:
    """A table the migrations create, and what it is to replication — exactly one of:

    - `rows`: replicated — every node that applied the same logs holds the same rows; the query lists its
      replicated columns in a fixed order (never a row id a node assigns). The digest covers it, a snapshot
      carries it, a repair's replay compares it; some record kind's handler writes it (`RecordKind.writes`).
    - `local`: this node's own (why, in words) — no log fills it: no digest covers it, a snapshot leaves it out.
    - `carried`: kept in step with other rows (by triggers, or the engine, in their transaction) — a snapshot
      carries it as it is; the digest covers the rows it follows from.

    A new table is one line here beside its migration (tests/test_record_kinds.py opens a fresh database and
    fails on a table of sqlite_master that is not here, or on a kind that writes a table not replicated)."""

    name: str
    rows: str = ""
    local: str = ""
    carried: str = ""

    def __post_init__(self) -> None:
        if sum(bool(x) for x in (self.rows, self.local, self.carried)) != 1:
            raise TypeError(f"table '{self.name}' must be exactly one of replicated (rows), local or carried")


# every table, the replicated ones in the digest's order (the content digest hashes them in this order: a
# new replicated table goes at the end, so the digests of the tables before it stay what older builds say)
TABLES: tuple[Table, ...] = (
    Table("pages", rows="SELECT id, container, address, title, body, revision, parent_id, created_by, created_at, "
                        "saved_by, saved_at, updated_at, trashed_at, trashed_by, labels, version FROM pages ORDER BY id"),
    Table("revisions", rows="SELECT page_id, revision, title, body, author, at, kind, message FROM revisions "
                            "ORDER BY page_id, revision"),
    Table("comments", rows="SELECT id, page_id, author, body, created_at, edited_at FROM comments ORDER BY id"),
    Table("deleted_pages", rows="SELECT page_id, container, title, purged_by, purged_at, reason FROM deleted_pages "
                                "ORDER BY page_id"),
    Table("containers", rows="SELECT key, name, purpose, lead, chart_epoch FROM containers ORDER BY key"),
    Table("applied_ops", rows="SELECT op_id, seq, type, status, code, reason, result FROM applied_ops "
                              "ORDER BY seq, op_id"),
    Table("knowledge_reads", rows="SELECT op_id, actor, at, via, query, pages, backend, turn, phase "
                                  "FROM knowledge_reads ORDER BY op_id"),
    Table("agent_onboarding_markers", rows="SELECT agent_id, chain_hash, marked_at FROM agent_onboarding_markers "
                                           "ORDER BY agent_id"),
    Table("vectors", rows="SELECT source_id, kind, space, container, revision, digest, bytes, bucket, dims, seq, "
                          "vector FROM vectors ORDER BY source_id, space"),
    # each code with its list under the index that filed it
    Table("vector_codes", rows="SELECT v.source_id, v.space, c.code, c.list, c.generation FROM vector_codes c "
                               "JOIN vectors v ON v.id = c.id ORDER BY v.source_id, v.space"),
    # the semantic index as its records installed it (what a node measures for itself left out)
    Table("semantic_index", rows="SELECT space, generation, lists, width, centroids, probes, ranges, refiled, "
                                 "trained_sources, fullest, trained_at FROM semantic_index ORDER BY space"),
    # spec 003's entries (issue 35, m011), each list in an order every node derives alike
    Table("entries", rows="SELECT id, page_id, kind, body, folded, scope, citations, status, author, author_kind, "
                          "created_at, supersedes, superseded_by, verified_by, verified_at, status_by, status_at, "
                          "status_reason, version FROM entries ORDER BY id"),
    Table("entry_history", rows="SELECT op_id, entry_id, seq, actor, actor_kind, at, action, from_status, to_status, "
                                "reason, body_before, kind_before, scope_before FROM entry_history "
                                "ORDER BY seq, op_id, entry_id"),
    Table("entry_corroborations", rows="SELECT op_id, entry_id, actor, at FROM entry_corroborations ORDER BY op_id"),
    Table("citation_checks", rows="SELECT op_id, idx, entry_id, seq, result, commit_id, blob, anchor, message, "
                                  "checked_at FROM citation_checks ORDER BY seq, op_id, idx"),
    Table("page_policies", rows="SELECT op_id, page_id, seq, policy, set_by, set_at FROM page_policies "
                                "ORDER BY seq, op_id"),
    Table("page_about", rows="SELECT op_id, page_id, seq, item_kind, item, linked, set_by, set_at FROM page_about "
                             "ORDER BY seq, op_id"),
    Table("entry_serves", rows="SELECT op_id, entry_id, actor, at, via, query, rank, run FROM entry_serves "
                               "ORDER BY op_id, entry_id"),
    # spec 003's triage (issue 36, m015): every node shows the same queue, audits and kappa
    Table("triage_decisions", rows="SELECT op_id, entry_id, entry_version, seq, actor, at, mode, decision, acted, "
                                   "reasons, held, fold_into, refusal, inputs, audited FROM triage_decisions "
                                   "ORDER BY seq, op_id"),
    Table("triage_audits", rows="SELECT decision_id, entry_id, opened_seq, answer, answered_by, answered_at, answer_op "
                                "FROM triage_audits ORDER BY opened_seq, decision_id"),
    Table("triage_verdicts", rows="SELECT op_id, decision_id, entry_id, decision, label, verdict, source, actor, at, "
                                  "seq FROM triage_verdicts ORDER BY seq, op_id, decision_id"),
    Table("triage_states", rows="SELECT op_id, decision_type, state, figures, actor, at, seq FROM triage_states "
                                "ORDER BY seq, op_id"),
    # agent runs (issue 37, m016): each run, its review findings, and each outcome counted for an entry it was given
    Table("runs", rows="SELECT id, agent, issue, modules, arm, holdout_rate, started_by, started_at, start_op, "
                       "finish_op, finished_by, finished_at, checks, review, pr, cost FROM runs ORDER BY id"),
    Table("run_findings", rows="SELECT op_id, idx, run_id, module, text FROM run_findings ORDER BY op_id, idx"),
    Table("entry_outcomes", rows="SELECT op_id, entry_id, outcome, effect, run_id, at FROM entry_outcomes "
                                 "ORDER BY op_id, entry_id, outcome"),
    # upkeep (issue 37, m017): the questions the bank could not answer, the issues upkeep filed
    Table("gap_asks", rows="SELECT op_id, gap_key, question, via, actor, at FROM gap_asks ORDER BY op_id"),
    Table("upkeep_issues", rows="SELECT op_id, subject, kind, space, title, ref, url, page, actor, at "
                                "FROM upkeep_issues ORDER BY op_id"),
    # consolidation (issue 37, m018): proposals to fold a page's entries into its body, and each decision on one
    Table("consolidation_proposals", rows="SELECT id, page_id, base_revision, body, entries, message, proposed_by, "
                                          "proposed_kind, proposed_at, propose_op, state, old_body, applied_revision, "
                                          "reverted_revision, folded, version FROM consolidation_proposals ORDER BY id"),
    Table("consolidation_decisions", rows="SELECT op_id, proposal_id, seq, action, actor, actor_kind, at, revision "
                                          "FROM consolidation_decisions ORDER BY seq, op_id"),
    # generated pages (issue 37, m019): each page's question and state, and each build's sections
    Table("generated_pages", rows="SELECT page_id, question, question_no, state, set_by, set_at, built_at, "
                                  "built_question_no, inputs_digest, version FROM generated_pages ORDER BY page_id"),
    Table("generated_builds", rows="SELECT op_id, page_id, seq, revision, saved, body_sha, question_no, sections, "
                                   "digest, built_by, built_at FROM generated_builds ORDER BY seq, op_id"),
    Table("generated_changes", rows="SELECT op_id, page_id, seq, action, question, by_kind, actor, at "
                                    "FROM generated_changes ORDER BY seq, op_id"),
    Table("log_position", carried="where this database stands on each log: digested apart (POSITIONS), "
                                  "in the transaction that applied the rows"),
    Table("_migrations", carried="which migrations made the file's schema: a snapshot's own"),
    Table("page_levels", carried="live pages per level, kept by triggers on pages (m008)"),
    Table("page_spaces", carried="live pages per space, kept by triggers on pages (m008)"),
    Table("vector_counts", carried="vectors per space, kept by triggers on vectors and pages (m008)"),
    Table("duties", local="each node's duties: their cursors, status and leases"),
    Table("page_links", local="backlinks, derived by this node's keyword index"),
    Table("embed_holds", local="the sources a provider refused, held back by this node's embedding duty"),
    Table("agent_diary", local="agents' diaries are this node's own (never on a log): each node holds the diaries "
                               "of the agents it runs, so nodes at one position may differ there"),
    Table("agent_diary_versions", local="counts of the diaries, kept by triggers on agent_diary"),
    Table("answer_cache", local="cached answers are the node's own, written for its askers"),
)
# table -> the query listing its replicated columns in a fixed order (never a row id a node assigns)
REPLICATED: dict[str, str] = {t.name: t.rows for t in TABLES if t.rows}
# each node's own: no digest covers them, no snapshot carries them (core/sync/snapshot.py)
NODE_LOCAL: tuple[str, ...] = tuple(t.name for t in TABLES if t.local)
# the node-local tables a database that replaces this node's derives again from the rows it holds (backlinks by the
# indexer, each duty's cursor by its next pass, a diary's counts by the triggers that insert its notes) ...
DERIVED_LOCAL: tuple[str, ...] = ("duties", "page_links", "agent_diary_versions")
# ... and the others, this node's own, which follow into the new file: an adopted snapshot
# (core/sync/snapshot.py), a repair's rebuild (core/repair.py)
CARRIED_LOCAL: tuple[str, ...] = tuple(t for t in NODE_LOCAL if t not in DERIVED_LOCAL)
# node-local rows that hold only for the content they were written at, which a repair's rebuild changes under the
# same positions (it rebuilds because the database holds records the log lost): started over there, not carried
STALE_AFTER_REBUILD: dict[str, str] = {
    "answer_cache": "each answer is kept at the log positions it was written at, and a rebuilt database stands at "
                    "those positions without the records the repair lost: carried, it would be served as if nothing "
                    "had changed",
}
POSITIONS = "SELECT name, seq, byte_offset, frame_offset, digest FROM log_position ORDER BY name"
# rows a node holds that no log carries, so no digest covers them: table -> why (said in --json)
EXCLUDED: dict[str, str] = {t.name: t.local for t in TABLES if t.name == "agent_diary"}


@dataclass
class Digest:
    content: str                                   # over every replicated table
    positions: str                                 # over the log_position rows
    rows: dict[str, int] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    # the positions it stands for, read in the same transaction as the rows: name -> (seq, end offset)
    logs: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"content": self.content, "positions": self.positions, "rows": self.rows, "tables": self.tables,
                "excluded": EXCLUDED}

    def published(self, at_ms: int) -> dict[str, Any]:
        """What a node says beside the shared logs: the content and the positions (seqs) it stands for."""
        return {"content": self.content, "positions": {name: seq for name, (seq, _end) in self.logs.items()},
                "at": at_ms}


def _value(v: Any) -> Any:
    return v.hex() if isinstance(v, (bytes, memoryview)) else v


def _digest_rows(conn: Any, sql: str) -> tuple[str, int]:
    h = hashlib.blake2b(digest_size=16)
    n = 0
    for row in conn.execute(sql):
        h.update(json.dumps([_value(v) for v in row], ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        h.update(b"\n")
        n += 1
    return h.hexdigest(), n


def content_digest(source: Any) -> Digest:
    """The content digest of a database: `source` a connection, or the database file's path — then read on a
    read-only connection of its own, so a process computing it (the apply duty inside the app, `sync status`)
    holds no lock of its node's and keeps no reader of its waiting: it reads every replicated row, seconds on a
    large home. Read in one transaction, the positions with the rows, so a concurrent apply cannot tear it."""
    if isinstance(source, (str, Path)):
        from .db import connect

        conn = connect(Path(source), readonly=True)
        try:
            return content_digest(conn)
        finally:
            conn.close()
    conn = source
    conn.execute("BEGIN")
    try:
        total = hashlib.blake2b(digest_size=16)
        out = Digest("", "")
        for table, sql in REPLICATED.items():
            d, n = _digest_rows(conn, sql)
            out.tables[table], out.rows[table] = d, n
            total.update(f"{table}:{d}\n".encode())
        out.content = total.hexdigest()
        out.positions = _digest_rows(conn, POSITIONS)[0]
        out.logs = {r[0]: (int(r[1]), int(r[2])) for r in conn.execute("SELECT name, seq, byte_offset FROM log_position")}
    finally:
        conn.execute("COMMIT")
    return out
