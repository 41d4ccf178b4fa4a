"""Keyword search speed on a real wiki: crewlet's index build and query latency next to SQLite FTS5.

    python bench/keyword_bench.py [--docs DIR] [--pages N] [--queries 200] [--keep]

Loads the windows-driver-docs tree (~14k Markdown pages) into a fresh home through the importer
(one space, `--into WDD`; a loader of its own if the importer refuses the tree), builds the index
with the indexer (its first build: worker processes, one per core), and builds FTS5 (porter +
unicode61) over the same rows, in the same run; prints both builds' wall and CPU seconds, the ratio,
and the build's peak memory (every process of it, sampled). `--pages N` grows the corpus to N pages
first by repeating the shared corpora under other directory names (48,000 is the size the memory
figure is asked at). Then runs a fixed query set (made from titles and body words, seeded) through
both and prints p50/p95 with ratios:

- crewlet, the whole seam: NativeSearcher.search (mode keyword, limit 8) — hits with titles,
  ancestors, snippets, exclusions checked against the rows;
- crewlet, the ranking alone (terms -> top 8 page ids);
- FTS5 ranking alone (MATCH … ORDER BY bm25 LIMIT 8), and FTS5 with its snippet() function — with
  the title weighted 2:1 as crewlet weighs it (bm25() weighs the columns in order, the first being the
  unindexed page id).

Each query set runs twice: cold (first sight of each query's terms) and warm. Times are printed,
never asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import ROOT, Doc, Fts5, Timer, find_corpus, load_pages, new_home, percentile, rss, tree_rss

from core.node import Node
from core.pages.service import KnowledgeBase
from core.search.indexer import Indexer
from core.search.native import NativeSearcher
from core.search.seam import Query

SPACE = "WDD"
# what --pages repeats, in this order, until the tree is large enough
GROWN_FROM = [("windows-driver-docs", "windows-driver-docs-pr"), ("powershell-docs", "reference"),
              ("hugo-docs", "content"), ("textual-docs", "docs")]
_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.M)
_WORD = re.compile(r"[A-Za-z][A-Za-z]{4,}")


def load(node: Node, root: Path) -> tuple[str, float]:
    """Import the tree; returns how it was loaded and the seconds it took."""
    started = time.perf_counter()
    try:
        from core.importer import import_directory

        report = import_directory(KnowledgeBase(node), root, actor="alex", into=SPACE)
        return f"importer ({report.created:,} pages)", time.perf_counter() - started
    except Exception as exc:  # the importer missing or refusing the tree: a plain loader instead
        print(f"importer not used ({type(exc).__name__}: {str(exc)[:200]}); loading files directly")
    docs = []
    for path in sorted(root.rglob("*.md")):
        text = path.read_text(encoding="utf-8", errors="replace")
        m = _TITLE.search(text[:2000])
        title = m.group(1).strip("'\"") if m else path.stem
        docs.append(Doc(str(path.relative_to(root)), title, text, SPACE))
    load_pages(node, docs)
    return f"own loader ({len(docs):,} pages)", time.perf_counter() - started


def grown_tree(root: Path, pages: int) -> Path:
    """A tree of at least `pages` Markdown files: the shared corpora repeated under other directory
    names (directories made, files linked, not copied)."""
    sources = [find_corpus(*parts) for parts in GROWN_FROM]
    count = 0
    copy = 0
    while count < pages:
        for src in sources:
            dst = root / f"{src.parent.name}-{copy}"
            for dirpath, dirnames, filenames in os.walk(src):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                target = dst / os.path.relpath(dirpath, src)
                target.mkdir(parents=True, exist_ok=True)
                for name in filenames:
                    if name.endswith(".md"):
                        os.symlink(os.path.join(dirpath, name), target / name)
                        count += 1
            if count >= pages:
                break
        copy += 1
    return root


def tree_rss_self(pid: int) -> int:
    return rss([pid])


class PeakMemory:
    """Samples the RSS of this process's children (and theirs) every 50 ms while open."""

    def __enter__(self) -> "PeakMemory":
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(me) - tree_rss_self(me))
            self._stop.wait(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def load_avg() -> str:
    try:
        return ", ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def make_queries(node: Node, n: int, seed: int = 42) -> list[str]:
    rng = random.Random(seed)
    with node.lock:
        rows = node.conn.execute("SELECT title, body FROM pages WHERE trashed_at IS NULL AND length(body) > 200 "
                                 "ORDER BY container, address").fetchall()
    queries = []
    for r in rng.sample(rows, min(len(rows), n)):
        if len(queries) % 4 == 3:   # one in four: two words from a page's body
            words = _WORD.findall(r["body"])
            if len(words) >= 2:
                queries.append(" ".join(rng.sample(words, 2)).lower())
                continue
        words = r["title"].split()
        queries.append(" ".join(words[: rng.choice((2, 3, 4))]))
    return queries


def timed(fn, queries: list[str]) -> list[float]:
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1000)
    return out


