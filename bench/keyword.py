"""Keyword search speed on a real wiki: crewlet's index build and query latency next to SQLite FTS5.

    /work/venv/bin/python bench/keyword.py [--docs DIR] [--queries 200] [--keep]

Loads the windows-driver-docs tree (~14k Markdown pages) into a fresh home through the importer
(one space, `--into WDD`; a loader of its own if the importer refuses the tree), builds the index
with the indexer, and builds FTS5 (porter + unicode61) over the same rows. Then runs a fixed query
set (made from titles and body words, seeded) through both and prints p50/p95 with ratios:

- crewlet, the whole seam: NativeSearcher.search (mode keyword, limit 8) — hits with titles,
  ancestors, snippets, exclusions checked against the rows;
- crewlet, the ranking alone (terms -> top 8 page ids);
- FTS5 ranking alone (MATCH … ORDER BY bm25 LIMIT 8), and FTS5 with its snippet() function.

Each query set runs twice: cold (first sight of each query's terms) and warm. Times are printed,
never asserted.
"""
from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import time
from pathlib import Path

from _common import Doc, Fts5, Timer, load_pages, new_home, percentile

from core.node import Node
from core.pages.service import KnowledgeBase
from core.search.indexer import Indexer
from core.search.native import NativeSearcher
from core.search.seam import Query

DOCS = Path("/work/shared/corpora/windows-driver-docs/windows-driver-docs-pr")
SPACE = "WDD"
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
    ap.add_argument("--docs", type=Path, default=DOCS)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    home = new_home([SPACE])
    print(f"home {home.root}")
    try:
        with Node.open(home) as node:
            how, secs = load(node, args.docs)
            pages = node.conn.execute("SELECT count(*), sum(length(body)) FROM pages").fetchone()
            print(f"loaded {pages[0]:,} pages ({pages[1] / 1e6:.1f} MB of Markdown) with {how} in {secs:.1f}s")

            with Indexer(home) as indexer, Timer() as t_build:
                report = indexer.run_pass()
            fts = Fts5(home.root / "fts5.db", title_weight=2.0)
            with node.lock:
                rows = node.conn.execute("SELECT id, title, body FROM pages WHERE trashed_at IS NULL").fetchall()
            fts_build = fts.build((r[0], r[1], r[2]) for r in rows)
            print(f"index build: crewlet {t_build.seconds:.1f}s ({report.indexed:,} pages), FTS5 {fts_build:.1f}s "
                  f"— ×{t_build.seconds / max(fts_build, 1e-9):.1f}")

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
                                   "ORDER BY bm25(docs, 2.0, 1.0) LIMIT 8", (m,)).fetchall()

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
