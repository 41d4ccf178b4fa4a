"""The semantic index as replicated state: its records on the vector log, and how every node applies them.

- `index.install` — a trained index for one embedding space: its centroids, how many lists a search
  reads, the re-filing batches its training fixed (ranges of vectors.id, about 1,000 rows each) and the
  measurement that installed it. Its generation is the record's own log position. Applying it files no
  row: every code keeps its old list until its batch applies, and a search reads those rows in full.
- `index.refile` — one batch: the lists the training computed for the rows it saw in the range (a row
  put since is filed from the centroids as the batch applies). Ignored once another generation is in.
- `index.measure` — the daily re-measurement: how many lists a search reads now.
- `index.retire` — the index is withdrawn (the corpus fell below 1,024 sources, or no count of lists
  within half of them meets the floor any more and a retraining did not either): the scan answers.

A vector put while an index is installed is filed as it applies (its nearest centroid, the lower list on
a tie), so a search never waits for a batch to find a new document.
"""
from __future__ import annotations

import base64
import json
import threading
from typing import TYPE_CHECKING, Any

from ..log import Record
# the installed index as its row reads it lives in .index_row (no numpy until the centroids are asked for)
from .index_row import SERVE_GROWTH, IndexRow, index_key, measured_sources, read_index, serves  # noqa: F401

if TYPE_CHECKING:
    import numpy as np
# numpy (and the Hamming kernel, which loads it) is imported by the functions that use it: the vector log's
# kinds are declared with these builders and handlers (vectors/kinds.py), and a node that opens — or a repair
# that reads the declarations — applies no index record

ACTOR = "embedding-duty"
INSTALL, REFILE, MEASURE, RETIRE = "index.install", "index.refile", "index.measure", "index.retire"
RECORD_TYPES = (INSTALL, REFILE, MEASURE, RETIRE)


def _b64(array: np.ndarray) -> str:
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def _array(text: str, dtype: str) -> np.ndarray:
    import numpy as np

    return np.frombuffer(base64.b64decode(text), dtype=dtype)


# -- records ---------------------------------------------------------------------------------------------

def install_record(space: str, centroids: np.ndarray, probes: int, ranges: list[tuple[int, int]],
                   trained_sources: int, fullest: int, measured: dict[str, Any], at: int) -> Record:
    import numpy as np

    return Record.new(INSTALL, ACTOR, {
        "space": space, "lists": int(len(centroids)), "width": int(centroids.shape[1]),
        "centroids": _b64(centroids.astype(np.uint8)), "probes": int(probes),
        "ranges": [[int(lo), int(hi)] for lo, hi in ranges], "trained_sources": int(trained_sources),
        "fullest": int(fullest), "measured": measured, "at": int(at)})


def refile_record(space: str, generation: int, batch: int, lo: int, hi: int, ids: np.ndarray,
                  lists: np.ndarray) -> Record:
    import numpy as np

    return Record.new(REFILE, ACTOR, {
        "space": space, "generation": int(generation), "batch": int(batch), "lo": int(lo), "hi": int(hi),
        "ids": _b64(np.asarray(ids, dtype="<i8")), "lists": _b64(np.asarray(lists, dtype="<i4"))})


def measure_record(space: str, generation: int, probes: int, measured: dict[str, Any], at: int) -> Record:
    return Record.new(MEASURE, ACTOR, {"space": space, "generation": int(generation), "probes": int(probes),
                                       "measured": measured, "at": int(at)})


def retire_record(space: str, generation: int, reason: str) -> Record:
    return Record.new(RETIRE, ACTOR, {"space": space, "generation": int(generation), "reason": reason})


# -- reading ---------------------------------------------------------------------------------------------

def list_counts(conn: Any, generation: int) -> np.ndarray:
    """Codes per list under `generation` (the covering index: no code is read)."""
    import numpy as np

    rows = conn.execute("SELECT list, count(*) FROM vector_codes WHERE generation = ? GROUP BY list",
                        (generation,)).fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64)
    out = np.zeros(max(r[0] for r in rows) + 1, dtype=np.int64)
    for lst, count in rows:
        out[lst] = count
    return out


# -- applying --------------------------------------------------------------------------------------------

_cache_lock = threading.Lock()
_centroid_cache: dict[tuple[int, str, int, int], np.ndarray] = {}


