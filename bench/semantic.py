"""The semantic engine's speed, side by side in one run, on one core (issue 11).

    .venv/bin/python bench/semantic.py [--n 40000] [--dims 384 3072] [--queries 200]

For each width, on a real home (pages + vectors applied through the vector log, bench/_vectors.py), with
synthetic clustered vectors (topics under subjects) and fresh queries of the same topics:

- stage one p50/p95 — crewlet's (numkong's C popcount, the filter mask, the nearest 1,200 with the id
  tie break) next to the C popcount floor (numkong's distances alone over the same codes), numpy's
  plain scan (`bitwise_count` over (n, words) rows, distances alone and with a top-1,200) and the exact
  float scan (every float vector in memory, one matrix-vector product and a top-150);
- stage two (1,200 vectors read by primary key, exact cosine): the build's previous read (IN chunks of
  500, page cache) next to crewlet's (one statement in key order, memory-mapped);
- the whole semantic query (SemanticRetriever.rank: no query embedding) p50/p95;
- recall@150 of the two-stage search against the exact scan;
- the code table: a whole load (the previous join over the wide rows and crewlet's covering read) and
  an incremental refresh after a batch of 1,000 vectors (what the embedding duty writes a minute).

The process pins itself to one core (and one BLAS thread) before numpy loads. Each figure is printed
with the load average `uptime` shows at that moment: the machine is shared. Nothing is asserted.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _vectors import cached_home, queries, space_of  # noqa: E402
from _common import machine_load  # noqa: E402
from core.node import Node  # noqa: E402
from core.search import semantic  # noqa: E402
from core.vectors import records as vectors  # noqa: E402
from core.search.access import Access  # noqa: E402
from core.store import connect  # noqa: E402
from core.vectors import hamming  # noqa: E402


def timed(fn: Callable[[int], object], count: int) -> tuple[float, float]:
    """p50 and p95 in ms of fn(i) for i in range(count), after one warm call."""
    fn(0)
    times = []
    for i in range(count):
        started = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.95))]


def line(label: str, p: tuple[float, float], peer: tuple[float, float] | None = None, peer_name: str = "") -> None:
    ratio = f"   {p[1] / peer[1]:.2f}× {peer_name} (p95)" if peer else ""
    print(f"  {label:<46} p50 {p[0]:8.2f} ms  p95 {p[1]:8.2f} ms{ratio}   [{machine_load()}]")


def _seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def old_load_table(conn, space: str) -> int:
    """The previous build's whole load: the join over the wide rows, then the same arrays and maps."""
    rows = conn.execute(
        "SELECT v.id, v.source_id, v.container, c.code FROM vectors v NOT INDEXED JOIN vector_codes c "
        "ON c.id = v.id WHERE v.space = ? ORDER BY v.id", (space,)).fetchall()
    names = sorted({r[2] for r in rows})
    index = {name: i for i, name in enumerate(names)}
    codes = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.uint8).reshape(len(rows), len(rows[0][3]))
    sources = [r[1] for r in rows]
    np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    np.fromiter((index[r[2]] for r in rows), dtype=np.int32, count=len(rows))
    hamming.as_words(codes)
    return len({s: i for i, s in enumerate(sources)})


def old_stage_two(conn, ids: list[int], q: np.ndarray) -> np.ndarray:
    """The previous build's rerank read: IN chunks of 500, rows one by one into a matrix."""
    full: dict[int, np.ndarray] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for r in conn.execute(f"SELECT id, vector FROM vectors WHERE id IN ({','.join('?' * len(chunk))})", chunk):
            full[r[0]] = np.frombuffer(r[1], dtype="<f4")
    matrix = np.stack([full[i] for i in ids if i in full])
    return matrix @ q


