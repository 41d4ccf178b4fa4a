"""One training (or re-measurement) of the semantic index over a node's own rows.

A training reads every code of the space (one covering read), keeps 25 documents out (the lowest by a
hash of their source id: the same 25 on every machine), runs the k-means on a sample of the rest (the
next lowest by another hash, 32 a list), files every code in its nearest list, reads every float vector
once to score the 25 held-out documents exactly against the whole corpus, and measures the smallest
number of lists at which every shape meets its floor with no top-ten miss (measure.py). A
re-measurement does the same with the installed centroids and lists, and no k-means.

Reading and scoring take the node's lock 1,024 rows at a time, so searches and the applier go on
between; every chunk is progress, renews the duty's lease and honours a stop.
"""
from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...vectors import records as vectors
from ...vectors.read import read_vectors, scan_vectors
from .. import semantic
from . import MIN_SOURCES, kmeans, measure  # noqa: F401  (MIN_SOURCES: training.MIN_SOURCES as before)

BATCH_ROWS = 1000             # rows a re-filing batch covers
READ_CHUNK = 1024
TOP_ID = 2 ** 62              # the last batch's range runs to here: a row put later still falls in one

ProgressFn = Callable[[int, int, str], None]


def hash_order(sources: list[str], salt: str) -> np.ndarray:
    """Row positions ordered by sha256(salt + source id): the same order on every machine."""
    keys = np.fromiter((int.from_bytes(hashlib.sha256((salt + s).encode("utf-8")).digest()[:8], "big")
                        for s in sources), dtype=np.uint64, count=len(sources))
    return np.argsort(keys, kind="stable")


@dataclass
class Training:
    """What a training found: an index to install (`probes` set) or the reason it is not installed."""

    space: str
    sources: int
    centroids: np.ndarray
    lists: np.ndarray                        # each table row's list
    table: semantic.CodeTable
    probes: int | None
    measurement: measure.Measurement
    ranges: list[tuple[int, int]] = field(default_factory=list)
    fullest: int = 0
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    cases: list[measure.Case] = field(default_factory=list)    # the held-out documents it was measured on

    def batches(self) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
        """(lo, hi, ids, lists) of every re-filing batch, in range order."""
        live = np.flatnonzero(self.table.alive[:self.table.n])
        return split_batches(self.table.ids[live], self.lists[live], self.ranges)

    def summary(self) -> dict[str, Any]:
        """The measurement as it is stored with the index and shown by `crewlet index status`."""
        worst = self.measurement.worst()
        return {"probes": self.probes, "lists": int(len(self.centroids)), "sources": self.sources,
                "queries": worst.queries, "worst_shape": worst.shape, "worst_recall": round(worst.recall, 4),
                "worst_floor": round(worst.floor, 4), "head_misses": sum(s.head_misses for s in
                                                                          self.measurement.shapes.values()),
                "worst_query": round(min(s.worst for s in self.measurement.shapes.values()), 4),
                "worst_query_floor": measure.WORST_FLOOR,
                "below": sum(s.below for s in self.measurement.shapes.values()),
                "passed": self.probes is not None, "seconds": round(self.seconds, 1),
                "phases": {k: round(v, 1) for k, v in self.phases.items()},
                "shapes": {k: {"recall": round(v.recall, 4), "floor": round(v.floor, 4), "head_misses": v.head_misses,
                               "scanned": v.scanned, "queries": v.queries, "worst": round(v.worst, 4),
                               "below": v.below, "codes_read": round(v.codes_read)}
                           for k, v in self.measurement.shapes.items()}}


def split_batches(ids: np.ndarray, lists: np.ndarray, ranges: Sequence[Sequence[int]]
                  ) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """Live rows' (ids, lists) cut into the re-filing batches a training fixed: (lo, hi, ids, lists) per
    range, in range order."""
    order = np.argsort(ids, kind="stable")
    ids, lists = ids[order], lists[order]
    out = []
    for lo, hi in ranges:
        a, b = np.searchsorted(ids, lo, "left"), np.searchsorted(ids, hi, "right")
        out.append((lo, hi, ids[a:b], lists[a:b]))
    return out


