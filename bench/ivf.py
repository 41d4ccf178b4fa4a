"""The semantic index against the full scan, side by side in one run (issue 12).

    .venv/bin/python bench/ivf.py [--sizes 40000 120000] [--dims 3072 384] [--queries 200] [--threads 2]
                                  [--factors 0 1 2 4 8 16] [--serve-rss] [--rerank] [--codes-from file|db]

For each corpus (synthetic, clustered: topics under subjects, bench/_vectors.py; a real home with the
vectors applied through the vector log), it trains the index the way the duty does (core/search/ivf/
training.py: the codes read from the space's file when the database vouches for it — `--codes-from db`
reads them by id from the database —, k-means over them on `--threads` cores, filing, the exact pass over
25 held-out documents, the measured probe count) and prints:

- training time, by phase, and the lists it probes (or that it would not install);
- stage one p50/p95 through the index and with the full scan, over fresh queries of the corpus's topics,
  and the whole semantic query (stage two included) both ways;
- recall@150 of each against the exact scan (ties at the 150th score count as found);
- faiss's IndexBinaryIVF on the same codes, when it is installed (a peer, not a dependency: `pip install
  faiss-cpu`): the same number of lists, trained and searched with the same probe count for the same
  1,200 candidates.

- `--factors`: recall (mean and worst query) and stage one's time with a search reading at least F × 1,200
  codes (semantic.READ_FACTOR), for each F — how the factor crewlet ships was chosen (docs/search.md);
- `--rerank`: stage two as it runs now (the int8 copy reranks the 1,200 candidates to the ranking's depth + 50,
  whose exact floats are read from the space's vector file) against reading the 1,200 by id from the database,
  both warm and cold (the file they read dropped from the page cache before each query with
  posix_fadvise DONTNEED), the whole query both ways; recall@10 and recall@150 of the final ranking against the
  exact ranking of the same candidates, for int8 and float16 copies at margins 0 / 50 / 150; the compact
  copy's memory, and a new process's read of the vector file (cold);
- `--serve-rss`: a plain serving process (a fresh interpreter that opens the home and answers semantic
  searches, stage two included) and its resident memory after 200 of them: peak, and how much is the
  process's own (anonymous) against pages of the database file mapped in.

Big corpora: set CREWLET_BENCH_OUT to a directory with room (1,000,000 × 1,536 is ~14 GB of log and
database). Searches run on one core (the process pins itself to one after training); the training uses
`--threads`. Each figure carries the load average at that moment. Nothing is asserted.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _vectors import cached_home, queries, space_of  # noqa: E402
from _common import machine_load as load  # noqa: E402
from semantic import line, timed  # noqa: E402

from core.node import Node  # noqa: E402
from core.search import code_file, semantic  # noqa: E402
from core.vectors import records as vectors  # noqa: E402
from core.search.access import Access  # noqa: E402
from core.search.ivf import training  # noqa: E402
from core.vectors import index as store_mod  # noqa: E402

EVERYONE = Access(actor=None, mode="semantic", allowed=None, skills="SKILLS", exclusions=(), draft_backstop=True)


def recall_of(cands: np.ndarray, scores: np.ndarray, ids_to_rows: np.ndarray) -> float:
    kth = np.partition(scores, len(scores) - 150)[len(scores) - 150]
    return min(150, int(np.count_nonzero(scores[ids_to_rows[cands]] >= kth))) / 150


def drop_cache(path: Path) -> None:
    """Take `path`'s pages out of the kernel's page cache (what a cold read then pays for)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def rerank_bench(node, home, space: str, retriever, table, qs: np.ndarray, through, nq: int) -> None:
    """Stage two both ways, warm and cold, with the recall of the compact rerank against the exact one."""
    from core.search import vector_file
    from core.vectors.read import read_vectors

    dims = qs.shape[1]
    path = vector_file.file_for(home.codes_dir, space)
    started = time.perf_counter()
    vf, note = retriever.vectors(table, dims)
    if vf is None and retriever._writer is not None:     # a large space's file is written behind the searches
        retriever._writer.join()
        vf, note = retriever.vectors(table, dims)
    print(f"  the vector file: {'read or built' if vf else note} in {time.perf_counter() - started:.1f}s; "
          f"{path.stat().st_size / 2**20:,.0f} MB on disk; compact copy {vector_file.compact_bytes(vf.n, dims) / 2**20:,.0f} MB "
          f"in memory (int8 + norm + id; float16 would be {vf.n * (2 * dims + 8) / 2**20:,.0f} MB)")
    drop_cache(path)
    started = time.perf_counter()
    again = vector_file.load(path, space, dims)
    print(f"  a new process's read of it, cold: {time.perf_counter() - started:.2f}s   [{load()}]")
    again.close()
    cands = [table.ids[through(i)] for i in range(nq)]
    qn = [q / np.linalg.norm(q) for q in qs]
    # recall of the compact rerank against the exact ranking of the same candidates
    depth = semantic.STAGE_TWO
    rec: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for i in range(nq):
        found, mat = read_vectors(node.conn, cands[i].tolist(), dims)
        mat_n = mat / np.linalg.norm(mat, axis=1, keepdims=True)
        exact = mat_n @ qn[i]
        order = np.argsort(-exact, kind="stable")
        top10, top150 = set(order[:10].tolist()), set(order[:depth].tolist())
        q8, scale = vector_file.quantize(mat)
        a8 = q8.astype(np.float32)
        a16 = mat.astype(np.float16).astype(np.float32)
        for kind, approx in (("int8", a8), ("float16", a16)):
            cos = (approx @ qn[i]) / np.linalg.norm(approx, axis=1)
            for margin in (0, 50, 150):
                keep = np.argsort(-cos, kind="stable")[:depth + margin]
                final = keep[np.argsort(-exact[keep], kind="stable")]    # 2b: exact scores decide the order
                rec.setdefault((kind, margin), []).append(
                    (len(top10 & set(final[:10].tolist())) / 10, len(top150 & set(final[:depth].tolist())) / depth))
    print(f"  recall of the final ranking against the exact ranking of the same 1,200 candidates ({nq} queries):")
    for (kind, margin), r in rec.items():
        r10, r150 = np.array([x[0] for x in r]), np.array([x[1] for x in r])
        print(f"    {kind:<7} margin {margin:>3} (exact reads {depth + margin}): recall@10 mean {r10.mean():.4f} "
              f"worst {r10.min():.2f}; recall@150 mean {r150.mean():.4f} worst {r150.min():.4f}")
    # agreement of the shipped path with the by-id path, as the retriever serves them
    agree = []
    for i in range(min(nq, 50)):
        retriever.rerank = False
        old = [s for s, _ in retriever.rank(qs[i], space, EVERYONE).ranked]
        retriever.rerank = True
        new = [s for s, _ in retriever.rank(qs[i], space, EVERYONE).ranked]
        agree.append((old[:10] == new[:10], len(set(old) & set(new)) / len(old)))
    print(f"  served: the top 10 identical to the by-id path's on {sum(a for a, _ in agree)} of {len(agree)} queries, "
          f"the 150 shared {np.mean([b for _, b in agree]):.4f}")

    def new_whole(i: int) -> None:
        retriever.rank(qs[i], space, EVERYONE)

    def old_whole(i: int) -> None:
        retriever.rerank = False
        try:
            retriever.rank(qs[i], space, EVERYONE)
        finally:
            retriever.rerank = True

    def new_two(i: int) -> None:
        vector_file.rerank(vf, lambda ids: read_vectors(node.conn, ids, dims), cands[i], qs[i],
                           depth + vector_file.MARGIN)

    def old_two(i: int) -> None:
        semantic.exact_scores(node.conn, cands[i].tolist(), qs[i])

    db = home.db_file
    # each pair alternated query by query (new, old, new, old …): on a shared machine a burst of load then
    # falls on both sides alike instead of on whichever ran during it
    for i in range(nq):           # warm: every query's reads once in the page cache (the cold read above dropped it)
        new_two(i), old_two(i)
    warm_new, warm_old = alternated(new_two, old_two, nq)
    print("  stage two alone, warm (alternated):")
    line("int8 rerank + exact floats from the file", warm_new, warm_old, "by id from the database")
    line("1,200 by id from the database", warm_old)
    w_new, w_old = alternated(new_whole, old_whole, nq)
    print("  the whole semantic query, warm (alternated):")
    line("now", w_new, w_old, "before")
    line("before (by id)", w_old)
    cq = min(nq, 60)
    c_new, c_old = alternated(new_two, old_two, cq, path, db)
    print(f"  stage two alone, cold ({cq} queries, alternated; the vector file / the database dropped from the page "
          f"cache before each):")
    line("int8 rerank + exact floats from the file", c_new, c_old, "by id from the database")
    line("1,200 by id from the database", c_old)
    cw_new, cw_old = alternated(new_whole, old_whole, cq, path, db)
    print("  the whole semantic query, cold (alternated):")
    line("now", cw_new, cw_old, "before")
    line("before (by id)", cw_old)


