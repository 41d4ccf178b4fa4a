"""From the pages a search found to the passages a model is given: the best-matching parts of each page,
not only its opening, inside a budget of tokens.

A body is split into passages along its own structure: a heading starts a new passage (and names the
section every passage under it belongs to), blank lines separate blocks, a fenced code block is never cut
unless it alone is too long, and blocks of one section are joined up to about PASSAGE_BYTES (a small
subsection joins its section's passage). Each passage
is scored against the question's terms — the keyword index's own analyser, so "deploys" matches
"deploy" — by BM25 over every passage of the pages found (its section's headings count at half a word).
A page none of whose passages holds a question term (found by meaning alone) is given the passage
closest to the question by meaning when an embedder is at hand, else its opening.

The selection, in the search's order: every page gets its best passage while the budget lasts (a page
whose best passage no longer fits gets what fits of it, down to MIN_CUT_TOKENS), then the pages already
chosen get their next-best passages, best first, while they fit. Within a source the passages keep the
page's order. docs/ask.md has how the budget and the sizes were measured.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.text.markdown import _FRONT_MATTER, plain_text

from . import tokens

PASSAGE_BYTES = 900            # a section's blocks are joined up to about this (≈ 200 tokens of prose)
MAX_BLOCK_BYTES = 1800         # a single block longer than this is cut at lines, then at sentences
MIN_CUT_TOKENS = 80            # a passage cut to fit the rest of the budget keeps at least this much
MAX_MEANING_PASSAGES = 32      # passages of one page ranked by meaning (the first ones)
MORE_CANDIDATES = 64           # next-best passages considered once every page has its best (≈ 12,000 tokens)
MIN_MORE_TOKENS = 24           # below this much room no further passage is looked for
BM25_K1, BM25_B = 1.2, 0.75
HEADING_WEIGHT = 0.5
ELLIPSIS = " …"

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Passage:
    ordinal: int                  # its place in the page
    start: int                    # its first character's offset in the body
    heading: str                  # the section it is in, outermost heading first ("" before the first)
    text: str                     # the Markdown as written
    terms: dict[str, float] = field(default_factory=dict, repr=False)
    length: float = 0             # terms in it (BM25's document length)
    score: float = 0.0
    token_count: int | None = None
    cut: bool = False             # shortened to fit the budget

    @property
    def tokens(self) -> int:
        if self.token_count is None:
            self.token_count = tokens.count(self.rendered())
        return self.token_count

    def rendered(self) -> str:
        head = f"§ {self.heading}\n" if self.heading else ""
        return head + self.text.strip() + (ELLIPSIS if self.cut else "")


@dataclass
class PageText:
    """One page the search found, as the selection sees it."""

    rank: int                     # 0 = the search's best
    page_id: str
    title: str
    container: str
    ancestors: list[str]
    passages: list[Passage]
    by_meaning: bool = False      # its passage was picked by meaning (no passage held a question term)
    entry_id: str | None = None   # an entry under the page (spec 003), not the page itself

    def header(self) -> str:
        where = f"{'an entry under ' if self.entry_id else ''}{self.container}/{self.title}"
        inside = f" (in {' › '.join(self.ancestors)})" if self.ancestors else ""
        return where + inside


@dataclass
class Chosen:
    page: PageText
    passages: list[Passage]       # in the page's order

    def text(self) -> str:
        """The passages in the page's order; "…" where the page has text between two of them."""
        out: list[str] = []
        for i, p in enumerate(self.passages):
            if i:
                out.append("\n\n…\n\n" if p.ordinal > self.passages[i - 1].ordinal + 1 else "\n\n")
            out.append(p.rendered())
        return "".join(out)

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.passages)


# -- splitting -------------------------------------------------------------------------------------------

def _blocks(body: str) -> list[tuple[int, str, int, str]]:
    """(start, text, heading level, heading title): a heading line is a block of its own with its level;
    a paragraph, list or fenced code block has level 0."""
    out: list[tuple[int, str, int, str]] = []
    current: list[str] = []
    start = pos = 0
    fence: str | None = None

    def flush() -> None:
        nonlocal current
        text = "".join(current)
        if text.strip():
            out.append((start, text, 0, ""))
        current = []

    for line in body.splitlines(keepends=True):
        if fence is not None:
            current.append(line)
            if line.strip().startswith(fence):
                fence = None
        else:
            opened = _FENCE.match(line)
            heading = _ATX.match(line) if not opened else None
            if opened:
                if not current:
                    start = pos
                current.append(line)
                fence = opened.group(1)
            elif heading:
                flush()
                out.append((pos, line, len(heading.group(1)), heading.group(2).strip()))
            elif not line.strip():
                flush()
            else:
                if not current:
                    start = pos
                current.append(line)
        pos += len(line)
    flush()
    return out


