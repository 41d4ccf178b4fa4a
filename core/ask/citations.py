"""The citation check: every [n] in a reply must name a source it was given.

A reply is split into claims (sentences, list items; a heading or a line that only introduces a list,
ending in ':', is no claim) and each claim's citations are read: [1], [2][3], [1, 2], [1-3] — outside
code and link addresses. The reply
is **checked** when it cites at least one source and every number it cites is a source that was given.
Otherwise it is shown marked unchecked, with the reason: it cites a source that does not exist, or none
at all. A reply saying the sources do not answer (the one sentence the instruction asks for) makes no
claim and is not marked. A markdown link `[1](url)` and a footnote `[^1]` are not citations.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .prompt import NOT_ANSWERED_OPENING

CITATION = re.compile(r"\[(\d{1,3}(?:\s*(?:[,;]|[-–])\s*\d{1,3})*)\](?!\()")
# a sentence ends at . ! or ? (after closing quotes or brackets, and the citations that follow it) before
# whitespace or the end of the line
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]]*((?:\s*\[\d[\d,;\s–-]*\])*)(?=\s|$)")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl)|\b[A-Z])$", re.I)
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")      # a link's address is not the reply's words
_CODE_SPAN = re.compile(r"`[^`]*`")                # nor is code
MAX_RANGE = 20          # [1-999] is not a citation of 999 sources


@dataclass
class Claim:
    text: str
    cites: list[int]              # the sources it cites that were given
    unknown: list[int] = field(default_factory=list)   # numbers it cites that are no source


@dataclass
class CitationCheck:
    checked: bool
    reason: str                   # "" when checked; else why the reply is unchecked, in one line
    cited: list[int]              # every given source the reply cites, in order of first citation
    unknown: list[int]            # every number cited that is no source
    claims: list[Claim]
    uncited: int                  # claims that cite nothing
    not_answered: bool = False    # the reply says the sources do not answer the question

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CitationCheck:
        return cls(**{**data, "claims": [Claim(**c) for c in data.get("claims", [])]})


def numbers(inside: str) -> list[int]:
    """The numbers of one bracket: "1, 2" → [1, 2]; "1-3" → [1, 2, 3]."""
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inside.strip()):
        bounds = re.split(r"\s*[-–]\s*", part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            lo, hi = int(bounds[0]), int(bounds[1])
            out.extend(range(lo, hi + 1) if 0 <= hi - lo <= MAX_RANGE else [lo, hi])
        elif part.isdigit():
            out.append(int(part))
    return out


def claims(reply: str) -> list[str]:
    """The reply's claims: its sentences and list items, code blocks and headings left out."""
    out: list[str] = []
    fence: str | None = None
    for line in reply.splitlines():
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        if _HEADING.match(line):
            continue
        text = _LIST_MARK.sub("", line).strip()
        if not text:
            continue
        at = 0
        for m in _BOUNDARY.finditer(text):
            if text[m.start()] == "." and not m.group(1) and _ABBREVIATION.search(text, 0, m.start()):
                continue      # "e.g." or an initial: no sentence ends there
            sentence = text[at:m.end()].strip()
            if sentence:
                out.append(sentence)
            at = m.end()
        rest = text[at:].strip()
        if rest:
            out.append(rest)
    # a line that only introduces what follows ("To roll back:") states nothing by itself
    return [c for c in out if not CITATION.sub("", c).rstrip().endswith(":") and re.search(r"\w", c)]


def check(reply: str, sources: int) -> CitationCheck:
    """Check `reply` against `sources` numbered sources (1..sources)."""
    cited: list[int] = []
    unknown: list[int] = []
    found: list[Claim] = []
    for text in claims(reply):
        given: list[int] = []
        bad: list[int] = []
        for m in CITATION.finditer(_LINK_TARGET.sub("]", _CODE_SPAN.sub("", text))):
            for n in numbers(m.group(1)):
                (given if 1 <= n <= sources else bad).append(n)
        given, bad = list(dict.fromkeys(given)), list(dict.fromkeys(bad))
        found.append(Claim(text, given, bad))
        cited.extend(n for n in given if n not in cited)
        unknown.extend(n for n in bad if n not in unknown)
    uncited = sum(1 for c in found if not c.cites and not c.unknown)
    stripped = reply.strip()
    if not cited and not unknown and stripped.lower().startswith(NOT_ANSWERED_OPENING.lower()):
        return CitationCheck(True, "", [], [], found, 0, not_answered=True)
    if unknown:
        listed = ", ".join(f"[{n}]" for n in unknown)
        offered = f"{sources} source{'s were' if sources != 1 else ' was'} given"
        reason = f"it cites {listed}, but only {offered}" if sources else f"it cites {listed}, but no source was given"
        return CitationCheck(False, reason, cited, unknown, found, uncited)
    if not cited:
        return CitationCheck(False, "it cites no source, so nothing in it can be traced to a page", [], [], found,
                             uncited)
    return CitationCheck(True, "", cited, [], found, uncited)
