"""core/text/markdown.py: one set of Markdown rules for bodies (the index, snippets) and titles (the
importer). The bodies' regex pass is pinned by test_search_snippets.py, the titles by test_import.py;
here: what the two readers must agree on, and what the title reader gets right because it parses."""
from __future__ import annotations

import pytest

from core.importer import titles
from core.search import snippets
from core.text.markdown import find_h1, inline_to_plain, plain_text


def test_the_importer_and_the_index_read_markdown_through_the_one_module() -> None:
    assert titles.find_h1 is find_h1 and titles.inline_to_plain is inline_to_plain
    assert snippets.plain_text is plain_text  # the indexer imports it from snippets


@pytest.mark.parametrize("line", [
    r"Send WM\_PALETTECHANGED to \*every\* window",
    "The `IRP_MJ_READ` request and **bold** _emphasis_",
    "[Linked](https://example.com/x) text and [a reference][ref] link",
    "&lt;color&gt; &amp; <b>tags</b> ~~struck~~",
    "![a diagram](img/d.png) of the stack",
])
def test_a_line_reads_the_same_as_a_title_and_as_a_body(line: str) -> None:
    # the shared rules (escapes, reference links) and the same reading of emphasis, code, links and tags
    assert inline_to_plain(line) == plain_text(line)


@pytest.mark.parametrize("heading, title", [
    ("~~~~~", "~~~~~"),                                   # a run of tildes is no strikethrough
    ("a ~~b~~ c", "a b c"),
    ("Use the `` `tick` `` character", "Use the `tick` character"),
    ("![alt with *emphasis*](x.png) diagram", "alt with emphasis diagram"),
    ("A [reference][] and [another][r2]", "A reference and another"),
    ("Intra*word*emphasis and snake_case_name", "Intrawordemphasis and snake_case_name"),
    ("<https://example.com/a_b>", "https://example.com/a_b"),
    ("AT&amp;T &copy; 2024", "AT&T © 2024"),
    ("unclosed *star and `tick", "unclosed *star and `tick"),
    ("Title {#custom-id}", "Title"),
])
def test_titles_are_read_by_a_commonmark_parser(heading: str, title: str) -> None:
    assert inline_to_plain(heading) == title
    assert find_h1(f"# {heading}\n\nbody\n")[0] == title


def test_a_title_without_markup_is_taken_as_it_is() -> None:
    assert inline_to_plain("  Plain   title  ") == "Plain title"
