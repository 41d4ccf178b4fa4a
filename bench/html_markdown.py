"""Which library turns a remote backend's page HTML into Markdown: markdownify or html-to-markdown?

A remote page opens in crewlet as Markdown: Confluence answers storage XHTML, Plane `description_html`.
Both are what an editor (or crewlet's own importer, through markdown-it-py) made from Markdown-like
structure, so the measure is a round trip over real documentation:

    Markdown --markdown-it--> HTML --library--> Markdown' --markdown-it--> HTML'

and a page passes when HTML and HTML' say the same thing: the same sequence of block elements
(headings by level, paragraphs, list items, code blocks with their language, table cells, quotes) and
the same text in each, and the same link targets. Pages whose HTML holds raw HTML (which markdown-it
passes through and neither library can be blamed for) are left out. Speed is per page, the two
libraries alternating page by page, with the load average printed.

    .venv/bin/python bench/html_markdown.py [--pages 600] [--corpus textual-docs/docs]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

from markdown_it import MarkdownIt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine_load  # noqa: E402

CORPORA = Path(os.environ.get("CREWLET_CORPORA", "/work/shared/corpora"))
BLOCKS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "th", "blockquote", "hr"}


class Shape(HTMLParser):
    """The block sequence, with each block's collapsed text, and every link target."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[str, str]] = []
        self.links: list[str] = []
        self._stack: list[list[str]] = []
        self._tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links.append(dict(attrs).get("href") or "")
        if tag == "code" and self._tags and self._tags[-1] == "pre":
            lang = (dict(attrs).get("class") or "").replace("language-", "")
            self.blocks.append(("lang", lang))
        if tag in BLOCKS:
            self._tags.append(tag)
            self._stack.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag in BLOCKS and self._tags and self._tags[-1] == tag:
            self._tags.pop()
            text = " ".join("".join(self._stack.pop()).split())
            self.blocks.append((tag, text))
            if self._stack:
                self._stack[-1].append(" " + text + " ")

    def handle_data(self, data: str) -> None:
        if self._stack:
            self._stack[-1].append(data)


def shape(html: str) -> tuple[list[tuple[str, str]], list[str]]:
    s = Shape()
    s.feed(html)
    s.close()
    return s.blocks, s.links


def with_markdownify(html: str) -> str:
    from markdownify import markdownify

    return markdownify(html, heading_style="ATX", bullets="-", code_language_callback=_lang)


def _lang(el) -> str | None:  # noqa: ANN001 - a bs4 Tag
    code = el.find("code")
    cls = (code.get("class") or []) if code is not None else []
    for c in cls:
        if c.startswith("language-"):
            return c[len("language-"):]
    return None


def with_html_to_markdown(html: str) -> str:
    import html_to_markdown as h2m

    return h2m.convert(html).content


def crewlet_plain(html: str) -> str:
    """crewlet's reader (markdownify with its converters) on plain HTML, as Plane's description_html."""
    from core.remote.convert import html_to_markdown

    return html_to_markdown(html)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=600)
    ap.add_argument("--corpus", action="append", default=None,
                    help="folders under the corpora directory (default: textual-docs/docs and hugo-docs/content)")
    args = ap.parse_args()
    folders = args.corpus or ["textual-docs/docs", "hugo-docs/content"]
    files = sorted(p for f in folders for p in (CORPORA / f).rglob("*.md"))
    if not files:
        sys.exit(f"no corpus under {CORPORA}: nothing to measure")
    random.Random(7).shuffle(files)
    md = MarkdownIt("gfm-like", {"html": True})
    raw_html = re.compile(r"<(?!/?(?:h[1-6]|p|ul|ol|li|pre|code|table|thead|tbody|tr|td|th|blockquote|hr|a|em|strong|s|img|br)\b)[a-zA-Z]")
    libs = {"markdownify": with_markdownify, "html-to-markdown": with_html_to_markdown, "crewlet": crewlet_plain}
    try:
        import html_to_markdown  # noqa: F401 - the peer: not a dependency of crewlet
    except ImportError:
        print("html-to-markdown is not installed (`.venv/bin/pip install html-to-markdown` to compare with it)")
        del libs["html-to-markdown"]
    passed = {k: 0 for k in libs}
    seconds = {k: 0.0 for k in libs}
    failures: dict[str, list[str]] = {k: [] for k in libs}
    measured = 0
    for path in files:
        if measured >= args.pages:
            break
        text = path.read_text(encoding="utf-8", errors="replace")
        html = md.render(text)
        if raw_html.search(html):
            continue
        want = shape(html)
        order = list(libs.items()) if measured % 2 == 0 else list(reversed(libs.items()))  # alternate the order
        for name, fn in order:
            t0 = time.perf_counter()
            out = fn(html)
            seconds[name] += time.perf_counter() - t0
            if shape(md.render(out)) == want:
                passed[name] += 1
            elif len(failures[name]) < 5:
                failures[name].append(str(path.relative_to(CORPORA)))
        measured += 1
    print(f"{measured} pages from {', '.join(folders)} ({machine_load()})")
    for name in libs:
        print(f"{name:17} round trip kept {passed[name]:4} of {measured} pages ({100 * passed[name] / measured:.1f}%)"
              f"  {1000 * seconds[name] / measured:.2f} ms a page")
        for f in failures[name]:
            print(f"{'':17}   differs: {f}")
    if "html-to-markdown" in libs:
        a, b = seconds["markdownify"], seconds["html-to-markdown"]
        print(f"time ratio markdownify / html-to-markdown: {a / b:.1f}x")
    storage_round_trip(files[:measured], md, raw_html)


def storage_round_trip(files: list[Path], md: MarkdownIt, raw_html: re.Pattern[str]) -> None:
    """crewlet's own way out and back: Markdown -> storage XHTML (markdown_to_storage) -> Markdown."""
    from core.remote.convert import markdown_to_storage, storage_to_markdown

    # both sides read as crewlet reads a body: raw HTML off (shown as its text), no linkify
    plain = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    kept = total = 0
    t = 0.0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        html = md.render(text)
        if raw_html.search(html):
            continue
        total += 1
        t0 = time.perf_counter()
        back = storage_to_markdown(markdown_to_storage(text))
        t += time.perf_counter() - t0
        kept += shape(plain.render(back)) == shape(plain.render(text))
    print(f"crewlet storage  Markdown -> storage -> Markdown kept {kept} of {total} pages "
          f"({100 * kept / max(total, 1):.1f}%)  {1000 * t / max(total, 1):.2f} ms a page")


if __name__ == "__main__":
    main()
