"""The native Searcher: this node's own lexical index, read through the seam.

Plain text in; ranked hits and an outcome out; never raises. Every seat reads every page, so
`can_search` is only "is this the configured backend, has this node's first index build finished, and
is the index it names there" — the facts a search decides by. Before the first build, a search answers
"not searchable yet" (no mode served) — a different fact from "nothing matched"; a query with no word
that can be searched answers "no_terms", not "nothing matched" either.

What a search never returns, and how it keeps its places:

- the tool-skills container, trashed and purged pages, containers outside knowledge.scope (and outside
  the caller's own narrowing) are masked out inside the candidate stage, before any ranking is cut;
- pages under an excluded ancestor title (default "Auto-Drafted Skills") are masked too, from the rows;
- then the ranking is walked, each candidate checked against the CURRENT rows (the index may be a
  moment behind them), until `limit` hits are accepted — an exclusion costs a result its page, never
  a place.

An agent's search is one knowledge_read event listing the hits it was shown; a person's never is.
"""
from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import AUTO_DRAFT_TITLE_PREFIX, AUTO_DRAFTED_PARENT
from ..pages.applier import position
from ..pages.model import normalise_title
from . import lexical
from .indexer import IndexManifest, covered_seq, read_state, state_path
from .lexical import DEFAULT_RANKING, Ranking, SegmentCache, Snapshot
from .seam import (MODES, NO_EMBEDDINGS, NO_TERMS, NOT_SEARCHABLE_MESSAGE, NOT_SEARCHABLE_YET, OUT_OF_SCOPE, SNIPPET_MAX,
                   UNAVAILABLE, Coverage, Hit, Outcome, Query, Result)
from .snippets import TermFinder, plain_text, snippet

log = logging.getLogger("crewlet.search")

BACKEND = "native"
SERVED_MODES = ["keyword"]
PAGE_URL = "#/knowledge/pages/{id}"
TEXT_CACHE_CHARS = 16_000_000     # plain texts kept for snippets, keyed on (page id, row version)

HYBRID_MESSAGE = ("keyword ranking only: this node has no embeddings yet, so nothing was ranked by meaning — "
                  "a page that shares no word with the question can be missing")
SEMANTIC_MESSAGE = ("nothing served: this node has no embeddings yet to rank by meaning, and a keyword ranking "
                    "cannot find a page that shares no word with the question — search in keyword or hybrid mode")
UNAVAILABLE_MESSAGE = "the knowledge base could not be searched just now"

# degraded reasons this backend adds to the seam's (they belong next to those in seam.py)

NO_TERMS_MESSAGE = "nothing was searched: the query has no word that can be searched"


def page_url(page_id: str) -> str:
    return PAGE_URL.format(id=page_id)


def _cause(exc: BaseException) -> str:
    """A failure in words a person can act on."""
    if isinstance(exc, (FileNotFoundError, *lexical.WHOOSH_ERRORS)):
        return (f"the keyword index is missing or damaged ({exc}) — `crewlet index build` derives it again "
                f"from the pages")
    return str(exc) or type(exc).__name__


@dataclass
class _Candidate:
    page_id: str
    score: float


