"""The Searcher seam: the one interface every consumer (CLI, app, agent runtimes) searches through.

Plain text in, ranked hits and an outcome out. `search()` never raises: every failure is an answer
with no hits whose outcome says why, because "nothing matched" and "could not be searched" send a
reader to different places.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

from ..config import AUTO_DRAFTED_PARENT

Mode = Literal["hybrid", "keyword", "semantic"]
MODES: tuple[str, ...] = ("hybrid", "keyword", "semantic")
# another name a person knows a mode by (the app labels semantic search "Meaning"): accepted everywhere,
# answered under the mode's own name (served_mode says "semantic")
MODE_ALIASES: dict[str, str] = {"meaning": "semantic"}


def canonical_mode(mode: str | None) -> str | None:
    """The mode a name asks for ("" or None: hybrid), or None when it names none."""
    name = (mode or "hybrid").strip().lower()
    name = MODE_ALIASES.get(name, name)
    return name if name in MODES else None


def modes_in_words() -> str:
    """The modes as help and a refusal list them: "hybrid, keyword or semantic (also: meaning)"."""
    aliases = {m: [a for a, to in MODE_ALIASES.items() if to == m] for m in MODES}
    named = [m + (f" (also: {', '.join(aliases[m])})" if aliases[m] else "") for m in MODES]
    return ", ".join(named[:-1]) + " or " + named[-1]
DEFAULT_LIMIT = 8
SNIPPET_MAX = 200

# degraded reasons (docs/search.md has the table of what each mode serves in each case)
NOT_SEARCHABLE_YET = "not_searchable_yet"    # this node's first full index build has not finished
NO_EMBEDDINGS = "no_embeddings"              # nothing to rank by meaning (vectors off, or none in the configured
                                             # space yet): hybrid served keyword, semantic served nothing
PROVIDER_SLOW = "provider_slow"              # the query was not embedded within its 2 s: the same
PROVIDER_FAILED = "provider_failed"          # the provider could not embed the query: the same
PARTIAL_COVERAGE = "partial_coverage"        # ranked by meaning over only part of the pages (the rest wait
                                             # for the embedding duty, or its provider refused them)
REFILLING = "refilling"                      # the model changed: pages still on the previous one are not ranked
                                             # by meaning until the refill reaches them
UNAVAILABLE = "unavailable"                  # the search could not run at all
NO_TERMS = "no_terms"                        # the query has no word the index could hold (hybrid: ranked by
                                             # meaning alone; keyword: nothing was searched)
OUT_OF_SCOPE = "out_of_scope"                # every container asked for is outside knowledge.scope
UNKNOWN_CONTAINER = "unknown_container"      # a container asked for is neither declared nor holds a page (a typo)

NOT_SEARCHABLE_MESSAGE = ("the knowledge base is not searchable from this node yet — ask a colleague rather than "
                          "concluding nothing has been written down")


@dataclass
class Hit:
    """A page, or an entry under a page (spec 003): an entry's hit has `entry_id` set, its page's title,
    container, id and ancestors, its own url and its body as the snippet."""

    title: str
    url: str                      # shareable link; "" when unbuildable
    container: str
    page_id: str
    snippet: str                  # plain text, at most 200 characters; may be ""
    ancestors: list[str] = field(default_factory=list)   # ancestor titles, outermost first
    score: float = 0.0
    entry_id: str | None = None   # set: this hit is an entry under the page
    entry_kind: str | None = None     # FACT, DECISION, CONVENTION, GOTCHA
    entry_status: str | None = None   # PROPOSED, STANDING, …

    @property
    def is_entry(self) -> bool:
        return self.entry_id is not None

    @property
    def address(self) -> str:
        """CONTAINER/Title of the page (an entry's: the page it is under)."""
        return f"{self.container}/{self.title}"

    def where(self) -> str:
        """What a surface says of the hit: the page's address, or "entry under ENG/Page"."""
        return f"entry under {self.address}" if self.is_entry else self.address

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.is_entry:      # a page's hit says what it always said
            for key in ("entry_id", "entry_kind", "entry_status"):
                out.pop(key)
        else:
            out["kind"] = "entry"
        return out


@dataclass
class Coverage:
    nodes: int = 1
    complete: bool = True
    buckets_missing: int = 0
    indexed_seq: int = 0          # the log position the lexical index covers
    applied_seq: int = 0          # the log position this node's rows are applied through
    pages_indexed: int = 0
    embedded: int = 0             # live pages with a current vector in the configured space
    embeddable: int = 0           # live pages (what full semantic coverage would be)

    @property
    def behind(self) -> int:
        return max(0, self.applied_seq - self.indexed_seq)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"behind": self.behind}


@dataclass
class Outcome:
    served_mode: str | None       # None: the search did not run
    modes: list[str]              # the modes this backend can serve now
    degraded: str | None = None   # why less was served than asked; None when nothing was lost
    message: str = ""             # the same, in words for a person or a seat
    coverage: Coverage = field(default_factory=Coverage)
    # a remote backend's answer: where it came from (backend, url), whose credential asked, how it
    # ranked, how many requests it took (None for this node's own copy)
    source: dict[str, Any] | None = None
    # what the relevance floor did (core/search/floor.py FloorReport); None when nothing was ranked by meaning
    floor: Any = None
    # where the query's vector came from when one was used: "cache" (asked before), "daemon" (the home's
    # long-lived process, core/search/query_daemon.py) or "model" (loaded by this process); None without one
    query_vector: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"served_mode": self.served_mode, "modes": self.modes, "degraded": self.degraded,
               "message": self.message, "coverage": self.coverage.to_json(),
               "floor": self.floor.to_json() if self.floor is not None else None,
               "query_vector": self.query_vector}
        return out if self.source is None else out | {"source": self.source}


@dataclass
class Result:
    hits: list[Hit]
    outcome: Outcome

    def to_json(self) -> dict[str, Any]:
        return {"hits": [h.to_json() for h in self.hits], "outcome": self.outcome.to_json()}


@dataclass
class Query:
    text: str                                  # plain language, never a query-language fragment
    actor: str | None = None                   # who is searching (None: the configured operator)
    limit: int = DEFAULT_LIMIT                 # 0 takes DEFAULT_LIMIT
    exclude_ancestors: list[str] | None = None # None takes [AUTO_DRAFTED_PARENT]; [] disables
    mode: str = "hybrid"
    containers: list[str] | None = None        # an operator's own narrowing (CLI --container), inside the scope

    def effective_limit(self) -> int:
        return self.limit if self.limit > 0 else DEFAULT_LIMIT

    def effective_exclusions(self) -> list[str]:
        return [AUTO_DRAFTED_PARENT] if self.exclude_ancestors is None else list(self.exclude_ancestors)


class Searcher(Protocol):
    def backend(self) -> str:
        """Names the integration answering, for logs and the operator surface."""

    def can_search(self, actor: str | None = None) -> bool:
        """Cheap (no query, at most a stat of the index state): could a search possibly hit anything?"""

    def search(self, query: Query) -> Result:
        """Up to query.limit ranked hits and what the search did. Never raises."""
