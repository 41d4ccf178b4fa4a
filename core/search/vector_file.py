"""A space's float vectors kept as one contiguous file beside the database, with a compact int8 copy of them
held in memory: stage two's rerank without 1,200 random reads of the database (issue 38).

Stage two used to read stage one's 1,200 candidates' float vectors by primary key: at 1,000,000 × 1,536
that is 1,200 random reads of 6 KB from a 9 GB database. Now it runs in two steps:

- 2a: the 1,200 are scored against the query with the compact copy — each vector as int8 with its own
  scale (`v ≈ scale × q8`, 1 byte a dimension: 1.5 GB at 1,000,000 × 1,536 where float16 would take 3 GB;
  bench/ivf.py --rerank measured both against the exact ranking, docs/search.md) — and the best
  `depth + MARGIN` are kept;
- 2b: those few are scored exactly, their float32 vectors read from this file by offset (one `pread` of a
  row each), so the score a hit shows is still the exact cosine.

The file (`vectors/vectors-<digest>.bin` in the home) holds, page-aligned: a header (format, space, width,
the vector-log position, the row count), the rows' `vectors.id` ascending, the int8 rows' own norms (a
cosine needs only the direction, so the scale itself is not kept), the int8 rows, then the float32 rows. A new process reads everything but the floats in one sequential pass. A
vector's id never names another vector (a put files a new id; a restamp keeps the vector), so a row of the
file stays true for its id; the database vouches for the file as for the code file (core/search/code_file.py):
its position may not be past the database's, and a sample of its rows must be the database's own floats,
byte for byte (those the database has not written again since the file). Rows filed since the file are read from the database by id the first time a search needs
them and kept in memory beside it; past `REBUILD_SHARE` of the file they are, the file is written again.
Writes go to a temporary file renamed over the old one: a killed write leaves a `.tmp` no reader opens
(swept after an hour), never a half file under the real name.

A node told to hold less (node.toml `rerank_memory_mb`, default `DEFAULT_MEMORY_MB`) whose compact copy
would not fit serves stage two as before — the candidates read by id — and its ranking says so
(`SemanticRanking.stage_two`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import leftovers

log = logging.getLogger("crewlet.search")

FORMAT = 2
MAGIC = b"CRWVEC01"
PAGE = 4096
SAMPLE = 16
DEFAULT_MEMORY_MB = 2048      # 1,000,000 × 1,536 in int8 with ids and norms is ~1,476 MB
# 2a keeps the ranking's depth plus this many for the exact 2b: measured (bench/ivf.py --rerank) recall@150
# and recall@10 of the exact ranking at margins 0/50/150; see docs/search.md
MARGIN = 50
REBUILD_SHARE = 0.25          # rows held beside the file, as a share of it, past which it is written again
BUILD_CHUNK = 8192
ADVISE = hasattr(os, "posix_fadvise")     # not on every platform: the reads are then one after another


def file_for(cache_dir: Path, space: str) -> Path:
    return cache_dir / f"vectors-{hashlib.sha256(space.encode('utf-8')).hexdigest()[:16]}.bin"


def compact_bytes(rows: int, dims: int) -> int:
    """What the compact copy of `rows` vectors takes in memory: int8 row, float32 norm, int64 id."""
    return rows * (dims + 4 + 8)


def quantize(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 and its scale (max |v| / 127): the row is scale × int8 within half a step."""
    peak = np.abs(matrix).max(axis=1) if len(matrix) else np.zeros(0, np.float32)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q8 = np.rint(matrix / scale[:, None]).clip(-127, 127).astype(np.int8)
    return q8, scale


def _align(x: int) -> int:
    return (x + PAGE - 1) // PAGE * PAGE


