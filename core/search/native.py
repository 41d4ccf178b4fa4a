"""The native Searcher: this node's own copy, read through the seam.

Plain text in; ranked hits and an outcome out; never raises. A search is four steps, each in its own
module so a new retriever slots in without touching the others:

1. the access policy (`access.py`) decides who may search and what a hit may be;
2. each retriever the mode asks for ranks page ids — the keyword retriever (`keyword.py`) by BM25F over
   this node's lexical index — with the policy's masks applied inside its candidate stage;
3. fusion (`fusion.py`) merges the rankings a hybrid search holds by reciprocal rank;
4. the hit assembly (`hits.py`) walks the merged ranking against the current rows until `limit` hits
   are accepted, and gives each its title, ancestors and snippet.

Every seat reads every page, so `can_search` is only "is this the configured backend, has this node's
first index build finished, and is the index it names there". Before the first build a search answers
"not searchable yet" (no mode served) — a different fact from "nothing matched"; a query with no word
that can be searched answers "no_terms", not "nothing matched" either. An agent's search is one
knowledge_read event listing the hits it was shown; a person's never is.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from ..pages.applier import position
from . import lexical
from .access import Access, AccessPolicy, Denial
from .hits import Accepted, HitAssembler, page_url
from .keyword import KeywordRanking, KeywordRetriever
from .lexical import DEFAULT_RANKING, Ranking, Snapshot
from .seam import (NO_EMBEDDINGS, NO_TERMS, NOT_SEARCHABLE_MESSAGE, NOT_SEARCHABLE_YET, OUT_OF_SCOPE, UNAVAILABLE,
                   Coverage, Outcome, Query, Result)
from .snippets import TermFinder

__all__ = ["NativeSearcher", "page_url", "NO_TERMS", "OUT_OF_SCOPE", "BACKEND"]

log = logging.getLogger("crewlet.search")

BACKEND = "native"
SERVED_MODES = ["keyword"]

HYBRID_MESSAGE = ("keyword ranking only: this node has no embeddings yet, so nothing was ranked by meaning — "
                  "a page that shares no word with the question can be missing")
SEMANTIC_MESSAGE = ("nothing served: this node has no embeddings yet to rank by meaning, and a keyword ranking "
                    "cannot find a page that shares no word with the question — search in keyword or hybrid mode")
UNAVAILABLE_MESSAGE = "the knowledge base could not be searched just now"
NO_TERMS_MESSAGE = "nothing was searched: the query has no word that can be searched"


def _cause(exc: BaseException) -> str:
    """A failure in words a person can act on."""
    if isinstance(exc, (FileNotFoundError, *lexical.WHOOSH_ERRORS)):
        return (f"the keyword index is missing or damaged ({exc}) — `crewlet index build` derives it again "
                f"from the pages")
    return str(exc) or type(exc).__name__


def _unserved(degraded: str, message: str, coverage: Coverage | None = None, modes: list[str] | None = None) -> Result:
    return Result([], Outcome(None, list(SERVED_MODES) if modes is None else modes, degraded, message,
                              coverage or Coverage(complete=False)))


class NativeSearcher:
    """knowledge.Searcher over this node's rows and indexes. Thread-safe (searches are serialised)."""

    def __init__(self, node: Any, *, ranking: Ranking = DEFAULT_RANKING) -> None:
        self.node = node
        self.policy = AccessPolicy(node)
        self.keyword = KeywordRetriever(node.home.index_dir, ranking)
        self.assembler = HitAssembler(node)
        self._lock = threading.RLock()
        # the term finder of this searcher's latest search that returned hits, for a caller that owns
        # the searcher and highlights those hits (the CLI) without analysing the query again
        self.last_finder: TermFinder | None = None

    # -- the seam -----------------------------------------------------------------------------------
    def backend(self) -> str:
        return BACKEND

    def can_search(self, actor: str | None = None) -> bool:
        """Would a search run? The facts search() decides by, read cheaply: the configured backend, the
        index state file (one stat; parsed only when it changed) and the directory it names (one stat)."""
        return self.node.company.knowledge.backend == BACKEND and self.keyword.ready()

    def search(self, query: Query) -> Result:
        try:
            with self._lock:
                try:
                    return self._search(query)
                except (OSError, *lexical.WHOOSH_ERRORS):
                    # the index was switched (a re-derivation) between reading its state and opening it:
                    # forget what is open and read the state again, once
                    self.keyword.forget()
                    return self._search(query)
        except Exception as exc:  # never raises: every failure is an answer that says so
            log.warning("search failed: %s", _cause(exc))
            log.debug("search failed", exc_info=True)
            return _unserved(UNAVAILABLE, f"{UNAVAILABLE_MESSAGE}: {_cause(exc)}")

    def snapshot(self) -> Snapshot | None:
        """The keyword index generation searches currently read (None before the first build)."""
        with self._lock:
            return self.keyword.snapshot()

    def close(self) -> None:
        with self._lock:
            self.keyword.close()

    # -- one search -----------------------------------------------------------------------------------
    def _search(self, query: Query) -> Result:
        node = self.node
        node.refresh_config()  # scope and actors are read off the configuration current at each call
        with node.lock:
            applied = position(node.conn)[0]
        access = self.policy.decide(query, BACKEND)
        if isinstance(access, Denial) and access.degraded != OUT_OF_SCOPE:
            return _unserved(access.degraded, access.message, modes=None if access.modes_known else [])
        text = query.text or ""
        if not text.strip():
            return _unserved(NO_TERMS, f"{NO_TERMS_MESSAGE}: it is empty", Coverage(complete=False, applied_seq=applied))
        manifest = self.keyword.manifest()
        if manifest is None:
            return _unserved(NOT_SEARCHABLE_YET, NOT_SEARCHABLE_MESSAGE,
                             Coverage(complete=False, indexed_seq=0, applied_seq=applied, pages_indexed=0))
        snapshot = self.keyword.snapshot(manifest)
        assert snapshot is not None
        with node.lock:
            coverage = self.keyword.coverage(node.conn, manifest, applied, snapshot)
        if isinstance(access, Denial):  # out of scope: said with the coverage of what was not searched
            return _unserved(access.degraded, access.message, coverage)
        ranking = self.keyword.rank(snapshot, text, access)
        if ranking is None:
            return _unserved(NO_TERMS, f"{NO_TERMS_MESSAGE}: it holds only punctuation or common words "
                                       f"(the, and, of …) that the index leaves out", coverage)
        if access.mode == "semantic":
            return _unserved(NO_EMBEDDINGS, SEMANTIC_MESSAGE, coverage)

        notes = [HYBRID_MESSAGE] if access.mode == "hybrid" else []
        notes.extend(access.notes)
        if ranking.dropped_terms:
            notes.append(f"the query has more than {lexical.MAX_QUERY_TERMS} distinct words the index holds: "
                         f"{ranking.dropped_terms} of them (the last ones) were left out of the search")
        accepted = self._walk(ranking, access, query.effective_limit())
        hits = self.assembler.hits(accepted, ranking.finder)
        self.last_finder = ranking.finder
        outcome = Outcome("keyword", list(SERVED_MODES), NO_EMBEDDINGS if access.mode == "hybrid" else None,
                          "; ".join(notes), coverage)
        if hits and access.is_agent:
            self._record_read(access, hits, text)
        return Result(hits, outcome)

    def _walk(self, ranking: KeywordRanking, access: Access, limit: int) -> list[Accepted]:
        """Read the ranking deeper until `limit` candidates are accepted or it runs out."""
        accepted: list[Accepted] = []
        seen: set[str] = set()
        depth = max(64, limit * 4)
        while True:
            candidates = ranking.take(depth)
            self.assembler.accept(candidates, access, limit, accepted, seen)
            if len(accepted) >= limit or len(candidates) < depth:
                return accepted
            depth *= 4

    def _record_read(self, access: Access, hits: list[Any], text: str) -> None:
        assert access.actor is not None
        try:
            self.assembler.record_read(access.actor.handle, hits, text)
        except Exception:  # the answer stands; the audit trail says what it could
            log.exception("could not record %s's search as a knowledge_read", access.actor.handle)
