"""The native Searcher: this node's own copy, read through the seam.

Plain text in; ranked hits and an outcome out; never raises. A search is four steps, each in its own
module so a retriever slots in without touching the others:

1. the access policy (`access.py`) decides who may search and what a hit may be;
2. each retriever the mode asks for ranks page ids with the policy's masks applied inside its
   candidate stage — keyword (`keyword.py`, BM25F over this node's lexical index) and semantic
   (`semantic.py`, sign codes then an exact rerank, the query embedded by `query_vectors.py`);
3. fusion (`fusion.py`) merges a hybrid search's two rankings by reciprocal rank, the keyword half weighed
   by how specific its words are and how much of the question its best page holds;
4. the hit assembly (`hits.py`) walks the merged ranking against the current rows until `limit` hits
   are accepted, and gives each its title, ancestors and snippet (from the keyword half's terms where
   the page holds one).

The answer says what it served. Before this node's first keyword build a keyword or hybrid search
answers "not searchable yet" (no mode served) — a different fact from "nothing matched". With nothing to
rank by meaning (vectors off, no vector in the configured space yet, a provider that failed or did not
answer within two seconds) a hybrid search serves its keyword half and says why; a semantic search serves
nothing and says why, because a keyword ranking is exactly the one that cannot find a page sharing no
word with the question. docs/search.md has the whole table. An agent's search is one knowledge_read
event listing the hits it was shown; a person's never is.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..embed.provider import Provider
from ..embed.registry import make_provider
from ..pages import reads
from ..vectors import records as vectors
from . import lexical
from .access import Access, AccessPolicy, Denial
from . import floor as relevance
from .fusion import keyword_weight, reciprocal_rank_fusion
from .hits import Accepted, HitAssembler, page_url
from .keyword import KeywordRanking, KeywordRetriever
from .lexical import DEFAULT_RANKING, Ranking, Snapshot
from .query_cache import QueryVectorStore
from .query_vectors import TIMEOUT_S as QUERY_TIMEOUT_S
from .query_vectors import QueryEmbedder
from .seam import (NO_EMBEDDINGS, NO_TERMS, NOT_SEARCHABLE_MESSAGE, NOT_SEARCHABLE_YET, OUT_OF_SCOPE, PARTIAL_COVERAGE,
                   PROVIDER_FAILED, PROVIDER_SLOW, REFILLING, UNAVAILABLE, Coverage, Outcome, Query, Result)
from .stages import STAGE_ONE, STAGE_TWO
from .stamp import Stamp, read_stamp

if TYPE_CHECKING:
    # the semantic engine loads numpy: imported by the first search that ranks by meaning
    from .semantic import SemanticRanking, SemanticRetriever
    from ..node import Node
from .snippets import TermFinder

__all__ = ["NativeSearcher", "page_url", "NO_TERMS", "OUT_OF_SCOPE", "BACKEND"]

log = logging.getLogger("crewlet.search")

BACKEND = "native"
# what opening an index that a re-derivation switched under the search raises
_SWITCHED: tuple[type[BaseException], ...] = (OSError, *lexical.WHOOSH_ERRORS)
CONFIGURED = object()          # NativeSearcher(relevance_floor=…): the space's own floor (floor.py)
KEYWORD_DEPTH = STAGE_TWO      # how deep each half is read before fusion (deeper when the walk runs short)

UNAVAILABLE_MESSAGE = "the knowledge base could not be searched just now"
NO_TERMS_MESSAGE = "nothing was searched: the query has no word that can be searched"
NOT_BY_MEANING = ("a page that shares no word with the question can be missing, because nothing was ranked "
                  "by meaning")
KEYWORD_CANNOT = ("a keyword ranking cannot find a page that shares no word with the question — search in "
                  "keyword or hybrid mode for pages that share the question's words")


@functools.cache
def _analyzer() -> Any:
    """The keyword index's own analyser (stop words out, stems), for a folder's title against the question."""
    return lexical.make_analyzer()


def _cause(exc: BaseException) -> str:
    """A failure in words a person can act on."""
    if isinstance(exc, (FileNotFoundError, *lexical.WHOOSH_ERRORS)):
        return (f"the keyword index is missing or damaged ({exc}) — `crewlet index build` derives it again "
                f"from the pages")
    return str(exc) or type(exc).__name__


def _unserved(degraded: str, message: str, coverage: Coverage | None = None, modes: list[str] | None = None) -> Result:
    return Result([], Outcome(None, ["keyword"] if modes is None else modes, degraded, message,
                              coverage or Coverage(complete=False)))


@dataclass
class MeaningHalf:
    """What the semantic half could do for one search."""

    ranking: SemanticRanking | None = None
    degraded: str | None = None       # why nothing (or only part of the pages) was ranked by meaning
    message: str = ""
    embedded: int = 0
    embeddable: int = 0
    floor: relevance.Floor | None = None   # the relevance floor of the space it ranked in
    model: str = ""
    known_share: float | None = None       # how much of the question the corpus holds (read when first needed)
    query_vector: str | None = None        # where the query's vector came from: "cache" | "daemon" | "model"


def _held_words(held: int) -> str:
    return (f"{held:,} page{'s are' if held != 1 else ' is'} held back: the provider refused "
            f"{'them' if held != 1 else 'it'} (`crewlet index status` names them)")


class NativeSearcher:
    """knowledge.Searcher over this node's rows and indexes. Thread-safe (searches are serialised)."""

    def __init__(self, node: Node, *, ranking: Ranking = DEFAULT_RANKING,
                 provider_factory: Callable[..., Provider | None] = make_provider,
                 embed_threads: int | None = None, query_timeout_s: float | None = None,
                 relevance_floor: tuple[float | None, float | None] | None | object = CONFIGURED) -> None:
        """`relevance_floor`: the floors of the configured space (floor.py) by default; (known-word floor,
        unknown-word floor), or None for none, puts others in their place for every space; False cuts
        nothing at all, folders included (bench/relevance.py's baseline)."""
        self.node = node
        self.relevance_floor = relevance_floor
        self.policy = AccessPolicy(node)
        self.keyword = KeywordRetriever(node.home.index_dir, ranking)
        self._semantic: SemanticRetriever | None = None
        self.embedder = QueryEmbedder(provider_factory, threads=embed_threads,
                                      store=QueryVectorStore(node.home.query_cache_file,
                                                             readonly=bool(getattr(node, "readonly", False))),
                                      timeout_s=query_timeout_s or QUERY_TIMEOUT_S, daemon=node.home.root)
        self.assembler = HitAssembler(node)
        self._coverage_cache: tuple[tuple[Any, ...], tuple[int, int, dict[str, int]]] | None = None
        self._lock = threading.RLock()
        # the term finder of this searcher's latest search that returned hits, for a caller that owns
        # the searcher and highlights those hits (the CLI) without analysing the query again
        self.last_finder: TermFinder | None = None
        self._floor_report: relevance.FloorReport | None = None   # what the floor did to the current search

    # -- the seam -----------------------------------------------------------------------------------
    def backend(self) -> str:
        return BACKEND

    def modes(self) -> list[str]:
        """The modes this node can serve now: keyword, and hybrid and semantic when vectors are on."""
        return ["hybrid", "keyword", "semantic"] if self.node.company.knowledge.vectors else ["keyword"]

    def can_search(self, actor: str | None = None) -> bool:
        """Would a search run? The facts search() decides by, read cheaply: the configured backend, the
        index state file (one stat; parsed only when it changed) and the directory it names (one stat)."""
        return self.node.company.knowledge.backend == BACKEND and self.keyword.ready()

    def search(self, query: Query) -> Result:
        try:
            with self._lock:
                try:
                    return self._search(query)
                except _SWITCHED:
                    # the index was switched (a re-derivation) between reading its state and opening it:
                    # forget what is open and read the state again, once
                    self.keyword.forget()
                    return self._search(query)
        except Exception as exc:  # never raises: every failure is an answer that says so
            log.warning("search failed: %s", _cause(exc))
            log.debug("search failed", exc_info=True)
            return _unserved(UNAVAILABLE, f"{UNAVAILABLE_MESSAGE}: {_cause(exc)}")

    def prefetch(self, query: Query) -> None:
        """Start embedding the query now, when its search will rank by meaning, so the model loads while
        the caller does other work (the CLI's index catch-up); the search picks the vector up. Never
        raises: a prefetch that cannot start leaves the search to embed as it always does."""
        try:
            company = self.node.company
            if query.mode == "keyword" or not company.knowledge.vectors or not (query.text or "").strip():
                return
            provider = self.embedder.provider(company)
            if provider is None:
                return
            with self.node.lock:
                stored = vectors.sources(self.node.conn, provider.space.key()) > 0
            if stored:
                self.embedder.start(company, query.text)
        except Exception:
            log.debug("query prefetch failed", exc_info=True)

    def snapshot(self) -> Snapshot | None:
        """The keyword index generation searches currently read (None before the first build)."""
        with self._lock:
            return self.keyword.snapshot()

    def close(self) -> None:
        with self._lock:
            self.keyword.close()
            self.embedder.close()

    # -- one search -----------------------------------------------------------------------------------
    def _search(self, query: Query) -> Result:
        node = self.node
        node.refresh_config()  # scope and actors are read off the configuration current at each call
        modes = self.modes()
        stamp = read_stamp(node)      # where this search stands, read once
        applied = stamp.applied
        access = self.policy.decide(query, BACKEND, stamp)
        if isinstance(access, Denial) and access.degraded != OUT_OF_SCOPE:
            return _unserved(access.degraded, access.message, modes=modes if access.modes_known else [])
        text = query.text or ""
        if not text.strip():
            return _unserved(NO_TERMS, f"{NO_TERMS_MESSAGE}: it is empty", Coverage(complete=False, applied_seq=applied),
                             modes)
        mode = access.mode if isinstance(access, Access) else "keyword"
        manifest = self.keyword.manifest()
        snapshot = self.keyword.snapshot(manifest) if manifest is not None else None
        if manifest is not None and snapshot is not None:
            with node.lock:
                coverage = self.keyword.coverage(node.conn, manifest, applied, snapshot)
        else:
            coverage = Coverage(complete=False, indexed_seq=0, applied_seq=applied, pages_indexed=0)
        if snapshot is None and mode != "semantic":
            return _unserved(NOT_SEARCHABLE_YET, NOT_SEARCHABLE_MESSAGE, coverage, modes)
        if isinstance(access, Denial):  # out of scope: said with the coverage of what was not searched
            return _unserved(access.degraded, access.message, coverage, modes)

        limit = query.effective_limit()
        self._floor_report = None
        words = self.keyword.rank(snapshot, text, access) if snapshot is not None and mode != "semantic" else None
        meaning = self._meaning(text, access, stamp) if mode != "keyword" else MeaningHalf()
        if mode != "semantic" and words is None and meaning.ranking is None:
            return _unserved(NO_TERMS, f"{NO_TERMS_MESSAGE}: it holds only punctuation or common words "
                                       f"(the, and, of …) that the index leaves out", coverage, modes)
        coverage.embedded, coverage.embeddable = meaning.embedded, meaning.embeddable
        notes = list(access.notes)
        if words is not None and words.dropped_terms:
            notes.append(f"the query has more than {lexical.MAX_QUERY_TERMS} distinct words the index holds: "
                         f"{words.dropped_terms} of them (the last ones) were left out of the search")

        degraded: str | None = None
        if mode == "semantic":
            if meaning.ranking is None:
                return _unserved(meaning.degraded or NO_EMBEDDINGS, f"nothing served: {meaning.message} — "
                                 + KEYWORD_CANNOT, coverage, modes)
            served, degraded = "semantic", meaning.degraded
            notes.insert(0, meaning.message) if meaning.message else None
            accepted = self._walk_semantic(meaning, None, text, access, limit, stamp)
        elif mode == "hybrid" and meaning.ranking is not None and words is not None:
            served, degraded = "hybrid", meaning.degraded
            notes.insert(0, meaning.message) if meaning.message else None
            accepted = self._walk_fused(words, meaning, text, access, limit, stamp)
        elif mode == "hybrid" and meaning.ranking is not None:  # the keyword half had no word to search
            served, degraded = "semantic", NO_TERMS
            notes.insert(0, "ranked by meaning alone: the query holds only punctuation or common words "
                            "(the, and, of …) that the keyword index leaves out")
            if meaning.message:
                notes.append(meaning.message)
            accepted = self._walk_semantic(meaning, None, text, access, limit, stamp)
        else:
            assert words is not None  # every other case returned above
            served = "keyword"
            if mode == "hybrid":
                degraded = meaning.degraded or NO_EMBEDDINGS
                notes.insert(0, f"keyword ranking only: {meaning.message} — {NOT_BY_MEANING}")
            accepted = self._walk_keyword(words, access, limit)
        if degraded in (PARTIAL_COVERAGE, REFILLING):
            coverage.complete = False
        floor = self._floor_report
        if meaning.ranking is not None and meaning.ranking.stage_two_note and served in ("semantic", "hybrid"):
            notes.append(meaning.ranking.stage_two_note)   # slower, nothing lost: said, not degraded
        if floor is not None and not accepted and (floor.cut or floor.folders):
            notes.insert(0, floor.nothing_close(meaning.model))
        finder = words.finder if words is not None else None
        hits = self.assembler.hits(accepted, finder)
        self.last_finder = finder
        outcome = Outcome(served, modes, degraded, "; ".join(n for n in notes if n), coverage, floor=floor,
                          query_vector=meaning.query_vector if served in ("semantic", "hybrid") else None)
        if hits and access.is_agent:
            self._record_read(access, hits, text)
        return Result(hits, outcome)

    # -- the semantic half ---------------------------------------------------------------------------------
    def _meaning(self, text: str, access: Access, stamp: Stamp) -> MeaningHalf:
        company = self.node.company
        if not company.knowledge.vectors:
            return MeaningHalf(degraded=NO_EMBEDDINGS, message="vectors are off (knowledge.vectors = false in "
                               f"{company.file})")
        provider = self.embedder.provider(company)
        assert provider is not None
        space = provider.space.key()
        embedded, embeddable, stored = self._coverage(space, stamp)
        held = self._held()
        half = MeaningHalf(embedded=embedded, embeddable=embeddable, floor=self._floor(space),
                           model=provider.space.model)
        if not stored.get(space):
            waiting = embeddable - held
            said = (f"{waiting:,} page{'s' if waiting != 1 else ''} waiting for the embedding duty — "
                    "`crewlet worker --once` embeds them" if waiting > 0 else "")
            if held:
                said += ("; " if said else "") + _held_words(held)
            half.degraded, half.message = NO_EMBEDDINGS, (
                f"no page has a vector in {provider.space.model} yet ({said or 'no page'})")
            return half
        # the codes are read while the query embeds (a process's first search loads the model meanwhile)
        self.embedder.start(company, text)
        self.semantic.table(space, stamp.vectors)
        qv = self.embedder.vector(company, text)
        if qv.vector is None:
            half.degraded = PROVIDER_SLOW if qv.failure == "slow" else PROVIDER_FAILED
            half.message = qv.message
            return half
        half.query_vector = qv.source or None
        half.ranking = self.semantic.rank(qv.vector, space, access, stamp=stamp)
        if embedded < embeddable:
            other = sum(n for s, n in stored.items() if s != space)
            share = f"{embedded:,} of {embeddable:,} pages ({100 * embedded / embeddable:.0f}%)"
            if other:
                half.degraded = REFILLING
                half.message = (f"ranked by meaning over {share}: the model changed to {provider.space.model} and "
                                f"{other:,} page{'s are' if other != 1 else ' is'} still on the previous model until "
                                "the refill reaches them")
            else:
                half.degraded = PARTIAL_COVERAGE
                waiting = embeddable - embedded - held
                rest = []
                if waiting > 0:
                    rest.append(f"{waiting:,} not embedded yet — `crewlet worker`, or the app while it runs, embeds "
                                f"{'it' if waiting == 1 else 'them'}")
                if held:
                    rest.append(_held_words(held))
                half.message = (f"ranked by meaning over {embedded:,} of {embeddable:,} pages "
                                f"({'; '.join(rest) or 'none waits'})")
        return half

    def _floor(self, space: str) -> relevance.Floor:
        if self.relevance_floor is CONFIGURED:
            return relevance.floor_for(space, self.node.home.floors_file)
        if self.relevance_floor is None or self.relevance_floor is False:
            return relevance.Floor(space, None, None, "none")
        known, unknown = cast(tuple[float | None, float | None], self.relevance_floor)
        return relevance.Floor(space, known, unknown, "given")

    def _floored(self, meaning: MeaningHalf, ranking: SemanticRanking, words: KeywordRanking | None,
                 text: str) -> SemanticRanking:
        """The semantic ranking without what may not enter on meaning alone (floor.py): candidates under
        the relevance floor the keyword half did not also match, and pages with no body whose title
        shares no word with the question. Records what it cut for the outcome."""
        assert meaning.floor is not None
        if self.relevance_floor is False:    # the bench's baseline: nothing cut, not even folders
            return ranking
        terms: set[str] | None = None

        def title_matches(title: str) -> bool:
            nonlocal terms
            analyzer = _analyzer()
            if terms is None:
                terms = set(lexical.analyze(analyzer, text, None))
            return bool(terms & set(lexical.analyze(analyzer, title, None)))

        def folders(pages: list[str]) -> dict[str, str]:
            with self.node.lock:
                return reads.folder_titles(self.node.conn, pages)

        if meaning.known_share is None:
            meaning.known_share = self._known_share(words, text, meaning.floor.space)
        cut = relevance.apply(ranking.ranked, meaning.floor, known_share=meaning.known_share,
                              found_by_words=words.matches if words is not None else (lambda _pid: False),
                              folders=folders, title_matches=title_matches)
        self._floor_report = cut.report     # a deeper read of the same search covers the first one's pool
        return dataclasses.replace(ranking, ranked=cut.ranked)

    def _under_floor(self) -> bool:
        return self._floor_report is not None and self._floor_report.cut > 0

    def _known_share(self, words: KeywordRanking | None, text: str, space: str) -> float:
        """How much of the question the corpus holds (0 to 1, idf-weighted, the words of the model's
        language no page holds left aside: floor.py)? The keyword half's answer when it ran; else the index
        read for it (a semantic search); a node without an index yet cannot say, and is answered as for a
        question it holds none of (the stricter floor)."""
        def ordinary() -> set[str]:
            return relevance.language_words(space, text, lambda word: lexical.analyze(_analyzer(), word, None))

        if words is not None:
            return words.known_share(ordinary)
        manifest = self.keyword.manifest()
        snapshot = self.keyword.snapshot(manifest) if manifest is not None else None
        return self.keyword.known_share(snapshot, text, ordinary) if snapshot is not None else 0.0

    def _held(self) -> int:
        """Pages whose text the provider refused (held back an hour, then offered again): said apart from those
        that merely wait, since waiting will not bring them."""
        with self.node.lock:
            return reads.held_back(self.node.conn)

    def _coverage(self, space: str, stamp: Stamp) -> tuple[int, int, dict[str, int]]:
        """(embedded, embeddable, sources per stored space): a join over every page and vector, so kept
        until a page changes or the vector log moves (the search's stamp decides)."""
        with self.node.lock:
            conn = self.node.conn
            key = (space, stamp.version, stamp.vectors)
            if self._coverage_cache is None or self._coverage_cache[0] != key:
                embedded, embeddable = vectors.coverage(conn, space)
                self._coverage_cache = (key, (embedded, embeddable, vectors.spaces(conn)))
            return self._coverage_cache[1]

    # -- walks: read each ranking deeper until `limit` hits are accepted ---------------------------------
    def _walk_keyword(self, words: KeywordRanking, access: Access, limit: int) -> list[Accepted]:
        accepted: list[Accepted] = []
        seen: set[str] = set()
        depth = max(64, limit * 4)
        while True:
            candidates = words.take(depth)
            self.assembler.accept(candidates, access, limit, accepted, seen)
            if len(accepted) >= limit or len(candidates) < depth:
                return accepted
            depth *= 4

    @property
    def semantic(self) -> SemanticRetriever:
        if self._semantic is None:
            from .semantic import SemanticRetriever

            self._semantic = SemanticRetriever(self.node)
        return self._semantic

    def _walk_semantic(self, meaning: MeaningHalf, words: KeywordRanking | None, text: str, access: Access,
                       limit: int, stamp: Stamp) -> list[Accepted]:
        assert meaning.ranking is not None
        ranking = self._floored(meaning, meaning.ranking, words, text)
        accepted = self.assembler.accept(ranking.ranked, access, limit)
        # deeper only while nothing was under the floor: past the first page under it, every deeper one is
        if len(accepted) < limit and len(meaning.ranking.ranked) >= STAGE_TWO and not self._under_floor():
            deeper = self._floored(meaning, self._deeper(meaning.ranking, text, access, stamp), words, text)
            self.assembler.accept(deeper.ranked, access, limit, accepted, {a.doc_id for a in accepted})
        return accepted

    def _walk_fused(self, words: KeywordRanking, meaning_half: MeaningHalf, text: str, access: Access,
                    limit: int, stamp: Stamp) -> list[Accepted]:
        depth = max(KEYWORD_DEPTH, limit * 4)
        ranking = meaning_half.ranking
        assert ranking is not None
        meaning = self._floored(meaning_half, ranking, words, text)
        # each half weighed by what it knows of itself (fusion.py): the keyword half by how specific its words
        # are and how much of the question its best page holds
        weights = (keyword_weight(words.specificity(), words.coverage()), 1.0)
        deeper = False
        while True:
            keyword_ids = [pid for pid, _ in words.take(depth)]
            fused = reciprocal_rank_fusion([keyword_ids, [pid for pid, _ in meaning.ranked]], weights=weights)
            accepted = self.assembler.accept(fused, access, limit)
            keyword_short = len(keyword_ids) < depth
            # a ranking the floor cut has nothing closer left to find deeper in the pool
            meaning_short = deeper or len(ranking.ranked) < STAGE_TWO or self._under_floor()
            if len(accepted) >= limit or (keyword_short and meaning_short):
                return accepted
            depth *= 4
            if not meaning_short:
                meaning = self._floored(meaning_half, self._deeper(ranking, text, access, stamp), words, text)
                deeper = True

    def _deeper(self, ranking: SemanticRanking, text: str, access: Access, stamp: Stamp) -> SemanticRanking:
        """The same search's whole stage-one pool reranked: for a walk that ran out of accepted pages."""
        qv = self.embedder.vector(self.node.company, text)
        if qv.vector is None:
            return ranking
        return self.semantic.rank(qv.vector, qv.space, access, depth=STAGE_ONE, stamp=stamp)

    def _record_read(self, access: Access, hits: list[Any], text: str) -> None:
        assert access.actor is not None
        try:
            self.assembler.record_read(access.actor.handle, hits, text)
        except Exception:  # the answer stands; the audit trail says what it could
            log.exception("could not record %s's search as a knowledge_read", access.actor.handle)
