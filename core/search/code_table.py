"""A space's code table in memory: each source's sign code, id, container, list and liveness in numpy arrays
that grow in place as the vector log moves (`CodeTable`), the source ids as fixed-width bytes (`Sources`), each
live source's row (`RowOf`), and the installed semantic index as a search reads it (`IndexView`).

The search by meaning (semantic.py) fills and reads it; the code file (code_file.py) keeps it whole on disk for
the next process. Both import it; it imports neither.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..vectors.hamming import hamming


class Sources:
    """Each row's source (page) id, as fixed-width bytes in one numpy array (a Python str a row was ~73 bytes
    of the table's memory at a million sources, this is 16): reads as the list of str it stands for."""

    def __init__(self, capacity: int = 0, width: int = 16) -> None:
        self.data = np.zeros(capacity, dtype=f"S{width}")
        self.n = 0

    def _fit(self, need: int, width: int) -> None:
        cap, w = len(self.data), self.data.dtype.itemsize
        if need <= cap and width <= w:
            return
        new = np.zeros(max(need, cap * 2 if need > cap else cap, 1024), dtype=f"S{max(width, w)}")
        new[:self.n] = self.data[:self.n]
        self.data = new

    def extend(self, sources: list[str]) -> None:
        encoded = np.array([x.encode("utf-8", "surrogatepass") for x in sources], dtype=bytes) if sources else None
        if encoded is None:
            return
        self._fit(self.n + len(encoded), encoded.dtype.itemsize)
        self.data[self.n:self.n + len(encoded)] = encoded
        self.n += len(encoded)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, slice):
            return [b.decode("utf-8", "surrogatepass") for b in self.data[:self.n][at].tolist()]
        if at < 0:
            at += self.n
        if not 0 <= at < self.n:
            raise IndexError(at)
        return self.data[at].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Any:
        return iter(self[:])


