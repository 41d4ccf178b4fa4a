"""This node's last 256 answers, each kept at the corpus position it was written at.

An answer is found again by its key — the question with case and spacing folded, the set of spaces the
asker may read, and what it was written with (endpoint, model, output and source budgets) — and only at
the applied positions of the pages log and the vector log it was written at. Any write moves a position
(on this node, or on another node of a shared directory, once this node applied it), and every answer
kept at the old position is retired at the next ask. A repeat at the same position spends nothing and
says `cached: true`.

Kept in the node's own SQLite file (`answer_cache`, migration m008): a node's answers are its own, like
its keyword index; they never travel on a log. An answer is not kept when its search lacked something
that is made good without moving a position — a keyword index behind the rows, an embedding provider
that was slow or failing — so the same question is searched again once the search is whole.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from ..clock import now_ms
from ..store.db import transaction

if TYPE_CHECKING:
    from ..node import Node

SIZE = 256


def fold(question: str) -> str:
    """Case and spacing folded: "How do I  Deploy?" and "how do i deploy?" are one question."""
    return " ".join(question.casefold().split())


def cache_key(question: str, spaces: str, fingerprint: str) -> str:
    return hashlib.sha256(f"{fold(question)}\x00{spaces}\x00{fingerprint}".encode()).hexdigest()


class AnswerCache:
    def __init__(self, node: Node, size: int = SIZE) -> None:
        self.node = node
        self.size = size

    def _writable(self) -> bool:
        return not getattr(self.node, "readonly", False)

    def retire(self, position: tuple[int, int]) -> int:
        """Forget every answer written at another position; returns how many."""
        if not self._writable():
            return 0
        with self.node.lock:
            cur = self.node.conn.execute("DELETE FROM answer_cache WHERE pages_seq != ? OR vectors_seq != ?", position)
            return cur.rowcount or 0

    def get(self, key: str, position: tuple[int, int]) -> dict[str, Any] | None:
        with self.node.lock:
            row = self.node.conn.execute(
                "SELECT answer FROM answer_cache WHERE key = ? AND pages_seq = ? AND vectors_seq = ?",
                (key, *position)).fetchone()
            if row is None:
                return None
            if self._writable():
                self.node.conn.execute("UPDATE answer_cache SET used_at = ? WHERE key = ?", (now_ms(), key))
        return json.loads(row[0])

    def put(self, key: str, position: tuple[int, int], answer: dict[str, Any]) -> None:
        if not self._writable():
            return
        now = now_ms()
        with self.node.lock, transaction(self.node.conn) as conn:
            conn.execute("INSERT OR REPLACE INTO answer_cache (key, pages_seq, vectors_seq, answer, created_at, "
                         "used_at) VALUES (?, ?, ?, ?, ?, ?)", (key, *position, json.dumps(answer), now, now))
            conn.execute("DELETE FROM answer_cache WHERE key NOT IN "
                         "(SELECT key FROM answer_cache ORDER BY used_at DESC, created_at DESC LIMIT ?)",
                         (self.size,))

    def count(self) -> int:
        with self.node.lock:
            return int(self.node.conn.execute("SELECT count(*) FROM answer_cache").fetchone()[0])
