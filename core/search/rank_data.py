"""A segment's ranking data in one file beside it: page ids, containers, auto-draft flags, field lengths.

A ranking needs, for every document of every segment, its page id, its container, whether its title
is an auto-draft's and its title and body lengths. Whoosh keeps those per document (a pickled, compressed
stored-field record and a length byte per field), and reading them one document at a time cost a CLI
search about 200 ms on a 14k-page index. A segment never changes once written, so the same arrays are
written once, as one file named after the segment (`MAIN_<segment id>.rank`), and read whole.

The file is derived data: the first build writes it with each segment, a later reader writes it for a
segment Whoosh wrote (an incremental pass, a merge), and Whoosh's own clean-up removes it with its
segment (it matches Whoosh's segment file pattern). A missing, unreadable or foreign file is simply
derived again from the segment.

Layout: MAGIC, one JSON line {"count", "ids", "containers", "code"} and then, for `count` documents, the
title lengths and body lengths (float32, as Whoosh's reader reports them), the auto-draft flags (uint8)
and the container codes (`code`: uint16 or uint32), all little-endian.
"""
from __future__ import annotations

import json
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..durable import write_atomic

MAGIC = b"crewlet-rank 1\n"
EXT = ".rank"


@dataclass
class RankData:
    """One segment's per-document ranking data, in document order (plain Python sequences)."""

    ids: list[str]
    containers: list[str]          # the distinct containers, in first-seen order
    codes: list[int]               # each document's index into `containers`
    auto_draft: list[bool]
    title_lengths: list[float]
    body_lengths: list[float]

    @property
    def count(self) -> int:
        return len(self.ids)


def file_name(segment_id: str) -> str:
    return segment_id + EXT


def encode(data: RankData) -> bytes:
    n = data.count
    code = "H" if len(data.containers) < 65536 else "I"
    header = json.dumps({"count": n, "ids": data.ids, "containers": data.containers, "code": code},
                        ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    parts = [array("f", data.title_lengths), array("f", data.body_lengths),
             array("B", [1 if d else 0 for d in data.auto_draft]), array(code, data.codes)]
    if sys.byteorder != "little":  # pragma: no cover - big-endian machines
        for p in parts:
            p.byteswap()
    return MAGIC + header + b"\n" + b"".join(p.tobytes() for p in parts)


def write(folder: Path, segment_id: str, data: RankData) -> None:
    """Write atomically (a unique temporary file renamed into place: two writers of the same segment
    write the same bytes, and a reader never sees half a file). Not fsynced here: a build fsyncs its
    segment's files, this one among them, before the TOC names the segment."""
    write_atomic(Path(folder) / file_name(segment_id), encode(data), durable=False)


def read(folder: Path, segment_id: str, expected_count: int) -> dict[str, Any] | None:
    """The segment's arrays as numpy arrays ({ids, containers, codes, auto_draft, title, body}), or
    None when there is no usable file (missing, damaged, or not this segment's document count)."""
    import numpy as np

    try:
        blob = (Path(folder) / file_name(segment_id)).read_bytes()
    except OSError:
        return None
    try:
        if not blob.startswith(MAGIC):
            return None
        end = blob.index(b"\n", len(MAGIC))
        head = json.loads(blob[len(MAGIC):end])
        n = int(head["count"])
        code = np.dtype("<u2" if head["code"] == "H" else "<u4")
        if n != expected_count or len(head["ids"]) != n:
            return None
        pos = end + 1
        need = n * 4 * 2 + n + n * code.itemsize
        if len(blob) - pos != need:
            return None
        title = np.frombuffer(blob, dtype="<f4", count=n, offset=pos).astype(np.float64)
        pos += n * 4
        body = np.frombuffer(blob, dtype="<f4", count=n, offset=pos).astype(np.float64)
        pos += n * 4
        draft = np.frombuffer(blob, dtype=np.uint8, count=n, offset=pos).astype(bool)
        pos += n
        codes = np.frombuffer(blob, dtype=code, count=n, offset=pos).astype(np.int64)
        containers = [str(c) for c in head["containers"]]
        if n and (codes.max(initial=0) >= len(containers)):
            return None
        return {"ids": head["ids"], "containers": containers, "codes": codes,
                "auto_draft": draft, "title": title, "body": body}
    except (ValueError, KeyError, TypeError):
        return None
