"""Who may search, and what a search may return: the access policy, decided once per search.

Every retriever and the hit assembly read the same `Access`, so the rules hold whichever half ranked a
page: the knowledge app, the configured backend, knowledge.scope (read off the configuration current
at each call) and the caller's own narrowing inside it, the tool-skills container (never returned),
and the excluded ancestor titles (default "Auto-Drafted Skills", with the "[Auto-draft]" title prefix
as a fail-closed backstop).

A retriever applies `allowed`, `skills` and `excluded_ids` INSIDE its candidate stage, before any
ranking is cut (a filter applied after the top-K returns nothing: qmd's worst bug); the hit assembly
checks each candidate again against the current rows (`admits`), which may be a moment ahead of an
index.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..config import AUTO_DRAFT_TITLE_PREFIX, AUTO_DRAFTED_PARENT, Actor, Company, ConfigError
from ..errors import Invalid, Refused
from ..pages import reads, rules
from ..pages.containers import container_key, unknown_container
from ..pages.model import normalise_title
from .seam import OUT_OF_SCOPE, UNAVAILABLE, UNKNOWN_CONTAINER, Query, canonical_mode, modes_in_words
from .stamp import Stamp, read_stamp

if TYPE_CHECKING:
    from ..node import Node


@dataclass(frozen=True)
class Denial:
    """A search that does not run: the degraded reason and the words for it."""

    degraded: str
    message: str
    modes_known: bool = True      # False: the company does not search at all (no modes to offer)


@dataclass
class Access:
    actor: Actor | None
    mode: str
    allowed: set[str] | None                 # containers a hit may be in (None: every one)
    skills: str                              # the tool-skills container: never returned
    exclusions: tuple[str, ...]              # excluded ancestor titles, normalised
    draft_backstop: bool                     # also drop "[Auto-draft]" titles
    excluded_ids: frozenset[str] = frozenset()   # pages beneath an excluded ancestor, from the rows
    notes: list[str] = field(default_factory=list)

    @property
    def is_agent(self) -> bool:
        return self.actor is not None and self.actor.is_agent

    def admits_container(self, container: str) -> bool:
        return container != self.skills and (self.allowed is None or container in self.allowed)

    def admits(self, row: Any, ancestors: list[str]) -> bool:
        """The current row of a candidate (container, title, trashed_at) and its ancestor titles."""
        if row["trashed_at"] is not None or not self.admits_container(row["container"]):
            return False
        if self.draft_backstop and row["title"].lower().startswith(AUTO_DRAFT_TITLE_PREFIX.lower()):
            return False
        if row["id"] in self.excluded_ids:
            return False
        return not (self.exclusions and any(normalise_title(t) in self.exclusions for t in ancestors))


def who_searches(company: Company, query: Query) -> Actor | None | Denial:
    """Who searches (`rules.acting`: the query's actor, else the operator; nobody when there is neither), or
    why no search runs: an unknown actor, one without the knowledge app. Every backend's access policy asks
    this."""
    try:
        return rules.acting(company, query.actor, knowledge=True) if query.actor or company.operator else None
    except ConfigError as exc:
        return Denial(UNAVAILABLE, f"{exc.problem} in {exc.file}")
    except Refused as exc:
        return Denial(UNAVAILABLE, str(exc))


class AccessPolicy:
    """Decides each search's Access over one node. Thread-safe; caches the pages beneath excluded
    ancestors until a page changes."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._excluded: dict[tuple[int, tuple[str, ...]], frozenset[str]] = {}
        self._lock = threading.Lock()

    def decide(self, query: Query, backend: str, stamp: Stamp | None = None) -> Access | Denial:
        """`stamp`: where the search stands (read here when not given): the excluded pages are kept for
        its pages' version."""
        company = self.node.company
        mode = canonical_mode(query.mode)
        if mode is None:
            return Denial(UNAVAILABLE, f"mode '{query.mode}' is not one of: {modes_in_words()}")
        who = who_searches(company, query)
        if isinstance(who, Denial):
            return who
        if company.knowledge.backend != backend:
            return Denial(UNAVAILABLE, f"this company does not search: knowledge.backend is "
                                       f"'{company.knowledge.backend}' in {company.file}", modes_known=False)
        try:
            query = self._folded(query)
        except Invalid as exc:                    # a key two containers' keys fold to
            return Denial(UNKNOWN_CONTAINER, str(exc))
        unknown = self._unknown(query)
        if unknown:
            return Denial(UNKNOWN_CONTAINER, unknown)
        allowed, notes, nothing_allowed = self._containers(query)
        if nothing_allowed:
            return Denial(OUT_OF_SCOPE, "nothing searched: " + "; ".join(notes))
        exclusions = tuple(sorted({normalise_title(t) for t in query.effective_exclusions() if t and t.strip()}))
        return Access(actor=who, mode=mode, allowed=allowed, skills=company.knowledge.skills_container,
                      exclusions=exclusions, draft_backstop=normalise_title(AUTO_DRAFTED_PARENT) in exclusions,
                      excluded_ids=self._excluded_pages(exclusions, stamp) if exclusions else frozenset(), notes=notes)

    def _folded(self, query: Query) -> Query:
        """The query with each container it asks for named as declared (`eng` is ENG: containers.container_key)."""
        if not query.containers:
            return query
        with self.node.lock:
            keys = [container_key(self.node.conn, self.node.company, c.strip()) if c and c.strip() else c
                    for c in query.containers]
        return replace(query, containers=keys)

    def _unknown(self, query: Query) -> str | None:
        """Why a container asked for names none (a typo is refused, as `crewlet pages` refuses it)."""
        wanted = sorted({c.strip() for c in (query.containers or []) if c and c.strip()})
        if not wanted:
            return None
        with self.node.lock:
            for name in wanted:
                why = unknown_container(self.node.conn, self.node.company, name)
                if why:
                    return str(why)
        return None

    def _containers(self, query: Query) -> tuple[set[str] | None, list[str], bool]:
        """The containers a search may return (None: every one), from knowledge.scope and the caller's
        own narrowing inside it; a note for each requested container that cannot return anything; and
        whether every requested one is outside the scope."""
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
            with self.node.lock:
                holding = reads.containers_holding(self.node.conn, inside)
            for name in inside:
                if name not in holding:
                    notes.append(f"container {name} holds no pages")
        allowed = (wanted & scope) if scope else wanted
        return allowed, notes, bool(outside) and not (wanted - set(outside))

    def _excluded_pages(self, exclusions: tuple[str, ...], stamp: Stamp | None) -> frozenset[str]:
        """Every page beneath a page whose title is an excluded ancestor title, from the rows; cached
        until a page changes (a read or a comment moves the log, not the pages)."""
        stamp = stamp or read_stamp(self.node)
        key = (stamp.version, exclusions)
        with self._lock:
            hit = self._excluded.get(key)
        if hit is not None:
            return hit
        with self.node.lock:
            found = reads.beneath(self.node.conn, exclusions)
        with self._lock:
            if len(self._excluded) > 16:
                self._excluded.clear()
            self._excluded[key] = found
        return found