def line(label: str, ms: list[float], ref: list[float] | None = None) -> str:
    p50, p95 = percentile(ms, 50), percentile(ms, 95)
    text = f"{label:44} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms"
    if ref:
        text += f"   ×{p50 / max(percentile(ref, 50), 1e-9):.2f} / ×{p95 / max(percentile(ref, 95), 1e-9):.2f} of FTS5"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=Path, default=None, help="the Markdown tree (default: windows-driver-docs)")
    ap.add_argument("--pages", type=int, default=0, help="grow the tree to this many pages from the shared corpora")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    home = new_home([SPACE])
    print(f"home {home.root}; {os.cpu_count()} cores, load average {load_avg()}")
    docs = args.docs or find_corpus("windows-driver-docs", "windows-driver-docs-pr")
    grown = None
    if args.pages:
        grown = Path(tempfile.mkdtemp(prefix="crewlet-grown-"))
        docs = grown_tree(grown, args.pages)
    try:
        with Node.open(home) as node:
            how, secs = load(node, docs)
            pages = node.conn.execute("SELECT count(*), sum(length(body)) FROM pages").fetchone()
            print(f"loaded {pages[0]:,} pages ({pages[1] / 1e6:.1f} MB of Markdown) with {how} in {secs:.1f}s")

            # FTS5 first, then crewlet, then FTS5 again: the machine is shared, so each gets a turn early and late
            fts_builds, fts_cpus = [], []

            def fts_once(name: str) -> Fts5:
                path = home.root / name
                for suffix in ("", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
                cpu = cpu_seconds()
                fts = Fts5(path, title_weight=2.0)
                with node.lock:
                    rows = node.conn.execute("SELECT id, title, body FROM pages WHERE trashed_at IS NULL")
                    fts_builds.append(fts.build((r[0], r[1], r[2]) for r in rows))
                fts_cpus.append(cpu_seconds() - cpu)
                return fts

            fts_once("fts5-first.db").db.close()
            print(f"load average {load_avg()} before the builds")
            # the build as a person runs it: `crewlet index build`, a process of its own (its memory is its own)
            cpu = cpu_seconds()
            with Timer() as t_build, PeakMemory() as mem:
                out = subprocess.run([sys.executable, "-m", "crewlet_tui.cli", "--home", str(home.root), "index",
                                      "build", "--json"], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            build_cpu = cpu_seconds() - cpu
            if out.returncode != 0:
                raise SystemExit(f"crewlet index build failed: {out.stderr[-500:]}")
            report = json.loads(out.stdout)["pass"]
            fts = fts_once("fts5.db")
            fts_wall, fts_cpu = sum(fts_builds) / 2, sum(fts_cpus) / 2
            print(f"index build: crewlet {t_build.seconds:.1f}s wall, {build_cpu:.1f}s CPU ({report['indexed']:,} pages, "
                  f"{report['note']}, peak memory {mem.peak / 2**20:.0f} MB across its processes); FTS5 {fts_wall:.1f}s "
                  f"wall, {fts_cpu:.1f}s CPU (mean of {len(fts_builds)}) — ×{t_build.seconds / max(fts_wall, 1e-9):.1f} "
                  f"wall, ×{build_cpu / max(fts_cpu, 1e-9):.1f} CPU; load average {load_avg()} after")

            queries = make_queries(node, args.queries)
            searcher = NativeSearcher(node)
            with Timer() as t_open:
                snap = searcher.snapshot()
            print(f"open the index for reading: {t_open.seconds * 1000:.0f} ms ({snap.count:,} documents)")

            def seam(q: str) -> None:
                res = searcher.search(Query(q, mode="keyword", limit=8))
                assert res.outcome.served_mode == "keyword"

            def rank_only(q: str) -> None:
                s = searcher.snapshot()
                scores = s.scores(s.terms(q))
                mask = s.live
                [d for d, _ in zip(s.ranked(scores, mask), range(8))]

            def fts_rank(q: str) -> None:
                fts.search(q, 8)

            def fts_snippet(q: str) -> None:
                m = fts.match(q)
                if m:
                    fts.db.execute("SELECT page_id, title, snippet(docs, 2, '', '', '…', 30) FROM docs WHERE docs MATCH ? "
                                   f"ORDER BY {fts.bm25()} LIMIT 8", (m,)).fetchall()

            print(f"\n{len(queries)} queries, e.g. {queries[:3]}")
            for run in ("cold", "warm"):
                f_rank = timed(fts_rank, queries)
                f_snip = timed(fts_snippet, queries)
                if run == "cold":
                    searcher.close()
                    searcher = NativeSearcher(node)
                    searcher.snapshot()
                c_rank = timed(rank_only, queries)
                if run == "cold":
                    searcher.close()
                    searcher = NativeSearcher(node)
                    searcher.snapshot()
                c_seam = timed(seam, queries)
                print(f"-- {run}")
                print(line("FTS5 ranking (ids)", f_rank))
                print(line("FTS5 ranking + snippet()", f_snip))
                print(line("crewlet ranking (ids)", c_rank, f_rank))
                print(line("crewlet seam (hits, snippets, exclusions)", c_seam, f_snip))

            # one edit: the incremental pass, and the first search on the new generation
            with node.lock:
                row = node.conn.execute("SELECT id, revision, body FROM pages ORDER BY id LIMIT 1").fetchone()
            KnowledgeBase(node).save_page(row["id"], row["body"] + "\n\nzanzibar quokka", base_revision=row["revision"])
            with Indexer(home) as indexer, Timer() as t_inc:
                inc = indexer.run_pass()
            with Timer() as t_first:
                res = searcher.search(Query("zanzibar quokka", mode="keyword"))
            print(f"\none save: incremental pass {t_inc.seconds * 1000:.0f} ms ({inc.kind}, {inc.indexed} page); "
                  f"first search on the new generation {t_first.seconds * 1000:.0f} ms "
                  f"({len(res.hits)} hit)")
            c_after = timed(seam, queries)
            print(line("crewlet seam after the commit", c_after))
            searcher.close()
    finally:
        if not args.keep:
            shutil.rmtree(home.root.parent, ignore_errors=True)
        if grown is not None:
            shutil.rmtree(grown, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