def batch_ranges(ids: np.ndarray, rows: int = BATCH_ROWS) -> list[tuple[int, int]]:
    """Ranges of vectors.id covering every id there is, ~`rows` present ids each: the first starts at 0
    and the last runs to TOP_ID, so a row put after the training still belongs to one batch."""
    ids = np.sort(np.asarray(ids, dtype=np.int64))
    if not len(ids):
        return []
    starts = [0] + [int(ids[i]) for i in range(rows, len(ids), rows)]
    return [(lo, (starts[k + 1] - 1) if k + 1 < len(starts) else TOP_ID) for k, lo in enumerate(starts)]


def exact_pass(conn: Any, lock: Any, table: semantic.CodeTable, queries: np.ndarray, *,
               progress: Callable[[int], None] | None = None, stop: threading.Event | None = None) -> np.ndarray:
    """Every live row's exact cosine to each query vector (q, n) float32, reading the float vectors once
    in key order, READ_CHUNK at a time."""
    q = np.asarray(queries, dtype=np.float32)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30)
    scores = np.full((len(q), table.n), -np.inf, dtype=np.float32)
    order = np.argsort(table.ids[:table.n], kind="stable")
    sorted_ids = table.ids[:table.n][order]
    dims = q.shape[1]
    last = -1
    while True:
        if stop is not None and stop.is_set():
            raise kmeans.Stopped()
        with lock:
            read, last, ids, matrix = scan_vectors(conn, table.space, dims, after=last, limit=READ_CHUNK)
        if not read:
            return scores
        if len(ids):
            norms = np.maximum(np.linalg.norm(matrix, axis=1), 1e-30)
            at = np.searchsorted(sorted_ids, ids)
            at = np.minimum(at, len(sorted_ids) - 1)
            found = sorted_ids[at] == ids
            cols = order[at[found]]
            scores[:, cols] = ((matrix @ q.T) / norms[:, None]).T[:, found]
        if progress:
            progress(read)


def query_vectors(conn: Any, lock: Any, table: semantic.CodeTable, rows: np.ndarray) -> np.ndarray:
    """The vectors of the table's `rows`, in their order."""
    ids = [int(table.ids[r]) for r in rows]
    with lock:
        found, matrix = read_vectors(conn, ids, None)
    at = {vid: i for i, vid in enumerate(found.tolist())}
    return np.stack([matrix[at[i]] for i in ids])


def cases_for(conn: Any, lock: Any, table: semantic.CodeTable, rows: np.ndarray, *,
              progress: Callable[[int], None] | None = None, stop: threading.Event | None = None) -> list[measure.Case]:
    """The query documents at `rows`, each with its exact cosine to every row (one exact pass)."""
    qv = query_vectors(conn, lock, table, rows)
    scores = exact_pass(conn, lock, table, qv, progress=progress, stop=stop)
    return [measure.Case(int(r), table.codes[r].copy(), scores[i], int(table.containers[r])) for i, r in enumerate(rows)]


def held_out(table: semantic.CodeTable, count: int = measure.QUERIES, salt: str = "ivf:held-out:") -> np.ndarray:
    live = np.flatnonzero(table.alive[:table.n])
    order = hash_order([table.sources[r] for r in live], salt)
    return live[order[:count]]


class _Steps:
    """A long tick's progress in work units: each step reports how far, and renews the lease it runs under."""

    def __init__(self, total: int, progress: ProgressFn | None, renew: Callable[[], None] | None) -> None:
        self.total, self.done, self.progress, self.renew = total, 0, progress, renew

    def __call__(self, amount: int, label: str) -> None:
        self.done += amount
        if self.progress:
            self.progress(min(self.done, self.total), self.total, label)
        if self.renew:
            self.renew()


