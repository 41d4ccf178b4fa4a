"""An agent's diary: one row per declarative fact it kept for itself, private to it, on this node.

Who may: an agent writes, forgets and recalls only its own notes; a person reads any agent's diary (the
CLI's `crewlet diary`, the app's Diaries screen); nobody writes another's. A diary is this node's own —
written to this node's database and never to a log (docs/architecture.md, "An agent's own memory").

Embedding: a note is embedded as it is written when the company has an embeddings provider — the same
`providers.embeddings` and space the knowledge base uses, whatever `knowledge.vectors` says (spec 000,
Configuration: vectors = false stops embedding the corpus; "the diary … keep[s] using the provider
regardless"). A note written without a vector (no provider, a slow or failing one) or under another
model is filled by the diary-fill duty (fill.py). With `provider = "none"` the diary is recency alone,
and every recall says so.

Recall (`recall`) is the spec's hybrid selection: the union of the vector top-50 (exact cosine of the
query against every note of the agent embedded under the current model — a per-agent scan, no index)
and the recency top-50, deduplicated by note id, so at most 100 notes. The order: the notes the vector
half found keep their order by cosine, and the recent notes it did not find take every other place,
newest first — the two lists fused by reciprocal rank (core/search/fusion.py), which for two disjoint
lists is exactly that alternation, the closest note first. Why: the recency half exists for broadly
applicable rules that are not a topical match, so ordered by similarity they would always sink to the
end and be the first cut by a limit; ordered by recency (or by fusing the two full rankings, which we
tried first) a small diary — where every note is in both halves — put the newest note above the one the
query is about. So a diary of at most 50 notes is ordered purely by meaning, and a larger one gives each
half an equal share of any limit. Each note carries its age, which half found it (both, when it is in
both), and its cosine when it has a vector. (The spec's auxiliary-LLM relevance filter over the union is not here yet:
crewlet has no chat-model provider on main; README "Agents' own memory" says so.)
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..config import Actor, Company
from ..errors import Invalid, NotFound, Refused, storage_problem
from ..clock import now_ms
from ..node import WriteFailed
from ..search.fusion import reciprocal_rank_fusion
from ..store import sqlite3
from .notes import check_note

if TYPE_CHECKING:
    import numpy as np

    from ..embed.provider import Provider
    from ..node import Node
    from ..search.query_vectors import QueryEmbedder

log = logging.getLogger("crewlet.diary")

HALF = 50                     # each half of the selection: the spec's K
UNION_MAX = 2 * HALF          # the union is the bound
DEFAULT_RECALL = 30
WRITE_EMBED_TIMEOUT_S = 10.0  # a remember waits this long for its vector, then keeps the note without one
LIST_MAX = 1000
TABLES_KEPT = 4               # agents' vector matrices a Diary keeps between recalls (a server serves one)


def diary_company(company: Company) -> Company:
    """The company as the diary embeds under it: the same provider and space, with knowledge.vectors
    (the corpus's switch) set aside. With provider = "none" it is the company as it is."""
    if company.embeddings.provider == "none" or company.knowledge.vectors:
        return company
    return replace(company, knowledge=replace(company.knowledge, vectors=True))


def has_provider(company: Company) -> bool:
    return company.embeddings.provider != "none"


def diary_provider(company: Company, *, threads: int | None = None) -> Provider | None:
    """The provider the diary embeds with, or None when the company has none."""
    from ..embed.registry import make_provider

    if not has_provider(company):
        return None
    return make_provider(diary_company(company), threads=threads)


def age_words(ms: int) -> str:
    """How old, in the largest whole unit: "just now", "5 minutes", "3 hours", "2 days", "4 months"."""
    s = max(0, ms) // 1000
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600),
                       ("minute", 60)):
        if s >= size:
            n = s // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return "just now"


def unit_vector(vector: Any) -> np.ndarray | None:
    """The vector as stored (float32, unit length), or None when it is not finite or all zero."""
    import numpy as np

    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(v)) if np.all(np.isfinite(v)) else 0.0
    if not norm or not np.isfinite(norm):
        return None
    return (v / norm).astype("<f4")


