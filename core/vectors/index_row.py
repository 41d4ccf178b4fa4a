"""The installed semantic index of a space as its row in `semantic_index` reads it: what a search loads,
what `crewlet index status` shows, and whether the index still serves the corpus as it is. numpy is loaded
only when the centroids themselves are asked for, so a status read costs no more than its SQL.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


@dataclass
class IndexRow:
    """The installed index of one space, as this node applied it."""

    space: str
    generation: int
    lists: int
    width: int
    centroid_bytes: bytes
    probes: int
    ranges: list[list[int]]
    refiled: int
    trained_sources: int
    fullest: int
    measured: dict[str, Any]
    trained_at: int
    measured_at: int

    @cached_property
    def centroids(self) -> np.ndarray:
        """(lists, width) uint8: decoded when asked for, so reading the row's summary needs no numpy."""
        import numpy as np

        return np.frombuffer(self.centroid_bytes, dtype=np.uint8).reshape(self.lists, self.width)

    @property
    def batches(self) -> int:
        return len(self.ranges)

    @property
    def refiling(self) -> bool:
        return self.refiled < self.batches

    def summary(self) -> dict[str, Any]:
        return {"space": self.space, "generation": self.generation, "lists": self.lists, "probes": self.probes,
                "batches": self.batches, "refiled": self.refiled, "trained_sources": self.trained_sources,
                "fullest": self.fullest, "trained_at": self.trained_at, "measured_at": self.measured_at,
                "measured": self.measured}


def read_index(conn: Any, space: str) -> IndexRow | None:
    try:
        r = conn.execute("SELECT * FROM semantic_index WHERE space = ?", (space,)).fetchone()
    except Exception as exc:  # a store from before the index (eval reads any copy): no index
        if "no such table" in str(exc):
            return None
        raise
    if r is None:
        return None
    return IndexRow(r["space"], r["generation"], r["lists"], r["width"], bytes(r["centroids"]), r["probes"],
                    json.loads(r["ranges"]), r["refiled"], r["trained_sources"], r["fullest"],
                    json.loads(r["measured"]), r["trained_at"], r["measured_at"])


# A search reads through the index only while the corpus is at most this many times the size its latest
# measurement saw; past it the index is unmeasured on the corpus as it is (a training at 2,048 sources
# recalled 0.963 against a 0.98 floor at 6,154), so the scan answers until the duty measures it again
# or retrains it. The duty measures again at a tenth of growth (duty.REMEASURE_SHARE), well before this.
SERVE_GROWTH = 1.25


def measured_sources(row: IndexRow) -> int:
    """The corpus size the index's latest measurement (its training's, or a re-measurement's) saw."""
    return int(row.measured.get("sources") or row.trained_sources)


def serves(measured: int, live: int) -> bool:
    """Does a search read through an index measured over `measured` sources, at `live` sources now?"""
    return live <= measured * SERVE_GROWTH


def index_key(conn: Any, space: str) -> tuple[int, int, int, int] | None:
    """(generation, batches re-filed, probes, sources measured): what a code table compares to know
    whether to reload."""
    try:
        r = conn.execute("SELECT generation, refiled, probes, COALESCE(json_extract(measured, '$.sources'), "
                         "trained_sources) FROM semantic_index WHERE space = ?", (space,)).fetchone()
    except Exception as exc:
        if "no such table" in str(exc):
            return None
        raise
    return (r[0], r[1], r[2], int(r[3] or 0)) if r else None
