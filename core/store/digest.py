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

# table -> the query listing its replicated columns in a fixed order (never a row id a node assigns)
REPLICATED: dict[str, str] = {
    "pages": "SELECT id, container, address, title, body, revision, parent_id, created_by, created_at, saved_by, "
             "saved_at, updated_at, trashed_at, trashed_by, labels, version FROM pages ORDER BY id",
    "revisions": "SELECT page_id, revision, title, body, author, at, kind, message FROM revisions "
                 "ORDER BY page_id, revision",
    "comments": "SELECT id, page_id, author, body, created_at, edited_at FROM comments ORDER BY id",
    "deleted_pages": "SELECT page_id, container, title, purged_by, purged_at, reason FROM deleted_pages "
                     "ORDER BY page_id",
    "containers": "SELECT key, name, purpose, lead, chart_epoch FROM containers ORDER BY key",
    "applied_ops": "SELECT op_id, seq, type, status, code, reason, result FROM applied_ops ORDER BY seq, op_id",
    "knowledge_reads": "SELECT op_id, actor, at, via, query, pages, backend, turn, phase FROM knowledge_reads "
                       "ORDER BY op_id",
    "agent_onboarding_markers": "SELECT agent_id, chain_hash, marked_at FROM agent_onboarding_markers "
                                "ORDER BY agent_id",
    "vectors": "SELECT source_id, kind, space, container, revision, digest, bytes, bucket, dims, seq, vector "
               "FROM vectors ORDER BY source_id, space",
    # each code with its list under the index that filed it
    "vector_codes": "SELECT v.source_id, v.space, c.code, c.list, c.generation FROM vector_codes c "
                    "JOIN vectors v ON v.id = c.id ORDER BY v.source_id, v.space",
    # the semantic index as its records installed it (what a node measures for itself left out)
    "semantic_index": "SELECT space, generation, lists, width, centroids, probes, ranges, refiled, trained_sources, "
                      "fullest, trained_at FROM semantic_index ORDER BY space",
}
POSITIONS = "SELECT name, seq, byte_offset, frame_offset, digest FROM log_position ORDER BY name"
# rows a node holds that no log carries, so no digest covers them: table -> why (said in --json)
EXCLUDED: dict[str, str] = {
    "agent_diary": "agents' diaries are this node's own (never on a log): each node holds the diaries of the "
                   "agents it runs, so nodes at one position may differ there",
}


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
