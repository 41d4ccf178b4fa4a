"""What git's diffs say, parsed: the files a jump changed (`--name-status -z`) and each file's hunks
(`-U0` patches), and a cited line range carried through those hunks.

A hunk `@@ -s,c +t,d @@` replaces old lines s..s+c-1 by new lines t..t+d-1; with c = 0 it inserts after old
line s, with d = 0 it deletes and t is the new line before the gap. A range none of whose lines a hunk
replaces, and inside which nothing is inserted, is untouched: it moves by the sum of what the hunks above it
added and took away (as Gerrit carries a comment to the next patch set).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Change:
    """One file a jump changed: status letter (A, M, D, R, C, T), its old path and its new path."""

    status: str
    old_path: str | None
    new_path: str | None


def parse_name_status(raw: bytes) -> dict[str, Change]:
    """`git diff --name-status -z --find-renames` read into {old path (new path for an addition): Change}."""
    fields = raw.decode("utf-8", "surrogateescape").split("\0")
    out: dict[str, Change] = {}
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i][0]
        if status in "RC":
            old, new = fields[i + 1], fields[i + 2]
            i += 3
            if status == "C":  # a copy leaves its source as it was: the new path is an addition
                out[new] = Change("A", None, new)
                continue
            out[old] = Change("R", old, new)
        else:
            path = fields[i + 1]
            i += 2
            if status == "A":
                out[path] = Change("A", None, path)
            elif status == "D":
                out[path] = Change("D", path, None)
            else:
                out[path] = Change(status, path, path)
    return out


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int


@dataclass
class FilePatch:
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False


_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "r": "\r", "v": "\v"}


def unquote_path(text: str) -> str:
    """A path as git prints it in a patch: C-quoted when it holds a quote, a backslash or a control byte
    (octal escapes are UTF-8 bytes)."""
    if not (len(text) >= 2 and text[0] == '"' and text[-1] == '"'):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and i + 4 <= len(body):
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.extend(_ESCAPES.get(nxt, nxt).encode())
            i += 2
            continue
        out.extend(ch.encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _side(line: bytes, prefix: bytes) -> str | None:
    """The path of a `--- a/x` / `+++ b/x` line (None for /dev/null); git ends a name holding a space
    with a tab."""
    text = line[4:].decode("utf-8", "surrogateescape").rstrip("\n").removesuffix("\t")
    if text == "/dev/null":
        return None
    text = unquote_path(text)
    return text[len(prefix):] if text.startswith(prefix.decode()) else text


def _same_sides(rest: str) -> str | None:
    """P from `a/P b/P` (a header names one path twice unless the file was renamed; then the rename
    lines name both)."""
    if rest.startswith('"'):
        halves = rest.split('" "')
        if len(halves) == 2:
            a, b = unquote_path(halves[0] + '"'), unquote_path('"' + halves[1])
            return a[2:] if a[2:] == b[2:] else None
        return None
    n = (len(rest) - 5) // 2
    path = rest[2:2 + n]
    return path if n > 0 and rest == f"a/{path} b/{path}" else None


def parse_patch(raw: bytes) -> list[FilePatch]:
    """A `git diff -U0` patch (many files) read into one FilePatch per file, hunks in order."""
    patches: list[FilePatch] = []
    cur: FilePatch | None = None
    for line in raw.split(b"\n"):
        if line.startswith(b"diff --git "):
            same = _same_sides(line[11:].decode("utf-8", "surrogateescape"))
            cur = FilePatch(same, same)  # a binary or mode-only change has no ---/+++ lines to name it
            patches.append(cur)
            continue
        if cur is None:
            continue
        if line.startswith(b"@@ "):
            m = _HUNK.match(line)
            if m:
                cur.hunks.append(Hunk(int(m[1]), int(m[2]) if m[2] is not None else 1,
                                      int(m[3]), int(m[4]) if m[4] is not None else 1))
            continue
        if cur.hunks:
            continue  # the hunks' own lines: only where they stand is needed, not what they say
        if line.startswith(b"--- "):
            cur.old_path = _side(line, b"a/")
        elif line.startswith(b"+++ "):
            cur.new_path = _side(line, b"b/")
        elif line.startswith(b"rename from "):
            cur.old_path = unquote_path(line[12:].decode("utf-8", "surrogateescape"))
        elif line.startswith(b"rename to "):
            cur.new_path = unquote_path(line[10:].decode("utf-8", "surrogateescape"))
        elif line.startswith(b"Binary files ") or line.startswith(b"GIT binary patch"):
            cur.binary = True
    return patches


@dataclass(frozen=True)
class Mapped:
    """A range carried through a file's hunks: where it stands now, and whether a hunk touched it."""

    start: int
    end: int
    touched: bool


def map_range(hunks: list[Hunk], start: int, end: int) -> Mapped:
    """Old lines start..end (1-based, inclusive) carried through hunks (sorted, as git prints them).

    Untouched: moved by the hunks wholly above. Touched (a hunk replaces one of its lines, or inserts
    between two of them): each end mapped on its own — an end a hunk replaced goes to that hunk's new lines
    —, for a caller to look at, never to trust."""
    touched = any(start <= h.old_start < end if h.old_count == 0
                  else h.old_start <= end and h.old_start + h.old_count - 1 >= start for h in hunks)
    s = _map_line(hunks, start, first=True)
    e = _map_line(hunks, end, first=False)
    s = max(1, s)
    return Mapped(s, max(s, e), touched)


def _map_line(hunks: list[Hunk], line: int, *, first: bool) -> int:
    delta = 0
    for h in hunks:
        if h.old_count == 0:
            if h.old_start >= line:
                break
            delta += h.new_count
            continue
        last = h.old_start + h.old_count - 1
        if last < line:
            delta += h.new_count - h.old_count
            continue
        if h.old_start <= line:  # the line itself was replaced: the place of the hunk's new lines
            if first:
                return h.new_start if h.new_count else h.new_start + 1
            return h.new_start + h.new_count - 1 if h.new_count else h.new_start
        break
    return line + delta
