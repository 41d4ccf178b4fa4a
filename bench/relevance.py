"""Search quality of keyword, semantic and hybrid search, side by side, through the Searcher seam.

Judged collections (nDCG@10, recall@100, MRR@10) and a question set of our own over real documentation
(success@10, MRR@10).

    .venv/bin/python bench/relevance.py [--reuse] [--keep] [--only ir|questions] [--cli-check N]
        [--collection scifact --split train ...] [--sweep-k 1,2,5,10,20,60] [--sweep]

Homes are built the way the product builds them, under bench/.out/relevance/ (ignored by git):

- IR collections (../shared/ir, BEIR layout): each document is a page (title -> title, text -> body;
  a duplicate title gets its document id appended), loaded in batches of records through Node.submit;
  the keyword index is built by the Indexer; the vectors by the product's own duties (DutyRunner over
  core.duties.default_duties, exactly `crewlet worker --once`) with the embedded default model.
- The question set (bench/questions/corpora.jsonl): the documentation trees in ../shared/corpora are
  imported with core.importer.import_directory(into=KEY, title_from_name=True) — `crewlet import DIR
  --into KEY --title-from-name` — then indexed and embedded the same way. Each question names its
  target(s) by file path inside its tree; the import report maps a path to its page id (kept beside a
  kept home), and every target is checked to be a live page before a question is asked.

Every query goes through NativeSearcher.search — the code path `crewlet search` runs — in modes keyword,
semantic and hybrid, limit 100, exclude_ancestors=[]. It is called in-process rather than by starting
`crewlet search` once per query: 300 process starts per mode would measure start-up, not relevance.
Each answer must say it served the mode asked with nothing degraded, or the bench stops. The query
embedding bound is raised from 2 s to 60 s here because this measures what is found, not how fast
(a loaded two-core machine can miss the 2 s bound and serve keyword, which would blur the figures).

For keyword, SQLite FTS5 (porter + unicode61, bm25()) over the same rows is the peer line, built and
queried in the same run. Every phase's time is printed (load, index, embed, queries per mode) with
the machine's load; a kept home reports the times measured when it was built.

`--floor none|K,U` searches with nothing cut (no relevance floor, no folder rule), or with the floors K (a question the pages hold a
word of) and U (one whose words none holds) in place of the configured space's (core/search/floor.py);
`--compare-floor` runs every mode with the configured floor and with nothing cut (no floor, no folder
rule), side by side, and prints the change. `--nonsense` asks the nonsense questions (bench/questions/nonsense.jsonl) of every home in every
mode and counts the answers with no hit (`--wdd DIR` adds a windows-driver-docs home; the bundled example
is built under --out); with `--cli-check N` the first N of them also run as `crewlet search` processes,
whose exit must be what `crewlet search --help` says: 0 when the search ran, 1 when it could not.

`--cli-check N` also runs the first N queries of each set as `crewlet search --json` processes and
compares their answers with the seam's. `--sweep-k` reruns hybrid with other RRF constants (tune on
SciFact's train split, read on test: docs/relevance.md has the k chosen and why); `--sweep` prints the
keyword BM25F grid (k1 × b × title weight).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import (OUT, ROOT, Doc, Progress, Timer, fts5_from_home, load_pages, machine_load, measures, mrr_at,
                     ndcg_at, new_home, read_jsonl, read_qrels, run_worker_once)

from core.importer import ImportProblems, ImportReport, import_directory
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search import fusion, lexical, native
from core.search.indexer import Indexer
from core.search.lexical import DEFAULT_RANKING, Ranking
from core.search.native import NativeSearcher
from core.search.seam import Query

COLLECTIONS = {"scifact": ("test", "train"), "vaswani_npl": ("test",)}
REFERENCES = {"scifact": "BEIR paper BM25 nDCG@10 0.665; plain BM25 (k1 0.9, b 0.4, no stemming) 0.662",
              "vaswani_npl": "plain BM25 nDCG@10 0.384"}
MODES = ("keyword", "semantic", "hybrid")
LIMIT = 100
QUERY_TIMEOUT_S = 60.0
BUILT = "built.json"          # written last: a home without it was not finished and is built again


# -- homes, built once and kept under bench/.out/relevance ---------------------------------------------

def _fingerprint(*paths: Path) -> str:
    """What a kept home was built from: the source files' sizes and modification times."""
    h = hashlib.sha256()
    for p in paths:
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                st = f.stat()
                h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


@dataclasses.dataclass
class Built:
    """A home ready to search, and how long each phase of building it took."""

    folder: Path
    phases: dict[str, float]
    load: str                     # the machine load when it was built
    facts: dict[str, Any]
    reused: bool


def _cached(folder: Path, fingerprint: str, reuse: bool) -> dict[str, Any] | None:
    marker = folder / BUILT
    if not reuse or not marker.is_file():
        return None
    data = json.loads(marker.read_text())
    return data if data.get("fingerprint") == fingerprint else None


def _fresh(folder: Path, spaces: list[str]) -> Any:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return new_home(spaces, folder)


def _finish(folder: Path, fingerprint: str, phases: dict[str, float], facts: dict[str, Any]) -> Built:
    load = machine_load()
    (folder / BUILT).write_text(json.dumps({"fingerprint": fingerprint, "phases": phases, "load": load,
                                            "built_at": time.strftime("%Y-%m-%d %H:%M:%S"), "facts": facts}))
    return Built(folder, phases, load, facts, reused=False)