def read_table(conn: Any, lock: Any, space: str, codes_file: Path | None) -> semantic.CodeTable:
    """The space's codes as the rows are now: from the space's file when the database vouches for it (one
    sequential read: cold, at 1,000,000 × 1,536, 2.9 s against 273 s by id from the database)."""
    with lock:
        return semantic.open_table(conn, space, vectors.position(conn)[0], codes_file)


def train(conn: Any, lock: Any, space: str, *, threads: int = 2, progress: ProgressFn | None = None,
          stop: threading.Event | None = None, renew: Callable[[], None] | None = None,
          codes_file: Path | None = None) -> Training | None:
    """Train, file and measure an index for `space` (None below MIN_SOURCES). `codes_file`: the space's
    code table file (core/search/code_file.py), read when the database vouches for it."""
    started = time.perf_counter()
    phases: dict[str, float] = {}
    table = read_table(conn, lock, space, codes_file)
    table.index = None
    n_live = table.live
    if n_live < MIN_SOURCES:
        return None
    lists = kmeans.list_count(n_live)
    step = _Steps(n_live * 3 + kmeans.ITERATIONS, progress, renew)   # read ≈ file ≈ score (rows) + k-means iterations
    step(n_live, "reading codes")
    phases["read codes"] = time.perf_counter() - started
    hold = held_out(table)
    live = np.flatnonzero(table.alive[:table.n])
    rest = np.setdiff1d(live, hold)
    sample = rest[hash_order([table.sources[r] for r in rest], "ivf:sample:")[:kmeans.SAMPLE_PER_LIST * lists]]
    t0 = time.perf_counter()
    centroids = kmeans.train(table.codes[sample], lists, threads=threads, stop=stop,
                             progress=lambda k: step(k, "clustering codes (k-means)"))
    phases["k-means"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    owner, _ = kmeans.assign(table.codes[:table.n], centroids, threads=threads, stop=stop,
                             progress=lambda k: step(k, "filing codes in lists"))
    phases["filing"] = time.perf_counter() - t0
    table.lists[:table.n] = np.where(table.alive[:table.n], owner, -1)
    table.index = semantic.IndexView(0, centroids, 1)
    table.version += 1
    t0 = time.perf_counter()
    cases = cases_for(conn, lock, table, hold, progress=lambda k: step(k, "scoring held-out documents exactly"),
                      stop=stop)
    phases["exact pass"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    probes, measurement = measure.smallest_passing(table, cases)
    phases["measuring"] = time.perf_counter() - t0
    fullest = int(np.bincount(owner[live], minlength=lists).max()) if len(live) else 0
    return Training(space, n_live, centroids, table.lists[:table.n].copy(), table, probes, measurement,
                    batch_ranges(table.ids[live]), fullest, time.perf_counter() - started, phases, cases)


def remeasure(conn: Any, lock: Any, space: str, *, progress: ProgressFn | None = None,
              stop: threading.Event | None = None, renew: Callable[[], None] | None = None,
              codes_file: Path | None = None) -> Training | None:
    """The installed index measured against the corpus as it is now: the smallest passing count of its
    lists (probes None when none within half of them passes). None when there is no index."""
    started = time.perf_counter()
    table = read_table(conn, lock, space, codes_file)
    if table.index is None:
        return None
    step = _Steps(table.live * 2, progress, renew)
    step(table.live, "reading codes")
    hold = held_out(table)
    cases = cases_for(conn, lock, table, hold, progress=lambda k: step(k, "scoring held-out documents exactly"),
                      stop=stop)
    probes, measurement = measure.smallest_passing(table, cases)
    live = np.flatnonzero(table.alive[:table.n])
    fullest = int(np.bincount(table.lists[live][table.lists[live] >= 0], minlength=table.index.count).max())
    return Training(space, table.live, table.index.centroids, table.lists[:table.n].copy(), table, probes, measurement,
                    [], fullest, time.perf_counter() - started, {"remeasure": time.perf_counter() - started}, cases)
