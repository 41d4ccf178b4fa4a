"""The one Hamming kernel: 1-bit sign codes and the popcount distances between them.

Stage one of a search (one query code against every stored code), the semantic index's k-means (many
codes against every centroid) and the filing of a new code all measure through here, so every path —
numkong's C popcount (AVX-512 VPOPCNTQ / AVX2 where the CPU has them) or numpy's `bitwise_count` where
numkong has no wheel — gives the same integers on every machine.
"""
from __future__ import annotations

from typing import Any

import numpy as np

try:  # C SIMD popcount; the same integers as the numpy path
    import numkong
    _numkong: Any = numkong   # read untyped: its stubs' out_dtype omits the integer types cdist takes ("uint32")
except ImportError:  # pragma: no cover - a platform without its wheel runs the numpy path
    _numkong = None


def sign_code(vector: np.ndarray) -> np.ndarray:
    """The 1-bit code of a vector as sqlite-vec's vec_quantize_binary writes it (bit i set when
    component i > 0, least significant bit first)."""
    return np.packbits(np.asarray(vector) > 0, bitorder="little")


def as_words(codes: np.ndarray) -> np.ndarray:
    """Codes (n, bytes) as 64-bit words (n, words), zero-padded to a whole word."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.ndim == 1:
        codes = codes.reshape(1, -1)
    n, width = codes.shape
    pad = (-width) % 8
    if pad:
        codes = np.concatenate([codes, np.zeros((n, pad), dtype=np.uint8)], axis=1)
    return np.ascontiguousarray(codes).view(np.uint64)


def hamming_rows(words: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Distances from `q` (words,) to every row of `words` (n, words): numpy's plain popcount scan (what
    the benchmark calls the numpy floor, and the path where numkong is not installed)."""
    return np.bitwise_count(words ^ q).sum(axis=1, dtype=np.uint32)


def hamming(codes: np.ndarray, q: np.ndarray, *, use_numkong: bool | None = None) -> np.ndarray:
    """Distances (uint32) from the code `q` (bytes,) to every row of `codes` (n, bytes, uint8).
    Integer popcounts: every path and every CPU gives the same numbers."""
    if not len(codes):
        return np.zeros(0, dtype=np.uint32)
    if _numkong is not None and use_numkong is not False:
        out = _numkong.cdist(np.ascontiguousarray(q, dtype=np.uint8).reshape(1, -1), codes, metric="hamming",
                             dtype="uint1", out_dtype="uint32")
        return np.asarray(out).reshape(-1)
    return hamming_rows(as_words(codes), as_words(q)[0])


def distance_matrix(codes: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """(m, L) uint32 Hamming distances between code rows and centroid rows (both uint8)."""
    if _numkong is not None and len(codes) and len(centroids):
        out = _numkong.cdist(np.ascontiguousarray(codes), np.ascontiguousarray(centroids),
                             metric="hamming", dtype="uint1", out_dtype="uint32")
        return np.asarray(out).reshape(len(codes), len(centroids))
    words_c = as_words(centroids)
    words_x = as_words(codes)
    out = np.zeros((len(codes), len(centroids)), dtype=np.uint32)
    for w in range(words_x.shape[1]):
        out += np.bitwise_count(words_x[:, w, None] ^ words_c[None, :, w])
    return out


def nearest_lists(codes: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each code's nearest centroid, the lower list on a tie."""
    return distance_matrix(codes, centroids).argmin(axis=1).astype(np.int32)
