"""The vector log's record kinds: one declaration each (core/replica/kinds.py `RecordKind`).

The vector log files derived rows nobody waits on (the engine's FilingApplier: no outcome is stored, a record of
another shape files nothing). Its shapes and handlers (vectors/applier.py `VECTORS`), the tables a repair's
replay compares, and how a repair gives a lost record back (core/recover.py `give_back_vector`, which asks each
kind that can in turn: the log keeps no outcome naming a lost record's kind) are read off these.

Importing this loads no numpy: the index's builders and handlers import it when they run.
"""
from __future__ import annotations

from typing import Any

from ..log import Record
from ..replica.kinds import LOST_SHAPE, LogKinds, RecordKind, tombstone
from ..replica.shapes import DICT, INT, LIST, TEXT, may, need
from . import index
from . import records as vec

# an index record is derived from the vectors a training read: a database keeps the index it installed, not the
# records that built it, and the next training (or the daily measure) writes the index anew
_NOT_KEPT = "the index's records are not kept by the rows they file: the next training or measure writes them anew"


def _files_nothing(conn: Any, rec: Record) -> None:
    """A repair's tombstone on the vector log: nothing to file (no outcome is stored on a filing log)."""


KINDS = LogKinds("vectors", kinds=[
    RecordKind("vector.put", vec.put_record, writes=("vectors", "vector_codes"),
               shape={"source_id": need(TEXT), "kind": may(TEXT), "space": need(TEXT), "container": need(TEXT),
                      "revision": need(INT), "digest": need(TEXT), "bytes": need(INT), "bucket": need(INT),
                      "dims": need(INT), "vector": need(TEXT)},
               handle=vec.put, give_back=vec.give_back_put),
    RecordKind("vector.restamp", vec.restamp_record, writes=("vectors",),
               shape={"source_id": need(TEXT), "space": need(TEXT), "container": need(TEXT), "revision": need(INT),
                      "digest": need(TEXT)},
               handle=vec.restamp,
               give_back="a restamp moves the row's seq: the put given back for that seq files the row as it is"),
    RecordKind("vector.drop", vec.drop_record, writes=("vectors", "vector_codes"), shape={"source_id": need(TEXT)},
               handle=vec.drop, give_back="a drop leaves no row to read it back from"),
    RecordKind(index.INSTALL, index.install_record, writes=("semantic_index",),
               shape={"space": need(TEXT), "lists": need(INT), "width": need(INT), "centroids": need(TEXT),
                      "probes": need(INT), "ranges": need(LIST, items=LIST), "trained_sources": need(INT),
                      "fullest": need(INT), "measured": need(DICT), "at": need(INT)},
               handle=index.install, give_back=_NOT_KEPT),
    RecordKind(index.REFILE, index.refile_record, writes=("vector_codes", "semantic_index"),
               shape={"space": need(TEXT), "generation": need(INT), "lo": need(INT), "hi": need(INT),
                      "ids": need(TEXT), "lists": need(TEXT)},
               handle=index.refile, give_back=_NOT_KEPT),
    RecordKind(index.MEASURE, index.measure_record, writes=("semantic_index",),
               shape={"space": need(TEXT), "generation": need(INT), "probes": need(INT), "measured": need(DICT),
                      "at": need(INT)},
               handle=index.measure, give_back=_NOT_KEPT),
    RecordKind(index.RETIRE, index.retire_record, writes=("semantic_index",),
               shape={"space": need(TEXT), "generation": need(INT)},
               handle=index.retire, give_back=_NOT_KEPT),
    RecordKind("log.lost", tombstone, writes=(), shape=LOST_SHAPE, handle=_files_nothing,
               give_back="a tombstone on the vector log files nothing a database could read it back from"),
])