def _embed(node: Node, label: str) -> tuple[float, dict[str, int]]:
    with Timer() as t:
        totals = run_worker_once(node, label=label)
    if totals["covered"] < totals["total"]:
        raise SystemExit(f"{label}: only {totals['covered']:,} of {totals['total']:,} pages were embedded")
    return t.seconds, totals


def ir_home(out: Path, ir: Path, name: str, reuse: bool) -> tuple[Built, dict[str, str]]:
    """A home holding the collection's corpus, indexed and embedded; and page id -> document id."""
    folder = out / name
    corpus_file = ir / name / "corpus.jsonl"
    fp = _fingerprint(corpus_file)
    cached = _cached(folder, fp, reuse)
    if cached is not None:
        mapping = json.loads((folder / "mapping.json").read_text())
        return Built(folder, cached["phases"], cached["load"], cached["facts"], reused=True), mapping
    container = "IR"
    home = _fresh(folder, [container])
    corpus = read_jsonl(corpus_file)
    docs = [Doc(str(d["_id"]), d.get("title") or str(d["_id"]), d.get("text") or "", container) for d in corpus]
    with Node.open(home) as node:
        with Timer() as t_load:
            mapping = load_pages(node, docs)
        with Indexer(home) as indexer, Timer() as t_index:
            indexer.run_pass()
        embed_s, totals = _embed(node, name)
    (folder / "mapping.json").write_text(json.dumps(mapping))
    return _finish(folder, fp, {"load": t_load.seconds, "index": t_index.seconds, "embed": embed_s},
                   {"pages": len(docs), **totals}), mapping


# -- queries through the seam --------------------------------------------------------------------------

@dataclasses.dataclass
class Run:
    ranked: dict[str, list[str]]     # query id -> page ids, best first
    seconds: float


def floor_arg(text: str | None) -> Any:
    """--floor: None (the configured floors), 'none' (nothing cut: no floor, no folder rule), or 'K,U'."""
    if text is None:
        return native.CONFIGURED
    if text == "none":
        return False
    known, unknown = (float(x) for x in text.split(","))
    return (known, unknown)


def searchers_for(node: Node, args: argparse.Namespace) -> dict[str, NativeSearcher]:
    """The searcher(s) a run measures with: the configured (or --floor) floor, and with --compare-floor
    the same with no floor, first."""
    out = {}
    if args.compare_floor:   # the baseline cuts nothing: no floor, and folders found on their title alone stay
        out["no floor"] = NativeSearcher(node, query_timeout_s=QUERY_TIMEOUT_S, relevance_floor=False)
    out["floor" if args.compare_floor else ""] = NativeSearcher(node, query_timeout_s=QUERY_TIMEOUT_S,
                                                                relevance_floor=floor_arg(args.floor))
    return out


def search_all(searcher: NativeSearcher, queries: dict[str, str], mode: str, container: list[str] | None = None) -> Run:
    ranked: dict[str, list[str]] = {}
    started = time.perf_counter()
    for qid, text in queries.items():
        res = searcher.search(Query(text, mode=mode, limit=LIMIT, exclude_ancestors=[], containers=container))
        out = res.outcome
        if out.served_mode != mode or out.degraded is not None:
            raise SystemExit(f"query {qid!r} in mode {mode} was served as {out.served_mode} "
                             f"(degraded {out.degraded}): {out.message}")
        ranked[qid] = [h.page_id for h in res.hits]
    return Run(ranked, time.perf_counter() - started)