@dataclass
class Layout:
    n: int
    dims: int
    ids_at: int
    norms_at: int
    q8_at: int
    floats_at: int

    @classmethod
    def of(cls, n: int, dims: int) -> Layout:
        ids_at = PAGE
        norms_at = _align(ids_at + 8 * n)
        q8_at = _align(norms_at + 4 * n)
        floats_at = _align(q8_at + n * dims)
        return cls(n, dims, ids_at, norms_at, q8_at, floats_at)

    @property
    def size(self) -> int:
        return self.floats_at + 4 * self.n * self.dims


@dataclass
class VectorFile:
    """A space's vectors as a stage two reads them: the file's rows (ids ascending, int8 copy in memory,
    floats on disk) and the rows filed since, held whole in memory (`extra`)."""

    space: str
    dims: int
    seq: int
    path: Path
    ids: np.ndarray                                   # (n,) int64, ascending
    norms: np.ndarray                                 # (n,) float32: each int8 row's norm (1 where 0)
    q8: np.ndarray                                    # (n, dims) int8
    floats_at: int
    fd: int = -1
    extra: dict[int, np.ndarray] = field(default_factory=dict)   # id -> float32 vector, filed since the file
    # ids the file holds that the database has written again since (SQLite reuses the largest id when the
    # newest row is replaced): read from the database instead; `checked` is the position they were read to
    shadowed: set[int] = field(default_factory=set)
    checked: int = -1

    def follow(self, conn: Any, seq: int) -> None:
        """Take in what the log filed between `checked` and `seq`: an id written again is no longer the file's
        (nor a held row's) — one read of the rows filed since, through the log-position index."""
        if self.checked < 0:
            self.checked = self.seq
        if seq <= self.checked:
            return
        for (vid,) in conn.execute("SELECT id FROM vectors INDEXED BY vectors_seq WHERE seq > ? AND seq <= ?",
                                   (self.checked, seq)):
            self.extra.pop(int(vid), None)
            if self.n and int(vid) <= int(self.ids[-1]):
                self.shadowed.add(int(vid))
        self.checked = seq

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def memory(self) -> int:
        return compact_bytes(self.n, self.dims) + len(self.extra) * (4 * self.dims + 100)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Each id's row in the file, -1 where the file has none."""
        at = np.searchsorted(self.ids, ids)
        at = np.minimum(at, max(self.n - 1, 0))
        hit = (self.ids[at] == ids) if self.n else np.zeros(len(ids), bool)
        if self.shadowed:
            hit &= ~np.isin(ids, np.fromiter(self.shadowed, np.int64, len(self.shadowed)))
        return np.where(hit, at, -1)

    def floats(self, rows: np.ndarray) -> np.ndarray:
        """The exact float32 vectors of file rows `rows`, one pread each (in offset order). Every row is first
        asked of the kernel at once (POSIX_FADV_WILLNEED), so a cold file's reads go to the disk together
        instead of one after another: 200 rows cold measured p50 3.0 ms against 20.3 ms (docs/search.md)."""
        out = np.empty((len(rows), self.dims), dtype=np.float32)
        width = 4 * self.dims
        order = np.argsort(rows, kind="stable")
        if ADVISE and len(rows) > 1:
            for r in rows[order].tolist():
                os.posix_fadvise(self.fd, self.floats_at + int(r) * width, width, os.POSIX_FADV_WILLNEED)
        for i in order.tolist():
            buf = os.pread(self.fd, width, self.floats_at + int(rows[i]) * width)
            if len(buf) != width:
                raise OSError(f"{self.path} ends inside row {int(rows[i])}")
            out[i] = np.frombuffer(buf, dtype="<f4")
        return out


def read_header(fd: int) -> dict[str, Any] | None:
    head = os.pread(fd, PAGE, 0)
    if len(head) < 16 or head[:8] != MAGIC:
        return None
    size = int.from_bytes(head[8:16], "little")
    if size > PAGE - 16:
        return None
    meta: dict[str, Any] = json.loads(head[16:16 + size].decode("utf-8"))
    return meta