# -- what the diary answers ------------------------------------------------------------------------------

@dataclass
class Note:
    id: int
    agent: str
    text: str
    created_at: int
    space: str | None           # the embedding space of its vector (None: not embedded)

    def to_json(self, *, now: int | None = None, current_space: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "agent": self.agent, "text": self.text, "created_at": self.created_at,
                               "embedded": self.space is not None and (current_space is None
                                                                       or self.space == current_space)}
        if now is not None:
            out |= {"age_s": max(0, now - self.created_at) // 1000, "age": age_words(now - self.created_at)}
        return out


@dataclass
class Remembered:
    note: Note
    duplicate: bool             # the agent had already noted exactly this: nothing new was written
    embedded: bool
    why_not_embedded: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"note": self.note.to_json(), "duplicate": self.duplicate, "embedded": self.embedded,
                "why_not_embedded": self.why_not_embedded}


@dataclass
class NotesPage:
    agent: str
    notes: list[Note]
    total: int
    embedded: int               # notes with a vector under the current model
    space: str | None
    now: int

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "total": self.total, "shown": len(self.notes), "embedded": self.embedded,
                "space": self.space, "notes": [n.to_json(now=self.now, current_space=self.space) for n in self.notes]}


@dataclass
class RecalledNote:
    note: Note
    via: list[str]              # "meaning" and/or "recent": which half found it
    rank: int                   # its place in the answer, from 1
    similarity: float | None    # the exact cosine to the query, when the note has a current vector

    def to_json(self, now: int, space: str | None = None) -> dict[str, Any]:
        return self.note.to_json(now=now, current_space=space) | {"rank": self.rank, "via": self.via,
                                             "similarity": None if self.similarity is None else round(self.similarity, 4)}


@dataclass
class Recall:
    agent: str
    query: str
    notes: list[RecalledNote]
    mode: str                   # "hybrid" (both halves) | "recency" (the vector half could not run)
    union: int                  # notes in the union before the limit
    by_meaning: int             # the vector half's size
    by_recency: int             # the recency half's size
    total: int                  # the agent's notes
    embedded: int               # of them, with a vector under the current model
    degraded: str = ""          # "" | "no_provider" | "provider_failed" | "no_query" | "partly_embedded"
    message: str = ""           # the outcome in words
    space: str | None = None    # the embedding space notes are compared in (None: no provider)
    now: int = field(default_factory=now_ms)

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "query": self.query, "mode": self.mode, "union": self.union,
                "by_meaning": self.by_meaning, "by_recency": self.by_recency, "total": self.total,
                "embedded": self.embedded, "degraded": self.degraded or None, "message": self.message,
                "notes": [n.to_json(self.now, self.space) for n in self.notes]}


# -- the diary -------------------------------------------------------------------------------------------