def cli_check(home: Path, queries: dict[str, str], seam: dict[str, dict[str, list[str]]], n: int) -> None:
    """The same questions through `crewlet search --json --limit 100` as separate processes, each compared
    with the seam's answer in this run: the CLI is the seam plus start-up. A process embeds its query with
    the product's own 2 s bound, so on a loaded machine it can serve less than asked; that is counted."""
    exe = [sys.executable, "-m", "crewlet_tui.cli", "--home", str(home.resolve()), "search", "--json", "--limit", str(LIMIT)]
    picked = list(queries.items())[:n]
    for mode in MODES:
        same, degraded, seconds = 0, [], []
        for qid, text in picked:
            started = time.perf_counter()
            proc = subprocess.run([*exe, "--mode", mode, "--", text], capture_output=True, text=True, timeout=300,
                                  cwd=ROOT)
            seconds.append(time.perf_counter() - started)
            if proc.returncode != 0:
                degraded.append(f"{qid}: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
                continue
            answer = json.loads(proc.stdout)
            outcome = answer["outcome"]
            if outcome["served_mode"] != mode or outcome["degraded"]:
                degraded.append(f"{qid}: served {outcome['served_mode']} ({outcome['degraded']})")
                continue
            same += [h["page_id"] for h in answer["hits"]] == seam[mode][qid]
        print(f"  crewlet search --mode {mode:8}: {same}/{len(picked)} answers identical to the seam's, "
              f"{len(degraded)} did not serve the mode asked; {statistics.median(seconds):.1f}s a process (median)"
              + ("".join(f"\n    {d}" for d in degraded)))


@functools.cache
def _fusion_with(k: int) -> Any:
    return functools.partial(fusion.reciprocal_rank_fusion, k=k)


def with_rrf_k(k: int | None) -> None:
    """Make the seam fuse with RRF constant k (None: the shipped default). A sweep only: the seam reads
    the name `reciprocal_rank_fusion` from core.search.native at each hybrid search."""
    native.reciprocal_rank_fusion = fusion.reciprocal_rank_fusion if k is None else _fusion_with(k)


def _row(label: str, m: dict[str, float], seconds: float, n: int) -> str:
    return (f"{label:30} {m['nDCG@10']:8.3f} {m['recall@100']:11.3f} {m['MRR@10']:8.3f} "
            f"{seconds:8.1f}s {1000 * seconds / max(n, 1):8.1f}")


SAVED: dict[str, Any] = {}      # every set's measures and per-query figures, for --save


def success_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    """1 when a relevant document is in the first k, else 0."""
    return 1.0 if any(rel.get(d, 0) > 0 for d in ranked[:k]) else 0.0


def print_losses(per_query: dict[str, dict[str, dict[str, float]]], texts: dict[str, str]) -> None:
    """The queries where hybrid scores lower than one of its halves (nDCG@10), each with both figures: what
    fusion cost, query by query, beside the averages."""
    for half in ("keyword", "semantic"):
        lost = [(q, per_query[half][q]["nDCG@10"], per_query["hybrid"][q]["nDCG@10"]) for q in texts
                if per_query["hybrid"][q]["nDCG@10"] < per_query[half][q]["nDCG@10"] - 1e-9]
        gained = sum(1 for q in texts if per_query["hybrid"][q]["nDCG@10"] > per_query[half][q]["nDCG@10"] + 1e-9)
        dropped = [q for q, _, _ in lost if per_query[half][q]["success@10"] > per_query["hybrid"][q]["success@10"]]
        print(f"hybrid against {half}: lower nDCG@10 on {len(lost)} of {len(texts)} queries, higher on {gained}; "
              f"{len(dropped)} lose every relevant page from the top 10")
        for q, a, b in sorted(lost, key=lambda x: x[2] - x[1])[:LOSSES_SHOWN]:
            gone = " (out of the top 10)" if q in dropped else ""
            print(f"    {q:16} {half} {a:.3f} hybrid {b:.3f}{gone}  {texts[q][:70]}")
        if len(lost) > LOSSES_SHOWN:
            print(f"    … {len(lost) - LOSSES_SHOWN} more (--save keeps every one)")


LOSSES_SHOWN = 15


def _phases(built: Built) -> str:
    what = "kept home, built" if built.reused else "built"
    times = " · ".join(f"{k} {v:.1f}s" for k, v in built.phases.items())
    return f"{what}: {times} ({built.load})"


def run_collection(args: argparse.Namespace, name: str, splits: list[str]) -> dict[str, Any]:
    ir: Path = args.ir
    folder = ir / name
    queries = {str(q["_id"]): q["text"] for q in read_jsonl(folder / "queries.jsonl")}
    built, mapping = ir_home(args.out, ir, name, args.reuse)
    facts = built.facts
    print(f"\n== {name}: {facts['pages']:,} documents — home {built.folder / 'home'}")
    print(f"{_phases(built)}; {facts['covered']:,} of {facts['total']:,} pages embedded")
    results: dict[str, Any] = {}
    with Node.open(Home(built.folder / "home")) as node:
        for stale in built.folder.glob("fts5.db*"):  # the peer is rebuilt in every run, timed beside us
            stale.unlink()
        fts, fts_build = fts5_from_home(node, built.folder / "fts5.db")
        print(f"FTS5 peer build {fts_build:.1f}s")
        searchers = searchers_for(node, args)
        searcher = searchers[list(searchers)[-1]]
        try:
            for split in splits:
                qrels = read_qrels(folder / "qrels" / f"{split}.tsv")
                judged = {q: queries[q] for q in qrels if q in queries}
                print(f"\n-- {name} {split}: {len(judged)} judged queries ({machine_load()})")
                print(f"{'':30} {'nDCG@10':>8} {'recall@100':>11} {'MRR@10':>8} {'time':>9} {'ms/query':>8}")
                per_mode: dict[str, dict[str, float]] = {}
                seam: dict[str, dict[str, list[str]]] = {}
                docs: dict[str, dict[str, list[str]]] = {}
                for mode in MODES:
                    by: dict[str, dict[str, float]] = {}
                    for which, one in searchers.items():
                        run = search_all(one, judged, mode)
                        seam[mode] = run.ranked
                        docs[mode] = {q: [mapping[p] for p in r] for q, r in run.ranked.items()}
                        by[which] = m = measures(docs[mode], qrels)
                        m["success@10"] = statistics.fmean(success_at(docs[mode].get(q, []), qrels[q], 10)
                                                           for q in qrels if any(v > 0 for v in qrels[q].values()))
                        label = f"crewlet {mode}" + (f" (RRF k {fusion.RRF_K})" if mode == "hybrid" else "")
                        print(_row(f"{label} {which}".rstrip(), m, run.seconds, len(judged)))
                    if len(by) == 2:
                        a, b = by["no floor"], by["floor"]
                        print(f"{'  change with the floor':30} {b['nDCG@10'] - a['nDCG@10']:+8.4f} "
                              f"{b['recall@100'] - a['recall@100']:+11.4f} {b['MRR@10'] - a['MRR@10']:+8.4f}")
                    per_mode[mode] = by[list(by)[-1]]
                started = time.perf_counter()
                theirs = {q: [mapping[p] for p, _ in fts.search(t, LIMIT)] for q, t in judged.items()}
                m_fts = measures(theirs, qrels)
                print(_row("SQLite FTS5 bm25() (peer)", m_fts, time.perf_counter() - started, len(judged)))
                best_half = max(per_mode["keyword"]["nDCG@10"], per_mode["semantic"]["nDCG@10"])
                print(f"hybrid − better half: nDCG@10 {per_mode['hybrid']['nDCG@10'] - best_half:+.3f}; "
                      f"keyword/FTS5 nDCG@10 ratio {per_mode['keyword']['nDCG@10'] / max(m_fts['nDCG@10'], 1e-9):.3f}")
                print(f"reference: {REFERENCES.get(name, '—')}")
                print("success@10: " + ", ".join(f"{mode} {per_mode[mode]['success@10']:.3f}" for mode in MODES))
                per_query = {mode: {q: {"nDCG@10": ndcg_at(docs[mode].get(q, []), qrels[q], 10),
                                        "MRR@10": mrr_at(docs[mode].get(q, []), qrels[q], 10),
                                        "success@10": success_at(docs[mode].get(q, []), qrels[q], 10)}
                                    for q in judged} for mode in MODES}
                print_losses(per_query, judged)
                results[split] = per_mode | {"fts5": m_fts}
                SAVED[f"{name} {split}"] = {"measures": per_mode, "per_query": per_query}
                if args.cli_check:
                    print(f"the first {args.cli_check} queries through the CLI, one process each:")
                    cli_check(built.folder / "home", judged, seam, args.cli_check)
                if args.sweep_k:
                    sweep_k(searcher, judged, qrels, mapping, args.sweep_k)
                if args.sweep:
                    sweep_bm25(node, judged, qrels, mapping)
        finally:
            for one in searchers.values():
                one.close()
            fts.db.close()
    return results


def sweep_k(searcher: NativeSearcher, judged: dict[str, str], qrels: dict[str, dict[str, int]],
            mapping: dict[str, str], ks: list[int]) -> None:
    print("RRF k sweep (hybrid through the seam, this split):")
    try:
        for k in ks:
            with_rrf_k(k)
            run = search_all(searcher, judged, "hybrid")
            m = measures({q: [mapping[p] for p in r] for q, r in run.ranked.items()}, qrels)
            print(f"  k {k:<5} nDCG@10 {m['nDCG@10']:.4f}  recall@100 {m['recall@100']:.4f}  MRR@10 {m['MRR@10']:.4f}",
                  flush=True)
    finally:
        with_rrf_k(None)


def sweep_bm25(node: Node, judged: dict[str, str], qrels: dict[str, dict[str, int]], mapping: dict[str, str]) -> None:
    print("BM25F sweep (same index, keyword ranking parameters only):")
    r = DEFAULT_RANKING
    for k1 in (0.9, 1.2, 1.5):
        for b in (0.6, 0.75, 0.9):
            for tb in (1.0, 2.0, 3.0):
                ranking: Ranking = dataclasses.replace(r, k1=k1, b_body=b, title_weight=tb)
                searcher = NativeSearcher(node, ranking=ranking)
                try:
                    run = search_all(searcher, judged, "keyword")
                finally:
                    searcher.close()
                m = measures({q: [mapping[p] for p in x] for q, x in run.ranked.items()}, qrels)
                print(f"  k1 {k1:<4} b {b:<5} title ×{tb:<4} nDCG@10 {m['nDCG@10']:.4f} "
                      f"recall@100 {m['recall@100']:.4f} MRR@10 {m['MRR@10']:.4f}", flush=True)


# -- the question set over ../shared/corpora ---------------------------------------------------------------

# (space, tree under ../shared/corpora): each tree is imported into its own space, keeping its folders
CORPORA = (("TEXTUAL", "textual-docs/docs"), ("HUGO", "hugo-docs/content"), ("PWSH", "powershell-docs/reference"),
           ("WDD", "windows-driver-docs/windows-driver-docs-pr"))
QUESTIONS = Path(__file__).resolve().parent / "questions" / "corpora.jsonl"
PARAPHRASES = Path(__file__).resolve().parent / "questions" / "paraphrases.jsonl"
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _import_tree(kb: KnowledgeBase, root: Path, key: str, staging: Path) -> tuple[ImportReport, list[str]]:
    """`crewlet import ROOT --into KEY --title-from-name`. A file the importer refuses (frontmatter YAML
    cannot parse: five PowerShell pages) stops the whole import, as it should for a user, who would fix
    it; the corpora are not ours to edit, so the tree is copied to `staging` without those files and
    imported from there. Returns the report and the files left out."""
    show = Progress(f"importing {key}")
    try:
        return import_directory(kb, root, into=key, title_from_name=True, progress=show), []
    except ImportProblems as exc:
        refused = sorted({f for p in exc.problems for f in p.files})
        if not refused or any(p.code not in ("bad_yaml", "bad_frontmatter", "not_utf8", "not_text")
                              for p in exc.problems):
            raise
    target = staging / key
    shutil.rmtree(target, ignore_errors=True)
    skip = {str(root / f) for f in refused}
    shutil.copytree(root, target, ignore=lambda d, names: [n for n in names if str(Path(d) / n) in skip])
    return import_directory(kb, target, into=key, title_from_name=True, progress=show), refused


def corpora_folder(out: Path, trees: list[str] | None) -> Path:
    chosen = [key for key, _ in CORPORA if trees is None or key in trees]
    return out / ("corpora" if len(chosen) == len(CORPORA) else "corpora-" + "-".join(sorted(chosen)))


def corpora_home(out: Path, corpora: Path, reuse: bool,
                 trees: list[str] | None = None) -> tuple[Built, dict[str, dict[str, str]]]:
    """One home holding the documentation trees (`trees`: their space keys; None: every one), each in its
    own space; and, per tree, file -> page id. The home of every tree is `corpora`; a subset's is named by
    its keys (`corpora-HUGO-TEXTUAL`), so a run that cannot afford to embed windows-driver-docs (14k
    pages) keeps a home of its own."""
    chosen = [(key, rel) for key, rel in CORPORA if trees is None or key in trees]
    folder = corpora_folder(out, trees)
    roots = [(key, corpora / rel) for key, rel in chosen]
    missing = [str(r) for _, r in roots if not r.is_dir()]
    if missing:
        raise SystemExit(f"no documentation tree at {', '.join(missing)} — pass --corpora DIR (../shared/corpora)")
    fp = _fingerprint(*(r for _, r in roots))
    cached = _cached(folder, fp, reuse)
    if cached is not None:
        pages = json.loads((folder / "pages.json").read_text())
        return Built(folder, cached["phases"], cached["load"], cached["facts"], reused=True), pages
    home = _fresh(folder, [key for key, _ in roots])
    phases: dict[str, float] = {}
    facts: dict[str, Any] = {"spaces": {}, "left_out": {}}
    pages: dict[str, dict[str, str]] = {}
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        with Timer() as t_load:
            for key, root in roots:
                report, refused = _import_tree(kb, root, key, folder / "staging")
                rel = str(root.relative_to(corpora))
                pages[rel] = {p.source: p.page_id for p in report.pages if p.source and p.page_id}
                facts["spaces"][key] = {"tree": rel, "pages": len(report.pages), "files": report.files}
                facts["left_out"][key] = refused
                print(f"  imported {rel} into {key}: {len(report.pages):,} pages ({report.files:,} files, "
                      f"{report.seconds:.1f}s){'; left out ' + ', '.join(refused) if refused else ''}",
                      file=sys.stderr, flush=True)
        phases["load"] = t_load.seconds
        with Indexer(home) as indexer, Timer() as t_index:
            indexer.run_pass()
        phases["index"] = t_index.seconds
        phases["embed"], totals = _embed(node, "corpora")
    shutil.rmtree(folder / "staging", ignore_errors=True)
    (folder / "pages.json").write_text(json.dumps(pages))
    facts |= {"pages": sum(s["pages"] for s in facts["spaces"].values()), **totals}
    return _finish(folder, fp, phases, facts), pages


def content_words(text: str, *, split_names: bool = False) -> set[str]:
    """The words keyword search would match on (the index's own analyser: stop words out, stems);
    `split_names` also splits CamelCase names (LoadingIndicator: loading, indicator) so a question
    counts as sharing a word with a title only when a person would say so too."""
    words = set(lexical.analyze(_ANALYZER, text, limit=None))
    if split_names:
        words |= set(lexical.analyze(_ANALYZER, " ".join(_CAMEL.findall(text)), limit=None))
    return words


_ANALYZER = lexical.make_analyzer()


@dataclasses.dataclass
class Question:
    qid: str
    text: str
    corpus: str
    targets: list[str]          # files relative to the corpus tree, any of which answers it
    title: str
    page_ids: set[str]
    titles: list[str]           # the target pages' titles as imported
    shares_title_word: bool


def load_questions(path: Path, corpora: Path, pages: dict[str, dict[str, str]], node: Node,
                   trees_left_out: list[str] | None = None) -> list[Question]:
    """Every question with its targets resolved to page ids; stops on a target that is not a file of its
    tree or was not imported as a live page. A question over a tree of `trees_left_out` (not in this
    home, by --trees) is skipped."""
    out: list[Question] = []
    problems: list[str] = []
    for n, row in enumerate(read_jsonl(path), start=1):
        where = f"{path.name}:{n} ({row.get('id', '?')})"
        tree = pages.get(row["corpus"])
        if tree is None and row["corpus"] in (trees_left_out or []):
            continue
        if tree is None:
            problems.append(f"{where}: corpus {row['corpus']!r} is not one of {', '.join(pages)}")
            continue
        ids, titles = set(), []
        for target in row["targets"]:
            if not (corpora / row["corpus"] / target).is_file():
                problems.append(f"{where}: {row['corpus']}/{target} is not a file")
            elif target not in tree:
                problems.append(f"{where}: {row['corpus']}/{target} was not imported (left out by the importer)")
            else:
                ids.add(tree[target])
        with node.lock:
            for pid in sorted(ids):
                r = node.conn.execute("SELECT title, trashed_at FROM pages WHERE id = ?", (pid,)).fetchone()
                if r is None or r["trashed_at"] is not None:
                    problems.append(f"{where}: page {pid} of {row['targets']} is not a live page of the home")
                else:
                    titles.append(r["title"])
        shares = any(content_words(row["question"]) & content_words(t, split_names=True) for t in titles)
        out.append(Question(row["id"], row["question"], row["corpus"], row["targets"], row["title"], ids, titles, shares))
    if problems:
        raise SystemExit("the question set does not resolve:\n  " + "\n  ".join(problems))
    return out


def first_rank(ranked: list[str], wanted: set[str]) -> int | None:
    """1-based rank of the first target found, None when none is in the list."""
    for i, pid in enumerate(ranked, start=1):
        if pid in wanted:
            return i
    return None


def run_questions(args: argparse.Namespace) -> dict[str, Any]:
    built, pages = corpora_home(args.out, args.corpora, args.reuse, args.trees)
    facts = built.facts
    spaces = ", ".join(f"{k} {v['pages']:,} ({v['tree']})" for k, v in facts["spaces"].items())
    left_out_trees = [rel for key, rel in CORPORA if key not in facts["spaces"]]
    print(f"\n== question sets over ../shared/corpora — home {built.folder / 'home'}")
    print(f"spaces: {spaces}; {facts['pages']:,} pages"
          + (f"; not in this home (--trees): {', '.join(left_out_trees)}" if left_out_trees else ""))
    for key, files in facts["left_out"].items():
        if files:
            print(f"left out of {key} (the importer refuses their frontmatter): {', '.join(files)}")
    print(f"{_phases(built)}; {facts['covered']:,} of {facts['total']:,} pages embedded")
    out: dict[str, Any] = {}
    with Node.open(Home(built.folder / "home")) as node:
        searchers = searchers_for(node, args)
        try:
            for path in args.questions:
                out[path.name] = _ask_set(args, path, pages, node, searchers, left_out_trees, built)
        finally:
            for one in searchers.values():
                one.close()
    return out


def _ask_set(args: argparse.Namespace, path: Path, pages: dict[str, dict[str, str]], node: Node,
             searchers: dict[str, NativeSearcher], left_out_trees: list[str], built: Built) -> dict[str, Any]:
    questions = load_questions(path, args.corpora, pages, node, left_out_trees)
    skipped = sum(1 for _ in read_jsonl(path)) - len(questions)
    no_share = sum(1 for q in questions if not q.shares_title_word)
    per_corpus: dict[str, int] = {}
    for q in questions:
        per_corpus[q.corpus.split("/")[0]] = per_corpus.get(q.corpus.split("/")[0], 0) + 1
    print(f"\n-- {path.name}: {len(questions)} questions ({', '.join(f'{k} {v}' for k, v in per_corpus.items())}"
          f"{f'; {skipped} over trees not in this home skipped' if skipped else ''}); "
          f"{no_share} share no content word with their target's title ({machine_load()})")
    searcher = searchers[list(searchers)[-1]]
    ranks: dict[str, dict[str, int | None]] = {}
    texts = {q.qid: q.text for q in questions}
    seam: dict[str, dict[str, list[str]]] = {}
    print(f"{'':30} {'success@10':>10} {'nDCG@10':>8} {'MRR@10':>8} {'found@100':>10} {'time':>9} {'ms/query':>8}")
    for mode in MODES:
        for which, one in searchers.items():
            run = search_all(one, texts, mode)
            seam[mode] = run.ranked
            ranks[mode] = {q.qid: first_rank(run.ranked[q.qid], q.page_ids) for q in questions}
            print(_qrow(f"crewlet {mode} {which}".rstrip(), list(ranks[mode].values()), run.seconds))
    if args.sweep_k:
        print("RRF k sweep (hybrid through the seam):")
        try:
            for k in args.sweep_k:
                with_rrf_k(k)
                run = search_all(searcher, texts, "hybrid")
                found = {q.qid: first_rank(run.ranked[q.qid], q.page_ids) for q in questions}
                lost = sum(1 for q in questions if (ranks["keyword"][q.qid] or 999) <= 10 < (found[q.qid] or 999))
                print(_qrow(f"  k {k}", list(found.values()), run.seconds) + f"  loses {lost} keyword answers")
        finally:
            with_rrf_k(None)
    if args.cli_check:
        print(f"the first {args.cli_check} questions through the CLI, one process each:")
        cli_check(built.folder / "home", texts, seam, args.cli_check)
    _question_breakdown(questions, ranks)
    per_query = {mode: {q.qid: _rank_measures(ranks[mode][q.qid]) for q in questions} for mode in MODES}
    print_losses(per_query, texts)
    SAVED[path.name] = {"measures": {mode: _rank_summary(list(ranks[mode].values())) for mode in MODES},
                        "per_query": per_query, "ranks": ranks}
    return ranks


def _rank_measures(r: int | None) -> dict[str, float]:
    """One question's measures from the rank of its first target (the targets are alternatives: one
    answer, so the ideal DCG is 1)."""
    top = r is not None and r <= 10
    return {"nDCG@10": 1.0 / math.log2(r + 1) if top else 0.0, "MRR@10": 1.0 / r if top else 0.0,
            "success@10": 1.0 if top else 0.0}


def _rank_summary(found: list[int | None]) -> dict[str, float]:
    each = [_rank_measures(r) for r in found]
    n = max(len(found), 1)
    return {k: sum(e[k] for e in each) / n for k in ("success@10", "nDCG@10", "MRR@10")} | {
        "found@100": sum(1 for r in found if r is not None) / n}


def _qrow(label: str, found: list[int | None], seconds: float) -> str:
    m = _rank_summary(found)
    n = max(len(found), 1)
    return (f"{label:30} {m['success@10']:10.3f} {m['nDCG@10']:8.3f} {m['MRR@10']:8.3f} {m['found@100']:10.3f} "
            f"{seconds:8.1f}s {1000 * seconds / n:8.1f}")


def _question_breakdown(questions: list[Question], ranks: dict[str, dict[str, int | None]]) -> None:
    def top10(r: int | None) -> bool:
        return r is not None and r <= 10

    corpora = sorted({q.corpus.split("/")[0] for q in questions})
    print("success@10 by corpus:     " + "  ".join(f"{c:>22}" for c in corpora))
    for mode in MODES:
        cells = []
        for c in corpora:
            mine = [q for q in questions if q.corpus.startswith(c + "/")]
            hit = sum(1 for q in mine if top10(ranks[mode][q.qid]))
            cells.append(f"{hit:>2}/{len(mine):<2}")
        print(f"  {mode:22}  " + "  ".join(f"{c:>22}" for c in cells))
    group = [q for q in questions if not q.shares_title_word]
    print(f"success@10 on the {len(group)} sharing no word with the title: "
          + ", ".join(f"{m} {sum(1 for q in group if top10(ranks[m][q.qid]))}" for m in MODES))
    lost = [q for q in questions if top10(ranks["keyword"][q.qid]) and not top10(ranks["hybrid"][q.qid])]
    gained = [q for q in questions if top10(ranks["hybrid"][q.qid]) and not top10(ranks["keyword"][q.qid])]
    print(f"hybrid loses {len(lost)} question(s) keyword answers in its top 10"
          + (": " + "; ".join(f"{q.qid} (keyword {ranks['keyword'][q.qid]}, hybrid {ranks['hybrid'][q.qid]})" for q in lost)
             if lost else ""))
    print(f"hybrid answers {len(gained)} question(s) keyword does not (top 10)")
    print("per question (rank of the first target; - = not in the top 100):")
    print(f"  {'id':16} {'keyword':>7} {'semantic':>8} {'hybrid':>6}  question -> target title")
    for q in questions:
        cells = [str(ranks[m][q.qid] or "-") for m in MODES]
        mark = "" if q.shares_title_word else " *"
        print(f"  {q.qid:16} {cells[0]:>7} {cells[1]:>8} {cells[2]:>6}  {q.text} -> {q.titles[0] if q.titles else q.title}{mark}")
    print("  (* shares no content word with its target's title)")


# -- the nonsense questions ----------------------------------------------------------------------------

NONSENSE = Path(__file__).resolve().parent / "questions" / "nonsense.jsonl"


def example_home(out: Path) -> Path:
    """The bundled example, imported and embedded the way `crewlet init --example` and `worker --once` do."""
    folder = out / "example"
    if not (folder / BUILT).is_file():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "crewlet_tui.cli", "--home", str(folder / "home"), "init", "--example"],
                       check=True, capture_output=True, cwd=ROOT)
        with Node.open(Home(folder / "home")) as node:
            with Indexer(node.home) as indexer:
                indexer.run_pass()
            run_worker_once(node, label="example")
        (folder / BUILT).write_text("{}")
    return folder / "home"


