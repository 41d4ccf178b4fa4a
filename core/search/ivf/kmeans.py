"""k-means in Hamming space over sign codes, in integer arithmetic, so two machines given the same codes
compute the same centroids and file every code in the same list.

- A distance is a popcount of XOR (numkong's C kernel, or numpy's): exact integers on every CPU.
- A code goes to its nearest centroid; a tie goes to the lower list.
- A centroid is its members' majority vote bit by bit; a bit split exactly in half keeps the centroid's
  previous bit, and an empty list keeps its previous centroid until it is reseeded.
- An empty list is reseeded with the codes farthest from their own centroids (the lower row on ties).
- The starting centroids are evenly spaced codes of the caller's order (a hash of each source's id,
  so the order does not depend on how rows were stored).

Work is split in chunks of rows over a thread pool (the popcount kernels release the GIL); the results
are written in place per chunk, so the thread count never changes an answer.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...vectors.hamming import distance_matrix

LISTS_MIN = 16
LISTS_MAX = 4096
SAMPLE_PER_LIST = 32          # training codes per list: the k-means runs on a sample, the filing on all
ITERATIONS = 10
CHUNK = 4096                  # rows per unit of work

Progress = Callable[[int], None]


class Stopped(Exception):
    """The training was asked to stop (the duty lost its lease, or the worker is shutting down)."""


def list_count(sources: int) -> int:
    """Lists for a corpus: the power of two nearest 3·√N (512 at 40,000, 1,024 at 120,000, 2,048 at
    500,000), within [16, 4,096]."""
    target = 3.0 * math.sqrt(max(1, sources))
    return int(min(LISTS_MAX, max(LISTS_MIN, 2 ** round(math.log2(target)))))


def _chunks(n: int) -> list[tuple[int, int]]:
    return [(s, min(n, s + CHUNK)) for s in range(0, n, CHUNK)]


def assign(codes: np.ndarray, centroids: np.ndarray, *, threads: int = 2, progress: Progress | None = None,
           stop: threading.Event | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each code's nearest centroid (the lower list on a tie) and its distance to it."""
    n = len(codes)
    lists = np.zeros(n, dtype=np.int32)
    dist = np.zeros(n, dtype=np.uint32)

    def work(span: tuple[int, int]) -> int:
        if stop is not None and stop.is_set():
            raise Stopped()
        s, e = span
        d = distance_matrix(codes[s:e], centroids)
        best = d.argmin(axis=1)        # the first minimum: the lower list wins a tie
        lists[s:e] = best
        dist[s:e] = d[np.arange(e - s), best]
        return e - s

    spans = _chunks(n)
    if threads <= 1 or len(spans) <= 1:
        for span in spans:
            done = work(span)
            if progress:
                progress(done)
    else:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for done in pool.map(work, spans):
                if progress:
                    progress(done)
    return lists, dist


def majority(codes: np.ndarray, lists: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Each list's majority vote bit by bit; a bit split in half, and an empty list, keep `previous`."""
    count, width = previous.shape
    bits = width * 8
    order = np.argsort(lists, kind="stable")
    ones = np.zeros((count, bits), dtype=np.int64)
    for s, e in _chunks(len(order)):
        rows = order[s:e]
        owner = lists[rows]
        unpacked = np.unpackbits(codes[rows], axis=1, bitorder="little")
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        ones[owner[starts]] += np.add.reduceat(unpacked, starts, axis=0, dtype=np.int64)
    sizes = np.bincount(lists, minlength=count).astype(np.int64)[:, None]
    before = np.unpackbits(previous, axis=1, bitorder="little").astype(bool)
    twice = 2 * ones
    voted = np.where(twice > sizes, True, np.where(twice < sizes, False, before))
    return np.packbits(voted, axis=1, bitorder="little")


def train(codes: np.ndarray, lists: int, *, iterations: int = ITERATIONS, threads: int = 2,
          progress: Progress | None = None, stop: threading.Event | None = None) -> np.ndarray:
    """Centroids (lists, width) uint8 for `codes` (m, width) uint8, taken in the order given."""
    m = len(codes)
    if m == 0:
        raise ValueError("no codes to train on")
    lists = max(1, min(lists, m))
    centroids = np.ascontiguousarray(codes[(np.arange(lists) * m) // lists])
    for _ in range(iterations):
        owner, dist = assign(codes, centroids, threads=threads, stop=stop)
        fresh = majority(codes, owner, centroids)
        empty = np.flatnonzero(np.bincount(owner, minlength=lists) == 0)
        if len(empty):
            # the codes farthest from their own centroids seed the empty lists (the lower row on a tie)
            far = np.lexsort((np.arange(m), -dist.astype(np.int64)))[:len(empty)]
            fresh[empty[:len(far)]] = codes[far]
        if progress:
            progress(1)
        if np.array_equal(fresh, centroids):
            break
        centroids = fresh
    return centroids