class RowOf:
    """Each live source's row: a sorted array of the sources and their rows (built when first asked, from
    the table's live rows) and a dict of what changed since — what a dict of a million str keys was, in a
    fifth of the memory. Reads as that dict (`get`, `in`, `[]`)."""

    REBUILD = 65_536                                   # changes kept beside the sorted arrays before a rebuild

    def __init__(self, table: CodeTable) -> None:
        self.table = table
        self.keys: np.ndarray | None = None            # sorted sources (bytes) of the live rows when built
        self.rows = np.zeros(0, dtype=np.int64)
        self.changed: dict[bytes, int] = {}            # since: source -> row, or -1 for gone

    def _base(self) -> None:
        t = self.table
        live = np.flatnonzero(t.alive[:t.n])
        keys = t.source_data[live]
        order = np.argsort(keys, kind="stable")
        self.keys, self.rows, self.changed = keys[order], live[order], {}

    @staticmethod
    def _key(source: str) -> bytes:
        return source.encode("utf-8", "surrogatepass")

    def _lookup(self, key: bytes) -> int | None:
        got = self.changed.get(key)
        if got is not None:
            return got if got >= 0 else None
        if self.keys is None:
            self._base()
        assert self.keys is not None
        i = int(np.searchsorted(self.keys, key))
        if i < len(self.keys) and self.keys[i] == key:
            row = int(self.rows[i])
            return row if self.table.alive[row] else None
        return None

    def get(self, source: str, default: int | None = None) -> int | None:
        found = self._lookup(self._key(source))
        return default if found is None else found

    def __contains__(self, source: object) -> bool:
        return isinstance(source, str) and self._lookup(self._key(source)) is not None

    def __getitem__(self, source: str) -> int:
        found = self.get(source)
        if found is None:
            raise KeyError(source)
        return found

    def __bool__(self) -> bool:
        return self.table.live > 0

    def set(self, source: str, row: int) -> None:
        if self.keys is None:                          # nothing built yet: built from the rows when first asked
            return
        self.changed[self._key(source)] = row
        if len(self.changed) > max(self.REBUILD, self.table.n // 8):
            self.keys = None

    def drop(self, source: str) -> None:
        if self.keys is not None:
            self.changed[self._key(source)] = -1


@dataclass
class CodeTable:
    """One embedding space's codes, in memory (row-major bytes), growing in place as the log moves.

    Rows are never reordered while the table lives: a replaced or dropped source's row is marked dead.
    `row_of` maps each live source to its row. What it holds is what stage one needs — a code (48 bytes a
    source at 384 dimensions), its id, container, list and liveness, and its source id as fixed-width bytes
    (about 80 bytes a row in all); the float vectors stay in the database, read by key for stage two."""

    space: str
    seq: int                                    # the vector-log position it reflects
    width: int                                  # bytes a code
    codes: np.ndarray                           # (capacity, width) uint8
    ids: np.ndarray                             # (capacity,) vectors.id
    containers: np.ndarray                      # (capacity,) an index into container_names
    alive: np.ndarray                           # (capacity,) bool
    lists: np.ndarray                           # (capacity,) the row's list under `index`, -1: not filed by it
    sources: Sources = field(default_factory=Sources)
    container_names: list[str] = field(default_factory=list)
    n: int = 0                                  # rows used (live and dead)
    live: int = 0
    index: IndexView | None = None            # the installed semantic index, when there is one
    index_key: tuple[int, int, int, int] | None = None
    version: int = 0                            # moves whenever a row is added or killed
    _container_index: dict[str, int] = field(default_factory=dict, repr=False)
    row_of: RowOf = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.row_of = RowOf(self)

    @classmethod
    def empty(cls, space: str, seq: int, width: int, capacity: int = 0) -> CodeTable:
        table = cls(space, seq, width, np.zeros((capacity, width), dtype=np.uint8), np.zeros(capacity, np.int64),
                    np.zeros(capacity, np.int32), np.zeros(capacity, bool), np.full(capacity, -1, np.int32))
        table.sources = Sources(capacity)
        return table

    @property
    def size(self) -> int:
        return self.n

    @property
    def source_data(self) -> np.ndarray:
        return self.sources.data

    def container_id(self, name: str) -> int:
        index = self._container_index
        if len(index) != len(self.container_names):
            index.clear()
            index.update((c, i) for i, c in enumerate(self.container_names))
        found = index.get(name)
        if found is None:
            found = index[name] = len(self.container_names)
            self.container_names.append(name)
        return found

    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = len(self.ids)
        if need <= cap:
            return
        cap = max(need, cap * 2, 1024)
        for name in ("codes", "ids", "containers", "alive", "lists"):
            old = getattr(self, name)
            new = np.empty((cap,) + old.shape[1:], dtype=old.dtype)   # rows past n are written by append
            new[:self.n] = old[:self.n]
            setattr(self, name, new)

    def append(self, ids: list[int], sources: list[str], containers: list[str], codes: bytes,
               lists: list[int] | None = None, *, fresh: bool = False) -> None:
        """Add rows (codes: the rows' code bytes concatenated, in order; lists: each row's list under the
        table's index, -1 where it is not filed by it). `fresh`: the caller knows no source is in the table
        yet nor twice among these (a whole load), so nothing is looked up."""
        k = len(ids)
        if not k:
            return
        if len(codes) != k * self.width:
            raise ValueError(f"{len(codes)} code bytes for {k} rows of {self.width}-byte codes")
        replaced = [] if fresh or not self.live else [self.row_of.get(s) for s in sources]
        self._reserve(k)
        lo, hi = self.n, self.n + k
        self.codes[lo:hi] = np.frombuffer(codes, dtype=np.uint8).reshape(k, self.width)
        self.ids[lo:hi] = ids
        self.containers[lo:hi] = [self.container_id(c) for c in containers]
        self.alive[lo:hi] = True
        self.lists[lo:hi] = -1 if lists is None else lists
        self.version += 1
        self.sources.extend(sources)
        self.n, self.live = hi, self.live + k
        if fresh:
            return
        seen: dict[str, int] = {}
        for row, source in enumerate(sources, lo):
            old = seen.get(source)
            if old is None and replaced:
                old = replaced[row - lo]
            if old is not None:
                self.kill(old)
            seen[source] = row
            self.row_of.set(source, row)

    def kill(self, row: int) -> None:
        if self.alive[row]:
            self.alive[row] = False
            self.live -= 1
            self.version += 1
            self.row_of.drop(self.sources[row])

    def distances(self, q: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Hamming distances from the code `q` to every row (rows=None) or to `rows`, in that order."""
        if rows is None:
            return hamming(self.codes[:self.n], q)
        # np.take copies whole rows (numpy's fancy indexing measured ~10× slower for the same gather)
        return hamming(np.take(self.codes, rows, axis=0), q)


@dataclass
class IndexView:
    """The semantic index as a search reads it: centroids, how many lists an unfiltered search reads, and
    (derived from the table's `lists`, again whenever the table changed) each list's live rows."""

    generation: int
    centroids: np.ndarray                       # (lists, width) uint8
    probes: int
    measured_sources: int = 0                   # the corpus its latest measurement saw (0: unknown)
    members: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # filed live rows by list
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))   # list l: members[o[l]:o[l+1]]
    sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    unfiled: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # live rows no list holds yet
    _version: int = -1

    @property
    def count(self) -> int:
        return len(self.centroids)

    def prepare(self, table: CodeTable) -> None:
        if self._version == table.version:
            return
        n = table.n
        lists, alive = table.lists[:n], table.alive[:n]
        filed = np.flatnonzero(alive & (lists >= 0))
        self.members = filed[np.argsort(lists[filed], kind="stable")]
        self.sizes = np.bincount(lists[filed], minlength=self.count).astype(np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.unfiled = np.flatnonzero(alive & (lists < 0))
        self._version = table.version