def _read_into(fd: int, at: int, array: np.ndarray) -> int:
    """Fill `array` from `fd` at offset `at`; the bytes read (fewer only at the file's end)."""
    view, done = array.data.cast("B"), 0   # the array's own buffer (numpy's stubs do not call ndarray a Buffer)
    while done < len(view):
        got = os.preadv(fd, [view[done:done + (1 << 30)]], at + done)
        if got <= 0:
            break
        done += got
    return done


def load(path: Path, space: str, dims: int) -> VectorFile | None:
    """The file's vectors for `space` at width `dims`, or None when there is no usable file (absent, torn,
    another format, space or width)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.info("the vector file %s cannot be opened (%s): stage two reads the database", path, exc)
        return None
    try:
        meta = read_header(fd)
        if meta is None or meta.get("format") != FORMAT or meta.get("space") != space or meta.get("dims") != dims:
            os.close(fd)
            return None
        n = int(meta["n"])
        lay = Layout.of(n, dims)
        if os.fstat(fd).st_size != lay.size:      # torn or grown: not the file its header describes
            os.close(fd)
            return None
        ids, norms = np.empty(n, "<i8"), np.empty(n, "<f4")
        q8 = np.empty((n, dims), dtype=np.int8)
        # one sequential pass over all but the floats, straight into the arrays (no second copy)
        got = sum(_read_into(fd, at, array) for at, array in ((lay.ids_at, ids), (lay.norms_at, norms), (lay.q8_at, q8)))
        if got != 12 * n + n * dims or (n > 1 and not bool(np.all(ids[1:] > ids[:-1]))):
            os.close(fd)
            return None
        return VectorFile(space, dims, int(meta["seq"]), path, ids, norms, q8, lay.floats_at, fd)
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as exc:
        os.close(fd)
        log.info("the vector file %s is unreadable (%s): stage two reads the database", path, exc)
        return None


def vouched(conn: Any, vf: VectorFile, seq: int) -> bool:
    """Does this database hold a sample of the file's rows as the file does (the float bytes by id), at a
    position not before the file's?"""
    if vf.seq > seq:
        return False
    if not vf.n:
        return True
    rows = sorted({int(r) for r in np.linspace(0, vf.n - 1, min(SAMPLE, vf.n))})
    picked = np.asarray(rows, dtype=np.int64)
    mine = vf.floats(picked)
    want = {int(vf.ids[r]): mine[i].tobytes() for i, r in enumerate(rows)}
    marks = ",".join("?" * len(want))
    # a row written since the file (its id reused by a replacement: `follow` shadows it) or gone since says
    # nothing; the rows the database still holds as of the file's position must be the file's, byte for
    # byte, and they must be most of the sample (a file most of whose sample was replaced is stale anyway)
    got = {r[0]: bytes(r[1]) for r in conn.execute(
        f"SELECT id, vector FROM vectors WHERE id IN ({marks}) AND seq <= ?", [*want, vf.seq])}
    return 2 * len(got) >= len(want) and all(want[v] == blob for v, blob in got.items())


