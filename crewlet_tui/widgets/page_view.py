"""A page body rendered as Markdown, safely.

* The parser runs with HTML off, so raw HTML is shown as the text it is (Textual's Markdown widget
  would otherwise drop HTML blocks silently).
* Control characters are made visible and inert before parsing (see sanitize).
* Links are never opened by the widget itself (open_links=False): the screen decides, see links.py.
"""
from __future__ import annotations

from markdown_it import MarkdownIt
from textual.widgets import Markdown

from ..sanitize import body_for_display


def safe_parser() -> MarkdownIt:
    return MarkdownIt("gfm-like", {"html": False})


class PageBody(Markdown):
    def __init__(self, body: str = "", *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(body_for_display(body), id=id, classes=classes, parser_factory=safe_parser, open_links=False)

    def show(self, body: str):  # noqa: ANN201 - Textual's AwaitComplete
        return self.update(body_for_display(body))
