"""The semantic retriever: two stages over this node's replicated vectors.

Stage one ranks the narrow table of 1-bit sign codes by Hamming distance to the query's own code and
keeps the nearest 1,200; stage two reranks those candidates with an int8 copy of their vectors held in
memory down to 200 (the depth, 150, and a margin of 50), scores those exactly against their float vectors
read from the space's vector file (core/search/vector_file.py), and returns 150 by exact cosine. A node
whose int8 copy would not fit in node.toml's `rerank_memory_mb` reads the 1,200 float vectors by primary
key instead, and its ranking says so. The score a hit shows is always the exact one: a sign code or an
int8 copy decides which documents are looked at, never how they are ordered.

Filters apply INSIDE stage one, before its cut: the embedding space (a model change leaves the sources
not yet refilled out of the pool rather than ranked badly), the access policy's containers and excluded
pages, and pages the rows say are trashed or auto-drafts. A filtered search therefore returns its
container's nearest pages even when they are far from the global nearest.

Once the corpus has a semantic index (core/search/ivf/), stage one reads only the rows of the lists
nearest the query's code, plus the rows no list holds yet (a re-filing in progress): an unfiltered
search reads as many lists as the index's measurement says, a narrowed one reads lists nearest first until
it has seen as many of its own rows as an unfiltered search reads, or scans past half the lists. An index
is read only while the corpus is at most 1.25 times what its latest measurement saw: grown past that, it
is unmeasured on the corpus as it is, and the scan answers until the duty measures it again or retrains.

Speed (bench/semantic.py measures each choice):

- The codes of a space are held in memory (the sqlite-vec table stays the record) and ranked by
  numkong's C popcount kernel (AVX-512 VPOPCNTQ / AVX2 where the CPU has them): at 40,000 × 3,072 bits
  a scan is ~0.7 ms where numpy's bitwise_count over the same rows is ~7 ms (numpy stays the path where
  numkong has no wheel; both are integer popcounts, so the distances are the same numbers). The cut is
  found from a histogram of the distances (small integers), not a partition.
- The table follows the vector log incrementally: only rows the log filed since the table's position
  are read (by `vectors.seq`), a replaced row is marked dead in place, and the whole table is read again
  only when rows vanished without a successor (a purge) or the change is most of the table.
- Ties at stage one's cut go to the lower `vectors.id`, so the candidates never depend on how rows
  happen to be laid out in memory.
- Stage two by id (past the memory bound) reads the candidates in one statement in primary-key order, each
  straight into one preallocated matrix, through SQLite's page cache (no memory map: see MMAP_BYTES below);
  through the vector file it reads 200 rows of one file by offset, one pread each.
- A new process reads its table from the space's file in the home when the database vouches for it, then
  the rows filed since (`open_table`, core/search/code_file.py): one sequential read instead of the code
  rows by id, whose pages lie between the wide rows'.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import AUTO_DRAFT_TITLE_PREFIX
from ..pages import reads
from ..vectors import records as vectors
from ..vectors.hamming import hamming, sign_code
from ..vectors.read import read_vectors
from . import code_file, vector_file
from .code_table import CodeTable, IndexView, RowOf, Sources  # noqa: F401 - the table is read through this module too
from .access import Access
from .stages import STAGE_ONE, STAGE_TWO
from .stamp import Stamp, read_stamp

if TYPE_CHECKING:
    from ..node import Node

# No memory map of the database (it was set here for stage two): every page faulted in through it brought
# its neighbours in the page cache into the process, and the narrow index's and the codes' pages lie between
# the wide rows' (written together, row by row). At 1,000,000 × 384 the code table's load left 1.7 GB of the
# file resident for ~150 MB read, and each search's 1,200 candidates ~70 MB more, until RSS was the file's
# size. Read through SQLite's page cache instead, stage two was no slower (docs/search.md, "Memory").
MMAP_BYTES = 1 << 40  # what a peer read in bench/semantic.py maps (SQLite caps it at its compiled maximum)
# A search through the index reads at least this many times stage one's depth in codes (READ_FACTOR ×
# STAGE_ONE), however few lists its measurement asked for: at a million sources 4 of 4,096 lists held
# about 1,084 codes — fewer than the 1,200 candidates stage one keeps — and the worst fresh query recalled
# 0.447. Measured (bench/ivf.py --factors, docs/search.md): the worst query stops improving past 8×.
READ_FACTOR = 8

def nearest(dist: np.ndarray, rows: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """The `k` rows of `rows` with the smallest `dist` (aligned with `rows`); ties at the cut go to the
    lower id, so the answer never depends on how rows are laid out. Returns rows, in no order.
    Distances are small integers: a histogram finds the cut without a partition."""
    if len(rows) <= k:
        return rows
    cum = np.cumsum(np.bincount(dist))
    cut = int(np.searchsorted(cum, k))
    below = np.flatnonzero(dist < cut)
    at = np.flatnonzero(dist == cut)
    need = k - len(below)
    if len(at) > need:
        at = at[np.argsort(ids[rows[at]], kind="stable")[:need]]
    return rows[np.concatenate([below, at])]


def list_order(index: IndexView, q: np.ndarray) -> np.ndarray:
    """The lists by their centroid's distance to the code `q`, nearest first (the lower list on a tie)."""
    dist = hamming(index.centroids, q)
    return np.lexsort((np.arange(index.count), dist))