def expected_exit(outcome: Any) -> int:
    """What `crewlet search --help` says: 0 when the search ran (hits or none), 1 when it could not."""
    return 0 if outcome.served_mode is not None else 1


def run_nonsense(args: argparse.Namespace) -> None:
    questions = read_jsonl(NONSENSE)
    homes: list[tuple[str, Path, list[str] | None]] = [("example", example_home(args.out), None)]
    for name in ("scifact", "vaswani_npl", "corpora"):
        if (args.out / name / BUILT).is_file():
            homes.append((name, args.out / name / "home", None))
    if (args.out / "corpora" / BUILT).is_file():
        homes.append(("corpora, WDD only", args.out / "corpora" / "home", ["WDD"]))
    if args.wdd:
        homes.append(("windows-driver-docs", args.wdd, None))
    print(f"\n== {len(questions)} nonsense questions ({NONSENSE.name}) in every mode ({machine_load()})")
    print(f"{'home':24} {'pages':>7} " + " ".join(f"{m + ' empty':>16}" for m in MODES) + "  kept a hit (hybrid)")
    for label, root, containers in homes:
        with Node.open(Home(root)) as node:
            pages = node.conn.execute("SELECT count(*) FROM pages WHERE trashed_at IS NULL").fetchone()[0]
            searcher = NativeSearcher(node, query_timeout_s=QUERY_TIMEOUT_S, relevance_floor=floor_arg(args.floor))
            cells, kept = [], []
            outcomes: dict[tuple[str, str], Any] = {}
            try:
                for mode in MODES:
                    empty = 0
                    for q in questions:
                        res = searcher.search(Query(q["query"], mode=mode, exclude_ancestors=[], containers=containers))
                        outcomes[(mode, q["id"])] = res
                        if not res.hits:
                            empty += 1
                        elif mode == "hybrid":
                            kept.append(f"{q['query']!r}: {res.hits[0].title[:40]!r} ({res.hits[0].score:.2f})")
                    cells.append(f"{empty:>3}/{len(questions)} {100 * empty / len(questions):5.1f}%")
            finally:
                searcher.close()
        print(f"{label:24} {pages:>7,} " + " ".join(f"{c:>16}" for c in cells) + "  " + "; ".join(kept[:3])
              + (f" (+{len(kept) - 3})" if len(kept) > 3 else ""))
        if args.cli_check and containers is None:
            nonsense_cli_check(root, questions[:args.cli_check], outcomes)


