"""Search quality on judged collections: crewlet's keyword search next to SQLite FTS5's bm25().

    /work/venv/bin/python bench/relevance.py [--ir /work/shared/ir] [--collection scifact ...] [--sweep]

Each collection's corpus is loaded as pages into a fresh home (title -> page title, text -> body;
a duplicate title gets its document id appended), the index is built by the indexer, and every judged
query runs through NativeSearcher (mode keyword, limit 100). FTS5 (porter + unicode61, bm25) indexes
the same rows in the same run. Prints nDCG@10, recall@100 and MRR@10 for both.
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from pathlib import Path

from _common import (Doc, Timer, fts5_from_home, load_pages, measures, new_home, read_jsonl, read_qrels)

from core.node import Node
from core.search.indexer import Indexer
from core.search.lexical import DEFAULT_RANKING, Ranking
from core.search.native import NativeSearcher
from core.search.seam import Query

COLLECTIONS = {"scifact": "test", "vaswani_npl": "test"}
REFERENCES = {"scifact": "BEIR paper BM25 nDCG@10 0.665; plain BM25 (k1 0.9, b 0.4, no stemming) 0.662",
              "vaswani_npl": "plain BM25 nDCG@10 0.384"}


def run_collection(ir: Path, name: str, split: str, sweep: bool, keep: bool) -> None:
    folder = ir / name
    corpus = read_jsonl(folder / "corpus.jsonl")
    queries = {q["_id"]: q["text"] for q in read_jsonl(folder / "queries.jsonl")}
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv")
    judged = [q for q in qrels if q in queries]
    container = "IR"
    docs = [Doc(str(d["_id"]), d.get("title") or str(d["_id"]), d.get("text") or "", container) for d in corpus]
    home = new_home([container])
    print(f"\n== {name}: {len(docs):,} documents, {len(judged)} judged queries ({split}) — home {home.root}")
    try:
        with Node.open(home) as node:
            with Timer() as t_load:
                mapping = load_pages(node, docs)
            with Indexer(home) as indexer, Timer() as t_build:
                indexer.run_pass()
            fts, fts_build = fts5_from_home(node, home.root / "fts5.db")
            print(f"load {t_load.seconds:.1f}s · crewlet index build {t_build.seconds:.1f}s · FTS5 build {fts_build:.1f}s")

            def crewlet_runs(ranking: Ranking) -> tuple[dict[str, list[str]], float]:
                searcher = NativeSearcher(node, ranking=ranking)
                runs = {}
                started = time.perf_counter()
                for qid in judged:
                    res = searcher.search(Query(queries[qid], mode="keyword", limit=100, exclude_ancestors=[]))
                    if res.outcome.served_mode != "keyword":
                        raise SystemExit(f"search did not serve: {res.outcome.message}")
                    runs[qid] = [mapping[h.page_id] for h in res.hits]
                return runs, time.perf_counter() - started

            ours, secs = crewlet_runs(DEFAULT_RANKING)
            m_ours = measures(ours, qrels)
            started = time.perf_counter()
            theirs = {qid: [mapping[p] for p, _ in fts.search(queries[qid], 100)] for qid in judged}
            fts_secs = time.perf_counter() - started
            m_fts = measures(theirs, qrels)
            print(f"{'':34} {'nDCG@10':>8} {'recall@100':>11} {'MRR@10':>8} {'time':>8}")
            r = DEFAULT_RANKING
            label = f"crewlet BM25F (k1 {r.k1}, b {r.b_body}, title ×{r.title_weight})"
            print(f"{label:34} {m_ours['nDCG@10']:8.3f} {m_ours['recall@100']:11.3f} {m_ours['MRR@10']:8.3f} {secs:7.2f}s")
            print(f"{'SQLite FTS5 bm25()':34} {m_fts['nDCG@10']:8.3f} {m_fts['recall@100']:11.3f} {m_fts['MRR@10']:8.3f} "
                  f"{fts_secs:7.2f}s")
            print(f"ratio crewlet/FTS5: nDCG@10 {m_ours['nDCG@10'] / max(m_fts['nDCG@10'], 1e-9):.3f}, "
                  f"recall@100 {m_ours['recall@100'] / max(m_fts['recall@100'], 1e-9):.3f}, "
                  f"MRR@10 {m_ours['MRR@10'] / max(m_fts['MRR@10'], 1e-9):.3f}")
            print(f"reference: {REFERENCES.get(name, '—')}")
            if sweep:
                print("sweep (same index, ranking parameters only):")
                for k1 in (0.9, 1.2, 1.5):
                    for b in (0.6, 0.75, 0.9):
                        for tb in (1.0, 2.0, 3.0):
                            for bt in (0.75,):
                                ranking = dataclasses.replace(r, k1=k1, b_body=b, b_title=bt, title_weight=tb)
                                runs, _ = crewlet_runs(ranking)
                                m = measures(runs, qrels)
                                print(f"  k1 {k1:<4} b {b:<5} b_title {bt:<5} title ×{tb:<4} nDCG@10 {m['nDCG@10']:.4f} "
                                      f"recall@100 {m['recall@100']:.4f} MRR@10 {m['MRR@10']:.4f}", flush=True)
    finally:
        if not keep:
            shutil.rmtree(home.root.parent, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ir", default="/work/shared/ir", type=Path)
    ap.add_argument("--collection", action="append", choices=sorted(COLLECTIONS))
    ap.add_argument("--sweep", action="store_true", help="also print a k1 × b × title-boost grid")
    ap.add_argument("--keep", action="store_true", help="keep the homes (paths printed)")
    args = ap.parse_args(argv)
    for name in args.collection or list(COLLECTIONS):
        run_collection(args.ir, name, COLLECTIONS[name], args.sweep, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
