"""How well the two-stage search recovers the exact ranking: the floor it must meet, and the measurement
the index's training, its daily re-measurement and `crewlet search eval` all use.

The method (spec 000): query documents sampled from the corpus, each searched with its own vector, never
counted as its own answer; the ground truth is the exact scan's own top 150 (no judgement authored);
recall is the share of that top 150 the two-stage search returns (a document tied with the 150th exact
score counts as found), and a head miss is a document of the exact top ten the search drops. Because
stage two reranks exactly, a candidate of the exact top 150 is always returned: recall is decided by
stage one's 1,200 candidates alone, so a measurement needs no rerank.

Every shape a search is issued in is measured against its own floor, at the size of the corpus it
searches: unfiltered; narrowed to each source kind (crewlet has one, the page, so that shape is the
whole corpus, searched as an unfiltered search is); narrowed to the query's own container.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .. import semantic

FLOOR_CURVE = ((20_000, 0.98), (120_000, 0.93), (500_000, 0.88))
# No held-out query may fall below this recall through the index — or below what the full scan recalls for
# it, when the sign codes themselves cannot reach this (the index is not to blame for those): a mean over 25
# queries hid one at 0.447 while the scan recalled it at 0.973.
WORST_FLOOR = 0.85
DEPTH = semantic.STAGE_TWO        # recall at 150
HEAD = 10                         # no document of the exact top ten may be dropped
QUERIES = 25
SHAPES = ("unfiltered", "source:page", "container:page")


def floor(sources: int) -> float:
    """The recall floor for a corpus of `sources`: 0.98 at 20,000, 0.93 at 120,000, 0.88 at 500,000,
    straight lines in log N between them, flat beyond the ends."""
    (n0, f0), *_ = FLOOR_CURVE
    if sources <= n0:
        return f0
    for (a, fa), (b, fb) in zip(FLOOR_CURVE, FLOOR_CURVE[1:]):
        if sources <= b:
            t = (math.log(sources) - math.log(a)) / (math.log(b) - math.log(a))
            return fa + t * (fb - fa)
    return FLOOR_CURVE[-1][1]


@dataclass
class Case:
    """One query document: its row in the table, its code, and its exact cosine to every row."""

    row: int
    code: np.ndarray
    scores: np.ndarray
    container: int
    dist: np.ndarray | None = None      # its Hamming distance to every row (computed once)
    scan: dict[str, float] = field(default_factory=dict)   # its recall with the full scan, per shape
    # what does not change from one probe count to the next, worked out once: the rows each shape admits,
    # the exact scores at the depth and at the head, the list order of its code under an index
    admitted: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    cuts: dict[str, tuple[int, float, int, float, int]] = field(default_factory=dict, repr=False)
    order: tuple[Any, np.ndarray] | None = field(default=None, repr=False)   # (the index it was taken under, it)

    def floor(self, shape: str) -> float:
        """The least this query may recall through the index in `shape` (see WORST_FLOOR)."""
        return min(WORST_FLOOR, self.scan.get(shape, WORST_FLOOR))


@dataclass
class ShapeResult:
    shape: str
    recall: float
    worst: float
    head_misses: int
    floor: float
    queries: int
    scanned: int              # queries a narrowed search answered with the full scan
    size: int                 # the corpus it searches (the median over its queries)
    lists_read: float = 0.0   # mean lists read by the queries that did not scan
    below: int = 0            # queries below their own floor (WORST_FLOOR, or the scan's recall when lower)
    worst_floor: float = WORST_FLOOR
    codes_read: float = 0.0   # mean codes read by the queries that did not scan

    @property
    def passed(self) -> bool:
        return self.recall >= self.floor and self.head_misses == 0 and self.below == 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"passed": self.passed}


@dataclass
class Measurement:
    """One probe count measured in every shape."""

    probes: int | None                  # None: the full scan as the first stage
    shapes: dict[str, ShapeResult] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.shapes.values())

    def worst(self) -> ShapeResult:
        """The shape furthest below (or least above) its floor; a head miss, then a query below its own
        floor, counts first."""
        return min(self.shapes.values(), key=lambda s: (s.head_misses == 0, s.below == 0, s.recall - s.floor))

    def to_json(self) -> dict[str, Any]:
        return {"probes": self.probes, "passed": self.passed,
                "shapes": {k: v.to_json() for k, v in self.shapes.items()}}


def _cut(case: Case, pool: np.ndarray) -> tuple[int, float, int, float, int]:
    """(depth, the exact score at it, head, the exact score at it, pool size) of `pool` (rows)."""
    depth = min(DEPTH, len(pool))
    if depth == 0:
        return 0, 0.0, 0, 0.0, 0
    truth = case.scores[pool]
    kth = float(np.partition(truth, len(truth) - depth)[len(truth) - depth])
    head = min(HEAD, len(pool))
    tenth = float(np.partition(truth, len(truth) - head)[len(truth) - head])
    return depth, kth, head, tenth, len(pool)


def _score(case: Case, cands: np.ndarray, cut: tuple[int, float, int, float, int]) -> tuple[float, int]:
    """(recall@150, head misses) of candidate rows against the exact ranking the `cut` was taken of."""
    depth, kth, head, tenth, _ = cut
    if depth == 0:
        return 1.0, 0
    got = case.scores[cands]
    recall = min(depth, int(np.count_nonzero(got >= kth))) / depth
    misses = max(0, head - int(np.count_nonzero(got >= tenth)))
    return recall, misses


def measure(table: semantic.CodeTable, cases: list[Case], probes: int | None, *,
            stage_one: int = semantic.STAGE_ONE, min_rows: int | None = None) -> Measurement:
    """Every shape at `probes` lists (None: the full scan) through `table`'s index. Each query is also held
    to its own floor (Case.floor: WORST_FLOOR, or its full-scan recall when lower), so an index is judged by
    its worst query and not only by the mean."""
    out = Measurement(probes)
    alive = table.alive[:table.n]
    per: dict[str, list[tuple[float, int, bool, int, int, bool, int]]] = {s: [] for s in SHAPES}
    for case in cases:
        if case.dist is None:
            case.dist = table.distances(case.code)
        if not case.admitted:
            admitted_all = alive.copy()
            admitted_all[case.row] = False
            case.admitted = {"all": admitted_all,
                             "own": admitted_all & (table.containers[:table.n] == case.container)}
        order = None
        if probes is not None and table.index is not None:
            if case.order is None or case.order[0] is not table.index:
                case.order = (table.index, semantic.list_order(table.index, case.code))
            order = case.order[1]
        for shape in SHAPES:
            narrowed = shape.startswith("container:")
            admitted = case.admitted["own" if narrowed else "all"]
            if shape not in case.cuts:
                pool = np.flatnonzero(admitted)
                case.cuts[shape] = _cut(case, pool)
                if shape not in case.scan:        # what the sign codes alone recall for it
                    case.scan[shape] = _score(case, semantic.nearest(case.dist[pool], pool, table.ids, stage_one),
                                              case.cuts[shape])[0]
            cut = case.cuts[shape]
            rows, lists_read = (None, 0) if probes is None else semantic.rows_to_read(
                table, case.code, admitted if narrowed else None, probes, order=order, min_rows=min_rows)
            scanned = rows is None
            rows = np.flatnonzero(admitted) if rows is None else rows[admitted[rows]]
            cands = semantic.nearest(case.dist[rows], rows, table.ids, stage_one)
            recall, misses = _score(case, cands, cut)
            per[shape].append((recall, misses, scanned, cut[4] + 1, lists_read,
                               recall < case.floor(shape) - 1e-9, len(rows)))
    for shape, results in per.items():
        if not results:
            continue
        sizes = sorted(r[3] for r in results)
        read = [r[4] for r in results if not r[2]]
        codes = [r[6] for r in results if not r[2]]
        out.shapes[shape] = ShapeResult(
            shape, recall=float(np.mean([r[0] for r in results])), worst=float(min(r[0] for r in results)),
            head_misses=int(sum(r[1] for r in results)),
            floor=float(np.mean([floor(r[3]) for r in results])), queries=len(results),
            scanned=sum(1 for r in results if r[2]) if probes is not None else len(results),
            size=sizes[len(sizes) // 2], lists_read=float(np.mean(read)) if read else 0.0,
            below=sum(1 for r in results if r[5]), codes_read=float(np.mean(codes)) if codes else 0.0)
    return out


def ladder(lists: int) -> list[int]:
    """Probe counts to try, up to half the lists: 1, 2, 3, 4, 6, 8, 12, 16, … (then refined by halving)."""
    out, p = [], 1
    while p <= lists // 2:
        out.append(p)
        p = p + 1 if p < 4 else (p * 3 // 2 if p % 2 == 0 and (p & (p - 1)) == 0 else p * 4 // 3)
    if lists // 2 >= 1 and (not out or out[-1] != lists // 2):
        out.append(lists // 2)
    return sorted(set(out))


def smallest_passing(table: semantic.CodeTable, cases: list[Case]) -> tuple[int | None, Measurement]:
    """The smallest probe count (at most half the lists) at which every shape meets its floor with no
    head miss and no query below its own floor, and its measurement; (None, the measurement at half the
    lists) when none does. The count is found by the lists alone (never the READ_FACTOR codes a search
    reads however few lists it asks for: an index is installed on its own merit), and the measurement
    returned is of the search as it runs, those codes included."""
    assert table.index is not None
    lists = len(table.index.centroids)
    steps = ladder(lists)
    results: dict[int, Measurement] = {}

    def at(p: int) -> Measurement:
        if p not in results:
            results[p] = measure(table, cases, p, min_rows=0)
        return results[p]

    last_fail = 0
    for p in steps:
        if at(p).passed:
            lo, hi = last_fail + 1, p           # refine between the last failing step and this one
            while lo < hi:
                mid = (lo + hi) // 2
                if at(mid).passed:
                    hi = mid
                else:
                    lo = mid + 1
            return hi, measure(table, cases, hi)
        last_fail = p
    return None, at(steps[-1] if steps else 1)