def alternated(a, b, count: int, a_cold: Path | None = None, b_cold: Path | None = None
               ) -> tuple[tuple[float, float], tuple[float, float]]:
    """p50 and p95 in ms of a(i) and b(i), called in turn for each i after one warm call of each; a file
    given for a side is dropped from the page cache before each of its calls (not timed)."""
    a(0), b(0)
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(count):
        for fn, cold_file, out in ((a, a_cold, times[0]), (b, b_cold, times[1])):
            if cold_file is not None:
                drop_cache(cold_file)
            started = time.perf_counter()
            fn(i)
            out.append((time.perf_counter() - started) * 1000)

    def p(ts: list[float]) -> tuple[float, float]:
        ts.sort()
        return ts[len(ts) // 2], ts[min(len(ts) - 1, int(len(ts) * 0.95))]
    return p(times[0]), p(times[1])


def run(n: int, dims: int, nq: int, threads: int, factors: list[int] | None = None,
        serve_rss: bool = False, codes_from: str = "file", rerank: bool = False) -> None:
    print(f"\n== {n:,} sources × {dims} dimensions ({dims} bits a code) ==")
    home, ids, corpus = cached_home(n, dims)
    space = space_of(dims)
    qs = queries(corpus, nq)
    with Node.open(home) as node:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:max(1, threads)]))
        started = time.perf_counter()
        # as the duty does: the codes from the space's file when the database vouches for it (--codes-from db:
        # read by id from the database, as before the file)
        codes = None if codes_from == "db" else code_file.file_for(home.codes_dir, space)
        result = training.train(node.conn, node.lock, space, threads=threads, codes_file=codes)
        took = time.perf_counter() - started
        assert result is not None
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in result.phases.items())
        worst = result.measurement.worst()
        verdict = (f"installs: {result.probes} of {len(result.centroids)} lists probed"
                   if result.probes is not None else
                   f"not installed: {len(result.centroids) // 2} of {len(result.centroids)} lists still below the floor")
        print(f"  training on {threads} thread(s): {took:.1f}s ({phases}) — {verdict}; worst shape {worst.shape} "
              f"{worst.recall:.4f} against {worst.floor:.4f}, {worst.head_misses} head miss(es)   [{load()}]")
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})   # searches: one core

        table = result.table
        retriever = semantic.SemanticRetriever(node)
        table.seq = vectors.position(node.conn)[0]
        mask = retriever.mask(table, EVERYONE)
        qcodes = [semantic.sign_code(q) for q in qs]
        probes = result.probes or max(1, len(result.centroids) // 2)
        table.index.probes = probes
        index_view = table.index
        # exact truth, in memory, by table row
        row_of_corpus = np.asarray([int(s, 16) for s in table.sources[:table.n]])   # page id -> corpus position
        exact = [(corpus.vectors @ q)[row_of_corpus] for q in qs]
        rows_all = np.arange(table.n)

        def through(i: int) -> np.ndarray:
            return retriever.candidates(table, qcodes[i], mask, semantic.STAGE_ONE)

        def scan(i: int) -> np.ndarray:
            table.index = None
            try:
                return retriever.candidates(table, qcodes[i], mask, semantic.STAGE_ONE)
            finally:
                table.index = index_view

        t_index = timed(through, nq)
        t_scan = timed(scan, nq)
        r_index = [recall_of(through(i), exact[i], rows_all) for i in range(nq)]
        r_scan = [recall_of(scan(i), exact[i], rows_all) for i in range(nq)]
        read = [len(semantic.rows_to_read(table, qcodes[i], None, probes)[0]) for i in range(min(nq, 50))]
        print(f"  stage one, unfiltered ({probes} of {len(result.centroids)} lists ≈ {np.mean(read):,.0f} codes read "
              f"of {table.n:,}):")
        line("index", t_index, t_scan, "the full scan")
        line("full scan", t_scan)
        print(f"  recall@150 against the exact scan: index {np.mean(r_index):.4f} (worst {min(r_index):.4f}), "
              f"scan {np.mean(r_scan):.4f} (worst {min(r_scan):.4f}) over {nq} fresh queries; the training's own "
              f"measurement on its 25 held-out documents, unfiltered: "
              f"{result.measurement.shapes['unfiltered'].recall:.4f} (worst {result.measurement.shapes['unfiltered'].worst:.4f})")

        if factors:
            print("  the codes a search reads at least (READ_FACTOR × 1,200), recall@150 against the exact scan:")
            shipped = semantic.READ_FACTOR
            try:
                for f in factors:
                    semantic.READ_FACTOR = f
                    rf = [recall_of(through(i), exact[i], rows_all) for i in range(nq)]
                    codes = [len(semantic.rows_to_read(table, qcodes[i], None, probes)[0]) for i in range(min(nq, 50))]
                    tf = timed(through, nq)
                    print(f"    F = {f:>3}: mean {np.mean(rf):.4f}, worst {min(rf):.4f}, p5 {np.percentile(rf, 5):.4f}; "
                          f"{np.mean(codes):,.0f} codes read; stage one p50 {tf[0]:.2f} ms p95 {tf[1]:.2f} ms   [{load()}]")
            finally:
                semantic.READ_FACTOR = shipped
        retriever._table = table                      # the retriever's own table, with this index in it
        whole_index = timed(lambda i: retriever.rank(qs[i], space, EVERYONE), nq)
        table.index = None
        whole_scan = timed(lambda i: retriever.rank(qs[i], space, EVERYONE), nq)
        table.index = index_view
        print("  the whole semantic query (stage two included, no query embedding):")
        line("through the index", whole_index, whole_scan, "with the full scan")
        line("with the full scan", whole_scan)
        if rerank:                                     # after: its cold reads leave the page cache emptied
            rerank_bench(node, home, space, retriever, table, qs, through, nq)
        if serve_rss:                                  # installed and re-filed as the duty does it
            node.submit_vectors([store_mod.install_record(space, result.centroids, result.probes or probes,
                                                          result.ranges, result.sources, result.fullest,
                                                          result.summary(), int(time.time() * 1000))])
            row = store_mod.read_index(node.conn, space)
            refiles = [store_mod.refile_record(space, row.generation, k, lo, hi, ids, lists)
                       for k, (lo, hi, ids, lists) in enumerate(result.batches())]
            for start in range(0, len(refiles), 50):
                node.submit_vectors(refiles[start:start + 50], sync=False)
            serving_rss(home, space)
            serving_rss(home, space, by_id=True)

        try:
            import faiss  # type: ignore[import-not-found]
        except ImportError:
            print("  (faiss not installed: its IndexBinaryIVF was not measured)")
            return
        faiss.omp_set_num_threads(threads)
        codes = np.ascontiguousarray(table.codes[:table.n])
        quantizer = faiss.IndexBinaryFlat(dims)
        fx = faiss.IndexBinaryIVF(quantizer, dims, len(result.centroids))
        started = time.perf_counter()
        fx.train(codes)
        fx.add(codes)
        f_train = time.perf_counter() - started
        faiss.omp_set_num_threads(1)
        fx.nprobe = probes
        qmat = np.stack(qcodes)
        t_faiss = timed(lambda i: fx.search(qmat[i:i + 1], semantic.STAGE_ONE), nq)
        r_faiss = [recall_of(fx.search(qmat[i:i + 1], semantic.STAGE_ONE)[1][0], exact[i], rows_all) for i in range(nq)]
        print(f"  faiss IndexBinaryIVF, {len(result.centroids)} lists, nprobe {probes}: trained + added in {f_train:.1f}s "
              f"on {threads} thread(s)")
        line("faiss stage one (k = 1,200)", t_faiss, t_index, "crewlet's index")
        print(f"  faiss recall@150 against the exact scan: {np.mean(r_faiss):.4f} (worst {min(r_faiss):.4f})")


def serving_rss(home, space: str, queries: int = 200, by_id: bool = False) -> None:
    """A fresh interpreter that opens the home and answers `queries` semantic searches (stage two included),
    then says its resident memory: what a serving process holds for this corpus (`by_id`: told to hold no
    compact copy, node.toml rerank_memory_mb = 0, so stage two reads its candidates by id as before)."""
    import subprocess

    script = f"""
import sys, numpy as np
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from pathlib import Path
from core.node import Node
from core.paths import Home
from core.search import semantic
from core.search.access import Access
from core.vectors.read import read_vectors
every = Access(actor=None, mode="semantic", allowed=None, skills="SKILLS", exclusions=(), draft_backstop=True)
from core.config import NodeSettings
with Node.open(Home(Path({str(home.root)!r}))) as node:
    if {by_id!r}:
        node.settings = NodeSettings(node_id=node.settings.node_id, rerank_memory_mb=0)
    retriever = semantic.SemanticRetriever(node)
    table = retriever.table({space!r})
    ids = [int(table.ids[r]) for r in np.random.default_rng(3).choice(table.n, {queries}, replace=False)]
    found, matrix = read_vectors(node.conn, ids, None)
    for q in matrix:
        retriever.rank(q, {space!r}, every)
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    ranking = retriever.rank(matrix[0], {space!r}, every)
    print(*(status[k].split()[0] for k in ("VmHWM", "VmRSS", "RssAnon", "RssFile")), table.n, retriever.last_read[1], ranking.stage_two)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        print(f"  serving process failed: {out.stderr[-500:]}")
        return
    *numbers, how = out.stdout.split()
    hwm, rss, anon, file_, n, read = (int(x) for x in numbers)
    print(f"  a serving process (stage two {how}) after {queries} semantic searches over {n:,} sources: peak RSS {hwm / 1024:.0f} MB, "
          f"RSS {rss / 1024:.0f} MB ({anon / 1024:.0f} MB its own, {file_ / 1024:.0f} MB of mapped files); "
          f"the last search read {read:,} codes   [{load()}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[40000, 120000])
    ap.add_argument("--dims", type=int, nargs="+", default=[3072, 384])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--factors", type=int, nargs="*", help="READ_FACTOR values to compare (recall, codes read, time)")
    ap.add_argument("--serve-rss", action="store_true", help="install the index and measure a serving process's memory")
    ap.add_argument("--rerank", action="store_true", help="stage two through the int8 copy and the vector file "
                                                          "against by id, warm and cold, with recall")
    ap.add_argument("--codes-from", choices=("file", "db"), default="file",
                    help="where the training reads the codes: the space's file, as the duty does, or the database by id")
    args = ap.parse_args()
    print(f"crewlet ivf bench: numpy {np.__version__}, {os.cpu_count()} cores on the machine   [{load()}]")
    for dims in args.dims:
        for n in args.sizes:
            run(n, dims, args.queries, args.threads, args.factors, args.serve_rss, args.codes_from, args.rerank)


if __name__ == "__main__":
    main()
