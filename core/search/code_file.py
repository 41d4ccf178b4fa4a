"""A space's code table kept as one file beside the database, so a new process reads it in one pass.

Read from SQLite, a code table walks the narrow index and the code rows by id; their pages lie between the
wide rows' (each vector applied writes both), so on a cold disk the read is page by page: at 1,000,000 ×
1,536 (8.5 GB of database) it took 273 s on this machine's disk, 25 s at 384 dimensions. The same rows as
one file (about 80 bytes a source at 384 dimensions, 225 at 1,536) are a single sequential read.

The file is a cache, never the truth. It names the vector-log position it reflects and the semantic index
(generation, batches re-filed) its lists belong to. A process brings it to the log's position by the same
incremental refresh a long-lived table gets; the database is read whole instead when the file is absent,
unreadable, of another format, space or width, ahead of the database (a restored copy), filed under
another index, or when the refresh cannot trust it (the live count differs). Only live rows are kept.
Writes go to a temporary file renamed over the old one, so a reader sees one whole file or the other.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import leftovers
from .code_table import CodeTable, Sources

log = logging.getLogger("crewlet.search")

FORMAT = 1
ARRAYS = ("ids", "sources", "containers", "codes", "lists")


def file_for(cache_dir: Path, space: str) -> Path:
    """The file of `space` (a space key holds ':' and '/'; its digest names the file)."""
    import hashlib

    return cache_dir / f"codes-{hashlib.sha256(space.encode('utf-8')).hexdigest()[:16]}.npz"


def save(table: CodeTable, path: Path) -> bool:
    """Write the table's live rows to `path` (atomically). False, and nothing changed, when it cannot."""
    # every row live (a whole read): slices, not copies — a save adds no second table to the process's memory
    live: Any = slice(0, table.n) if table.live == table.n else np.flatnonzero(table.alive[:table.n])
    meta = {"format": FORMAT, "space": table.space, "width": table.width, "seq": int(table.seq),
            "index_key": list(table.index_key) if table.index_key else None,
            "container_names": table.container_names}
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o644)       # as the home's other files (mkstemp makes it the owner's alone)
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
                     ids=table.ids[live], sources=table.sources.data[live], containers=table.containers[live],
                     codes=table.codes[live], lists=table.lists[live])
        os.replace(tmp, path)
        return True
    except OSError as exc:       # a read-only or full disk: the next process reads the database, as before
        log.info("the code table of %s was not kept in %s: %s", table.space, path, exc)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


def sweep(cache_dir: Path, spaces: set[str], *, stale_tmp_s: float = 3600.0) -> list[Path]:
    """Remove the files of spaces not in `spaces` (a model no longer configured, a space whose vectors are
    all gone: 224 MB a million sources at 1,536 dimensions) and temporary files a killed save left behind
    (older than `stale_tmp_s`: a younger one may be another process's save in flight). Returns what went."""
    keep = {file_for(cache_dir, space).name for space in spaces}
    gone = leftovers.sweep_cache(cache_dir, "codes-", ".npz", keep, stale_tmp_s=stale_tmp_s)
    if gone:
        log.info("removed %d code file(s) no space needs from %s", len(gone), cache_dir)
    return gone


SAMPLE = 16


def vouched(conn: Any, table: CodeTable) -> bool:
    """Does this database hold a sample of the file's rows as the file does (id, source, code)? A file
    beside a database it was not made from — a home emptied and filled again to the same position — is
    not; a sampled row replaced since the file only costs a whole read."""
    if not table.n:
        return True
    # sixteen rows spread over the table, in Python: np.unique would import numpy.ma (~40 ms a process)
    rows = sorted({int(r) for r in np.linspace(0, table.n - 1, min(SAMPLE, table.n))})
    want = {int(table.ids[r]): (table.sources[int(r)], table.codes[r].tobytes()) for r in rows}
    marks = ",".join("?" * len(want))
    got = {r[0]: (r[1], bytes(r[2])) for r in conn.execute(
        f"SELECT v.id, v.source_id, c.code FROM vectors v JOIN vector_codes c ON c.id = v.id WHERE v.id IN ({marks})",
        list(want))}
    return got == want


def load(path: Path, space: str) -> CodeTable | None:
    """The table `path` holds for `space` (index not attached: the caller compares `index_key`), or None
    when there is no usable file."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta: dict[str, Any] = json.loads(npz["meta"].tobytes().decode("utf-8"))
            if meta.get("format") != FORMAT or meta.get("space") != space:
                return None
            arrays = {name: npz[name] for name in ARRAYS}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        log.info("the code file %s is unreadable (%s): the database is read instead", path, exc)
        return None
    n, width = len(arrays["ids"]), int(meta["width"])
    if arrays["codes"].shape != (n, width) or any(len(arrays[k]) != n for k in ARRAYS):
        return None
    table = CodeTable.empty(space, int(meta["seq"]), width, n + max(4096, n // 8))
    table.codes[:n] = arrays["codes"]
    table.ids[:n] = arrays["ids"]
    table.containers[:n] = arrays["containers"]
    table.lists[:n] = arrays["lists"]
    table.alive[:n] = True
    sources = Sources(0)
    sources.data = np.zeros(len(table.ids), dtype=arrays["sources"].dtype if n else "S16")
    sources.data[:n] = arrays["sources"]
    sources.n = n
    table.sources = sources
    table.container_names = list(meta["container_names"])
    table.n = table.live = n
    table.index_key = tuple(meta["index_key"]) if meta.get("index_key") else None
    table.version += 1
    return table
