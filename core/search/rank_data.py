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

Layout: MAGIC, one JSON line {"count", "width", "containers", "code"} and then, for `count` documents, the
page ids (UTF-8, NUL-padded to `width` bytes each), the title lengths and body lengths (float32, as Whoosh's
reader reports them), the auto-draft flags (uint8) and the container codes (`code`: uint16 or uint32), all
little-endian. The ids are read as one numpy array of fixed-width bytes: version 1 kept them as a JSON
list, which a CLI search parsed into a Python list of every page id at every start (0.15 s at 250,000
pages, and growing with them); a version-1 file is foreign here and derived again.
"""
from __future__ import annotations

import json
import mmap
import os
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import AUTO_DRAFT_TITLE_PREFIX
from ..durable import write_atomic
from .index_files import BODY, TITLE

MAGIC = b"crewlet-rank 2\n"
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


class RankCollector:
    """A segment's ranking data, collected a document at a time in document order: what the bulk writer
    adds as it writes a segment, and what `derive` reads back from a segment Whoosh wrote."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.containers: dict[str, int] = {}
        self.codes: list[int] = []
        self.auto_draft: list[bool] = []
        self.title_lengths: list[float] = []
        self.body_lengths: list[float] = []
        self._draft_prefix = AUTO_DRAFT_TITLE_PREFIX.lower()

    @property
    def count(self) -> int:
        return len(self.ids)

    def add(self, page_id: str, container: str, title: str, title_length: float, body_length: float) -> None:
        self.ids.append(page_id)
        self.codes.append(self.containers.setdefault(container, len(self.containers)))
        self.auto_draft.append(title.lower().startswith(self._draft_prefix))
        self.title_lengths.append(title_length)
        self.body_lengths.append(body_length)

    def data(self) -> RankData:
        return RankData(self.ids, list(self.containers), self.codes, self.auto_draft, self.title_lengths,
                        self.body_lengths)


def derive(reader: Any) -> RankData:
    """A segment's ranking data read from Whoosh's own records, one document at a time (slow: done once
    per segment, then kept in its rank file)."""
    out = RankCollector()
    for docnum in range(reader.doc_count_all()):
        stored = reader.stored_fields(docnum) or {}
        out.add(str(stored.get("id", "")), str(stored.get("container", "")), str(stored.get("title", "")),
                float(reader.doc_field_length(docnum, TITLE) or 0), float(reader.doc_field_length(docnum, BODY) or 0))
    return out.data()


def ensure_files(ix: Any) -> int:
    """Write the rank file of every segment of the index's latest generation that has none (after an
    incremental commit, so that no search pays for deriving it); returns how many were written."""
    folder = Path(ix.storage.folder)
    written = 0
    reader = ix.reader()
    try:
        leaves = reader.leaf_readers() if reader.doc_count_all() else []
        for sub, _offset in leaves:
            segid = sub.segment().segment_id()
            if not (folder / file_name(segid)).exists():
                write(folder, segid, derive(sub))
                written += 1
    finally:
        reader.close()
    return written


def load(folder: Path | None, segment_id: str, reader: Any) -> dict[str, Any]:
    """The segment's arrays (as `read` gives them): from its rank file, else derived from the segment and
    written for the next reader (best effort: a home this process cannot write derives them again)."""
    import numpy as np

    n = reader.doc_count_all()
    got = read(folder, segment_id, n) if folder is not None else None
    if got is not None:
        return got
    data = derive(reader)
    if folder is not None:
        try:
            write(folder, segment_id, data)
        except OSError:
            pass
    return {"ids": id_array(data.ids), "containers": data.containers, "codes": np.asarray(data.codes, dtype=np.int64),
            "auto_draft": np.asarray(data.auto_draft, dtype=bool),
            "title": np.asarray(data.title_lengths, dtype=np.float64),
            "body": np.asarray(data.body_lengths, dtype=np.float64)}


def file_name(segment_id: str) -> str:
    return segment_id + EXT


def id_array(ids: list[str]) -> Any:
    """Page ids as one numpy array of fixed-width UTF-8 bytes (what a snapshot holds)."""
    import numpy as np

    return np.array([i.encode("utf-8", "surrogatepass") for i in ids], dtype=bytes) if ids else np.zeros(0, "S1")


def encode(data: RankData) -> bytes:
    n = data.count
    code = "H" if len(data.containers) < 65536 else "I"
    ids = [i.encode("utf-8", "surrogatepass") for i in data.ids]
    width = max((len(i) for i in ids), default=1) or 1
    header = json.dumps({"count": n, "width": width, "containers": data.containers, "code": code},
                        ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    parts: list[array[Any]] = [array("f", data.title_lengths), array("f", data.body_lengths),
             array("B", [1 if d else 0 for d in data.auto_draft]), array(code, data.codes)]
    if sys.byteorder != "little":  # pragma: no cover - big-endian machines
        for p in parts:
            p.byteswap()
    return (MAGIC + header + b"\n" + b"".join(i.ljust(width, b"\0") for i in ids)
            + b"".join(p.tobytes() for p in parts))


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
        # mapped, not read: the arrays below are views of it, and a search touches few of the ids
        with open(Path(folder) / file_name(segment_id), "rb") as f:
            blob: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
    except (OSError, ValueError):
        return None
    try:
        if blob[:len(MAGIC)] != MAGIC:
            return None
        end = blob.find(b"\n", len(MAGIC))
        if end < 0:
            return None
        head = json.loads(blob[len(MAGIC):end])
        n = int(head["count"])
        width = int(head["width"])
        code = np.dtype("<u2" if head["code"] == "H" else "<u4")
        if n != expected_count or width < 1:
            return None
        pos = end + 1
        need = n * width + n * 4 * 2 + n + n * code.itemsize
        if len(blob) - pos != need:
            return None
        ids = np.frombuffer(blob, dtype=f"S{width}", count=n, offset=pos)
        pos += n * width
        title = np.frombuffer(blob, dtype="<f4", count=n, offset=pos)
        pos += n * 4
        body = np.frombuffer(blob, dtype="<f4", count=n, offset=pos)
        pos += n * 4
        draft = np.frombuffer(blob, dtype=np.uint8, count=n, offset=pos).view(bool)
        pos += n
        codes = np.frombuffer(blob, dtype=code, count=n, offset=pos)
        containers = [str(c) for c in head["containers"]]
        if n and (codes.max(initial=0) >= len(containers)):
            return None
        return {"ids": ids, "containers": containers, "codes": codes,
                "auto_draft": draft, "title": title, "body": body}
    except (ValueError, KeyError, TypeError):
        return None
