"""A file's text as a citation counts it: lines as git numbers them, whitespace folded for matching.

Lines are split at "\\n" only (as git's diff counts them, not at the other breaks str.splitlines takes); a
CRLF file's lines lose their "\\r" for reading. Folding turns every run of whitespace into one space and
trims the ends, so a quote re-indented or re-wrapped still matches.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

_WS = re.compile(r"\s+")
BINARY_SNIFF = 8000  # git's own heuristic: a NUL byte in the first 8000 bytes makes a file binary


def fold(text: str) -> str:
    return _WS.sub(" ", text).strip()


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_SNIFF]


def split_lines(data: bytes) -> list[str]:
    """The file's lines, 1-based as git counts them (lines[0] is line 1); an empty file has none."""
    if not data:
        return []
    text = data.decode("utf-8", "replace")
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


@dataclass
class FoldedFile:
    """A file's lines folded and joined by single spaces, with where each line begins in the joined text:
    a folded needle found there is mapped back to the lines it spans."""

    text: str
    starts: list[int]     # offset in text where each kept line begins
    numbers: list[int]    # its line number (blank lines fold to nothing and are not kept)

    @classmethod
    def of(cls, lines: list[str]) -> FoldedFile:
        pieces: list[str] = []
        starts: list[int] = []
        numbers: list[int] = []
        at = 0
        for number, line in enumerate(lines, 1):
            folded = fold(line)
            if not folded:
                continue
            if pieces:
                at += 1  # the joining space
            starts.append(at)
            numbers.append(number)
            pieces.append(folded)
            at += len(folded)
        return cls(" ".join(pieces), starts, numbers)

    def find_all(self, needle: str, limit: int = 2, *, whole_lines: bool = False) -> list[tuple[int, int]]:
        """The line ranges where the folded needle occurs (overlapping ones too), at most `limit`;
        with `whole_lines`, only where it begins at a line's start and ends at a line's end (a block of
        lines, not a tail of one line and a head of another)."""
        if not needle:
            return []
        found: list[tuple[int, int]] = []
        pos = self.text.find(needle)
        while pos >= 0 and len(found) < limit:
            first = bisect_right(self.starts, pos) - 1
            stop = pos + len(needle)
            last = bisect_right(self.starts, stop - 1) - 1
            aligned = self.starts[first] == pos and (stop == len(self.text) or self.text[stop] == " " and
                                                     last + 1 < len(self.starts) and
                                                     self.starts[last + 1] == stop + 1)
            if aligned or not whole_lines:
                found.append((self.numbers[first], self.numbers[last]))
            pos = self.text.find(needle, pos + 1)
        return found


def range_text(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start - 1:end])