def run(n: int, dims: int, nq: int) -> None:
    print(f"\n== {n:,} sources × {dims} dimensions ==")
    started = time.perf_counter()
    home, ids, corpus = cached_home(n, dims)
    space = space_of(dims)
    qs = queries(corpus, nq)
    print(f"  home ready in {time.perf_counter() - started:.1f}s ({home.root})")
    exact_m = corpus.vectors                                   # the exact scan's peer holds every vector
    with Node.open(home) as node:
        retriever = semantic.SemanticRetriever(node)
        conn = node.conn
        seq0 = vectors.position(conn)[0]
        table = semantic.load_table(conn, space, seq0)              # warm both reads once, then best of 3
        old_load_table(conn, space)
        full_load = min(_seconds(lambda: semantic.load_table(conn, space, seq0)) for _ in range(3))
        old_load = min(_seconds(lambda: old_load_table(conn, space)) for _ in range(3))
        print(f"  whole code-table load: crewlet {full_load * 1000:.0f} ms (covering index), the previous load "
              f"(join over the wide rows) {old_load * 1000:.0f} ms: {old_load / full_load:.1f}× crewlet's   [{machine_load()}]")

        access = Access(actor=None, mode="semantic", allowed=None, skills="SKILLS", exclusions=(), draft_backstop=True)
        qcodes = [semantic.sign_code(q) for q in qs]
        qwords = [hamming.as_words(c)[0] for c in qcodes]
        rows_major = hamming.as_words(table.codes[:table.n])          # the same codes, (n, words)
        mask = retriever.mask(table, access)

        ours = timed(lambda i: retriever.candidates(table, qcodes[i], mask, semantic.STAGE_ONE), nq)
        floor_d = timed(lambda i: hamming.hamming_rows(rows_major, qwords[i]), nq)
        floor_k = timed(lambda i: np.argpartition(hamming.hamming_rows(rows_major, qwords[i]), 1199)[:1200], nq)
        nk_only = timed(lambda i: table.distances(qcodes[i]), nq)
        exact = timed(lambda i: np.argpartition(-(exact_m @ qs[i]), 149)[:150], nq)
        print("  stage one (Hamming over every code, 1,200 kept):")
        line("crewlet (numkong popcount, mask, id tie break)", ours, nk_only, "the C popcount floor")
        line("  the C popcount floor: numkong distances", nk_only)
        line("numpy floor: bitwise_count rows, distances", floor_d, nk_only, "the C floor")
        line("numpy floor: + argpartition top 1,200", floor_k)
        line("exact float scan (all vectors in memory)", exact, ours, "crewlet stage one")
        # stage two: the same 1,200 candidates each way
        cands = [[int(table.ids[r]) for r in retriever.candidates(table, qcodes[i], mask, semantic.STAGE_ONE)]
                 for i in range(nq)]
        plain = connect(home.db_file, migrate_schema=False)         # the previous build's connection: no mmap
        old2 = timed(lambda i: old_stage_two(plain, cands[i], qs[i]), nq)
        new2 = timed(lambda i: semantic.exact_scores(conn, cands[i], qs[i]), nq)
        plain.execute(f"PRAGMA mmap_size = {semantic.MMAP_BYTES}")
        old_mm = timed(lambda i: old_stage_two(plain, cands[i], qs[i]), nq)
        plain.close()
        print(f"  stage two ({semantic.STAGE_ONE:,} vectors of {dims * 4:,} bytes by primary key, exact cosine):")
        line("crewlet (one statement, key order)", new2, old2, "the previous read")
        line("previous (IN chunks of 500, page cache)", old2)
        line("previous read through mmap", old_mm)

        whole = timed(lambda i: retriever.rank(qs[i], space, access), nq)
        print("  the whole semantic query (no query embedding):")
        line("SemanticRetriever.rank, unfiltered", whole)
        narrowed = Access(actor=None, mode="semantic", allowed={"C03"}, skills="SKILLS", exclusions=(),
                          draft_backstop=True)
        line("SemanticRetriever.rank, one container of 20", timed(lambda i: retriever.rank(qs[i], space, narrowed), nq))

        # recall@150 against the exact scan (ties at the 150th score count as found)
        recalls = []
        by_source = {s: i for i, s in enumerate(ids)}
        for i in range(nq):
            scores = exact_m @ qs[i]
            kth = np.partition(-scores, 149)[149]
            got = retriever.rank(qs[i], space, access).ranked
            hit = sum(1 for s, _ in got if -scores[by_source[s]] <= kth)
            recalls.append(min(150, hit) / 150)
        print(f"  recall@150 of the two-stage search against the exact scan: mean {np.mean(recalls):.4f}, "
              f"worst {min(recalls):.4f} over {nq} queries")

        # the table following the log: a batch of 1,000 vectors (the embedding duty's minute), then refresh
        batch = [vectors.put_record(ids[j], space, f"C{corpus.containers[j]:02d}", 1, f"d{j}", 100, 0, corpus.vectors[j])
                 for j in range(1000)]
        before = semantic.load_table(conn, space, vectors.position(conn)[0])
        node.submit_vectors(batch, sync=False)
        seq = vectors.position(conn)[0]
        inc = _seconds(lambda: semantic.refresh_table(conn, before, seq))
        whole_load = min(_seconds(lambda: semantic.load_table(conn, space, seq)) for _ in range(3))
        print(f"  after 1,000 new vectors (the embedding duty's minute): incremental refresh {inc * 1000:.0f} ms, "
              f"whole reload {whole_load * 1000:.0f} ms ({whole_load / inc:.1f}× the refresh)   [{machine_load()}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40000)
    ap.add_argument("--dims", type=int, nargs="+", default=[384, 3072])
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    print(f"crewlet semantic bench: one core (affinity {sorted(os.sched_getaffinity(0))}), "
          f"numpy {np.__version__}, {os.cpu_count()} cores on the machine   [{machine_load()}]")
    for dims in args.dims:
        run(args.n, dims, args.queries)


if __name__ == "__main__":
    main()
