"""The keyword retriever: BM25F over this node's lexical index, as ranked page ids with scores.

It reads the index the indexer keeps behind the rows (`index/state.json` names the directory in use),
reuses one open snapshot while the index generation is unchanged and opens a new reader after every
commit (never Whoosh's `refresh()`, which returns duplicate hits after a merging commit). The access
policy's container scope, the tool-skills container and the pages beneath excluded ancestors are masked
out before the ranking is cut.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import lexical
from .access import Access
from .index_state import IndexManifest, covered_seq, read_state, state_path
from .lexical import DEFAULT_RANKING, Ranking, SegmentCache, Snapshot
from .seam import Coverage
from .snippets import TermFinder


@dataclass
class KeywordRanking:
    """One search's keyword ranking: read as deep as the caller needs (`take`)."""

    snapshot: Snapshot
    scores: np.ndarray
    mask: np.ndarray
    finder: TermFinder
    dropped_terms: int = 0
    terms: dict[str, int] = field(default_factory=dict)   # the query's terms as searched (analysed)
    _matched: set[str] | None = field(default=None, init=False, repr=False)
    _weights: list[tuple[str, int, float]] | None = field(default=None, init=False, repr=False)

    def matches(self, page_id: str) -> bool:
        """Did this search's words match the page (any score, at any depth, inside the masks)? The set
        is built at the first call: only a search whose semantic half has a candidate under the
        relevance floor asks."""
        if self._matched is None:
            ids = self.snapshot.ids
            self._matched = {ids[d] for d in np.flatnonzero((self.scores > 0) & self.mask)}
        return page_id in self._matched

    def known(self) -> bool:
        """Does the corpus hold a word of the question (a live page anywhere, whatever the scope)?"""
        return bool(np.any(self.scores > 0))

    def term_weights(self) -> list[tuple[str, int, float]]:
        """(term, live pages holding it, idf × query frequency) of each of the query's terms, read once."""
        if self._weights is None:
            self._weights = self.snapshot.term_weights(self.terms)
        return self._weights

    def known_share(self, ordinary: Callable[[], set[str]] = set) -> float:
        """How much of the question the corpus holds (0 to 1): the idf-weighted share of its terms that
        some live page holds, whatever the scope. A rare word weighs more than a common one, and a word
        no page holds weighs most: "zzzqqq xylophone" is about half known where one page says xylophone.
        `ordinary()`: the terms that are words of the model's language (floor.language_words), asked only
        when some term is held by no page; those are left out of the share rather than counted against."""
        return known_share(self.term_weights(), ordinary)

    def coverage(self) -> float:
        """How much of the question this ranking's best page holds (0 to 1): the idf-weighted share of the
        question's terms some page holds that the first page of the ranking holds too. A ranking resting on
        one rare word of a longer question ("negative" in "turn every colour of a photo into its opposite,
        like a negative") scores low however rare the word."""
        top = self.take(1)
        weights = self.term_weights()
        total = sum(w for _t, df, w in weights if df > 0)
        if not top or total <= 0:
            return 0.0
        doc = self.snapshot.docnum[top[0][0]]
        held = sum(w for t, df, w in weights if df > 0 and self.snapshot.holds(t, doc))
        return held / total

    def specificity(self) -> float:
        """How specific the words this ranking matched are (0 to 1): the largest idf among the matched
        terms over the idf of a term one page alone holds. A ranking whose words are all common (each on
        a third of the pages) scores low: its order says little about what the question means."""
        return specificity(self.term_weights(), self.snapshot.count)

    def take(self, depth: int) -> list[tuple[str, float]]:
        """The best `depth` page ids with their BM25F scores, best first (ties by document number)."""
        out = []
        for docnum, score in self.snapshot.ranked(self.scores, self.mask, first=depth):
            out.append((self.snapshot.ids[docnum], score))
            if len(out) >= depth:
                break
        return out


