"""Markdown to plain text, and the ≤200-character snippet a hit shows around its first matched term.

The same plain text is what the lexical index reads for a body (so a link's URL or a fence's
backticks are not words a page is found by), and what a snippet is cut from.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from .seam import SNIPPET_MAX

ELLIPSIS = "…"

# YAML front matter: a `---` block whose first line is a key (`title:`); a page that merely opens with a
# horizontal rule (`---`, a blank line, text) keeps its text
_FRONT_MATTER = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n(?=[A-Za-z_][\w.-]*[ \t]*:).*?\r?\n(?:---|\.\.\.)[ \t]*"
                           r"(?:\r?\n|\Z)", re.S)
# a Markdown backslash escape (`WM\_PALETTECHANGED`, `\*`): the same rule as core/importer/titles.py
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_HOLD_BASE = 0xF0000  # escaped characters are held as private-use characters until the markup is gone
_RELEASE = {_HOLD_BASE + c: chr(c) for c in range(0x21, 0x7F)}
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_FENCE_LINE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})[^\n]*$", re.M)
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_REF_LINK = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")
_REF_DEF = re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*\S+.*$", re.M)
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.M)
_SETEXT = re.compile(r"^[ \t]*(?:={2,}|-{3,}|\*{3,}|_{3,})[ \t]*$", re.M)
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.M)
_ADMONITION = re.compile(r"\[!(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]", re.I)
_BULLET = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?", re.M)
_TABLE_RULE = re.compile(r"^(?=[^\n]*\|)(?=[^\n]*-)[ \t|:-]+$", re.M)
_UNDERSCORE_EM = re.compile(r"_{1,3}(?=[^\s_])([^_\n]*?[^\s_])?_{1,3}(?!\w)")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_ENTITY = re.compile(r"&(nbsp|amp|lt|gt|quot|#39|apos);")
_ENTITIES = {"nbsp": " ", "amp": "&", "lt": "<", "gt": ">", "quot": '"', "#39": "'", "apos": "'"}


def _underscore(m: re.Match[str]) -> str:
    """_emphasis_ loses its underscores; an identifier's (IRP_MJ_READ) keep theirs."""
    start = m.start()
    if start > 0 and (m.string[start - 1].isalnum() or m.string[start - 1] == "_"):
        return m.group(0)
    return m.group(1) or ""


def plain_text(markdown: str) -> str:
    """The words of a Markdown body, on one line: markup, URLs and front matter removed, the text of
    links, emphasis, code and tables kept. Each rule runs only when its marker occurs at all."""
    if not markdown:
        return ""
    text = markdown
    if text.startswith(("---", "\ufeff---")):
        text = _FRONT_MATTER.sub("", text, count=1)
    held = "\\" in text
    if held:  # an escaped character is text, never markup: held out of every rule below, released at the end
        text = _ESCAPE.sub(lambda m: chr(_HOLD_BASE + ord(m.group(1))), text)
    if "<" in text:
        if "<!--" in text:
            text = _COMMENT.sub(" ", text)
        text = _AUTOLINK.sub(r"\1", text)
        text = _TAG.sub(" ", text)
    if "```" in text or "~~~" in text:
        text = _FENCE_LINE.sub(" ", text)
    if "](" in text:
        text = _IMAGE.sub(r"\1", text)
        text = _LINK.sub(r"\1", text)
    if "][" in text:
        text = _REF_LINK.sub(r"\1", text)
    if "]:" in text:
        text = _REF_DEF.sub(" ", text)
    if "#" in text:
        text = _HEADING.sub(" ", text)
    if "==" in text or "---" in text or "***" in text or "___" in text:
        text = _SETEXT.sub(" ", text)
    if ">" in text:
        text = _QUOTE.sub(" ", text)
    if "[!" in text:
        text = _ADMONITION.sub(" ", text)
    if "|" in text:
        if "--" in text:
            text = _TABLE_RULE.sub(" ", text)
        text = text.replace("|", " ")
    text = _BULLET.sub(" ", text)
    if "~~" in text:
        text = _STRIKE.sub(r"\1", text)
    if "*" in text:
        text = text.replace("*", "")  # emphasis markers; a bullet's star went with _BULLET
    if "_" in text:
        text = _UNDERSCORE_EM.sub(_underscore, text)
    if "`" in text:
        text = text.replace("`", "")
    if "&" in text:
        text = _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)
    if held:
        text = text.replace("\\", " ")  # a lone backslash (one that escapes nothing)
        text = text.translate(_RELEASE)
    return " ".join(text.split())


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