def build(conn: Any, space: str, dims: int, seq: int, path: Path) -> bool:
    """Write the space's vectors of width `dims` (every row the database holds at `seq`, in id order) to
    `path`, atomically. False, and nothing changed, when it cannot. Memory: a chunk of rows at a time."""
    from ..vectors.read import scan_vectors

    n = int(conn.execute("SELECT COUNT(*) FROM vectors WHERE space = ? AND length(vector) = ?",
                         (space, 4 * dims)).fetchone()[0])
    lay = Layout.of(n, dims)
    meta = json.dumps({"format": FORMAT, "space": space, "dims": dims, "seq": int(seq), "n": n}).encode("utf-8")
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, 0o644)
            os.ftruncate(fd, lay.size)
            os.pwrite(fd, MAGIC + len(meta).to_bytes(8, "little") + meta, 0)
            after, at = 0, 0
            while at < n:
                read, after, ids, matrix = scan_vectors(conn, space, dims, after=after, limit=BUILD_CHUNK)
                if not read:
                    break
                ids, matrix = ids[:n - at], matrix[:n - at]          # rows filed while the count was read
                k = len(ids)
                q8, _ = quantize(matrix)
                norms = np.sqrt(np.einsum("ij,ij->i", q8.astype(np.float32), q8.astype(np.float32)))
                os.pwrite(fd, ids.astype("<i8").tobytes(), lay.ids_at + 8 * at)
                os.pwrite(fd, np.where(norms > 0, norms, 1.0).astype("<f4").tobytes(), lay.norms_at + 4 * at)
                os.pwrite(fd, q8.tobytes(), lay.q8_at + dims * at)
                os.pwrite(fd, matrix.astype("<f4").tobytes(), lay.floats_at + 4 * dims * at)
                at += k
            if at != n:             # rows vanished under the count: not a whole file, not kept
                raise OSError(f"{at} of {n} rows read")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return True
    except OSError as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        log.warning("could not keep the vector file %s (%s): stage two reads the database", path, exc)
        return False


def sweep(cache_dir: Path, spaces: set[str], stale_tmp_s: float = 3600.0) -> list[Path]:
    """Remove the vector files of spaces not in `spaces`, and temporary files left by a write killed more
    than `stale_tmp_s` ago (a live write's temporary file is younger)."""
    keep = {file_for(cache_dir, space).name for space in spaces}
    gone = leftovers.sweep_cache(cache_dir, "vectors-", ".bin", keep, stale_tmp_s=stale_tmp_s)
    if gone:
        log.info("removed %d vector file(s) no space needs from %s", len(gone), cache_dir)
    return gone


def rerank(vf: VectorFile, conn_read: Any, ids: np.ndarray, query: np.ndarray, keep: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Stages 2a and 2b: of the candidates `ids`, the best `keep` by the compact copy, scored exactly.
    `conn_read(ids)` reads (found ids, float32 matrix) from the database, for rows the file does not hold
    (filed since it: kept in `vf.extra` after). Returns (ids, exact cosines), in no order."""
    q = np.asarray(query, dtype=np.float32)
    qn = float(np.linalg.norm(q)) or 1.0
    at = vf.positions(ids)
    inside = at >= 0
    missing = [int(v) for v in ids[~inside].tolist() if int(v) not in vf.extra]
    if missing:
        found, matrix = conn_read(missing)
        for v, row in zip(found.tolist(), matrix):
            vf.extra[int(v)] = row.copy()
    # 2a: approximate cosines — the file's rows from int8, the extra rows exactly (they are held whole)
    approx = np.full(len(ids), -np.inf, dtype=np.float32)
    rows = at[inside]
    if len(rows):
        block = np.take(vf.q8, rows, axis=0).astype(np.float32)
        approx[inside] = (block @ q) / (vf.norms[rows] * qn)
    for i in np.flatnonzero(~inside).tolist():
        vec = vf.extra.get(int(ids[i]))
        if vec is not None:
            approx[i] = float(vec @ q) / ((float(np.linalg.norm(vec)) or 1.0) * qn)
    known = np.flatnonzero(approx > -np.inf)
    if len(known) > keep:
        known = known[np.argpartition(-approx[known], keep - 1)[:keep]]
    # 2b: exact floats for those few — from the file by offset, or held (the extra rows)
    chosen_ids = ids[known]
    exact = np.empty((len(known), vf.dims), dtype=np.float32)
    from_file = at[known] >= 0
    if from_file.any():
        exact[from_file] = vf.floats(at[known][from_file])
    for j in np.flatnonzero(~from_file).tolist():
        exact[j] = vf.extra[int(chosen_ids[j])]
    norms = np.sqrt(np.einsum("ij,ij->i", exact, exact)) * qn
    return chosen_ids, (exact @ q) / np.where(norms > 0, norms, 1.0)