class KeywordRetriever:
    """Thread-safe: one search at a time reads the snapshot (the searcher serialises searches)."""

    def __init__(self, index_dir: Path, ranking: Ranking = DEFAULT_RANKING) -> None:
        self.index_dir = index_dir
        self.ranking = ranking
        self._lock = threading.RLock()
        self._manifest: IndexManifest | None = None
        self._manifest_key: tuple[int, int, int] | None = None
        self._ix: Any = None
        self._ix_dir: Path | None = None
        self._cache = SegmentCache()
        self._snap: Snapshot | None = None

    # -- the index in use ----------------------------------------------------------------------------
    def manifest(self) -> IndexManifest | None:
        """The index in use (None before this node's first build), re-read only when its file changed."""
        path = state_path(self.index_dir)
        try:
            st = os.stat(path)
        except OSError:
            with self._lock:
                self._manifest, self._manifest_key = None, None
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        with self._lock:
            if key != self._manifest_key:
                self._manifest = read_state(self.index_dir)
                self._manifest_key = key if self._manifest is not None else None
            return self._manifest

    def ready(self) -> bool:
        """The cheap gate: a first build finished and the directory it names is there (two stats)."""
        manifest = self.manifest()
        return manifest is not None and (self.index_dir / manifest.dir).is_dir()

    def snapshot(self, manifest: IndexManifest | None = None) -> Snapshot | None:
        """The index generation searches read now (None before the first build)."""
        manifest = manifest or self.manifest()
        if manifest is None:
            return None
        with self._lock:
            path = self.index_dir / manifest.dir
            if self._ix is None or self._ix_dir != path:
                self._close_snapshot()
                self._ix = lexical.open_index(path)
                self._ix_dir = path
                self._cache = SegmentCache()
            generation = lexical.latest_generation(self._ix)
            if self._snap is None or self._snap.generation != generation:
                fresh = Snapshot(self._ix, self._cache, self.ranking)
                self._close_snapshot()
                self._snap = fresh
            return self._snap

    def coverage(self, conn: Any, manifest: IndexManifest, applied: int, snapshot: Snapshot) -> Coverage:
        indexed = covered_seq(conn, manifest.indexed_seq, applied)
        return Coverage(indexed_seq=indexed, applied_seq=applied, pages_indexed=snapshot.count - snapshot.entries,
                        complete=indexed >= applied)

    # -- ranking -------------------------------------------------------------------------------------
    def rank(self, snapshot: Snapshot, text: str, access: Access) -> KeywordRanking | None:
        """The query's keyword ranking, with everything no hit may be masked out; None when the query
        holds no word the index could hold (only punctuation or stop words)."""
        selected = snapshot.query_terms(text)
        if not selected.terms:
            return None
        mask = snapshot.container_mask(access.allowed, {access.skills})
        if access.draft_backstop:
            mask &= ~snapshot.auto_draft
        if access.excluded_ids:
            docs = [snapshot.docnum[p] for p in access.excluded_ids if p in snapshot.docnum]
            if docs:
                mask[np.asarray(docs, dtype=np.int64)] = False
        return KeywordRanking(snapshot, snapshot.scores(selected.terms), mask,
                              TermFinder(selected.terms, snapshot.tokens), selected.dropped, dict(selected.terms))

    def known_share(self, snapshot: Snapshot, text: str, ordinary: Callable[[], set[str]] = set) -> float:
        """How much of `text` (as analysed for a search) the index holds, idf-weighted (0 to 1). For a
        search that ranks by meaning alone: where between its two numbers the relevance floor lies."""
        terms = snapshot.query_terms(text).terms
        return known_share(snapshot.term_weights(terms), ordinary) if terms else 0.0

    # -- closing ---------------------------------------------------------------------------------------
    def _close_snapshot(self) -> None:
        if self._snap is not None:
            self._snap.close()
            self._snap = None

    def forget(self) -> None:
        """Drop what is open (the index was switched under us): the next search reads the state again."""
        with self._lock:
            self._close_snapshot()
            self._ix = self._ix_dir = None
            self._manifest = self._manifest_key = None

    close = forget


def known_share(weights: list[tuple[str, int, float]], ordinary: Callable[[], set[str]] = set) -> float:
    """The idf-weighted share of (term, pages holding it, weight) rows that some page holds (0 to 1). A
    term no page holds that `ordinary()` names is left out of both sides (a word of the language, not
    noise); when nothing held is left, the share is 0."""
    known = sum(w for _t, df, w in weights if df > 0)
    if known <= 0:
        return 0.0
    spared = ordinary() if any(df == 0 for _t, df, _w in weights) else set()
    unknown = sum(w for t, df, w in weights if df == 0 and t not in spared)
    return known / (known + unknown)


def specificity(weights: list[tuple[str, int, float]], pages: int) -> float:
    """The idf of the rarest held term over that of a term one page of `pages` alone holds (0 to 1)."""
    held = [df for _t, df, _w in weights if df > 0]
    if not held or pages <= 0:
        return 0.0
    return min(1.0, lexical.idf(pages, min(held)) / lexical.idf(pages, 1))
