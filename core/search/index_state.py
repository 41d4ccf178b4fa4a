"""The keyword index's state as its small files say it — the manifest of the index in use, the journal of
a build under way, how far the index covers the applied log — readable without Whoosh or numpy, so
`crewlet index status` (and anything else that only asks what the index covers) costs what
`crewlet spaces` does, at any size. The indexer writes these files; this module only defines and reads them.

A change to what the index derives — a field, the analyser, the body's text, the link grammar — bumps
INDEX_DERIVATION (core/search/lexical.py says what the derivation is); the indexer then re-derives every
row once, on its own.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..pages.applier import position
from ..store import Connection

INDEX_DERIVATION = 4     # 4: entries are documents too (core/search/entry_docs.py)

STATE_FILE = "state.json"
BUILD_FILE = "build.json"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


@dataclass
class IndexManifest:
    """What the index in use covers. Exists only once this node's first build has finished."""

    dir: str
    derivation: int
    indexed_seq: int
    pages: int
    first_build_at: int
    built_at: int
    updated_at: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> IndexManifest | None:
        if not data:
            return None
        try:
            return cls(dir=str(data["dir"]), derivation=int(data["derivation"]), indexed_seq=int(data["indexed_seq"]),
                       pages=int(data.get("pages", 0)), first_build_at=int(data["first_build_at"]),
                       built_at=int(data.get("built_at", 0)), updated_at=int(data.get("updated_at", 0)))
        except (KeyError, TypeError, ValueError):
            return None


def state_path(index_dir: Path) -> Path:
    return index_dir / STATE_FILE


def read_state(index_dir: Path) -> IndexManifest | None:
    return IndexManifest.from_json(_read_json(state_path(index_dir)))


@dataclass
class BuildJournal:
    dir: str
    derivation: int
    snapshot_seq: int
    cursor: str
    done: int
    total: int
    started_at: int
    # the chunk whose segment was being added to the index: {segment, cursor, rows}. Written before the
    # index's TOC names the segment, so a build stopped between the two knows, when it resumes, whether
    # that chunk is in (move the cursor past it) or not (build it again) — never indexed twice
    pending: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> BuildJournal | None:
        if not data:
            return None
        try:
            pending = data.get("pending")
            return cls(dir=str(data["dir"]), derivation=int(data["derivation"]), snapshot_seq=int(data["snapshot_seq"]),
                       cursor=str(data["cursor"]), done=int(data["done"]), total=int(data["total"]),
                       started_at=int(data["started_at"]),
                       pending={"segment": str(pending["segment"]), "cursor": str(pending["cursor"]),
                                "rows": int(pending["rows"])} if pending else None)
        except (KeyError, TypeError, ValueError):
            return None


@dataclass
class IndexStatus:
    """What the index covers, for `crewlet index status`, the app's status line and the searcher."""

    first_build_done: bool
    first_build_at: int | None
    derivation: int | None            # what the index in use was built with
    current_derivation: int           # what this build of crewlet derives
    indexed_seq: int
    applied_seq: int
    pages_indexed: int
    directory: str | None
    building: BuildJournal | None = None

    @property
    def behind(self) -> int:
        return max(0, self.applied_seq - self.indexed_seq)

    @property
    def rebuild_pending(self) -> bool:
        return self.first_build_done and self.derivation != self.current_derivation

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["behind"] = self.behind
        out["rebuild_pending"] = self.rebuild_pending
        return out


def page_change_since(conn: Connection, seq: int) -> bool:
    """Has any record past `seq` changed what the index derives (a page row, an entry row, or a purge)?"""
    row = conn.execute(
        "SELECT EXISTS(SELECT 1 FROM pages WHERE version > ?) "
        "OR EXISTS(SELECT 1 FROM applied_ops WHERE seq > ? AND type = 'page.purge' AND status = 'applied')",
        (seq, seq)).fetchone()
    if row[0]:
        return True
    try:
        return bool(conn.execute("SELECT EXISTS(SELECT 1 FROM entries WHERE version > ?)", (seq,)).fetchone()[0])
    except Exception as exc:  # a store from before the entries (`crewlet search eval` on an old backup)
        if "no such table" not in str(exc):
            raise
        return False


def covered_seq(conn: Connection, indexed_seq: int, applied_seq: int) -> int:
    """The position the index truly covers: records that touch no page (a read, a comment) move the
    applied position without changing anything the index derives."""
    if applied_seq <= indexed_seq:
        return indexed_seq
    return indexed_seq if page_change_since(conn, indexed_seq) else applied_seq


def keyword_status(index_dir: Path, conn: Connection, *, current_derivation: int = INDEX_DERIVATION) -> IndexStatus:
    """What the index in `index_dir` covers against the rows `conn` reads (the caller holds what guards it)."""
    st = read_state(index_dir)
    applied = position(conn)[0]
    indexed = covered_seq(conn, st.indexed_seq, applied) if st else 0
    return IndexStatus(
        first_build_done=st is not None, first_build_at=st.first_build_at if st else None,
        derivation=st.derivation if st else None, current_derivation=current_derivation,
        indexed_seq=indexed, applied_seq=applied, pages_indexed=st.pages if st else 0,
        directory=str(index_dir / st.dir) if st else None,
        building=BuildJournal.from_json(_read_json(index_dir / BUILD_FILE)))
