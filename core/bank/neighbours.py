"""Repeats by meaning, before an entry is written (spec 003, "Repeats before write"): entries in use nearer
than KNOWLEDGE_SIMILARITY_THRESHOLD to a new body are returned to the writer, with nothing written, unless it
says the fact is distinct (`distinct: true`) or the write supersedes one. An exact repeat is folded apart, as a
corroboration (EntryBank.add)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..embed.provider import Provider, ProviderError
from ..embed.registry import make_provider
from ..embed.text import embed_text
from ..errors import CrewletError
from ..pages.service import Writer
from ..repos import Scope, scope_matches
from ..search.entry_docs import IN_BANK_SQL, PREFIX

if TYPE_CHECKING:
    import numpy as np

    from .entries import Entry
# numpy, the Hamming kernel and the vector reader are imported by the check that uses them: the bank is imported
# by commands that never compare a vector (`crewlet entries`)


class SimilarEntries(CrewletError):
    """Nothing written: entries in the bank say nearly the same. `similar`: (entry, similarity), nearest first."""

    code = "similar_entries"

    def __init__(self, message: str, *, similar: list[tuple[Entry, float]], **details: Any) -> None:
        super().__init__(message, fix="if yours is a different fact, write it again saying it is distinct; if it "
                                      "corrects one of them, supersede that entry", **details)
        self.similar = similar


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
EXACT_MAX = 2048             # past this many entries with a vector, the sign codes choose whom to score exactly
CANDIDATES = 256             # … the nearest this many by Hamming distance
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


def _scope_of(text: str | None) -> Scope | None:
    """A stored scope ('NAME:folder' or 'folder') as a Scope, without asking the configuration again."""
    if not text:
        return None
    name, sep, folder = text.partition(":")
    return Scope(name, folder) if sep else Scope(None, text)


def _same_area(a: str | None, b: str | None) -> bool:
    """Two entries can say the same thing only where their scopes meet (the same words can hold of one module
    and not of another: docs/triage.md's rule for rules 1–5)."""
    return scope_matches(_scope_of(a), _scope_of(b))


@functools.cache
def _analyzer() -> Any:
    from ..search import lexical

    return lexical.make_analyzer()


def words_of(text: str) -> set[str]:
    from ..search import lexical

    return set(lexical.analyze(_analyzer(), text, None))


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


# the entries in the bank under a live page; their vectors apart, by the range of their source ids (one range read
# of the vectors' unique index instead of a lookup an entry)
_ENTRIES = ("SELECT e.id, e.scope, e.version FROM entries e JOIN pages p ON p.id = e.page_id AND p.trashed_at IS NULL "
            f"WHERE e.{IN_BANK_SQL}")
_VECTORS = ("SELECT v.source_id, v.id, v.revision, v.digest, c.code FROM vectors v JOIN vector_codes c ON c.id = v.id "
            "WHERE v.source_id >= ? AND v.source_id < ? AND v.space = ?")


@dataclass
class Candidate:
    id: str
    vid: int | None = None            # its vector in the configured space, when it has one
    digest: str | None = None
    code: bytes | None = None
    current: bool = False             # filed for the row's version (else: compared with its body's digest)
    body: str = ""


class NeighbourFinder:
    """Finds the entries in the bank (not ARCHIVED or SUPERSEDED, under a page not in the trash, in a scope that
    meets the new one's) nearer to a new body than the threshold. One per EntryBank; the provider is the
    company's as configured at each call (`provider_factory`: a test's)."""

    def __init__(self, node: Writer, *, provider_factory: Callable[..., Provider | None] = make_provider,
                 timeout_s: float = EMBED_TIMEOUT_S) -> None:
        self.node = node
        self.provider_factory = provider_factory
        self.timeout_s = timeout_s

    def find(self, body: str, *, scope: str | None, threshold: float) -> Neighbourhood:
        if threshold <= 0:
            return Neighbourhood(note="KNOWLEDGE_SIMILARITY_THRESHOLD is 0: no neighbour check")
        company = self.node.company
        provider = self.provider_factory(company) if company.knowledge.vectors else None
        conn = self.node.conn
        with self.node.lock:
            versions = {r["id"]: r["version"] for r in conn.execute(_ENTRIES).fetchall()
                        if scope is None or _same_area(scope, r["scope"])}
            rows = [Candidate(entry_id) for entry_id in versions]
            if rows and provider is not None:
                by_id = {c.id: c for c in rows}
                end = PREFIX[:-1] + chr(ord(PREFIX[-1]) + 1)
                for source, vid, revision, digest, code in conn.execute(_VECTORS, (PREFIX, end, provider.space.key())):
                    c = by_id.get(source[len(PREFIX):])
                    if c is not None:
                        c.vid, c.digest, c.code, c.current = vid, digest, code, revision == versions.get(c.id)
        if not rows:
            if provider is not None:
                provider.close()
            return Neighbourhood(note="no entry in the bank to compare with")
        if provider is None:
            self._read_bodies(rows)
            return self._by_words(body, rows, "vectors are off (knowledge.vectors = false): compared by words")
        bound = min(provider.limits.max_input_bytes, provider.limits.max_batch_bytes)
        text, _digest = embed_text("", body, bound)
        # a vector filed for another version of the row is still the body's when its digest says so (a status
        # change the duty has not restamped yet); read the bodies of those, and of the entries with none
        self._read_bodies([c for c in rows if not c.current])
        with_vector: list[Candidate] = []
        without: list[Candidate] = []
        for c in rows:
            if c.vid is not None and (c.current or c.digest == embed_text("", c.body, bound)[1]):
                with_vector.append(c)
            else:
                without.append(c)
        now, later = without[:MAX_EMBED_NOW], without[MAX_EMBED_NOW:]
        import numpy as np

        try:
            got = provider.embed([text] + [embed_text("", c.body, bound)[0] for c in now], timeout=self.timeout_s)
            vectors = [np.asarray(v, dtype=np.float32) for v in got]
            if len(vectors) != 1 + len(now):
                raise ProviderError(f"the provider answered {len(vectors)} vectors for {1 + len(now)} texts")
        except (ProviderError, TimeoutError) as exc:
            self._read_bodies(rows)
            return self._by_words(body, rows, f"the embedding provider failed ({exc}): compared by words")
        finally:
            provider.close()
        query = vectors[0]
        scored = self._scored(query, with_vector) + [(c.id, _cosine(query, v)) for c, v in zip(now, vectors[1:])]
        floor = 1.0 - threshold
        similar = [(eid, sim, MEANING) for eid, sim in scored if sim > floor]
        notes = [f"compared by meaning with {len(with_vector) + len(now)} entries (cosine above {floor:.2f})"]
        if later:
            words = self._by_words(body, later, "")
            similar += words.similar
            notes.append(f"{len(later)} entries not embedded yet compared by words (Jaccard at least {WORDS_FLOOR})")
        similar.sort(key=lambda s: (-s[1], s[0]))
        return Neighbourhood(similar[:MAX_RETURNED], "; ".join(notes), len(rows))

    def _read_bodies(self, rows: list[Candidate]) -> None:
        todo = [c for c in rows if not c.body]
        by_id = {c.id: c for c in todo}
        with self.node.lock:
            for start in range(0, len(todo), 500):
                chunk = [c.id for c in todo[start:start + 500]]
                for entry_id, text in self.node.conn.execute(
                        f"SELECT id, body FROM entries WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                    by_id[entry_id].body = text

    def _scored(self, query: np.ndarray, rows: list[Candidate]) -> list[tuple[str, float]]:
        """Exact cosines of the entries with a current vector: every one up to EXACT_MAX, else the CANDIDATES
        nearest by their sign codes (a near repeat's code is near the new body's)."""
        import numpy as np

        from ..vectors.hamming import hamming, sign_code
        from ..vectors.read import read_vectors

        if not rows:
            return []
        if len(rows) > EXACT_MAX:
            codes = np.frombuffer(b"".join(c.code or b"" for c in rows), dtype=np.uint8).reshape(len(rows), -1)
            dist = hamming(codes, sign_code(query))
            rows = [rows[i] for i in np.argsort(dist, kind="stable")[:CANDIDATES]]
        by_vid = {c.vid: c.id for c in rows if c.vid is not None}
        with self.node.lock:
            found, matrix = read_vectors(self.node.conn, list(by_vid), len(query))
        return [(by_vid[int(vid)], _cosine(query, vec)) for vid, vec in zip(found.tolist(), matrix)]

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
