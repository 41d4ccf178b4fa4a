"""The semantic retriever: two stages over this node's replicated vectors.

Stage one ranks the narrow table of 1-bit sign codes by Hamming distance to the query's own code and
keeps the nearest 1,200; stage two reranks exactly those candidates against their full float vectors,
read by primary key, and returns 150 by exact cosine. The score a hit shows is always the exact one:
a sign code decides which documents are looked at, never how they are ordered.

Filters apply INSIDE stage one, before its cut: the embedding space (a model change leaves the sources
not yet refilled out of the pool rather than ranked badly), the access policy's containers and excluded
pages, and pages the rows say are trashed or auto-drafts. A filtered search therefore returns its
container's nearest pages even when they are far from the global nearest.

The codes of a space are held in memory (the sqlite-vec table stays the record), reloaded when the
vector log moves; what the page rows say (trashed, drafts) is read again when a page changes.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import AUTO_DRAFT_TITLE_PREFIX
from . import vectors
from .access import Access

STAGE_ONE = 1200      # candidates kept by Hamming distance
STAGE_TWO = 150       # returned by exact cosine


def sign_code(vector: np.ndarray) -> np.ndarray:
    """The 1-bit code of a vector as sqlite-vec's vec_quantize_binary writes it (bit i set when
    component i > 0, least significant bit first)."""
    return np.packbits(np.asarray(vector) > 0, bitorder="little")


def _words(codes: np.ndarray) -> np.ndarray:
    """Codes as 64-bit words (zero-padded to a whole word) for a fast XOR + popcount."""
    n, width = codes.shape
    pad = (-width) % 8
    if pad:
        codes = np.concatenate([codes, np.zeros((n, pad), dtype=np.uint8)], axis=1)
    return np.ascontiguousarray(codes).view(np.uint64)


@dataclass
class CodeTable:
    """One embedding space's codes, in memory, in vectors.id order."""

    space: str
    seq: int                       # the vector-log position it was loaded at
    ids: np.ndarray                # vectors.id
    sources: list[str]             # page ids
    containers: np.ndarray         # an index into container_names
    container_names: list[str]
    words: np.ndarray              # (n, words) uint64
    row_of: dict[str, int]

    @property
    def size(self) -> int:
        return len(self.sources)

    def hamming(self, code: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        q = _words(code.reshape(1, -1))[0]
        words = self.words if rows is None else self.words[rows]
        return np.bitwise_count(words ^ q).sum(axis=1, dtype=np.uint32)


def load_table(conn: Any, space: str, seq: int) -> CodeTable:
    rows = conn.execute(
        "SELECT v.id, v.source_id, v.container, c.code FROM vectors v JOIN vector_codes c ON c.id = v.id "
        "WHERE v.space = ? ORDER BY v.id", (space,)).fetchall()
    names = sorted({r[2] for r in rows})
    index = {name: i for i, name in enumerate(names)}
    if rows:
        width = len(rows[0][3])
        codes = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.uint8).reshape(len(rows), width)
    else:
        codes = np.zeros((0, 8), dtype=np.uint8)
    sources = [r[1] for r in rows]
    return CodeTable(space=space, seq=seq, ids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
                     sources=sources,
                     containers=np.fromiter((index[r[2]] for r in rows), dtype=np.int32, count=len(rows)),
                     container_names=names, words=_words(codes), row_of={s: i for i, s in enumerate(sources)})


@dataclass
class SemanticRanking:
    ranked: list[tuple[str, float]]      # page ids by exact cosine, best first
    pool: int                            # sources in the space this search could reach (after filters)
    candidates: int                      # kept by stage one


class SemanticRetriever:
    """Thread-safe (one search at a time holds the lock)."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._table: CodeTable | None = None
        self._unlisted_key: int | None = None
        self._unlisted: frozenset[str] = frozenset()

    def table(self, space: str) -> CodeTable:
        """The space's codes, reloaded when the vector log has moved since they were read."""
        with self.node.lock:
            seq = vectors.position(self.node.conn)[0]
            table = self._table
            if table is None or table.space != space or table.seq != seq:
                table = self._table = load_table(self.node.conn, space, seq)
        return table

    def _unlisted_pages(self) -> frozenset[str]:
        """Pages whose vectors a search must pass over: trashed, or auto-drafts by title (re-read when a
        page changes)."""
        with self.node.lock:
            version = self.node.conn.execute("SELECT max(version) FROM pages").fetchone()[0] or 0
            if version != self._unlisted_key:
                self._unlisted = frozenset(r[0] for r in self.node.conn.execute(
                    "SELECT id FROM pages WHERE trashed_at IS NOT NULL OR title LIKE ?",
                    (AUTO_DRAFT_TITLE_PREFIX + "%",)))
                self._unlisted_key = version
            return self._unlisted

    def mask(self, table: CodeTable, access: Access) -> np.ndarray:
        """The rows a search may rank: everything no hit may be is out before stage one's cut."""
        mask = np.ones(table.size, dtype=bool)
        if access.allowed is not None or access.skills in table.container_names:
            keep = [i for i, name in enumerate(table.container_names) if access.admits_container(name)]
            mask &= np.isin(table.containers, np.asarray(keep, dtype=np.int32))
        drop = set(self._unlisted_pages())
        drop |= access.excluded_ids
        rows = [table.row_of[s] for s in drop if s in table.row_of]
        if rows:
            mask[np.asarray(rows, dtype=np.int64)] = False
        return mask

    def rank(self, query: np.ndarray, space: str, access: Access, *, stage_one: int = STAGE_ONE,
             depth: int = STAGE_TWO) -> SemanticRanking:
        with self._lock:
            table = self.table(space)
            rows = np.flatnonzero(self.mask(table, access)) if table.size else np.zeros(0, dtype=np.int64)
            pool = len(rows)
            if not pool:
                return SemanticRanking([], 0, 0)
            dist = table.hamming(sign_code(query), rows)
            if pool > stage_one:
                # the nearest `stage_one` by distance; ties at the cut go to the lower row (a fixed order)
                part = np.argpartition(dist, stage_one - 1)[:stage_one]
                rows = rows[part[np.lexsort((rows[part], dist[part]))]]
            keep = [int(i) for i in table.ids[rows]]
            with self.node.lock:
                full = vectors.load_vectors(self.node.conn, keep)
            present = [(row, vid) for row, vid in zip(rows, keep) if vid in full]  # replaced since: next time
            if not present:
                return SemanticRanking([], pool, len(keep))
            matrix = np.stack([full[vid] for _, vid in present])
            q = np.asarray(query, dtype=np.float32)
            norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
            cosines = (matrix @ q) / np.where(norms > 0, norms, 1.0)
            scored = sorted(((table.sources[row], float(c)) for (row, _), c in zip(present, cosines)),
                            key=lambda item: (-item[1], item[0]))
            return SemanticRanking(scored[:depth], pool=pool, candidates=len(keep))