def _pieces(text: str) -> list[tuple[int, str]]:
    """A block too long for one passage, cut at line ends, then sentence ends, then anywhere: (offset, text)."""
    if len(text.encode("utf-8")) <= MAX_BLOCK_BYTES:
        return [(0, text)]
    units: list[tuple[int, str]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        if len(line.encode("utf-8")) <= PASSAGE_BYTES:
            units.append((offset, line))
        else:
            at = 0
            for sentence in _SENTENCE_END.split(line):
                found = line.find(sentence, at)
                at = found if found >= 0 else at
                while len(sentence.encode("utf-8")) > PASSAGE_BYTES:   # one unbroken run: cut by characters
                    units.append((offset + at, sentence[:PASSAGE_BYTES // 2]))
                    sentence = sentence[PASSAGE_BYTES // 2:]
                    at += PASSAGE_BYTES // 2
                units.append((offset + at, sentence + " "))
                at += len(sentence)
        offset += len(line)
    out: list[tuple[int, str]] = []
    size = 0
    for at, unit in units:
        n = len(unit.encode("utf-8"))
        if out and size + n <= PASSAGE_BYTES:
            out[-1] = (out[-1][0], out[-1][1] + unit)
            size += n
        else:
            out.append((at, unit))
            size = n
    return out


def split(body: str) -> list[Passage]:
    """The passages of a Markdown body, in order (front matter left out)."""
    skipped = 0
    if body.startswith(("---", "\ufeff---")):
        m = _FRONT_MATTER.match(body)
        if m:
            skipped = m.end()
    blocks = _blocks(body[skipped:])
    passages: list[Passage] = []
    trail: list[tuple[int, str]] = []           # the open headings: (level, title)
    pending: list[tuple[int, str]] = []         # blocks not yet in a passage
    pending_heading = ""                        # the section the pending passage started in
    pending_level = 0                           # the level of that section's heading (0: none)
    size = 0

    def heading() -> str:
        return " › ".join(t for _, t in trail if t)

    def flush() -> None:
        nonlocal pending, size
        if pending and any(t.strip() and not _ATX.match(t) for _, t in pending):
            text = "\n".join(t.rstrip("\n") for _, t in pending)
            passages.append(Passage(len(passages), skipped + pending[0][0], pending_heading, text))
        pending, size = [], 0

    def add(start: int, piece: str) -> None:
        nonlocal size, pending_heading, pending_level
        if not pending:
            pending_heading, pending_level = heading(), (trail[-1][0] if trail else 0)
        pending.append((start, piece))
        size += len(piece.encode("utf-8"))

    for start, text, level, title in blocks:
        if level:
            # a subsection small enough joins the passage of its section (its heading kept as text);
            # a heading of the same or a higher level starts a passage of its own
            joins = pending and pending_level and level > pending_level and \
                size + len(text.encode("utf-8")) < PASSAGE_BYTES // 2
            if not joins:
                flush()
            while trail and trail[-1][0] >= level:
                trail.pop()
            trail.append((level, title))
            if joins:
                add(start, text)
            continue
        for at, piece in _pieces(text):
            if pending and size + len(piece.encode("utf-8")) > PASSAGE_BYTES:
                flush()
            add(start + at, piece)
    flush()
    if not passages and body.strip():            # headings alone
        passages.append(Passage(0, skipped, "", body[skipped:].strip()))
    return passages


# -- scoring ---------------------------------------------------------------------------------------------

def analyse(texts: Sequence[str]) -> list[dict[str, int]]:
    """Each text's terms with their counts, as the keyword index reads a body (its Markdown made plain)."""
    count = _counter()
    return [count(plain_text(t)) for t in texts]


_COUNT: Any = None


def _counter() -> Callable[[str], dict[str, int]]:
    """The index's analyser as one function text -> {term: count}: its bulk counter (the same terms,
    several times faster than running the pipeline token by token), else the pipeline."""
    global _COUNT
    if _COUNT is None:
        from core.search import lexical
        from core.search.analysis import term_counter

        analyzer = lexical.make_analyzer()
        bulk = term_counter(analyzer)
        _COUNT = (lambda text: dict(bulk(text))) if bulk is not None else \
            (lambda text: lexical.analyze(analyzer, text, limit=None))
    return _COUNT


# the words a question is phrased with, which say nothing about which part of a page answers it ("how
# do I …" must not pick the passage that happens to say "how")
QUESTION_WORDS = ("how what why when where who whom whose which do does did done doing i me my mine we our can "
                  "could should would shall must might get got need want please tell explain there here way ways")
_question_stems: frozenset[str] | None = None


def query_terms(question: str) -> dict[str, int]:
    """The question's terms as the index analyses them, without the words it is phrased with (unless it
    holds nothing else)."""
    global _question_stems
    if _question_stems is None:
        _question_stems = frozenset(analyse([QUESTION_WORDS])[0])
    terms = analyse([question])[0]
    kept = {t: n for t, n in terms.items() if t not in _question_stems}
    return kept or terms


def score(pages: Sequence[PageText], terms: dict[str, int]) -> None:
    """BM25 of every passage of `pages` for the question's terms, idf over those passages."""
    everything = [p for page in pages for p in page.passages]
    texts = analyse([p.text for p in everything])
    heads = analyse([p.heading for p in everything])
    for p, counted, head in zip(everything, texts, heads):
        # a section's heading counts, at half a word: every passage under "Rolling back" is about it,
        # and a two-line passage under it must not outrank the one that says how
        weighted: dict[str, float] = dict(counted)
        for term in head:
            weighted[term] = weighted.get(term, 0) + HEADING_WEIGHT
        p.terms, p.length = weighted, sum(counted.values()) + HEADING_WEIGHT * len(head)
    if not everything or not terms:
        return
    n = len(everything)
    average = sum(p.length for p in everything) / n or 1.0
    idf = {}
    for term in terms:
        df = sum(1 for p in everything if term in p.terms)
        idf[term] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    for p in everything:
        total = 0.0
        for term in terms:
            tf = p.terms.get(term, 0)
            if tf:
                total += idf[term] * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * p.length / average))
        p.score = total


# -- choosing ----------------------------------------------------------------------------------------------

Meaning = Callable[[list[str]], "list[float] | None"]


def best_passage(page: PageText, meaning: Meaning | None) -> Passage:
    """The page's best-scoring passage; by meaning (or its opening) when none holds a question term."""
    if any(p.score > 0 for p in page.passages):
        return max(page.passages, key=lambda p: (p.score, -p.ordinal))
    if meaning is not None and len(page.passages) > 1:
        head = page.passages[:MAX_MEANING_PASSAGES]
        sims = meaning([f"{page.title}. {p.heading}. {plain_text(p.text)}" for p in head])
        if sims is not None and len(sims) == len(head):
            page.by_meaning = True
            best = max(range(len(head)), key=lambda i: (sims[i], -i))
            return head[best]
    return page.passages[0]


def _cut(p: Passage, allowed: int) -> Passage | None:
    """The passage shortened (at a word boundary) to at most `allowed` tokens, or None below MIN_CUT_TOKENS."""
    if allowed < MIN_CUT_TOKENS:
        return None
    text = p.text.strip()
    ratio = max(1.0, len(text) / max(p.tokens, 1))
    chars = int(allowed * ratio)
    while chars > 0:
        piece = text[:chars]
        space = piece.rfind(" ")
        if space > chars // 2:
            piece = piece[:space]
        cut = Passage(p.ordinal, p.start, p.heading, piece, p.terms, p.length, p.score, cut=True)
        if cut.tokens <= allowed:
            return cut
        chars = int(chars * 0.85)
    return None


def _count(found: Sequence[Passage]) -> None:
    """Count the tokens of many passages in one call of the tokenizer (it runs a batch in parallel)."""
    todo = [p for p in found if p.token_count is None]
    for p, n in zip(todo, tokens.count_many([p.rendered() for p in todo])):
        p.token_count = n


def select(pages: Sequence[PageText], budget: int, *, header_tokens: Callable[[PageText], int],
           meaning: Meaning | None = None) -> list[Chosen]:
    """The sources, in the search's order, inside `budget` tokens (each source's header counted)."""
    remaining = budget
    chosen: dict[int, list[Passage]] = {}
    for page in pages:
        if not page.passages:
            continue
        best = best_passage(page, meaning)       # by meaning only for a page that is reached
        cost = header_tokens(page) + best.tokens
        if cost > remaining:
            cut = _cut(best, remaining - header_tokens(page))
            if cut is None:
                break
            best = cut
            cost = header_tokens(page) + best.tokens
        chosen[page.rank] = [best]
        remaining -= cost
    more = sorted(((p.score, page.rank, p) for page in pages if page.rank in chosen for p in page.passages
                   if p.score > 0 and all(p.ordinal != c.ordinal for c in chosen[page.rank])),
                  key=lambda x: (-x[0], x[1], x[2].ordinal))
    more = more[:MORE_CANDIDATES]                 # the head of the list is what can fit
    _count([p for _, _, p in more])
    for _, rank, p in more:
        if remaining < MIN_MORE_TOKENS:
            break
        if p.tokens + 2 <= remaining:          # 2: the separator between passages of one source
            chosen[rank].append(p)
            remaining -= p.tokens + 2
    by_rank = {page.rank: page for page in pages}
    return [Chosen(by_rank[rank], sorted(ps, key=lambda p: p.ordinal)) for rank, ps in sorted(chosen.items())]
