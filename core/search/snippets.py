"""The ≤200-character snippet a hit shows around its first matched term, cut from a body's plain text.

The plain text is core/text/markdown.py's `plain_text` (re-exported here for the indexer): the same
text the lexical index reads for a body, so a link's URL or a fence's backticks are neither words a
page is found by nor words a snippet shows.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from ..text.markdown import plain_text
from .seam import SNIPPET_MAX

__all__ = ["ELLIPSIS", "TermFinder", "first_match", "match_spans", "plain_text", "snippet"]

ELLIPSIS = "…"

Tokens = Callable[[str], Iterable[tuple[str, int, int]]]


class TermFinder:
    """Finds the words of a text whose analysed form is one of a query's terms, without analysing
    the whole text: a regex finds the words that begin like a term (an analysed term keeps its
    word's first letters), and only those are analysed."""

    def __init__(self, terms: Iterable[str], tokens: Tokens) -> None:
        self.terms = {t for t in terms if t}
        self.tokens = tokens
        heads = sorted({t[:3] for t in self.terms}, key=lambda h: (-len(h), h))
        # a word starts after a non-word character, or after an underscore (a part of IRP_MJ_READ)
        self.rx = (re.compile(r"(?:(?<![\w.])|(?<=_))(?:" + "|".join(re.escape(h) for h in heads)
                              + r")\w*(?:\.\w+)*", re.I)
                   if heads else None)
        self._seen: dict[str, bool] = {}

    def _matches(self, word: str) -> bool:
        key = word.lower()
        got = self._seen.get(key)
        if got is None:
            got = any(term in self.terms for term, _, _ in self.tokens(word))
            self._seen[key] = got
        return got

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        if self.rx is None:
            return
        for m in self.rx.finditer(text):
            if self._matches(m.group(0)):
                yield m.start(), m.end()

    def first(self, text: str) -> tuple[int, int] | None:
        return next(self.spans(text), None)


def first_match(text: str, terms: set[str], tokens: Tokens) -> tuple[int, int] | None:
    """The character span of the first word of `text` whose analysed form is one of `terms`."""
    return TermFinder(terms, tokens).first(text)


def match_spans(text: str, terms: set[str], tokens: Tokens) -> list[tuple[int, int]]:
    """Every span of `text` whose analysed form is one of `terms` (for highlighting)."""
    return list(TermFinder(terms, tokens).spans(text))


def _cut_left(text: str, start: int) -> int:
    """Move `start` forward to the beginning of a word (never into the middle of one)."""
    if start <= 0:
        return 0
    if text[start - 1].isspace():
        return start
    nxt = text.find(" ", start)
    return nxt + 1 if nxt != -1 else start


def _cut_right(text: str, end: int) -> int:
    """Move `end` back to the end of a word."""
    if end >= len(text):
        return len(text)
    if text[end].isspace():
        return end
    prev = text.rfind(" ", 0, end)
    return prev if prev > 0 else end


def snippet(text: str, finder: TermFinder, *, limit: int = SNIPPET_MAX, lead: int = 60) -> str:
    """At most `limit` characters of plain `text`, around its first matched term (or its start when
    no term matches), cut at word boundaries, with … where text was cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    span = finder.first(text)
    start = 0
    if span is not None and span[0] > lead:
        start = _cut_left(text, span[0] - lead)
        if start > span[0]:
            start = span[0]
    prefix = ELLIPSIS if start > 0 else ""
    budget = limit - len(prefix)
    end = start + budget
    if end >= len(text):
        # the window reaches the end: slide it back so the snippet uses its whole budget
        end = len(text)
        start = max(0, end - budget)
        if start > 0:
            start = _cut_left(text, start)
        prefix = ELLIPSIS if start > 0 else ""
        return (prefix + text[start:end].strip())[:limit]
    end = _cut_right(text, end - 1)
    if end <= start:
        end = start + budget - 1
    body = text[start:end].rstrip()
    out = prefix + body + ELLIPSIS
    return out[:limit] if len(out) > limit else out