def rows_to_read(table: CodeTable, q: np.ndarray, mask: np.ndarray | None, probes: int,
                 order: np.ndarray | None = None, min_rows: int | None = None) -> tuple[np.ndarray | None, int]:
    """Which rows stage one reads through the index: (rows, lists read), or (None, lists it would take)
    when the search must scan instead.

    An unfiltered search (`mask` None) reads its `probes` nearest lists, and more, nearest first, until it
    has read at least `min_rows` codes (READ_FACTOR × STAGE_ONE by default). A narrowed one reads lists
    nearest first until it has seen as many of its own rows (those `mask` admits) as the unfiltered
    search reads rows, and scans when that would take more than half the lists. Either way the rows
    no list holds yet (a re-filing in progress) are read in full beside the lists."""
    index = table.index
    assert index is not None
    index.prepare(table)
    order = list_order(index, q) if order is None else order
    probes = max(1, min(probes, index.count))
    floor_rows = READ_FACTOR * STAGE_ONE if min_rows is None else min_rows
    sizes = index.sizes[order]
    if floor_rows > 0:                                   # the lists that hold at least floor_rows codes
        probes = max(probes, min(index.count, int(np.searchsorted(np.cumsum(sizes), floor_rows)) + 1))
    if mask is None:
        need = probes
    else:
        target = int(sizes[:probes].sum())
        own = np.bincount(table.lists[index.members[mask[index.members]]], minlength=index.count)
        seen = np.cumsum(own[order])
        if target == 0:
            need = probes
        elif seen[-1] < target:
            need = index.count + 1                       # all its rows are fewer than the target: scan
        else:
            need = int(np.searchsorted(seen, target)) + 1
        if need > index.count // 2:
            return None, need
    chosen = order[:need]
    parts = [index.members[index.offsets[c]:index.offsets[c + 1]] for c in chosen]
    parts.append(index.unfiled)
    return np.sort(np.concatenate(parts)), need     # in row order: the gather walks memory forwards


LOAD_CHUNK = 65_536          # rows a whole load reads at once (memory: a chunk, not the table, of Python rows)


