"""Vectors as records on a log of their own (`log/vectors.log`), applied into the node's SQLite.

Embedding a page costs a provider call, the one thing in the search path a node cannot recompute on its
own; so the embedding duty publishes each vector as a record and every node that shares the logs applies
it. The records:

- `vector.put`: a source's vector in one embedding space, with what it was computed from (container,
  revision, the digest and size of exactly the bytes embedded) and its bucket. It replaces the source's
  vector in every space: a model change leaves the sources not yet refilled on the old space (a search
  filters on the space, so they are simply out of its candidate pool) until their new vector arrives.
- `vector.restamp`: the same vector, now standing for a newer revision or another container (a change
  that left the embedded text alone: no provider call). Applied only while the stored vector still has
  that digest.
- `vector.drop`: a source that no longer exists (purged).
- `index.install`, `index.refile`, `index.measure`, `index.retire`: the semantic index over the codes
  (core/vectors/index.py); a code put while an index is installed is filed in its list as it applies.

Each kind is declared once in vectors/kinds.py (builder, shape, handler, tables, give-back); `VECTORS` reads its
handlers and shapes off those declarations.

Applying a put writes the wide row (`vectors`, the float32 vector last) and the narrow sign code
(`vector_codes`, sqlite-vec's `vec_quantize_binary`), in the same transaction as the log position.
"""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from ..log import Record
from ..replica import engine
from ..store import Connection

if TYPE_CHECKING:
    import numpy as np
# numpy and the semantic index's records (index.py, whose handlers load numpy) are imported by
# the functions that use them: opening a node imports this module to apply the vector log, and a command
# that never touches a vector (`crewlet page show`, the app's first screen) should not pay for them

POSITION = "vectors"          # this log's row in log_position
DUTY_ACTOR = "embedding-duty"


def encode_vector(vector: np.ndarray) -> str:
    import numpy as np

    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    import numpy as np

    return np.frombuffer(base64.b64decode(text), dtype="<f4")


def put_record(source_id: str, space: str, container: str, revision: int, digest: str, nbytes: int,
               bucket: int, vector: np.ndarray, kind: str = "page") -> Record:
    """`kind`: "page", or "entry" for an entry's body (source_id `entry:<id>`, revision the entry row's version)."""
    return Record.new("vector.put", DUTY_ACTOR, {
        "source_id": source_id, "kind": kind, "space": space, "container": container, "revision": revision,
        "digest": digest, "bytes": nbytes, "bucket": bucket, "dims": int(len(vector)),
        "vector": encode_vector(vector)})


def restamp_record(source_id: str, space: str, container: str, revision: int, digest: str) -> Record:
    return Record.new("vector.restamp", DUTY_ACTOR, {"source_id": source_id, "space": space, "container": container,
                                                     "revision": revision, "digest": digest})


def drop_record(source_id: str) -> Record:
    return Record.new("vector.drop", DUTY_ACTOR, {"source_id": source_id})


# -- applying -------------------------------------------------------------------------------------------

def put(conn: Connection, rec: Record) -> None:
    p = rec.payload
    vector = decode_vector(p["vector"])
    dims = int(p["dims"])
    if len(vector) != dims or dims <= 0:
        return  # a malformed record files nothing (and never stops the log behind it)
    blob = vector.tobytes()
    conn.execute("DELETE FROM vector_codes WHERE id IN (SELECT id FROM vectors WHERE source_id = ?)", (p["source_id"],))
    conn.execute("DELETE FROM vectors WHERE source_id = ?", (p["source_id"],))
    cur = conn.execute(
        "INSERT INTO vectors (source_id, kind, space, container, revision, digest, bytes, bucket, dims, seq, vector) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (p["source_id"], p.get("kind", "page"), p["space"], p["container"], int(p["revision"]), p["digest"],
         int(p["bytes"]), int(p["bucket"]), dims, rec.seq, blob))
    conn.execute("INSERT INTO vector_codes (id, code) VALUES (?, vec_quantize_binary(vec_f32(?)))", (cur.lastrowid, blob))
    from . import index as ivf_store   # imported already by handlers(): a lookup, not a load

    ivf_store.file_new_code(conn, p["space"], cur.lastrowid)


def restamp(conn: Connection, rec: Record) -> None:
    p = rec.payload
    conn.execute("UPDATE vectors SET container = ?, revision = ?, seq = ? WHERE source_id = ? AND space = ? "
                 "AND digest = ?", (p["container"], int(p["revision"]), rec.seq, p["source_id"], p["space"], p["digest"]))


def drop(conn: Connection, rec: Record) -> None:
    source = rec.payload["source_id"]
    conn.execute("DELETE FROM vector_codes WHERE id IN (SELECT id FROM vectors WHERE source_id = ?)", (source,))
    conn.execute("DELETE FROM vectors WHERE source_id = ?", (source,))


def give_back_put(conn: Connection, seq: int, op: object, related: object) -> tuple[list[Record], str]:
    """A lost vector-log record, when it filed a vector the database still holds (its `seq`): given back as the
    put that files exactly that row (a restamp moved the row's seq too: a put of the row as it is replays alike)."""
    from ..replica.kinds import CannotSay

    row = conn.execute("SELECT * FROM vectors WHERE seq = ?", (seq,)).fetchone()
    if row is None:
        raise CannotSay(f"it holds no vector filed by seq {seq} (a later put replaced it, or it was no put)")
    payload = {"source_id": row["source_id"], "kind": row["kind"], "space": row["space"], "container": row["container"],
               "revision": row["revision"], "digest": row["digest"], "bytes": row["bytes"], "bucket": row["bucket"],
               "dims": row["dims"], "vector": base64.b64encode(bytes(row["vector"])).decode("ascii")}
    return [Record.new("vector.put", DUTY_ACTOR, payload)], ""


def position(conn: Connection) -> tuple[int, int]:
    return engine.position(conn, POSITION)


# -- reading --------------------------------------------------------------------------------------------

def coverage(conn: Connection, space: str) -> tuple[int, int]:
    """(live pages with a current vector in `space`, live pages): current means computed from the page's
    present revision in its present container. Read off the counts the rows keep (store/migrations.py
    m008): a join over every page and vector was a second at a million pages."""
    row = conn.execute("SELECT current FROM vector_counts WHERE space = ?", (space,)).fetchone()
    live = conn.execute("SELECT coalesce(sum(live), 0) FROM page_spaces").fetchone()[0]
    return int(row[0]) if row else 0, int(live)


def spaces(conn: Connection) -> dict[str, int]:
    """Every embedding space the stored vectors are in, with how many sources each holds."""
    return {r[0]: r[1] for r in conn.execute("SELECT space, sources FROM vector_counts WHERE sources > 0 "
                                             "ORDER BY space")}


def sources(conn: Connection, space: str) -> int:
    """How many sources have a vector in `space` (off the kept counts)."""
    row = conn.execute("SELECT sources FROM vector_counts WHERE space = ?", (space,)).fetchone()
    return int(row[0]) if row else 0
