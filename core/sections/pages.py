"""[limits]: how much one write may hold — a page's body and a comment — the section and its parser.

The defaults are far past what a real page meets (the example's longest page is 769 bytes; the longest of
the 18,766 documents in the shared corpora, 132 KiB) and far below what would slow every reader: a body
at the bound is searched, shown and sent to an agent like any other. A write past a bound is refused by
the knowledge base (`core/pages/service.py`) for every surface alike, and `crewlet import` names such a
file as a problem. Titles keep their own bound (`MAX_TITLE` characters: the importer fits unique titles
inside it).

This module stands on floor 1 (tests/test_import_graph.py): `core.config` composes it, so it imports the
kit and nothing else of crewlet; `core/pages/model.py` takes the hard ceilings from here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import only_known, table, whole

TABLE = "limits"
KIB = 1024
MIB = 1024 * KIB
MAX_TITLE = 255
# the ceiling no setting passes: half the log's 64 MiB frame limit (JSON escaping can grow a body)
MAX_BODY_BYTES = 32 * MIB
DEFAULT_PAGE_BODY_BYTES = 1 * MIB
DEFAULT_COMMENT_BYTES = 64 * KIB
KEYS = ("page_body_bytes", "comment_bytes")


@dataclass(frozen=True)
class PageLimits:
    """[limits]: the most a page's body and a comment may hold, in bytes of UTF-8."""

    page_body_bytes: int = DEFAULT_PAGE_BODY_BYTES
    comment_bytes: int = DEFAULT_COMMENT_BYTES


def in_words(size: int) -> str:
    """A size as a person reads it: 1 MiB, 64 KiB, 1.5 MiB, 900 bytes."""
    for unit, name in ((MIB, "MiB"), (KIB, "KiB")):
        if size >= unit:
            return f"{size / unit:.1f}".removesuffix(".0") + f" {name}"
    return f"{size} bytes"


def sizes_in_words(size: int, limit: int) -> tuple[str, str]:
    """(size, limit) in words that tell them apart: in bytes when both round to the same words."""
    said, bound = in_words(size), in_words(limit)
    return (f"{size:,} bytes", f"{limit:,} bytes") if said == bound else (said, bound)


def parse(file: Path, raw: Any) -> PageLimits:
    """[limits]; absent (None) means the defaults."""
    t = table(file, TABLE, raw)
    only_known(file, TABLE, t, KEYS)
    body = whole(file, f"{TABLE}.page_body_bytes", t.get("page_body_bytes", DEFAULT_PAGE_BODY_BYTES), low=KIB,
                 high=MAX_BODY_BYTES, example=f"page_body_bytes = {DEFAULT_PAGE_BODY_BYTES}")
    comment = whole(file, f"{TABLE}.comment_bytes", t.get("comment_bytes", DEFAULT_COMMENT_BYTES), low=KIB,
                    high=MAX_BODY_BYTES, example=f"comment_bytes = {DEFAULT_COMMENT_BYTES}")
    return PageLimits(page_body_bytes=body, comment_bytes=comment)
