"""A search's answer in the words a person reads: the one place the CLI and the app turn an Outcome into
words, so neither shows an internal code (`partial_coverage`, `served semantic`, "record 17 of 17")
and both say the same thing. `--json` keeps the codes: scripts read those.

`search_words` says what a search served; `index_words` how current the copy it searched is.
"""
from __future__ import annotations

from dataclasses import dataclass

from core.search.seam import NOT_SEARCHABLE_YET, UNAVAILABLE, Coverage, Result

from .fmt import plural

# what each mode ranks by, as the app labels it ("Meaning") and a sentence reads it
RANKED_BY = {"hybrid": "words and meaning", "keyword": "words", "semantic": "meaning"}


def ranked_by(mode: str | None) -> str:
    return RANKED_BY.get(mode or "", mode or "")


@dataclass(frozen=True)
class SearchWords:
    """What a search did, said: a headline, the plain facts, and what was served less than asked."""

    headline: str                  # "3 results", "nothing matched", "not searchable yet", "could not search"
    tone: str                      # "ok" | "warning" (served less, or not at all) | "error" (could not run)
    facts: tuple[str, ...] = ()    # how it was served: "ranked by words and meaning", "the first 8 — …"
    warnings: tuple[str, ...] = () # what was served less than asked, and why

    def line(self) -> str:
        """Headline and facts on one line (the warnings follow, each on its own)."""
        return " · ".join((self.headline, *self.facts))


def hidden(weaker: int, folders: int) -> str:
    """What the relevance floor kept out of an answer that has hits, in words: "6 weaker matches hidden".
    (`--json` keeps the numbers: outcome.floor.cut, .folders, .value.)"""
    parts = [plural(weaker, "weaker match", "weaker matches")] if weaker else []
    if folders:
        parts.append(plural(folders, "folder") + " matched by title alone")
    return " and ".join(parts) + " hidden" if parts else ""


NOT_SEARCHABLE_HEADLINE = "not searchable yet"
NOTHING_SEARCHED_HEADLINE = "nothing searched"
COULD_NOT_HEADLINE = "could not search"


def search_words(result: Result, *, asked: str, limit: int, more: str = "") -> SearchWords:
    """`asked` is the mode asked for (canonical), `limit` how many hits were asked for, and `more` how this
    surface shows more when the answer was cut at the limit ("--limit N shows more")."""
    out = result.outcome
    message = (out.message or "").strip()
    if out.served_mode is None:
        if out.degraded == NOT_SEARCHABLE_YET:
            return SearchWords(NOT_SEARCHABLE_HEADLINE, "warning", (), (message,) if message else ())
        if out.degraded == UNAVAILABLE:
            return SearchWords(COULD_NOT_HEADLINE, "error", (), (message or "the search did not run",))
        return SearchWords(NOTHING_SEARCHED_HEADLINE, "warning", (f"searching by {ranked_by(asked)} was asked",),
                           (message,) if message else ())
    n = len(result.hits)
    floor = out.floor
    # "nothing close enough" is another answer: pages were ranked by meaning, none near enough (core/search/floor.py)
    cut = floor is not None and bool(floor.cut or floor.folders)
    headline = plural(n, "result") if n else ("nothing close enough" if cut else "nothing matched")
    cov = out.coverage
    if out.source is not None:      # a remote backend: the site searched live, ranked its own way
        requests = int(out.source.get("requests") or 0)
        facts = [f"{out.source.get('backend')} live, no local copy", plural(requests, "request"),
                 f"ranked by {out.source.get('ranking') or 'the site'}"]
    else:
        facts = [f"ranked by {ranked_by(out.served_mode)}"]
        if out.served_mode != asked:
            facts[0] += f" (by {ranked_by(asked)} was asked)"
        pages = cov.embedded if out.served_mode == "semantic" else cov.pages_indexed
        if pages:
            facts.append(f"over {plural(pages, 'page')}")
    if floor is not None and n and (floor.cut or floor.folders):
        facts.append(hidden(floor.cut if floor.value is not None else 0, floor.folders))
    if floor is not None and floor.source == "none" and out.served_mode in ("hybrid", "semantic"):
        facts.append("no relevance floor for this model")
    if n and n >= limit and more:
        facts.append(f"the first {n:,} — {more}")
    warnings = [message] if message else []
    if cov.behind and out.served_mode != "semantic" and out.source is None:
        warnings.append(f"{plural(cov.behind, 'change')} not in the keyword index yet (the background worker adds "
                        f"{'it' if cov.behind == 1 else 'them'})")
    tone = "warning" if out.degraded or cov.behind else "ok"
    return SearchWords(headline, tone, tuple(facts), tuple(warnings))


def index_words(coverage: Coverage | None = None, *, indexed_seq: int = 0, applied_seq: int = 0,
                pages: int = 0) -> str:
    """How current the keyword index of this copy is: "11 pages indexed, up to date" / "… 3 changes behind".
    From a search's coverage, or from the numbers the app's background worker last reported."""
    if coverage is not None:
        indexed_seq, applied_seq, pages = coverage.indexed_seq, coverage.applied_seq, coverage.pages_indexed
    behind = max(0, applied_seq - indexed_seq)
    lead = f"{plural(pages, 'page')} indexed, " if pages else "index "
    return lead + (f"{plural(behind, 'change')} behind" if behind else "up to date")
