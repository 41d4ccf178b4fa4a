"""Links between pages, by id: `/pages/<id>` or the app's `#/knowledge/pages/<id>`, outside code.

A title is an address a rename moves, so a link is by id. `[[CONTAINER/Title]]` is not a grammar
this engine reads: it counts for nothing in "Linked from".
"""
from __future__ import annotations

import re

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}).*?$.*?^(?P=fence)[`~]*\s*$", re.M | re.S)
_LIST_ITEM = re.compile(r"^ {0,3}(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
_LINK = re.compile(r"(?:#/knowledge/pages/|(?<![\w#/])/pages/)(?P<id>[A-Za-z0-9_-]{4,64})")


def _strip_indented(body: str) -> str:
    """Indented code blocks as CommonMark reads them: lines indented four spaces (or a tab) that
    follow a blank line — an indented line cannot interrupt a paragraph — and are not inside a list,
    where indentation nests an item rather than starting code."""
    out: list[str] = []
    after_blank, in_list, in_code = True, False, False
    for line in body.split("\n"):
        blank = not line.strip()
        indented = line.startswith(("    ", "\t"))
        if in_code and (blank or indented):
            out.append("")
            continue
        in_code = False
        if indented and not blank and after_blank and not in_list:
            in_code = True
            out.append("")
            continue
        if not blank and not indented:
            if _LIST_ITEM.match(line):
                in_list = True
            elif after_blank:
                in_list = False  # a paragraph after a blank line ends the list
        after_blank = blank
        out.append(line)
    return "\n".join(out)


def strip_code(body: str) -> str:
    """The body with fenced blocks, indented blocks and inline code removed."""
    body = _FENCE.sub("", body)
    body = _INLINE_CODE.sub("", body)
    return _strip_indented(body)


def extract_links(body: str) -> set[str]:
    """Every page id the body links to, outside code."""
    if "/pages/" not in body:  # both link forms hold it; most bodies link no page, and code is costly to strip
        return set()
    return {m.group("id") for m in _LINK.finditer(strip_code(body))}


def link_to(page_id: str, title: str) -> str:
    """The Markdown a writer should use to link a page: by id, rendered by title."""
    return f"[{title}](#/knowledge/pages/{page_id})"