class NativeSearcher:
    """knowledge.Searcher over this node's rows and lexical index.

    Thread-safe (searches are serialised; the index snapshot is reused while the index generation is
    unchanged and replaced — a new reader, never `refresh()` — after every commit).
    """

    def __init__(self, node: Any, *, ranking: Ranking = DEFAULT_RANKING) -> None:
        self.node = node
        self.ranking = ranking
        self.index_dir: Path = node.home.index_dir
        self._lock = threading.RLock()
        self._state: IndexManifest | None = None
        self._state_key: tuple[int, int, int] | None = None
        self._seen: tuple[tuple[int, int, int] | None, IndexManifest | None] = (None, None)  # (key, state), one object
        self._ix: Any = None
        self._ix_dir: Path | None = None
        self._cache = SegmentCache()
        self._snap: Snapshot | None = None
        self._exclusion_cache: dict[tuple[int, tuple[str, ...]], frozenset[str]] = {}
        self._texts: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._text_chars = 0
        self._kb: Any = None
        # the term finder of this searcher's latest search that returned hits, for a caller that owns
        # the searcher and highlights those hits (the CLI) without analysing the query again
        self.last_finder: TermFinder | None = None

    # -- the seam -----------------------------------------------------------------------------------
    def backend(self) -> str:
        return BACKEND

    def can_search(self, actor: str | None = None) -> bool:
        """Would a search run? The same facts search() decides by, read cheaply: the configured backend,
        the state file (one stat; parsed only when it changed) and the index directory it names (one
        stat). No query runs, no lock is taken."""
        if self.node.company.knowledge.backend != BACKEND:
            return False
        path = state_path(self.index_dir)
        try:
            st = os.stat(path)
        except OSError:
            return False
        key, state = self._seen
        if key != (st.st_mtime_ns, st.st_size, st.st_ino):
            state = read_state(self.index_dir)
        return state is not None and (self.index_dir / state.dir).is_dir()

    def search(self, query: Query) -> Result:
        try:
            with self._lock:
                try:
                    return self._search(query)
                except (OSError, *lexical.WHOOSH_ERRORS):
                    # the index was switched (a re-derivation) between reading its state and opening it:
                    # forget what is open and read the state again, once
                    self._forget()
                    return self._search(query)
        except Exception as exc:  # never raises: every failure is an answer that says so
            log.warning("search failed: %s", _cause(exc))
            log.debug("search failed", exc_info=True)
            return Result([], Outcome(None, list(SERVED_MODES), UNAVAILABLE, f"{UNAVAILABLE_MESSAGE}: {_cause(exc)}",
                                      Coverage(complete=False)))

    def close(self) -> None:
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        if self._snap is not None:
            self._snap.close()
            self._snap = None
        self._ix = self._ix_dir = None
        self._state = self._state_key = None

    # -- state and snapshot ---------------------------------------------------------------------------
    def _read_state(self) -> IndexManifest | None:
        path = state_path(self.index_dir)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._state, self._state_key = None, None
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        if key != self._state_key:
            self._state = read_state(self.index_dir)
            self._state_key = key if self._state is not None else None
            self._seen = (self._state_key, self._state)
        return self._state

    def _snapshot(self, state: IndexManifest) -> Snapshot:
        path = self.index_dir / state.dir
        if self._ix is None or self._ix_dir != path:
            if self._snap is not None:
                self._snap.close()
                self._snap = None
            self._ix = lexical.open_index(path)
            self._ix_dir = path
            self._cache = SegmentCache()
        generation = lexical.latest_generation(self._ix)
        if self._snap is None or self._snap.generation != generation:
            fresh = Snapshot(self._ix, self._cache, self.ranking)
            if self._snap is not None:
                self._snap.close()
            self._snap = fresh
        return self._snap

    def snapshot(self) -> Snapshot | None:
        """The index generation searches currently read (None before the first build)."""
        with self._lock:
            state = self._read_state()
            return self._snapshot(state) if state is not None else None

    # -- searching ----------------------------------------------------------------------------------
    def _search(self, query: Query) -> Result:
        node = self.node
        node.refresh_config()  # scope and actors are read off the configuration current at each call
        company = node.company
        mode = (query.mode or "hybrid").strip().lower()
        with node.lock:
            applied = position(node.conn)[0]
        if mode not in MODES:
            return Result([], Outcome(None, list(SERVED_MODES), UNAVAILABLE,
                                      f"mode '{query.mode}' is not one of: {', '.join(MODES)}", Coverage(complete=False)))
        handle = query.actor or company.operator
        who = company.actors.get(handle) if handle else None
        if handle and who is None:
            return Result([], Outcome(None, list(SERVED_MODES), UNAVAILABLE,
                                      f"no actor '{handle}' is configured in {company.file}", Coverage(complete=False)))
        if who is not None and not who.holds_knowledge:
            return Result([], Outcome(None, list(SERVED_MODES), UNAVAILABLE,
                                      f"{handle} does not hold the knowledge app — an admin sets `knowledge = true` "
                                      f"under [actors.{handle}] in {company.file}", Coverage(complete=False)))
        if company.knowledge.backend != BACKEND:
            return Result([], Outcome(None, [], UNAVAILABLE,
                                      f"this company does not search: knowledge.backend is "
                                      f"'{company.knowledge.backend}' in {company.file}", Coverage(complete=False)))
        text = query.text or ""
        if not text.strip():
            return Result([], Outcome(None, list(SERVED_MODES), NO_TERMS, f"{NO_TERMS_MESSAGE}: it is empty",
                                      Coverage(complete=False, applied_seq=applied)))
        state = self._read_state()
        if state is None:
            return Result([], Outcome(None, list(SERVED_MODES), NOT_SEARCHABLE_YET, NOT_SEARCHABLE_MESSAGE,
                                      Coverage(complete=False, indexed_seq=0, applied_seq=applied, pages_indexed=0)))
        snap = self._snapshot(state)
        with node.lock:
            indexed = covered_seq(node.conn, state.indexed_seq, applied)
        coverage = Coverage(indexed_seq=indexed, applied_seq=applied, pages_indexed=snap.count,
                            complete=indexed >= applied)
        selected = snap.query_terms(text)
        terms = selected.terms
        if not terms:
            return Result([], Outcome(None, list(SERVED_MODES), NO_TERMS,
                                      f"{NO_TERMS_MESSAGE}: it holds only punctuation or common words "
                                      f"(the, and, of …) that the index leaves out", coverage))
        if mode == "semantic":
            return Result([], Outcome(None, list(SERVED_MODES), NO_EMBEDDINGS, SEMANTIC_MESSAGE, coverage))

        degraded = NO_EMBEDDINGS if mode == "hybrid" else None
        notes = [HYBRID_MESSAGE] if mode == "hybrid" else []
        allowed, narrowing_notes, nothing_allowed = self._containers(query)
        notes.extend(narrowing_notes)
        if nothing_allowed:
            return Result([], Outcome(None, list(SERVED_MODES), OUT_OF_SCOPE,
                                      "nothing searched: " + "; ".join(narrowing_notes), coverage))
        if selected.dropped:
            notes.append(f"the query has more than {lexical.MAX_QUERY_TERMS} distinct words the index holds: "
                         f"{selected.dropped} of them (the last ones) were left out of the search")
        hits: list[Hit] = []
        if allowed is None or allowed:
            hits = self._rank(snap, query, terms, allowed)
        outcome = Outcome("keyword", list(SERVED_MODES), degraded, "; ".join(notes), coverage)
        if hits and who is not None and who.is_agent:
            self._record_read(who.handle, hits, query.text)
        return Result(hits, outcome)

    def _containers(self, query: Query) -> tuple[set[str] | None, list[str], bool]:
        """The containers a search may return (None: every one), from knowledge.scope — read off the
        configuration per call — and the caller's own narrowing inside it; a note for each requested
        container that cannot return anything; and whether every requested one is outside the scope."""
        company = self.node.company
        scope = set(company.scope())
        wanted = {c.strip() for c in (query.containers or []) if c and c.strip()}
        if not wanted:
            return (scope or None), [], False
        skills = company.knowledge.skills_container
        notes = []
        if skills in wanted:
            notes.append(f"{skills} holds tool skills, which search never returns")
        outside = sorted(wanted - scope) if scope else []
        if outside:
            notes.append(f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} outside knowledge.scope "
                         f"({', '.join(sorted(scope))})")
        inside = sorted(wanted - set(outside) - {skills})
        if inside:
            marks = ",".join("?" * len(inside))
            with self.node.lock:
                holding = {r[0] for r in self.node.conn.execute(
                    f"SELECT DISTINCT container FROM pages WHERE trashed_at IS NULL AND container IN ({marks})", inside)}
            for name in inside:
                if name not in holding:
                    notes.append(f"container {name} holds no pages")
        allowed = (wanted & scope) if scope else wanted
        return allowed, notes, bool(outside) and not (wanted - set(outside))

    def _excluded_pages(self, exclusions: tuple[str, ...]) -> frozenset[str]:
        """Every page beneath a page whose title is an excluded ancestor title, from the rows; cached
        until a page changes."""
        marks = ",".join("?" * len(exclusions))
        with self.node.lock:
            # keyed on the last page change, so a read or a comment (which move the log) keeps the cache
            version = self.node.conn.execute("SELECT max(version) FROM pages").fetchone()[0] or 0
            key = (version, exclusions)
            hit = self._exclusion_cache.get(key)
            if hit is not None:
                return hit
            rows = self.node.conn.execute(
                "WITH RECURSIVE under(id) AS ("
                f" SELECT c.id FROM pages c JOIN pages a ON c.parent_id = a.id WHERE a.address IN ({marks})"
                " UNION SELECT p.id FROM pages p JOIN under u ON p.parent_id = u.id)"
                " SELECT id FROM under", exclusions).fetchall()
        found = frozenset(r[0] for r in rows)
        if len(self._exclusion_cache) > 16:
            self._exclusion_cache.clear()
        self._exclusion_cache[key] = found
        return found

    def _rank(self, snap: Snapshot, query: Query, terms: dict[str, int], allowed: set[str] | None) -> list[Hit]:
        company = self.node.company
        skills = company.knowledge.skills_container
        limit = query.effective_limit()
        exclusions = tuple(sorted({normalise_title(t) for t in query.effective_exclusions() if t and t.strip()}))
        draft_backstop = normalise_title(AUTO_DRAFTED_PARENT) in exclusions

        # the candidate stage: everything no result may be is masked before the ranking is cut
        mask = snap.container_mask(allowed, {skills})
        if draft_backstop:
            mask &= ~snap.auto_draft
        if exclusions:
            below = self._excluded_pages(exclusions)
            docs = [snap.docnum[p] for p in below if p in snap.docnum]
            if docs:
                mask[np.asarray(docs, dtype=np.int64)] = False
        scores = snap.scores(terms)

        # the walk: each candidate checked against the current rows until `limit` are accepted
        accepted: list[tuple[Any, float, list[str]]] = []
        chains: dict[str, list[str]] = {}
        batch: list[_Candidate] = []
        for docnum, score in snap.ranked(scores, mask, first=max(64, limit * 4)):
            batch.append(_Candidate(snap.ids[docnum], score))
            if len(batch) >= max(16, 2 * (limit - len(accepted))):
                self._accept(batch, accepted, chains, limit, allowed, skills, exclusions, draft_backstop)
                batch = []
                if len(accepted) >= limit:
                    break
        if batch and len(accepted) < limit:
            self._accept(batch, accepted, chains, limit, allowed, skills, exclusions, draft_backstop)

        texts = self._plain_texts([row for row, _, _ in accepted])
        finder = TermFinder(terms, snap.tokens)
        self.last_finder = finder
        return [Hit(title=row["title"], url=page_url(row["id"]), container=row["container"], page_id=row["id"],
                    snippet=snippet(texts.get(row["id"], ""), finder, limit=SNIPPET_MAX), ancestors=ancestors,
                    score=round(score, 6))
                for row, score, ancestors in accepted]

    def _plain_texts(self, rows: list[Any]) -> dict[str, str]:
        """Each accepted page's plain text, from a cache keyed on (page id, row version)."""
        out: dict[str, str] = {}
        missing = []
        for row in rows:
            key = (row["id"], row["version"])
            text = self._texts.get(key)
            if text is None:
                missing.append(row["id"])
            else:
                self._texts.move_to_end(key)
                out[row["id"]] = text
        if missing:
            with self.node.lock:
                found = self.node.conn.execute(
                    f"SELECT id, version, body FROM pages WHERE id IN ({','.join('?' * len(missing))})", missing).fetchall()
            for r in found:
                text = plain_text(r["body"])
                out[r["id"]] = text
                self._texts[(r["id"], r["version"])] = text
                self._text_chars += len(text)
            while self._text_chars > TEXT_CACHE_CHARS and self._texts:
                _, old = self._texts.popitem(last=False)
                self._text_chars -= len(old)
        return out

    def _accept(self, batch: list[_Candidate], accepted: list[tuple[Any, float, list[str]]],
                chains: dict[str, list[str]], limit: int, allowed: set[str] | None, skills: str,
                exclusions: tuple[str, ...], draft_backstop: bool) -> None:
        conn = self.node.conn
        with self.node.lock:
            rows = {r["id"]: r for r in conn.execute(
                "SELECT id, container, title, parent_id, trashed_at, version FROM pages "
                f"WHERE id IN ({','.join('?' * len(batch))})", [c.page_id for c in batch])}
            for cand in batch:
                if len(accepted) >= limit:
                    return
                row = rows.get(cand.page_id)
                if row is None or row["trashed_at"] is not None:
                    continue  # purged or trashed since the index last caught up
                if row["container"] == skills or (allowed is not None and row["container"] not in allowed):
                    continue
                if draft_backstop and row["title"].lower().startswith(AUTO_DRAFT_TITLE_PREFIX.lower()):
                    continue
                ancestors = chains.get(row["parent_id"] or "")
                if ancestors is None:  # siblings share their chain: walked once per parent per search
                    ancestors = [a["title"] for a in self._knowledge_base()._ancestors(row["parent_id"])]
                    chains[row["parent_id"] or ""] = ancestors
                if exclusions and any(normalise_title(t) in exclusions for t in ancestors):
                    continue
                accepted.append((row, cand.score, ancestors))

    def _knowledge_base(self) -> Any:
        """The KnowledgeBase over this node (ancestors, reads): the one walk of the outline crewlet has."""
        if self._kb is None:
            from ..pages.service import KnowledgeBase

            self._kb = KnowledgeBase(self.node)
        return self._kb

    def _record_read(self, handle: str, hits: list[Hit], text: str) -> None:
        try:
            self._knowledge_base().record_read(
                handle, "search", [{"id": h.page_id, "container": h.container, "title": h.title} for h in hits],
                query=text)
        except Exception:  # the answer stands; the audit trail says what it could
            log.exception("could not record %s's search as a knowledge_read", handle)
