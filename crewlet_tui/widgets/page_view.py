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
# A body past this many characters is shown as plain text (widgets/plain_body.py) and edited without Markdown
# highlighting: the Markdown widget and tree-sitter both grow with the page, and a key on a 5.5 MB page took
# seconds (bench/large_pages.py). A long runbook is 20-60 KB; this is four times the longest in the example.
LARGE_BODY = 200_000


def is_large(body: str) -> bool:
    return len(body) > LARGE_BODY


def large_note(body: str, what: str) -> str:
    """What the screen says of a large page it shows plainly (`what`: "shown", "edited")."""
    lines = body.count("\n") + 1
    how = ("shown as plain text, not rendered as Markdown (its links are not followed here)" if what == "shown"
           else "edited as plain text, without Markdown highlighting")
    return f"A large page ({len(body):,} characters, {lines:,} lines): {how}, so every key stays quick."


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
