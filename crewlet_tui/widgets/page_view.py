"""A page body rendered as Markdown, safely.

* The parser runs with HTML off, so raw HTML is shown as the text it is (Textual's Markdown widget
  would otherwise drop HTML blocks silently).
* Control characters are made visible and inert before parsing (see sanitize).
* Links are never opened by the widget itself (open_links=False): the screen decides, see links.py.
* A line longer than LINE_SHOWN characters is cut, visibly (how much is not shown, and where it is): Textual
  lays a paragraph out whole at every refresh, and a page whose body was one 5 MB line took seconds a key.
"""
from __future__ import annotations

from markdown_it import MarkdownIt
from textual.widgets import Markdown

from ..sanitize import body_for_display

LINE_SHOWN = 5_000     # characters of one line the page screen shows; the rest is said, not laid out


def cut_long_lines(body: str, limit: int = LINE_SHOWN) -> str:
    """`body` with every line over `limit` characters cut there and followed by a note of what is not shown."""
    if len(body) <= limit or max(map(len, body.split("\n"))) <= limit:
        return body
    out = []
    for line in body.split("\n"):
        if len(line) > limit:
            line = (line[:limit] + f" … ⟨{len(line) - limit:,} more characters of this line are not shown here: "
                    "`crewlet page show` prints the whole page⟩")
        out.append(line)
    return "\n".join(out)


def safe_parser() -> MarkdownIt:
    return MarkdownIt("gfm-like", {"html": False})


class PageBody(Markdown):
    def __init__(self, body: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(body_for_display(cut_long_lines(body)), id=id, classes=classes, parser_factory=safe_parser,
                         open_links=False)

    def show(self, body: str):  # noqa: ANN201 - Textual's AwaitComplete
        return self.update(body_for_display(cut_long_lines(body)))