def nonsense_cli_check(home: Path, questions: list[dict[str, Any]], outcomes: dict[tuple[str, str], Any]) -> None:
    exe = [sys.executable, "-m", "crewlet_tui.cli", "--home", str(home.resolve()), "search", "--json"]
    agree, wrong = 0, []
    for mode in MODES:
        for q in questions:
            proc = subprocess.run([*exe, "--mode", mode, "--", q["query"]], capture_output=True, text=True, timeout=300,
                                  cwd=ROOT)
            want = expected_exit(outcomes[(mode, q["id"])].outcome)
            hits = len(json.loads(proc.stdout)["hits"]) if proc.stdout.strip() else None
            if proc.returncode == want and hits == len(outcomes[(mode, q["id"])].hits):
                agree += 1
            else:
                wrong.append(f"{mode} {q['query']!r}: exit {proc.returncode} (help says {want}), {hits} hits")
    print(f"  as `crewlet search` processes: {agree}/{agree + len(wrong)} exited as the help says with the "
          f"seam's hit count" + "".join(f"\n    {w}" for w in wrong[:10]))


def _ks(text: str) -> list[int]:
    try:
        ks = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sweep-k takes whole numbers separated by commas, e.g. 20,60,100; got {text!r}")
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"--sweep-k needs constants of at least 1, e.g. 20,60,100; got {text!r}")
    return ks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ir", default=Path("/work/shared/ir"), type=Path)
    ap.add_argument("--out", default=OUT / "relevance", type=Path, help="where homes are built and kept")
    ap.add_argument("--corpora", default=Path("/work/shared/corpora"), type=Path)
    ap.add_argument("--questions", action="append", type=Path,
                    help="a question set (JSON lines; repeat for several; default: corpora.jsonl and paraphrases.jsonl)")
    ap.add_argument("--trees", type=lambda t: [k.strip().upper() for k in t.split(",") if k.strip()],
                    help="the documentation trees the question home holds, by space key (TEXTUAL,HUGO,PWSH,WDD; "
                         "default every one): questions over the others are skipped")
    ap.add_argument("--save", type=Path, help="write every set's measures and per-query figures here (JSON)")
    ap.add_argument("--only", choices=("ir", "questions", "nonsense"),
                    help="run only the judged collections, the question set, or the nonsense questions")
    ap.add_argument("--collection", action="append", choices=sorted(COLLECTIONS))
    ap.add_argument("--split", action="append", help="qrels split(s) to score (default: every known split)")
    ap.add_argument("--reuse", action="store_true", help="search homes kept by an earlier run (built when missing)")
    ap.add_argument("--keep", action="store_true", help="keep the homes built by this run (implied by --reuse)")
    ap.add_argument("--sweep-k", type=_ks, help="also rerun hybrid with these RRF constants, e.g. 10,20,40,60,100")
    ap.add_argument("--cli-check", type=int, default=0, metavar="N",
                    help="also run the first N queries of each set through `crewlet search --json` processes")
    ap.add_argument("--sweep", action="store_true", help="also print a keyword k1 × b × title-boost grid")
    ap.add_argument("--floor", help="'none', or 'K,U': the relevance floors to search with (default: the configured)")
    ap.add_argument("--compare-floor", action="store_true", help="every mode with the floor and with none, side by side")
    ap.add_argument("--nonsense", action="store_true", help="also count the nonsense questions' empty answers")
    ap.add_argument("--wdd", type=Path, help="with --nonsense: a windows-driver-docs home, embedded")
    args = ap.parse_args(argv)
    args.questions = args.questions or [QUESTIONS, PARAPHRASES]
    print(f"relevance bench — {machine_load()}")
    built: list[Path] = []
    try:
        for name in (args.collection or list(COLLECTIONS)) if args.only not in ("questions", "nonsense") else []:
            splits = args.split or list(COLLECTIONS[name])
            unknown = [s for s in splits if not (args.ir / name / "qrels" / f"{s}.tsv").is_file()]
            if unknown:
                ap.error(f"{name} has no qrels split {', '.join(unknown)} (known: {', '.join(COLLECTIONS[name])})")
            built.append(args.out / name)
            run_collection(args, name, splits)
        if args.only not in ("ir", "nonsense") and not args.collection:
            unknown = sorted(set(args.trees or []) - {key for key, _ in CORPORA})
            if unknown:
                ap.error(f"--trees: no tree {', '.join(unknown)} (known: {', '.join(k for k, _ in CORPORA)})")
            built.append(corpora_folder(args.out, args.trees))
            run_questions(args)
        if args.nonsense or args.only == "nonsense":
            run_nonsense(args)
        if args.save:
            args.save.write_text(json.dumps(SAVED, indent=1))
    finally:
        if not (args.keep or args.reuse):
            for folder in built:
                shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
