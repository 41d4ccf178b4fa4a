"""Markdown to plain text: the regex pass crewlet indexes bodies with, next to markdown-it-py.

    python bench/plain_text_bench.py [--corpus DIR] [--limit N] [--repeat 2]

Why core/text/markdown.py reads bodies with regular expressions and titles with markdown-it: the
keyword index calls `plain_text` on every body it builds, so a body reader's speed is the index
build's. This reads every .md file under --corpus (default: the windows-driver-docs tree beside the
project, ~14k files, ~56 MB) and reduces each to plain text both ways in the same run:

* regex — `core.text.markdown.plain_text`, what the index reads.
* markdown-it — the peer: markdown-it-py (CommonMark + tables + strikethrough, what Textual renders a
  page with) parses the body and its text, code and alt tokens are joined.

Then every H1 line's inline Markdown is reduced to a title by `inline_to_plain` (markdown-it on a line
with markup, a plain string as it is) — the cost a title pays for the exact parser.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from markdown_it import MarkdownIt  # noqa: E402

from core.text.markdown import inline_to_plain, plain_text  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "windows-driver-docs"
_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)[ \t]*$", re.M)


def markdown_it_plain() -> Callable[[str], str]:
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])

    def walk(tokens: list[Any], out: list[str]) -> None:
        for tok in tokens:
            if tok.children:
                walk(tok.children, out)
            elif tok.type in ("text", "code_inline", "code_block", "fence"):
                out.append(tok.content)
            elif tok.type in ("softbreak", "hardbreak") or (tok.block and tok.nesting == -1):
                out.append(" ")

    def plain(text: str) -> str:
        out: list[str] = []
        walk(md.parse(text), out)
        return " ".join(" ".join(out).split())

    return plain


def best(repeat: int, fn: Callable[[str], str], items: list[str]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        for item in items:
            fn(item)
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="a directory of .md files")
    ap.add_argument("--limit", type=int, default=0, help="read at most N files (0: all)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per reader; the best is reported")
    args = ap.parse_args(argv)
    files = sorted(Path(args.corpus).rglob("*.md"))
    if args.limit:
        files = files[:args.limit]
    if not files:
        print(f"no .md files under {args.corpus}", file=sys.stderr)
        return 1
    bodies = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    mb = sum(len(b.encode("utf-8")) for b in bodies) / 1e6
    print(f"plain text benchmark — {len(bodies):,} files, {mb:.1f} MB from {args.corpus}; "
          f"Python {platform.python_version()}, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    regex_s = best(args.repeat, plain_text, bodies)
    mdit_s = best(args.repeat, markdown_it_plain(), bodies)
    print("\nbodies")
    print(f"  regex pass (indexed)   {regex_s:7.2f} s  {mb / regex_s:6.2f} MB/s  {regex_s / mb * 1000:7.1f} ms/MB")
    print(f"  markdown-it            {mdit_s:7.2f} s  {mb / mdit_s:6.2f} MB/s  {mdit_s / mb * 1000:7.1f} ms/MB")
    print(f"  ratio markdown-it / regex: {mdit_s / regex_s:.1f}x")

    heads = [m.group(1) for b in bodies for m in _H1.finditer(b)]
    marked = [h for h in heads if re.search(r"[\\`*_\[\]<>&{!~]", h)]
    title_s = best(args.repeat, inline_to_plain, heads)
    marked_s = best(args.repeat, inline_to_plain, marked) if marked else 0.0
    print(f"\ntitles: {len(heads):,} H1 lines, {len(marked):,} with inline markup")
    print(f"  inline_to_plain, all    {title_s:7.3f} s  {title_s / max(len(heads), 1) * 1e6:6.1f} µs a title")
    if marked:
        print(f"  of which with markup    {marked_s:7.3f} s  {marked_s / len(marked) * 1e6:6.1f} µs a title "
              "(markdown-it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
