"""Where a relevance floor for semantic search can sit: exact cosines of relevant and non-relevant
(query, document) pairs under the shipped model, against the nearest page a nonsense question reaches.

    .venv/bin/python bench/floor.py                    # the homes bench/relevance.py --reuse keeps
    .venv/bin/python bench/floor.py --wdd /tmp/wdd-search --floors 0.20,0.25,0.30

For each home (the judged collections and the question set's home that bench/relevance.py builds and
keeps under bench/.out/relevance/, the bundled example built here, and a windows-driver-docs home when
given), every vector of the configured space is read from the SQLite file and every question embedded
with the product's own provider (`core.embed.local.LocalProvider`, the bytes a search would use); the
cosines are exact (float32 dot products of unit vectors, over every page: no first stage).

Printed, per collection:
- relevant pairs (qrels > 0; a question's target pages): the distribution of their cosines, and of those
  the semantic ranking puts in its top ten (the pairs a floor can cost nDCG@10);
- non-relevant pairs: a uniform sample of all of them, and each question's best non-relevant page;
- the floor's probes (core/search/data/floor_probes.txt): the nearest page each reaches (pages with a
  body: a folder's vector is its title alone and search never lets one in on meaning), and the floor
  `crewlet search floor --measure` would set from them on this corpus (core.search.floor.measure_floor);
- the nonsense questions (bench/questions/nonsense.jsonl, none of them a probe: held out): the same;
- for each candidate floor for a question the pages hold a word of (every judged question does): the
  share of relevant top-ten pairs under it, and semantic nDCG@10 (or success@10) with the ranking cut
  at it. The nonsense questions hold no word of these corpora: the other floor is theirs.

It measures; the floor the product ships (core/search/floor.py) is chosen from these tables and its
choice written down in docs/relevance.md. Benchmarks print; they never assert.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from _common import OUT, ROOT, machine_load, ndcg_at, read_jsonl, read_qrels

from core.embed.local import LocalProvider
from core.search import floor as relevance
from core.store.driver import sqlite3

NONSENSE = ROOT / "bench" / "questions" / "nonsense.jsonl"
QUESTIONS = ROOT / "bench" / "questions" / "corpora.jsonl"
DEFAULT_FLOORS = [round(0.10 + 0.02 * i, 2) for i in range(18)]


@dataclass
class Corpus:
    name: str
    ids: list[str]
    matrix: np.ndarray            # (pages, dims), unit rows
    empty: np.ndarray             # (pages,) bool: the page has no body (a folder)


def read_corpus(name: str, db: Path, space: str | None = None) -> Corpus:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        if space is None:
            space = conn.execute("SELECT space FROM vectors GROUP BY space ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
        rows = conn.execute("SELECT v.source_id, v.vector, length(trim(p.body)) = 0 FROM vectors v JOIN pages p "
                            "ON p.id = v.source_id WHERE v.space = ? AND p.trashed_at IS NULL ORDER BY v.source_id",
                            (space,)).fetchall()
    finally:
        conn.close()
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1).astype(np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return Corpus(name, [r[0] for r in rows], matrix, np.asarray([bool(r[2]) for r in rows]))


def embed(provider: LocalProvider, texts: list[str]) -> np.ndarray:
    out = []
    for start in range(0, len(texts), 32):
        out += provider.embed(texts[start:start + 32], timeout=600)
    return np.stack(out).astype(np.float32)


def pct(values: np.ndarray, ps: tuple[float, ...] = (1, 5, 10, 25, 50, 75, 95, 99)) -> str:
    if not len(values):
        return "—"
    return "  ".join(f"p{p:g} {np.percentile(values, p):.3f}" for p in ps)


def nearest_table(label: str, corpus: Corpus, queries: list[str], kinds: list[str], qv: np.ndarray) -> np.ndarray:
    """The nearest page with a body each question reaches on the corpus, as printed percentiles."""
    cos = qv @ corpus.matrix.T
    body = ~corpus.empty
    best = cos[:, body].max(axis=1) if body.any() else np.full(len(qv), -1.0)
    print(f"  {label} ({len(queries)}): nearest page with a body {pct(best, (50, 75, 90, 95, 100))}")
    by_kind: dict[str, list[float]] = {}
    for kind, b in zip(kinds, best):
        by_kind.setdefault(kind, []).append(float(b))
    print("    by kind (max): " + ", ".join(f"{k} {max(v):.3f}" for k, v in by_kind.items()))
    worst = np.argsort(-best)[:4]
    print("    highest: " + "; ".join(f"{queries[i]!r} {best[i]:.3f}" for i in worst))
    return best


def probe_kinds() -> tuple[list[str], list[str]]:
    texts, kinds, kind = [], [], ""
    for line in relevance.PROBES_FILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):          # a kind's heading ("## " lines are the file's own comment)
            kind = line[2:]
        elif line and not line.startswith("#"):
            texts.append(line)
            kinds.append(kind)
    return texts, kinds


def judged_table(corpus: Corpus, qids: list[str], qv: np.ndarray, qrels: dict[str, dict[str, int]],
                 floors: list[float], graded: bool) -> None:
    index = {pid: i for i, pid in enumerate(corpus.ids)}
    cos = qv @ corpus.matrix.T
    cos[:, corpus.empty] = -2.0          # folders are never a hit by meaning alone
    relevant, relevant_top10, best_nonrel = [], [], []
    rng = np.random.default_rng(7)
    sample = cos[:, rng.integers(0, cos.shape[1], size=min(2000, cos.shape[1]))]
    order = np.argsort(-cos, axis=1)[:, :100]
    rankings: dict[str, list[str]] = {}
    for qi, q in enumerate(qids):
        rel = {d for d, g in qrels[q].items() if g > 0}
        top = order[qi]
        rankings[q] = [corpus.ids[j] for j in top]
        for d in rel:
            if d in index:
                relevant.append(cos[qi, index[d]])
        for rank, j in enumerate(top[:10]):
            if corpus.ids[j] in rel:
                relevant_top10.append(cos[qi, j])
        nonrel = [cos[qi, j] for j in top if corpus.ids[j] not in rel]
        if nonrel:
            best_nonrel.append(nonrel[0])
    relevant, relevant_top10 = np.asarray(relevant), np.asarray(relevant_top10)
    print(f"  relevant pairs ({len(relevant):,}):            {pct(relevant)}")
    print(f"  relevant in the semantic top 10 ({len(relevant_top10):,}): {pct(relevant_top10)}")
    print(f"  best non-relevant per question ({len(best_nonrel):,}): {pct(np.asarray(best_nonrel))}")
    print(f"  non-relevant sample ({sample.size:,}):        {pct(sample.ravel(), (50, 90, 99, 99.9))}")
    metric = "nDCG@10" if graded else "success@10"

    def score(cut: float | None) -> float:
        vals = []
        for qi, q in enumerate(qids):
            ranked = [d for d, j in zip(rankings[q], order[qi]) if cut is None or cos[qi, j] >= cut]
            if graded:
                vals.append(ndcg_at(ranked, qrels[q], 10))
            else:
                vals.append(1.0 if any(qrels[q].get(d, 0) > 0 for d in ranked[:10]) else 0.0)
        return float(np.mean(vals))

    base = score(None)
    print(f"  lowest relevant page in a semantic top 10: {relevant_top10.min():.3f}" if len(relevant_top10) else "")
    print(f"  {'floor':>6} {'top-10 relevant under':>22} {'semantic ' + metric:>20} {'change':>8}")
    for f in floors:
        under = float(np.mean(relevant_top10 < f)) if len(relevant_top10) else 0.0
        s = score(f)
        print(f"  {f:6.2f} {100 * under:21.1f}% {s:20.4f} {s - base:+8.4f}")


def example_home(out: Path) -> Path:
    """The bundled example, embedded by the product (`crewlet init --example`, `crewlet worker --once`)."""
    home = out / "example"
    if not (home / "crewlet.db").is_file():
        exe = [sys.executable, "-m", "crewlet_tui.cli", "--home", str(home)]
        subprocess.run([*exe, "init", "--example"], check=True, capture_output=True, cwd=ROOT)
        subprocess.run([*exe, "worker", "--once"], check=True, capture_output=True, cwd=ROOT)
    return home


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--relevance", type=Path, default=OUT / "relevance", help="bench/relevance.py's kept homes")
    ap.add_argument("--ir", type=Path, default=Path("/work/shared/ir"))
    ap.add_argument("--wdd", type=Path, help="a windows-driver-docs home, embedded")
    ap.add_argument("--floors", default=",".join(map(str, DEFAULT_FLOORS)))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="example,scifact,vaswani_npl,questions",
                    help="which of example,scifact,vaswani_npl,questions to measure (and --wdd when given)")
    args = ap.parse_args()
    floors = [float(x) for x in args.floors.split(",")]
    provider = LocalProvider(threads=args.threads)
    space = provider.space.key()
    nonsense = read_jsonl(NONSENSE)
    nv = embed(provider, [r["query"] for r in nonsense])
    probes, kinds = probe_kinds()
    pv = embed(provider, probes)
    print(f"relevance floor bench — {machine_load()}; space {space}")
    sizes: list[tuple[str, int, float]] = []

    def nonsense_of(corpus: Corpus) -> np.ndarray:
        measured = relevance.measure_floor(nearest_table("probes", corpus, probes, kinds, pv).tolist())
        best = nearest_table("nonsense", corpus, [r["query"] for r in nonsense], [r["kind"] for r in nonsense], nv)
        shipped = relevance.floor_for(space, None).unknown
        print(f"  floor for words no page holds, measured from the probes here: {measured:.2f} (nonsense left "
              f"empty: {100 * float(np.mean(best < measured)):.1f}%); shipped: {shipped:.2f} (nonsense left "
              f"empty: {100 * float(np.mean(best < shipped)):.1f}%)")
        sizes.append((corpus.name, len(corpus.ids), measured))
        return best

    if "example" in args.only:
        with tempfile.TemporaryDirectory(prefix="crewlet-floor-") as tmp:
            example = read_corpus("example", example_home(Path(tmp)) / "crewlet.db", space)
            print(f"\n== example ({len(example.ids)} pages, {int(example.empty.sum())} without a body)")
            nonsense_of(example)
    for name, split in (("scifact", "test"), ("scifact", "train"), ("vaswani_npl", "test")):
        if name not in args.only:
            continue
        db = args.relevance / name / "home" / "crewlet.db"
        if not db.is_file():
            print(f"\n== {name}: no kept home at {db} (bench/relevance.py --reuse builds it)")
            continue
        corpus = read_corpus(name, db, space)
        mapping = json.loads((args.relevance / name / "mapping.json").read_text())
        doc_to_page = {d: p for p, d in mapping.items()}
        queries = {str(q["_id"]): q["text"] for q in read_jsonl(args.ir / name / "queries.jsonl")}
        qrels_docs = read_qrels(args.ir / name / "qrels" / f"{split}.tsv")
        qrels = {q: {doc_to_page[d]: g for d, g in rel.items() if d in doc_to_page} for q, rel in qrels_docs.items()
                 if q in queries}
        qids = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
        print(f"\n== {name} {split}: {len(corpus.ids):,} pages, {len(qids)} judged questions ({machine_load()})")
        nonsense_of(corpus)
        judged_table(corpus, qids, embed(provider, [queries[q] for q in qids]), qrels, floors, graded=True)
    corpora = args.relevance / "corpora"
    if (corpora / "built.json").is_file() and "questions" in args.only:
        corpus = read_corpus("corpora", corpora / "home" / "crewlet.db", space)
        pages = json.loads((corpora / "pages.json").read_text())
        qs = read_jsonl(QUESTIONS)
        qrels = {q["id"]: {pages[q["corpus"]][t]: 1 for t in q["targets"] if t in pages.get(q["corpus"], {})}
                 for q in qs}
        print(f"\n== the question set over ../shared/corpora: {len(corpus.ids):,} pages, {len(qs)} questions")
        nonsense_of(corpus)
        judged_table(corpus, [q["id"] for q in qs], embed(provider, [q["question"] for q in qs]), qrels, floors,
                     graded=False)
    if args.wdd:
        corpus = read_corpus("wdd", args.wdd / "crewlet.db", space)
        print(f"\n== windows-driver-docs ({len(corpus.ids):,} pages, {int(corpus.empty.sum())} without a body)")
        nonsense_of(corpus)
    print("\nfloors measured from the probes, by corpus size: " +
          ", ".join(f"{name} {n:,} pages {f:.2f}" for name, n, f in sorted(set(sizes), key=lambda x: x[1])))
    print(f"{machine_load()} at end")


if __name__ == "__main__":
    main()
