"""Repeats by meaning, before an entry is written (spec 003, "Repeats before write"): entries in use nearer
than KNOWLEDGE_SIMILARITY_THRESHOLD to a new body are returned to the writer, with nothing written, unless it
says the fact is distinct (`distinct: true`) or the write supersedes one. An exact repeat is folded apart, as a
corroboration (EntryBank.add)."""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..embed.provider import Provider, ProviderError
from ..embed.registry import make_provider
from ..embed.text import embed_text
from ..pages.service import Writer
from ..repos.modules import written_scopes_meet
from ..search.entry_docs import IN_BANK_SQL, KIND, PREFIX
from ..vectors.records import position as vector_position

if TYPE_CHECKING:
    import numpy as np

    from ..search.code_table import CodeTable
    from ..search.semantic import SemanticRetriever

# numpy, the Hamming kernel and the vector reader are imported by the check that uses them: the bank is imported
# by commands that never compare a vector (`crewlet entries`)




# -- finding them -----------------------------------------------------------------------------------------------
# KNOWLEDGE_SIMILARITY_THRESHOLD is read as a cosine distance on the configured embedding model: an entry is a
# neighbour when 1 − cosine(new body, its body) < threshold (the default 0.25: cosine above 0.75). Measured on
# the labelled pairs (tests/data/entry_pairs.jsonl) with the shipped local model, docs/entries.md "Neighbours
# before write": at 0.25 it returns 91% of the pairs labelled related (duplicate, refinement, replacement,
# contradiction) and 11% of those labelled different.
#
# What cannot be compared by meaning is compared by words, and said: the stemmed terms of the keyword index's
# own analyser (stop words out), Jaccard at least WORDS_FLOOR — measured on the same pairs to return as many of
# the related ones as meaning does at the default threshold (91%; 7% of the different ones). That is every
# entry when vectors are off or the provider failed, else the entries past MAX_EMBED_NOW that had no current
# vector (the embedding duty has not reached them yet: up to MAX_EMBED_NOW such entries are embedded here, in
# the request that embeds the new body, and nothing is published — the duty files their vectors).
WORDS_FLOOR = 0.40
MAX_EMBED_NOW = 64           # entries without a current vector embedded in the write's own request
STAGE_ONE = 256              # the entries' vectors the sign codes choose for the exact scores, at first …
RADIUS_SLACK = 1.25          # … four times more while the furthest is within 1.25 × a threshold cosine's distance
EMBED_TIMEOUT_S = 30.0       # the write waits this long for the provider, then compares by words and says so
MAX_RETURNED = 5             # neighbours returned to the writer, nearest first

MEANING, WORDS = "meaning", "words"


@dataclass
class Neighbourhood:
    """What the check found: (entry id, similarity, how it was compared) nearest first — a cosine for
    "meaning", a Jaccard of terms for "words" — and a sentence saying what was compared how."""

    similar: list[tuple[str, float, str]] = field(default_factory=list)
    note: str = ""
    compared: int = 0




@functools.cache
def _analyzer() -> Any:
    from ..search import lexical

    return lexical.make_analyzer()


def words_of(text: str) -> set[str]:
    from ..search import lexical

    return set(lexical.analyze(_analyzer(), text, None))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


# An entry's row with its page's place and its vector's stamp in the configured space (None: no vector)
_ROW = ("SELECT e.id, e.scope, e.version, v.revision, v.digest, "
        "CASE WHEN v.revision = e.version THEN '' ELSE e.body END AS body FROM entries e "
        "JOIN pages p ON p.id = e.page_id AND p.trashed_at IS NULL "
        "LEFT JOIN vectors v ON v.source_id = ? || e.id AND v.space = ? "
        f"WHERE e.{IN_BANK_SQL}")
# the newest revision among the entries' vectors the duty filed lately: entries changed after it wait for the duty
_NEWEST_EMBEDDED = ("SELECT max(revision) FROM (SELECT revision FROM vectors INDEXED BY vectors_seq "
                    "WHERE kind = ? AND space = ? ORDER BY seq DESC LIMIT 64)")
_HELD = "SELECT substr(source_id, ?) FROM embed_holds WHERE source_id >= ? AND source_id < ?"
CHUNK = 500


@dataclass
class Candidate:
    id: str
    scope: str | None = None
    body: str = ""


