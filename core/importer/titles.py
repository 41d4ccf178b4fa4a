"""Titles: the first `# ` H1 of a Markdown body as plain text, and the body without it.

An H1 carries inline Markdown (`WM\\_PALETTECHANGED`, `` `if` ``, *emphasis*, [links](…)); a page title is
plain text, so the heading is reduced to what a reader sees. Headings inside fenced code blocks and
HTML comments are not headings.
"""
from __future__ import annotations

import html
import re

from ..pages.model import MAX_TITLE, clean_title

_ATX_H1 = re.compile(r"^ {0,3}#(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATTRS = re.compile(r"\s*\{#[^}]*\}\s*$")                    # `# Title {#custom-id}`
_CODE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
_AUTOLINK = re.compile(r"<((?:https?|mailto|ftp):[^>\s]+)>")
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_STAR = re.compile(r"\*(?=\S)(.+?)(?<=\S)\*")
_UNDER = re.compile(r"(?<![A-Za-z0-9_])_(?=\S)(.+?)(?<=\S)_(?![A-Za-z0-9_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_SPECIAL = re.compile(r"[\\`*_\[\]<>&{!~]")
_PH = "\ue000"                                              # private-use: stands in for an escaped character


def _plain_text(segment: str) -> str:
    escaped: list[str] = []

    def hold(m: re.Match[str]) -> str:
        escaped.append(m.group(1))
        return f"{_PH}{len(escaped) - 1}{_PH}"

    s = _ESCAPE.sub(hold, segment)
    s = _IMAGE.sub(r"\1", s)
    s = _LINK.sub(r"\1", s)
    s = _AUTOLINK.sub(r"\1", s)
    s = _TAG.sub("", s)
    for _ in range(3):                                       # nested emphasis: ***x***, **_x_**
        before = s
        s = _STRONG.sub(r"\2", s)
        s = _STAR.sub(r"\1", s)
        s = _UNDER.sub(r"\1", s)
        s = _STRIKE.sub(r"\1", s)
        if s == before:
            break
    s = html.unescape(s)
    if escaped:
        s = re.sub(f"{_PH}(\\d+){_PH}", lambda m: escaped[int(m.group(1))], s)
    return s


def inline_to_plain(text: str) -> str:
    """A heading's inline Markdown reduced to the text a reader sees."""
    if not _SPECIAL.search(text):
        return clean_title(text)
    text = _ATTRS.sub("", text)
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_plain_text(text[pos:m.start()]))
        code = m.group(2)
        if len(code) > 1 and code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(code)
        pos = m.end()
    out.append(_plain_text(text[pos:]))
    return clean_title("".join(out))


_H1_SEARCH = re.compile(r"^ {0,3}#[ \t]+\S", re.MULTILINE)


def find_h1(body: str) -> tuple[str, int, int] | None:
    """The first ATX H1 outside code fences and HTML comments: (plain title, start, end) offsets of
    its line in `body` (end includes the newline). None when the body has none."""
    m = _H1_SEARCH.search(body)
    if m is None:
        return None
    prefix = body[:m.start()]
    if "```" not in prefix and "~~~" not in prefix and "<!--" not in prefix:
        start = m.start()
        nl = body.find("\n", start)
        end = len(body) if nl < 0 else nl + 1
        found = _h1_title(body[start:end].rstrip("\n"))
        if found:
            return found, start, end
    return _scan_h1(body)


def _h1_title(line: str) -> str | None:
    m = _ATX_H1.match(line)
    if not m or not m.group(1):
        return None
    return inline_to_plain(_CLOSING.sub("", m.group(1))) or None


def _scan_h1(body: str) -> tuple[str, int, int] | None:
    fence: str | None = None
    in_comment = False
    pos = 0
    n = len(body)
    while pos < n:
        nl = body.find("\n", pos)
        end = n if nl < 0 else nl + 1
        line = body[pos:end].rstrip("\n")
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
        elif in_comment:
            if "-->" in line:
                in_comment = False
        else:
            f = _FENCE.match(line)
            if f:
                fence = f.group(1)
            elif line.lstrip().startswith("<!--") and "-->" not in line:
                in_comment = True
            elif line.lstrip(" ").startswith("#"):
                title = _h1_title(line)
                if title:
                    return title, pos, end
        pos = end
    return None


def strip_line(body: str, start: int, end: int) -> str:
    """The body without the H1 line and the blank lines after it; leading blank lines dropped."""
    head, rest = body[:start], body[end:].lstrip("\n")
    if not head.strip():
        return rest
    # an H1 further down: keep one blank line between what came before and what comes after
    return head.rstrip("\n") + "\n\n" + rest if rest else head.rstrip("\n") + "\n"


def fit(base: str, suffix: str) -> str:
    """`base suffix`, shortening base (never the suffix that makes it unique) to fit MAX_TITLE."""
    title = f"{base} {suffix}"
    if len(title) <= MAX_TITLE:
        return title
    room = MAX_TITLE - len(suffix) - 2
    return f"{base[:max(room, 1)].rstrip()}… {suffix}"