class Diary:
    """The diaries of this node, as the actor asking (the operator by default) may use them.

    `embedder` embeds queries (the search's QueryEmbedder: bounded, cached); one is made on first use.
    Every method takes the node's lock around its use of the connection."""

    def __init__(self, node: Node, *, embedder: QueryEmbedder | None = None,
                 provider_factory: Callable[..., Provider | None] | None = None) -> None:
        self.node = node
        self._embedder = embedder
        self._provider_factory = provider_factory
        self._tables: dict[tuple[str, str], tuple[int, np.ndarray, np.ndarray]] = {}
        self._tables_lock = threading.Lock()

    @property
    def company(self) -> Company:
        """The configuration as company.toml says now (one stat): a model or a space changed in the file
        applies to the next call of a long-running server or app."""
        self.node.refresh_config()
        return self.node.company

    @property
    def embedder(self) -> QueryEmbedder:
        if self._embedder is None:
            from ..embed.registry import make_provider
            from ..search.query_vectors import QueryEmbedder

            self._embedder = QueryEmbedder(self._provider_factory or make_provider)
        return self._embedder

    def provider(self) -> Provider | None:
        if not has_provider(self.company):
            return None
        return self.embedder.provider(diary_company(self.company))

    def close(self) -> None:
        if self._embedder is not None:
            self._embedder.close()

    # -- who may -------------------------------------------------------------------------------------
    def _actor(self, handle: str | None) -> Actor:
        company = self.company
        handle = handle or company.operator
        if not handle:
            raise Refused(f"no actor to act as: set `operator = \"…\"` in {company.file}, or pass --as HANDLE",
                          code="no_actor")
        return company.actor(handle)

    def owner(self, handle: str | None) -> Actor:
        """The agent writing its own diary; a person has none."""
        who = self._actor(handle)
        if not who.is_agent:
            raise Refused(f"{who.handle} is a person, and a diary is an agent's own: a person reads agents' diaries "
                          "(`crewlet diary AGENT`) and keeps knowledge in pages", code="not_an_agent")
        return who

    def reader(self, agent: str, handle: str | None) -> Actor:
        """May `handle` read `agent`'s diary? An agent its own only; a person any agent's."""
        who = self._actor(handle)
        target = self.node.company.actor(agent)     # _actor re-read the configuration
        if not target.is_agent:
            raise Invalid(f"{agent} is a person, not an agent: only agents keep diaries", fix="`crewlet agents` lists them",
                          code="not_an_agent")
        if who.is_agent and who.handle != agent:
            raise Refused(f"{who.handle} may read only its own diary, not {agent}'s: a diary is private to its agent",
                          code="not_yours")
        return target

    # -- writing -------------------------------------------------------------------------------------
    def _write(self, sql: str, params: tuple[Any, ...]) -> Any:
        if self.node.readonly:
            raise WriteFailed(f"{self.node.home.db_file} cannot be written (this home opened read-only) — nothing "
                              "was remembered or forgotten", code="read_only")
        try:
            with self.node.lock:
                return self.node.conn.execute(sql, params)
        except (sqlite3.Error, OSError) as exc:
            code, words = storage_problem(exc, self.node.home.db_file)
            raise WriteFailed(f"{words} — nothing was changed in the diary", code=code) from None

    def remember(self, text: str, *, actor: str | None = None) -> Remembered:
        """Keep one fact in the actor's own diary, embedded now when a provider answers in time."""
        agent = self.owner(actor).handle
        note_text = check_note(text)
        with self.node.lock:
            row = self.node.conn.execute("SELECT id, agent, text, created_at, space FROM agent_diary "
                                         "WHERE agent = ? AND text = ? LIMIT 1", (agent, note_text)).fetchone()
        if row is not None:
            note = _note(row)
            return Remembered(note, duplicate=True, embedded=note.space is not None)
        space, blob, why = self._embed_now(note_text)
        created = now_ms()
        cur = self._write("INSERT INTO agent_diary (agent, text, created_at, space, vector) VALUES (?, ?, ?, ?, ?)",
                          (agent, note_text, created, space, blob))
        note = Note(int(cur.lastrowid), agent, note_text, created, space)
        return Remembered(note, duplicate=False, embedded=space is not None, why_not_embedded=why)

    def _embed_now(self, text: str) -> tuple[str | None, bytes | None, str]:
        """(space, vector bytes, why not) for a note being written."""
        from ..embed.provider import ProviderError

        if not has_provider(self.company):
            return None, None, 'no embeddings provider (providers.embeddings provider = "none"): recalled by recency'
        try:
            provider = self.provider()
            if provider is None:
                return None, None, "no embeddings provider"
            vector = unit_vector(provider.embed([text], timeout=WRITE_EMBED_TIMEOUT_S)[0])
        except ProviderError as exc:
            return None, None, f"the embeddings provider failed ({exc}); the diary-fill duty embeds it later"
        except Exception as exc:  # noqa: BLE001 - a note is never lost to its embedding
            log.warning("embedding a diary note failed: %s", exc)
            return None, None, f"embedding failed ({exc}); the diary-fill duty embeds it later"
        if vector is None:
            return None, None, "the provider answered a vector that is not finite or all zero"
        return provider.space.key(), vector.tobytes(), ""

    def forget(self, note_id: int, *, actor: str | None = None) -> Note:
        """Delete one of the actor's own notes."""
        agent = self.owner(actor).handle
        with self.node.lock:
            row = self.node.conn.execute("SELECT id, agent, text, created_at, space FROM agent_diary "
                                         "WHERE id = ? AND agent = ?", (note_id, agent)).fetchone()
        if row is None:   # another agent's note is answered exactly as a missing one
            raise NotFound(f"there is no note {note_id} in {agent}'s diary — recall_memory gives your notes' ids",
                           code="note_not_found")
        self._write("DELETE FROM agent_diary WHERE id = ? AND agent = ?", (note_id, agent))
        return _note(row)

    # -- reading -------------------------------------------------------------------------------------
    def current_space(self) -> str | None:
        """The space notes are embedded in now (None without a provider). Nothing is loaded."""
        if not has_provider(self.company):
            return None
        provider = diary_provider(self.company, threads=1)
        return provider.space.key() if provider is not None else None

    def counts(self, agent: str, space: str | None) -> tuple[int, int]:
        """(notes, notes embedded in `space`) of one agent: two indexed counts."""
        with self.node.lock:
            total = self.node.conn.execute("SELECT count(*) FROM agent_diary WHERE agent = ?", (agent,)).fetchone()[0]
            embedded = self.node.conn.execute("SELECT count(*) FROM agent_diary WHERE agent = ? AND space = ?",
                                              (agent, space)).fetchone()[0] if space else 0
        return int(total), int(embedded)

    def notes(self, agent: str, *, actor: str | None = None, limit: int = 100, before: int | None = None) -> NotesPage:
        """One agent's notes, newest first (`before`: only notes with a smaller id, for the next window)."""
        self.reader(agent, actor)
        if not 1 <= limit <= LIST_MAX:
            raise Invalid(f"limit {limit} is out of range — use 1 to {LIST_MAX}", code="invalid_limit")
        space = self.current_space()
        with self.node.lock:
            rows = self.node.conn.execute(
                "SELECT id, agent, text, created_at, space FROM agent_diary WHERE agent = ?"
                + (" AND id < ?" if before is not None else "") + " ORDER BY created_at DESC, id DESC LIMIT ?",
                (agent, before, limit) if before is not None else (agent, limit)).fetchall()
        total, embedded = self.counts(agent, space)
        return NotesPage(agent, [_note(r) for r in rows], total, embedded, space, now_ms())

    def sizes(self) -> dict[str, int]:
        """Notes per agent on this node (agents with none are absent)."""
        with self.node.lock:
            return {r[0]: int(r[1]) for r in self.node.conn.execute(
                "SELECT agent, count(*) FROM agent_diary GROUP BY agent")}

    # -- recall: the hybrid selection ------------------------------------------------------------------
    def recall(self, query: str, *, actor: str | None = None, agent: str | None = None,
               limit: int = DEFAULT_RECALL) -> Recall:
        """The notes to hand an agent for `query`: the union of the vector top-50 and the recency top-50,
        in the order the module's docstring gives, cut to `limit` (at most 100). An agent recalls its own diary; a person may ask as
        any agent (`agent`)."""
        who = self._actor(actor)
        agent = agent or who.handle
        self.reader(agent, actor)     # the configuration was re-read (one stat) by _actor just now
        if not 1 <= limit <= UNION_MAX:
            raise Invalid(f"limit {limit} is out of range — use 1 to {UNION_MAX} (the union of the two halves of "
                          f"{HALF} is the bound)", code="invalid_limit")
        query = " ".join((query or "").split())
        with self.node.lock:
            recent = [int(r[0]) for r in self.node.conn.execute(
                "SELECT id FROM agent_diary WHERE agent = ? ORDER BY created_at DESC, id DESC LIMIT ?", (agent, HALF))]
        by_meaning, similarity, space, degraded, why, scanned = self._meaning_half(agent, query)
        if scanned is not None:   # the scan counted the embedded notes: the total is one lookup
            embedded = scanned
            with self.node.lock:
                row = self.node.conn.execute("SELECT notes FROM agent_diary_versions WHERE agent = ?",
                                             (agent,)).fetchone()
            total = int(row[0]) if row else 0
        else:
            total, embedded = self.counts(agent, space)
        found = set(by_meaning)
        fused = reciprocal_rank_fusion([[str(i) for i in by_meaning], [str(i) for i in recent if i not in found]])
        union = len(fused)
        chosen = [int(i) for i, _ in fused[:limit]]
        with self.node.lock:
            rows = {int(r["id"]): _note(r) for r in self.node.conn.execute(
                f"SELECT id, agent, text, created_at, space FROM agent_diary WHERE id IN ({','.join('?' * len(chosen))})",
                chosen)} if chosen else {}
        meaning, recency = set(by_meaning), set(recent)
        out: list[RecalledNote] = []
        for note_id in chosen:
            note = rows.get(note_id)
            if note is None:      # forgotten between the two reads
                continue
            via = [w for w, s in (("meaning", meaning), ("recent", recency)) if note_id in s]
            out.append(RecalledNote(note, via, len(out) + 1, similarity.get(note_id)))
        if not degraded and space and embedded < total:
            degraded = "partly_embedded"
            why = (f"{total - embedded:,} of {total:,} notes are not embedded under the current model yet: they are "
                   "found by recency alone until the diary-fill duty embeds them")
        mode = "hybrid" if degraded in ("", "partly_embedded") else "recency"
        shown = f"{len(out)} of {union} notes" if union > len(out) else f"{len(out)} note{'s' if len(out) != 1 else ''}"
        if total == 0:
            message = f"{agent}'s diary is empty: nothing to recall"
        elif mode == "hybrid":
            message = (f"{shown}: the union of {len(by_meaning)} closest in meaning and {len(recent)} most recent, "
                       f"of {total:,} in {agent}'s diary")
        else:
            message = f"{shown}: the {len(recent)} most recent of {total:,} in {agent}'s diary" + (
                "" if why else ", by recency alone")
        if why:
            message += f" — {why}"
        return Recall(agent, query, out, mode, union, len(by_meaning), len(recent), total, embedded, degraded, message,
                      space=space)

    def _meaning_half(self, agent: str, query: str
                      ) -> tuple[list[int], _Scores | dict[int, float], str | None, str, str, int | None]:
        """(ids best first, cosine by id, the space, degraded code, why, notes scanned) — the vector top-50
        by an exact scan of the agent's notes embedded in the current space."""
        company = self.node.company      # as recall's _actor just re-read it
        if not has_provider(company):
            return [], {}, None, "no_provider", ('no embeddings provider is configured (providers.embeddings '
                                                 'provider = "none"): recalled by recency alone'), None
        if not query:
            return [], {}, self.current_space(), "no_query", "no query was given: recalled by recency alone", None
        qv = self.embedder.vector(diary_company(company), query)
        if qv.vector is None:
            return ([], {}, qv.space or self.current_space(), "provider_failed",
                    f"{qv.message}: recalled by recency alone", None)
        q = unit_vector(qv.vector)
        if q is None:
            return [], {}, qv.space, "provider_failed", "the query's vector is all zero: recalled by recency alone", None
        ids, scores = self.scan(agent, qv.space, q)
        return _top(ids, scores, HALF), _Scores(ids, scores), qv.space, "", "", len(ids)

    def scan(self, agent: str, space: str, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, cosines) of every note of `agent` embedded in `space`, against the unit query `q`: an exact
        scan, one matrix product over all of them (there is no vector index).

        The matrix is kept in memory between recalls (per agent and space, the last TABLES_KEPT of them)
        with the agent's diary version (`agent_diary_versions`, counted by triggers on every write by any
        process): one indexed lookup tells it is current. When the version moved, the ids the (agent,
        space) index lists now are read from the index alone, and only notes written or filled since are
        read; forgotten ones are dropped. Ids are never reused (AUTOINCREMENT), and a note's vector in a
        space never changes, so equal ids are equal rows. bench/diary.py: reading every vector from SQLite
        at each recall cost 58 ms at p95 for 10,000 × 384, and 360 ms at 1,536 dimensions."""
        import numpy as np

        key = (agent, space)
        with self.node.lock:
            row = self.node.conn.execute("SELECT version FROM agent_diary_versions WHERE agent = ?", (agent,)).fetchone()
            version = int(row[0]) if row else 0
            with self._tables_lock:
                held = self._tables.pop(key, None)
            if held is None or held[0] != version:
                ids = np.fromiter((r[0] for r in self.node.conn.execute(
                    "SELECT id FROM agent_diary INDEXED BY agent_diary_space WHERE agent = ? AND space = ? "
                    "ORDER BY id", (agent, space))), dtype=np.int64)
                matrix = self._matrix(ids, held[1:] if held is not None else None)
            else:
                _, ids, matrix = held
        if not len(ids) or matrix is None or matrix.shape[1] != q.shape[0]:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        with self._tables_lock:
            self._tables[key] = (version, ids, matrix)
            while len(self._tables) > TABLES_KEPT:
                self._tables.pop(next(iter(self._tables)))
        return ids, matrix @ q

    def _matrix(self, ids: np.ndarray, held: tuple[Any, ...] | None) -> np.ndarray | None:
        """The vectors of `ids` in that order: the rows `held` has, and the others read by id."""
        import numpy as np

        if not len(ids):
            return None
        if held is not None and len(held[0]) == len(ids) and np.array_equal(held[0], ids):
            return held[1]
        have = np.zeros(len(ids), dtype=bool)
        if held is not None and len(held[0]):
            at = np.minimum(np.searchsorted(held[0], ids), len(held[0]) - 1)
            have = held[0][at] == ids
        missing = ids[~have].tolist()
        read: dict[int, bytes] = {}
        with self.node.lock:
            for start in range(0, len(missing), 500):
                chunk = missing[start:start + 500]
                read.update((int(r[0]), r[1]) for r in self.node.conn.execute(
                    f"SELECT id, vector FROM agent_diary WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        width = held[1].shape[1] if held is not None and len(held[0]) else (
            len(next(iter(read.values()))) // 4 if read else 0)
        if not width:
            return None
        matrix = np.zeros((len(ids), width), dtype=np.float32)
        if have.any():
            matrix[have] = held[1][at[have]]  # type: ignore[index]
        for row in np.flatnonzero(~have):
            blob = read.get(int(ids[row]))
            if blob is not None and len(blob) == width * 4:    # a note forgotten meanwhile, or torn: scores 0
                matrix[row] = np.frombuffer(blob, dtype="<f4")
        return matrix


class _Scores:
    """The scan's cosines, looked up by note id (ids ascending) for the few notes an answer shows."""

    def __init__(self, ids: np.ndarray, scores: np.ndarray) -> None:
        self.ids, self.scores = ids, scores

    def get(self, note_id: int) -> float | None:
        import numpy as np

        at = int(np.searchsorted(self.ids, note_id))
        return float(self.scores[at]) if at < len(self.ids) and self.ids[at] == note_id else None


def _top(ids: np.ndarray, scores: np.ndarray, k: int) -> list[int]:
    """The k best ids by score, ties to the newer note (the larger id)."""
    import numpy as np

    if not len(ids):
        return []
    if len(ids) > k:
        keep = np.argpartition(-scores, k - 1)[:k]
        # ties at the cut: argpartition picks arbitrarily among equal scores, so widen to them and sort
        cut = scores[keep].min()
        keep = np.flatnonzero(scores >= cut)
    else:
        keep = np.arange(len(ids))
    order = np.lexsort((-ids[keep], -scores[keep]))
    return [int(i) for i in ids[keep][order][:k]]


def _note(row: Any) -> Note:
    return Note(int(row["id"]), row["agent"], row["text"], int(row["created_at"]), row["space"])