class NeighbourFinder:
    """Finds the entries in the bank (not ARCHIVED or SUPERSEDED, under a page not in the trash, in a scope that
    meets the new one's) nearer to a new body than the threshold. One per EntryBank; the provider is the
    company's as configured at each call (`provider_factory`: a test's). The entries' vectors are ranked by the
    semantic engine (core/search/semantic.py: its code table, stage one's sign codes, stage two's exact floats),
    `semantic()` giving the retriever — a session's searcher's, so the codes are held once a process; by default
    one of the finder's own, made at its first check by meaning."""

    def __init__(self, node: Writer, *, provider_factory: Callable[..., Provider | None] = make_provider,
                 timeout_s: float = EMBED_TIMEOUT_S, semantic: Callable[[], SemanticRetriever | None] | None = None
                 ) -> None:
        self.node = node
        self.provider_factory = provider_factory
        self.timeout_s = timeout_s
        self._semantic_of = semantic
        self._own: SemanticRetriever | None = None
        self._entry_rows: tuple[Any, int, np.ndarray] | None = None   # (the table weakly, rows seen, entry by row)
        self._newest: tuple[tuple[str, int], int | None] | None = None  # ((space, vector-log position), revision)

    def semantic(self) -> SemanticRetriever:
        shared = self._semantic_of() if self._semantic_of is not None else None
        if shared is not None:
            return shared
        if self._own is None:
            from ..search.semantic import SemanticRetriever

            self._own = SemanticRetriever(self.node)   # type: ignore[arg-type]  # a Node: the finder's is one
        return self._own

    def find(self, body: str, *, scope: str | None, threshold: float) -> Neighbourhood:
        if threshold <= 0:
            return Neighbourhood(note="KNOWLEDGE_SIMILARITY_THRESHOLD is 0: no neighbour check")
        company = self.node.company
        provider = self.provider_factory(company) if company.knowledge.vectors else None
        if provider is None:
            rows = self._every(scope)
            if not rows:
                return Neighbourhood(note="no entry in the bank to compare with")
            return self._by_words(body, rows, "vectors are off (knowledge.vectors = false): compared by words")
        try:
            return self._by_meaning(body, scope, threshold, provider)
        finally:
            provider.close()

    def _by_meaning(self, body: str, scope: str | None, threshold: float, provider: Provider) -> Neighbourhood:
        import numpy as np

        bound = min(provider.limits.max_input_bytes, provider.limits.max_batch_bytes)
        text, _digest = embed_text("", body, bound)
        space = provider.space.key()
        # the entries the duty has not embedded (or not since they changed): compared in this request
        waiting = self._waiting(space, scope, bound)
        now, later = waiting[:MAX_EMBED_NOW], waiting[MAX_EMBED_NOW:]
        try:
            got = provider.embed([text] + [embed_text("", c.body, bound)[0] for c in now], timeout=self.timeout_s)
            vectors = [np.asarray(v, dtype=np.float32) for v in got]
            if len(vectors) != 1 + len(now):
                raise ProviderError(f"the provider answered {len(vectors)} vectors for {1 + len(now)} texts")
        except (ProviderError, TimeoutError) as exc:
            rows = self._every(scope)
            if not rows:
                return Neighbourhood(note="no entry in the bank to compare with")
            return self._by_words(body, rows, f"the embedding provider failed ({exc}): compared by words")
        query = vectors[0]
        floor = 1.0 - threshold
        scored, stale, pool = self._ranked(query, space, scope, threshold, bound, {c.id for c in waiting})
        if stale:                                    # candidates whose vector is another body's: in this request too
            try:
                extra = provider.embed([embed_text("", c.body, bound)[0] for c in stale], timeout=self.timeout_s)
                scored += [(c.id, _cosine(query, np.asarray(v, dtype=np.float32))) for c, v in zip(stale, extra)]
            except (ProviderError, TimeoutError):
                later += stale
        scored += [(c.id, _cosine(query, v)) for c, v in zip(now, vectors[1:])]
        if not scored and not later and not pool:
            return Neighbourhood(note="no entry in the bank to compare with")
        similar = [(eid, sim, MEANING) for eid, sim in scored if sim > floor]
        notes = [f"compared by meaning: ranked among {pool:,} entries' vectors, {len(now) + len(stale)} embedded "
                 f"now (cosine above {floor:.2f})"]
        if later:
            words = self._by_words(body, later, "")
            similar += words.similar
            notes.append(f"{len(later)} entries not embedded yet compared by words (Jaccard at least {WORDS_FLOOR})")
        similar.sort(key=lambda s: (-s[1], s[0]))
        return Neighbourhood(similar[:MAX_RETURNED], "; ".join(notes), pool + len(waiting))

    def _ranked(self, query: np.ndarray, space: str, scope: str | None, threshold: float, bound: int,
                waiting: set[str]) -> tuple[list[tuple[str, float]], list[Candidate], int]:
        """The entries' vectors ranked by the semantic engine: stage one over the entries' sign codes, its
        candidates kept where the rows say they are in the bank, in a scope that meets `scope` and embedded from
        their body as it is, then scored exactly. Stage one reads deeper (four times, up to every entry) while its
        furthest candidate is still within RADIUS_SLACK × the Hamming distance a cosine at the threshold has.
        Returns (entry id, cosine) for the scored, the candidates whose vector was another body's, and the pool."""
        import math

        engine = self.semantic()
        stale: dict[str, Candidate] = {}

        def admit(sources: list[str]) -> set[str]:
            kept: set[str] = set()
            ids = [s[len(PREFIX):] for s in sources if s[len(PREFIX):] not in waiting]
            with self.node.lock:
                for start in range(0, len(ids), CHUNK):
                    chunk = ids[start:start + CHUNK]
                    for r in self.node.conn.execute(f"{_ROW} AND e.id IN ({','.join('?' * len(chunk))})",
                                                    [PREFIX, space, *chunk]):
                        if scope is not None and not written_scopes_meet(scope, r["scope"]):
                            continue
                        # filed for another version of the row: still the body's when its digest says so (a status
                        # change the duty has not restamped yet)
                        if r["revision"] == r["version"] or r["digest"] == embed_text("", r["body"], bound)[1]:
                            kept.add(PREFIX + r["id"])
                        else:
                            stale[r["id"]] = Candidate(r["id"], r["scope"], r["body"])
            return kept

        stage_one = STAGE_ONE
        while True:
            stale.clear()
            ranking = engine.rank_where(query, space, self._entries_of, admit, stage_one=stage_one,
                                        depth=2 * MAX_RETURNED)
            bits = len(query)                        # a sign code: one bit a dimension
            radius = RADIUS_SLACK * bits * math.acos(max(-1.0, min(1.0, 1.0 - threshold))) / math.pi
            if ranking.candidates < stage_one or ranking.cut > radius or stage_one >= ranking.pool:
                break
            stage_one *= 4
        scored = [(doc[len(PREFIX):], round(float(sim), 4)) for doc, sim in ranking.ranked]
        return scored, list(stale.values()), ranking.pool

    def _entries_of(self, table: CodeTable) -> np.ndarray:
        """The table's live rows that are entries' vectors (kept a table long: only rows added since are read)."""
        import numpy as np

        n = table.n
        kept = self._entry_rows
        if kept is None or kept[0]() is not table or kept[1] > n:
            kept = (weakref.ref(table), 0, np.zeros(0, dtype=bool))
        ref, seen, marks = kept
        if n > seen:
            fresh = np.char.startswith(table.source_data[seen:n], PREFIX.encode("ascii"))
            marks = np.concatenate([marks[:seen], fresh])
        self._entry_rows = (ref, n, marks)
        return table.alive[:n] & marks[:n]

    def _waiting(self, space: str, scope: str | None, bound: int) -> list[Candidate]:
        """Entries in the bank (in a scope that meets `scope`) the embedding duty has not filed a vector for as
        they are: changed after the newest revision it filed lately (it embeds in the rows' version order), or
        held (their provider refused them). Every entry, when it has filed none."""
        with self.node.lock:
            conn = self.node.conn
            # read again only when the vector log moved (past a million pages' vectors the walk back is long)
            at = (space, vector_position(conn)[0])
            if self._newest is None or self._newest[0] != at:
                self._newest = (at, conn.execute(_NEWEST_EMBEDDED, (KIND, space)).fetchone()[0])
            newest = self._newest[1]
            if newest is None:
                rows = conn.execute(f"{_ROW} ORDER BY e.version", (PREFIX, space)).fetchall()
            else:
                rows = conn.execute(f"{_ROW} AND e.version > ? ORDER BY e.version", (PREFIX, space, newest)).fetchall()
                end = PREFIX[:-1] + chr(ord(PREFIX[-1]) + 1)
                held = [h[0] for h in conn.execute(_HELD, (len(PREFIX) + 1, PREFIX, end))]
                for start in range(0, len(held), CHUNK):
                    chunk = held[start:start + CHUNK]
                    rows += conn.execute(f"{_ROW} AND e.id IN ({','.join('?' * len(chunk))})",
                                         [PREFIX, space, *chunk]).fetchall()
        out: dict[str, Candidate] = {}
        for r in rows:
            if scope is not None and not written_scopes_meet(scope, r["scope"]):
                continue
            if r["revision"] == r["version"] or r["digest"] == embed_text("", r["body"], bound)[1]:
                continue                             # its vector is its body's: ranked by the engine
            out.setdefault(r["id"], Candidate(r["id"], r["scope"], r["body"]))
        return list(out.values())

    def _every(self, scope: str | None) -> list[Candidate]:
        """Every entry in the bank in a scope that meets `scope`, with its body (the words' comparison)."""
        with self.node.lock:
            rows = self.node.conn.execute(f"{_ROW}", (PREFIX, "")).fetchall()
        return [Candidate(r["id"], r["scope"], r["body"]) for r in rows
                if scope is None or written_scopes_meet(scope, r["scope"])]

    @staticmethod
    def _by_words(body: str, rows: list[Candidate], note: str) -> Neighbourhood:
        mine = words_of(body)
        similar = [(c.id, round(j, 4), WORDS) for c in rows if (j := jaccard(mine, words_of(c.body))) >= WORDS_FLOOR]
        similar.sort(key=lambda s: (-s[1], s[0]))
        said = f"{note} (Jaccard of terms at least {WORDS_FLOOR}, over {len(rows)} entries)" if note else ""
        return Neighbourhood(similar[:MAX_RETURNED], said, len(rows))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    import numpy as np

    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return round(float(np.dot(a, b)) / norm, 4) if norm > 0 else 0.0
