"""Titles: the first `# ` H1 of a Markdown body as plain text, and the body without it.

An H1 carries inline Markdown (`WM\\_PALETTECHANGED`, `` `if` ``, *emphasis*, [links](…)); a page title is
plain text, so the heading is reduced to what a reader sees. Headings inside fenced code blocks and
HTML comments are not headings. The Markdown rules are core/text/markdown.py's, the same module the
search index reads bodies through; this module shapes titles and bodies for the importer.
"""
from __future__ import annotations

from ..pages.model import MAX_TITLE
from ..text.markdown import find_h1, inline_to_plain

__all__ = ["find_h1", "inline_to_plain", "strip_line", "fit"]


def strip_line(body: str, start: int, end: int) -> str:
    """The body without the H1 line and the blank lines after it; leading blank lines dropped."""
    after = end
    while body.startswith("\n", after):              # one copy of the rest, not a second for lstrip
        after += 1
    head, rest = body[:start], body[after:]
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
