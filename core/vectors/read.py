"""The one reader of stored float vectors: by primary key (a search's exact rerank, a training's held-out
queries) or a space's whole table in key order (a training's exact pass), each copied once into a matrix.

Vectors are read in primary-key order — the b-tree walked forwards, through SQLite's memory map when the
connection has one (a 12 KB vector is then not copied through read() calls into the page cache first) —
and a vector of another width than the one asked for is passed over.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

PARAMETERS = 30_000      # ids one statement names: under SQLite's bound on parameters


def read_vectors(conn: Any, ids: Iterable[int], dims: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(ids found in key order, their vectors as one (n, dims) float32 matrix): a vector of another width
    (`dims` None: the first vector's), or an id no row has (replaced since it was chosen), is left out."""
    keys = sorted(ids)
    matrix: np.ndarray | None = None if dims is None else np.empty((len(keys), dims), dtype=np.float32)
    width = dims if dims is not None else 0     # the first vector's when not given (matrix is None until then)
    found: list[int] = []
    for start in range(0, len(keys), PARAMETERS):
        chunk = keys[start:start + PARAMETERS]
        for vid, blob in conn.execute(
                f"SELECT id, vector FROM vectors WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            if matrix is None:
                width = len(blob) // 4
                matrix = np.empty((len(keys), width), dtype=np.float32)
            if len(blob) == 4 * width:
                matrix[len(found)] = np.frombuffer(blob, dtype="<f4")
                found.append(vid)
    if matrix is None:
        matrix = np.zeros((0, 0), dtype=np.float32)
    return np.asarray(found, dtype=np.int64), matrix[:len(found)]


def scan_vectors(conn: Any, space: str, dims: int, *, after: int, limit: int
                 ) -> tuple[int, int, np.ndarray, np.ndarray]:
    """The next `limit` rows of `space` past the id `after`, in key order: (how many rows were read, the
    last id read — `after` when none was —, the ids of the vectors `dims` wide among them, and those
    vectors as one matrix)."""
    rows = conn.execute("SELECT id, vector FROM vectors WHERE space = ? AND id > ? ORDER BY id LIMIT ?",
                        (space, after, limit)).fetchall()
    keep = [(vid, blob) for vid, blob in rows if len(blob) == 4 * dims]
    ids = np.asarray([vid for vid, _ in keep], dtype=np.int64)
    matrix = (np.frombuffer(b"".join(blob for _, blob in keep), dtype="<f4").reshape(len(keep), dims) if keep
              else np.zeros((0, dims), dtype=np.float32))
    return len(rows), (rows[-1][0] if rows else after), ids, matrix