def load_table(conn: Any, space: str, seq: int) -> CodeTable:
    """The space's codes read whole, through the covering index (never the wide rows), with the semantic
    index when one is installed — a chunk of rows at a time, straight into the table's arrays (fetching a
    million rows as Python objects first held ~300 MB the allocator kept after)."""
    from ..vectors.index import index_key, measured_sources, read_index  # loads numpy: the semantic engine has it already

    row = read_index(conn, space)
    generation = row.generation if row is not None else None
    try:
        expected = vectors.sources(conn, space)
        cur = conn.execute(
            "SELECT v.id, v.source_id, v.container, c.code, CASE WHEN c.generation = ? THEN c.list END "
            "FROM vectors v INDEXED BY vectors_narrow JOIN vector_codes c ON c.id = v.id WHERE v.space = ? "
            "ORDER BY v.id", (generation, space))
    except Exception as exc:  # a store from before m005/m006/m008, read as it is (`crewlet search eval` on a backup)
        if "no such" not in str(exc):
            raise
        expected = 0
        cur = conn.execute(
            "SELECT v.id, v.source_id, v.container, c.code, NULL FROM vectors v JOIN vector_codes c ON c.id = v.id "
            "WHERE v.space = ? ORDER BY v.id", (space,))
    table: CodeTable | None = None
    while True:
        rows = cur.fetchmany(LOAD_CHUNK)
        if not rows:
            break
        if table is None:
            width = len(rows[0][3])
            # room for the embedding duty's next batches: a refresh appends in place instead of copying the table
            table = CodeTable.empty(space, seq, width, max(expected, len(rows)) + max(4096, expected // 8))
        table.append([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], b"".join(r[3] for r in rows),
                     [-1 if r[4] is None else r[4] for r in rows], fresh=True)
        del rows
    if table is None:
        table = CodeTable.empty(space, seq, 0, 4096)
    if row is not None and (not table.n or row.width == table.width):
        table.index = IndexView(row.generation, row.centroids, row.probes, measured_sources(row))
    table.index_key = index_key(conn, space)
    return table


def open_table(conn: Any, space: str, seq: int, cache_file: Path | None) -> CodeTable:
    """The space's table at log position `seq` for a process that has none yet: from its file (one
    sequential read, then the rows filed since) when the file can be trusted, else from the database —
    whose whole read is then kept in the file for the next process (core/search/code_file.py)."""
    from ..vectors.index import measured_sources, read_index

    if cache_file is not None:
        table = code_file.load(cache_file, space)
        # ahead of the database (a restored copy), or not made from it: not this database's file
        if table is not None and table.seq <= seq and code_file.vouched(conn, table):
            row = read_index(conn, space)
            if row is not None and row.width == table.width:
                table.index = IndexView(row.generation, row.centroids, row.probes, measured_sources(row))
            # the refresh reads the whole table instead when the file's index (generation, re-filing) is not
            # the database's, or its live count is not the database's
            kept, rows = table, table.n
            table = refresh_table(conn, table, seq)
            if table is not kept or table.n - rows > max(4096, table.live // 100):
                code_file.save(table, cache_file)      # read whole after all, or much filed since: keep it
            return table
    table = load_table(conn, space, seq)
    if cache_file is not None and table.n:
        code_file.save(table, cache_file)
        # a whole read is rare (a first search, a model change): the time to drop files no space needs
        code_file.sweep(cache_file.parent, set(vectors.spaces(conn)) | {space})
    return table


def refresh_table(conn: Any, table: CodeTable, seq: int) -> CodeTable:
    """The table moved to log position `seq`: the rows filed since are applied to it in place, or the
    whole table is read again when that is cheaper, an increment cannot say what vanished, or the
    semantic index was installed, re-filed or retired (a re-filing moves rows the log position does
    not name). A new measurement of the index only changes how many lists a search reads."""
    from ..vectors.index import index_key

    key = index_key(conn, table.space)
    if (key is None) != (table.index_key is None) or (key and table.index_key and key[:2] != table.index_key[:2]):
        return load_table(conn, table.space, seq)
    if key and table.index is not None:
        table.index.probes, table.index.measured_sources, table.index_key = key[2], key[3], key
    generation = table.index.generation if table.index is not None else None
    changed = conn.execute(
        "SELECT v.id, v.source_id, v.space, v.container, c.code, CASE WHEN c.generation = ? THEN c.list END "
        "FROM vectors v INDEXED BY vectors_seq JOIN vector_codes c ON c.id = v.id WHERE v.seq > ? "
        "ORDER BY v.seq, v.id", (generation, table.seq)).fetchall()
    if len(changed) > max(1024, table.live // 4):
        return load_table(conn, table.space, seq)
    add_ids, add_sources, add_containers, add_codes, add_lists = [], [], [], [], []
    for vid, source, space, container, code, lst in changed:
        row = table.row_of.get(source)
        if row is not None and int(table.ids[row]) == vid:
            table.containers[row] = table.container_id(container)   # a restamp: same vector, new place
            continue
        if row is not None:
            table.kill(row)            # a put replaces the source's vector in every space
        if space == table.space:
            if len(code) != table.width:   # another width (the first rows of an empty table)
                return load_table(conn, table.space, seq)
            add_ids.append(vid)
            add_sources.append(source)
            add_containers.append(container)
            add_codes.append(code)
            add_lists.append(-1 if lst is None else lst)
    if add_ids:
        table.append(add_ids, add_sources, add_containers, b"".join(add_codes), add_lists)
    table.seq = seq
    stored = vectors.sources(conn, table.space)
    if stored != table.live:   # a source dropped with no successor: only a whole read can say which
        return load_table(conn, table.space, seq)
    return table


def exact_scores(conn: Any, ids: list[int], query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stage two: the candidates' full vectors (read by primary key, in key order, into one matrix) and
    their exact cosine to `query`. Returns (ids found, cosines); a vector of another width is passed over."""
    q = np.asarray(query, dtype=np.float32)
    found, matrix = read_vectors(conn, ids, len(q))
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(q)) or 1.0)
    cosines = (matrix @ q) / np.where(norms > 0, norms, 1.0)
    return found, cosines


@dataclass
class SemanticRanking:
    ranked: list[tuple[str, float]]      # page ids by exact cosine, best first
    pool: int                            # sources in the space this search could reach (after filters)
    candidates: int                      # kept by stage one
    # how stage two read the candidates: "compact" (the int8 copy, then the few exact floats from the vector
    # file) or "by-id" (every candidate's floats from the database); `stage_two_note` says why, when by-id
    # was not chosen for an empty ranking
    stage_two: str = "by-id"
    stage_two_note: str = ""
    cut: int = 0                         # rank_where: the Hamming distance of stage one's furthest candidate


class SemanticRetriever:
    """Thread-safe (one search at a time holds the lock)."""

    # a search that leaves out only a few rows (trashed pages, drafts, a few exclusions: at most 64 or 1%)
    # reads the lists an unfiltered search reads: its own rows are all but the same
    NARROW_SLACK = 64
    # stage two through the compact copy and the vector file (False: every candidate read by id, as before:
    # what bench/ivf.py compares it with)
    rerank = True
    # sources up to which the search that finds no vector file writes it itself (~13 s at 100,000 × 1,536 on a
    # busy machine, 1-2 s here); past it the file is written behind the searches, which read by id meanwhile
    BUILD_INLINE = 20_000

    def __init__(self, node: Node) -> None:
        self.node = node
        self.last_read: tuple[str, int] = ("scan", 0)   # how the latest stage one read (for the bench)
        self._lock = threading.Lock()
        self._table: CodeTable | None = None
        self._unlisted_key: int | None = None
        self._unlisted: frozenset[str] = frozenset()
        self._vectors: vector_file.VectorFile | None = None
        self._writer: threading.Thread | None = None    # the vector file being written behind the searches

    def memory_bound(self) -> int:
        """Bytes the compact copy may take (node.toml `rerank_memory_mb`)."""
        mb = getattr(self.node.settings, "rerank_memory_mb", None)
        return (vector_file.DEFAULT_MEMORY_MB if mb is None else int(mb)) << 20

    def vectors(self, table: CodeTable, dims: int) -> tuple[vector_file.VectorFile | None, str]:
        """The space's vector file as stage two reads it, at the table's position: (the file, "") — or (None,
        why stage two reads by id instead). Builds or rebuilds the file when none can be trusted."""
        need, bound = vector_file.compact_bytes(table.live, dims), self.memory_bound()
        if need > bound:
            self._drop_vectors()
            return None, (f"stage two read its candidates from the database: the compact copy of {table.live:,} "
                          f"vectors would take {need / 2**20:,.0f} MB, over node.toml rerank_memory_mb = "
                          f"{bound >> 20:,}")
        vf = self._vectors
        if vf is not None and (vf.space != table.space or vf.dims != dims):
            self._drop_vectors()
            vf = None
        if vf is not None and (len(vf.extra) > max(1024, vector_file.REBUILD_SHARE * vf.n)
                               or vf.n > max(1024, (1 + vector_file.REBUILD_SHARE) * table.live)):
            self._drop_vectors()                     # much filed or replaced since the file: written again below
            vf = None
            stale = True
        else:
            stale = False
        if vf is None:
            path = vector_file.file_for(self.node.home.codes_dir, table.space)
            writing = self._writer is not None and self._writer.is_alive()
            with self.node.lock:
                vf = None if stale or writing else vector_file.load(path, table.space, dims)
                if vf is not None and not vector_file.vouched(self.node.conn, vf, vectors.position(self.node.conn)[0]):
                    vf.close()
                    vf = None
                if vf is None and not writing and table.live <= self.BUILD_INLINE:
                    seq = vectors.position(self.node.conn)[0]
                    if vector_file.build(self.node.conn, table.space, dims, seq, path):
                        vf = vector_file.load(path, table.space, dims)
                    vector_file.sweep(path.parent, set(vectors.spaces(self.node.conn)) | {table.space})
            if vf is None and table.live > self.BUILD_INLINE:
                if not writing:
                    self._write_behind(table.space, dims, path)
                return None, (f"stage two read its candidates from the database: the vector file of "
                              f"{table.live:,} sources is being written")
            if vf is None:
                return None, "stage two read its candidates from the database: the vector file could not be kept"
            if vf.memory > bound:                    # the file holds rows since replaced: more than the live count
                vf.close()
                return None, (f"stage two read its candidates from the database: the compact copy of {vf.n:,} "
                              f"vectors would take {vf.memory / 2**20:,.0f} MB, over node.toml rerank_memory_mb = "
                              f"{bound >> 20:,}")
            self._vectors = vf
        with self.node.lock:
            vf.follow(self.node.conn, table.seq)
        return vf, ""

    def _write_behind(self, space: str, dims: int, path: Path) -> None:
        """Write the space's vector file on a thread of its own, over a read-only connection of its own (one
        read transaction: the rows as of one position), while searches read by id; the first search after it
        ends reads the file. At 1,000,000 × 1,536 the write walks the whole database (minutes), which no
        search should wait for."""
        from ..store import db

        def write() -> None:
            try:
                conn = db.connect(self.node.home.db_file, readonly=True)
                try:
                    conn.execute("BEGIN")
                    vector_file.build(conn, space, dims, vectors.position(conn)[0], path)
                    vector_file.sweep(path.parent, set(vectors.spaces(conn)) | {space})
                    conn.execute("COMMIT")
                finally:
                    conn.close()
            except Exception as exc:      # the searches go on by id; the next one past this thread tries again
                vector_file.log.warning("could not write the vector file %s: %s", path, exc)

        # not a daemon: a one-shot process (`crewlet search`) answers first, then finishes the file before it
        # exits — a daemon would die with it mid-write, every time, and no process would ever find a file
        self._writer = threading.Thread(target=write, name="vector-file", daemon=False)
        self._writer.start()

    def _drop_vectors(self) -> None:
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None

    def table(self, space: str, seq: int | None = None) -> CodeTable:
        """The space's codes, brought to the vector log's position `seq` (this node's now when not given),
        incrementally where it can."""
        with self.node.lock:
            if seq is None:
                seq = vectors.position(self.node.conn)[0]
            table = self._table
            if table is None or table.space != space:
                table = self._table = open_table(self.node.conn, space, seq,
                                                 code_file.file_for(self.node.home.codes_dir, space))
            elif table.seq != seq:
                table = self._table = refresh_table(self.node.conn, table, seq)
        return table

    def _unlisted_pages(self, version: int) -> frozenset[str]:
        """Pages whose vectors a search must pass over: trashed, or auto-drafts by title (re-read when the
        pages' version moves)."""
        with self.node.lock:
            if version != self._unlisted_key:
                self._unlisted = reads.trashed_or_titled(self.node.conn, AUTO_DRAFT_TITLE_PREFIX)
                self._unlisted_key = version
            return self._unlisted

    def mask(self, table: CodeTable, access: Access, version: int | None = None) -> np.ndarray:
        """The rows a search may rank: everything no hit may be is out before stage one's cut (`version`:
        the pages' version the search stands at, this node's now when not given)."""
        mask = table.alive[:table.n].copy()
        if access.allowed is not None or access.skills in table.container_names:
            keep = [i for i, name in enumerate(table.container_names) if access.admits_container(name)]
            mask &= np.isin(table.containers[:table.n], np.asarray(keep, dtype=np.int32))
        if version is None:
            with self.node.lock:
                version = reads.version(self.node.conn)
        drop = set(self._unlisted_pages(version))
        drop |= access.excluded_ids
        rows = [table.row_of[s] for s in drop if s in table.row_of]
        if rows:
            mask[np.asarray(rows, dtype=np.int64)] = False
        return mask

    @staticmethod
    def index_served(table: CodeTable) -> bool:
        """The installed index answers stage one only over a corpus its latest measurement vouches for
        (core/vectors/index.py, SERVE_GROWTH): grown past it, the scan answers until the duty measures again."""
        from ..vectors.index import serves

        index = table.index
        return index is not None and (not index.measured_sources or serves(index.measured_sources, table.live))

    def candidates(self, table: CodeTable, q: np.ndarray, mask: np.ndarray, stage_one: int,
                   probes: int | None = None) -> np.ndarray:
        """Stage one: the rows (of those `mask` admits) nearest `q` — through the index's nearest lists when
        one is installed (`probes` overrides how many an unfiltered search reads), else every row."""
        admitted = int(np.count_nonzero(mask))
        if table.index is not None and self.index_served(table):
            narrowed = admitted < table.live - max(self.NARROW_SLACK, table.live // 100)
            rows, _ = rows_to_read(table, q, mask if narrowed else None, probes or table.index.probes)
            if rows is not None:
                rows = rows[mask[rows]]
                self.last_read = ("index", len(rows))
                return nearest(table.distances(q, rows), rows, table.ids, stage_one)
        self.last_read = ("scan", admitted)
        if admitted * 2 < table.n:
            rows = np.flatnonzero(mask)        # a narrow filter: read only its rows
            return nearest(table.distances(q, rows), rows, table.ids, stage_one)
        dist = table.distances(q)
        if admitted < table.n:
            dist[~mask] = table.width * 8 + 1  # past every real distance: never inside the cut
        rows = np.arange(table.n)
        kept = nearest(dist, rows, table.ids, stage_one)
        return kept[mask[kept]]

    def rank(self, query: np.ndarray, space: str, access: Access, *, stage_one: int = STAGE_ONE,
             depth: int = STAGE_TWO, stamp: Stamp | None = None) -> SemanticRanking:
        """`stamp`: where the search stands (the vector log's position the codes are brought to, the pages'
        version the passed-over pages are read at); this node's now when not given."""
        with self._lock:
            stamp = stamp or read_stamp(self.node)
            table = self.table(space, stamp.vectors)
            mask = self.mask(table, access, stamp.version) if table.n else np.zeros(0, dtype=bool)
            pool = int(np.count_nonzero(mask))
            if not pool:
                return SemanticRanking([], 0, 0)
            rows = self.candidates(table, sign_code(query), mask, stage_one)
            return self._stage_two(table, rows, query, depth, pool, len(rows))

    def rank_where(self, query: np.ndarray, space: str, rows_of: Callable[[CodeTable], np.ndarray],
                   admit: Callable[[list[str]], set[str]], *, stage_one: int = STAGE_ONE,
                   depth: int = STAGE_TWO) -> SemanticRanking:
        """`rank` over the rows another store decides: `rows_of(table)` (a mask over the table's rows, applied
        inside stage one as an access mask is), then `admit(sources)` — the sources of stage one's candidates it
        keeps — before stage two. The knowledge bank's neighbour check (core/bank/neighbours.py) ranks the entries'
        vectors so: its rows say which entry is in the bank and where, the table only which vector is whose.
        The ranking's `cut` is the Hamming distance of stage one's furthest candidate."""
        with self._lock:
            table = self.table(space)
            mask = rows_of(table) if table.n else np.zeros(0, dtype=bool)
            pool = int(np.count_nonzero(mask))
            if not pool:
                return SemanticRanking([], 0, 0)
            q = sign_code(query)
            rows = self.candidates(table, q, mask, stage_one)
            cut = int(table.distances(q, rows).max()) if len(rows) else 0
            sources = [table.sources[r] for r in rows.tolist()]
            kept = admit(sources)
            chosen = rows[np.asarray([s in kept for s in sources], dtype=bool)] if kept else rows[:0]
            ranking = self._stage_two(table, chosen, query, depth, pool, len(rows))
            ranking.cut = cut
            return ranking

    def _stage_two(self, table: CodeTable, rows: np.ndarray, query: np.ndarray, depth: int, pool: int,
                   candidates: int) -> SemanticRanking:
        """The candidates `rows` scored exactly (through the compact copy and the vector file, else by id)."""
        source_of = dict(zip(table.ids[rows].tolist(), [table.sources[r] for r in rows.tolist()]))
        if not source_of:
            return SemanticRanking([], pool=pool, candidates=candidates)
        vf, note = self.vectors(table, len(query)) if self.rerank else (None, "")
        if vf is not None:
            def by_id(ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
                with self.node.lock:
                    return read_vectors(self.node.conn, ids, len(query))
            found, cosines = vector_file.rerank(vf, by_id, table.ids[rows], query, depth + vector_file.MARGIN)
        else:
            with self.node.lock:
                found, cosines = exact_scores(self.node.conn, list(source_of), query)  # replaced since: next time
        scored = sorted(zip([source_of[v] for v in found.tolist()], cosines.tolist()),
                        key=lambda item: (-item[1], item[0]))
        return SemanticRanking(scored[:depth], pool=pool, candidates=candidates,
                               stage_two="compact" if vf is not None else "by-id", stage_two_note=note)