def _centroids(conn: Any, space: str) -> tuple[int, np.ndarray] | None:
    """The installed index's (generation, centroids) for `space`, cached per connection and generation."""
    r = conn.execute("SELECT generation, lists, width, trained_at FROM semantic_index WHERE space = ?",
                     (space,)).fetchone()
    if r is None:
        return None
    key = (id(conn), space, int(r[0]), int(r[3]))
    with _cache_lock:
        found = _centroid_cache.get(key)
        if found is None or found.shape != (r[1], r[2]):
            import numpy as np

            blob = conn.execute("SELECT centroids FROM semantic_index WHERE space = ?", (space,)).fetchone()[0]
            found = np.frombuffer(blob, dtype=np.uint8).reshape(r[1], r[2]).copy()
            if len(_centroid_cache) > 16:
                _centroid_cache.clear()
            _centroid_cache[key] = found
    return int(r[0]), found


def file_new_code(conn: Any, space: str, vector_id: int) -> None:
    """A code put while an index is installed goes straight into its list (no index: nothing to do)."""
    found = _centroids(conn, space)
    if found is None:
        return
    import numpy as np

    from .hamming import nearest_lists

    generation, centroids = found
    code = conn.execute("SELECT code FROM vector_codes WHERE id = ?", (vector_id,)).fetchone()[0]
    if len(code) != centroids.shape[1]:
        return  # a width the index was not trained on stays unfiled: searches read it in full
    lst = int(nearest_lists(np.frombuffer(code, dtype=np.uint8).reshape(1, -1), centroids)[0])
    conn.execute("UPDATE vector_codes SET list = ?, generation = ? WHERE id = ?", (lst, generation, vector_id))


def install(conn: Any, rec: Record) -> None:
    p = rec.payload
    lists, width = int(p["lists"]), int(p["width"])
    centroids = base64.b64decode(p["centroids"])
    if lists <= 0 or width <= 0 or len(centroids) != lists * width:
        raise ValueError("an index whose centroids do not match its shape")
    conn.execute(
        "INSERT INTO semantic_index (space, generation, lists, width, centroids, probes, ranges, refiled, "
        "trained_sources, fullest, measured, trained_at, measured_at) VALUES (?,?,?,?,?,?,?,0,?,?,?,?,?) "
        "ON CONFLICT(space) DO UPDATE SET generation = excluded.generation, lists = excluded.lists, "
        "width = excluded.width, centroids = excluded.centroids, probes = excluded.probes, "
        "ranges = excluded.ranges, refiled = 0, trained_sources = excluded.trained_sources, "
        "fullest = excluded.fullest, measured = excluded.measured, trained_at = excluded.trained_at, "
        "measured_at = excluded.measured_at",
        (p["space"], rec.seq, lists, width, centroids, int(p["probes"]), json.dumps(p["ranges"]),
         int(p["trained_sources"]), int(p["fullest"]), json.dumps(p["measured"]), int(p["at"]), int(p["at"])))


def refile(conn: Any, rec: Record) -> None:
    import numpy as np

    from .hamming import nearest_lists

    p = rec.payload
    found = _centroids(conn, p["space"])
    if found is None or found[0] != int(p["generation"]):
        return  # superseded (or retired): the batch files nothing
    generation, centroids = found
    known = dict(zip(_array(p["ids"], "<i8").tolist(), _array(p["lists"], "<i4").tolist()))
    rows = conn.execute(
        "SELECT c.id, c.code FROM vector_codes c JOIN vectors v ON v.id = c.id WHERE c.id BETWEEN ? AND ? "
        "AND v.space = ? AND (c.generation IS NOT ? OR c.list IS NULL)",
        (int(p["lo"]), int(p["hi"]), p["space"], generation)).fetchall()
    updates = [(known[r[0]], generation, r[0]) for r in rows if r[0] in known]
    unknown = [r for r in rows if r[0] not in known and len(r[1]) == centroids.shape[1]]
    if unknown:  # put after the training read them (and before this node filed them): file from the centroids
        codes = np.frombuffer(b"".join(r[1] for r in unknown), dtype=np.uint8).reshape(len(unknown), -1)
        updates += [(int(lst), generation, r[0]) for lst, r in zip(nearest_lists(codes, centroids), unknown)]
    conn.executemany("UPDATE vector_codes SET list = ?, generation = ? WHERE id = ?", updates)
    conn.execute("UPDATE semantic_index SET refiled = refiled + 1 WHERE space = ? AND generation = ?",
                 (p["space"], generation))


def measure(conn: Any, rec: Record) -> None:
    p = rec.payload
    conn.execute("UPDATE semantic_index SET probes = ?, measured = ?, measured_at = ? WHERE space = ? "
                 "AND generation = ?", (int(p["probes"]), json.dumps(p["measured"]), int(p["at"]), p["space"],
                                        int(p["generation"])))


def retire(conn: Any, rec: Record) -> None:
    p = rec.payload
    conn.execute("DELETE FROM semantic_index WHERE space = ? AND generation = ?", (p["space"], int(p["generation"])))
