"""An agent's recall at 10,000 notes: the exact per-agent scan, side by side with its floor, on one core.

    .venv/bin/python bench/diary.py [--notes 10000] [--dims 384 1536] [--queries 200]

For each width, a real home with one agent holding `--notes` notes (and a second agent as many, so the
scan must pick the agent's rows out of twice that), each note a unit vector in the configured space:

- recall      Diary.recall(query, limit=30): the recency top-50, the exact scan of the agent's embedded
              notes (read from SQLite, one matrix product), the vector top-50, the fusion and the notes'
              rows — everything but embedding the query, which is given (it is the same embedding every
              search by meaning pays: README, "Embeddings");
- scan        Diary.scan alone: the ids checked against the (agent, space) index, the vectors (kept in
              memory since the previous recall) scored;
- cold        a process's first scan: every vector read from SQLite (a new Diary each time);
- floor       the same exact scan over a matrix already in memory (numpy, one product and a top-50): what
              the selection would cost with no storage at all.

Queries alternate between the three (A/B/C, query by query) so load that comes and goes falls on all of
them alike; the load average is printed before and after. The process pins itself to one core and one
BLAS thread before numpy loads. Nothing is asserted.
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
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_load, percentile  # noqa: E402
from core import config as config_mod  # noqa: E402
from core.agents.diary import HALF, Diary, diary_provider  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.paths import Home  # noqa: E402
from core.search.query_vectors import QueryVector  # noqa: E402

AGENT, OTHER = "eng-bot", "ops-bot"


class GivenQueries:
    """The query vectors the bench hands the diary (the embedding of a query is not what is measured)."""

    def __init__(self, vectors: dict[str, np.ndarray], space: str) -> None:
        self.vectors, self.space = vectors, space

    def vector(self, company: Any, text: str) -> QueryVector:
        return QueryVector(self.vectors[text], self.space, "bench")

    def provider(self, company: Any) -> Any:
        return None

    def close(self) -> None:
        pass


def make_home(root: Path, dims: int) -> Home:
    data = config_mod.example_config()
    data["actors"][OTHER] = {"kind": "agent", "space": "OPS"}
    if dims != 384:   # any other width is an endpoint's; nothing is asked of it here
        data["providers"] = {"embeddings": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                                            "model": "bench-model", "dimensions": dims}}
    home = Home(root / f"home-{dims}")
    init_home(home, data)
    return home


def unit_rows(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    m = rng.standard_normal((n, dims)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def fill(node: Node, space: str, n: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    """n notes for each agent, one second apart; returns AGENT's vectors in id order."""
    mine = None
    t0 = 1_735_689_600_000
    for agent in (AGENT, OTHER):
        vecs = unit_rows(rng, n, dims)
        if agent == AGENT:
            mine = vecs
        rows = [(agent, f"{agent} noted fact {i}: service {i % 97} behaves this way under load {i % 13}",
                 t0 + i * 1000, space, vecs[i].astype("<f4").tobytes()) for i in range(n)]
        with node.lock:
            node.conn.execute("BEGIN")
            node.conn.executemany("INSERT INTO agent_diary (agent, text, created_at, space, vector) "
                                  "VALUES (?, ?, ?, ?, ?)", rows)
            node.conn.execute("COMMIT")
    assert mine is not None
    return mine


def floor_top(matrix: np.ndarray, ids: np.ndarray, q: np.ndarray) -> list[int]:
    scores = matrix @ q
    keep = np.argpartition(-scores, HALF - 1)[:HALF]
    return [int(i) for i in ids[keep][np.argsort(-scores[keep], kind="stable")]]


def ms(values: list[float]) -> str:
    return f"p50 {percentile(values, 50):6.2f} ms  p95 {percentile(values, 95):6.2f} ms"


def run(dims: int, notes: int, queries: int, root: Path) -> None:
    rng = np.random.default_rng(dims)
    home = make_home(root, dims)
    with Node.open(home) as node:
        space = diary_provider(node.company, threads=1).space.key()
        started = time.perf_counter()
        mine = fill(node, space, notes, dims, rng)
        loaded_s = time.perf_counter() - started
        qs = unit_rows(rng, queries, dims)
        texts = [f"query {i}" for i in range(queries)]
        diary = Diary(node, embedder=GivenQueries(dict(zip(texts, qs)), space))  # type: ignore[arg-type]
        with node.lock:
            ids = np.array([r[0] for r in node.conn.execute(
                "SELECT id FROM agent_diary WHERE agent = ? ORDER BY id", (AGENT,))], dtype=np.int64)
        wal = home.db_file.with_name(home.db_file.name + "-wal")
        db_mb = (home.db_file.stat().st_size + (wal.stat().st_size if wal.exists() else 0)) / 2**20
        print(f"\n{notes:,} notes for {AGENT} (+{notes:,} for {OTHER}) × {dims} dims — loaded in {loaded_s:.1f} s, "
              f"database {db_mb:.0f} MB; {queries} queries; load {machine_load()}")
        recall_t, scan_t, floor_t = [], [], []
        agree = 0
        for i, (text, q) in enumerate(zip(texts, qs)):
            t = time.perf_counter()
            result = diary.recall(text, actor=AGENT, limit=30)
            recall_t.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            got_ids, scores = diary.scan(AGENT, space, q)
            scan_t.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            top = floor_top(mine, ids, q)
            floor_t.append((time.perf_counter() - t) * 1000)
            meaning = [n.note.id for n in result.notes if "meaning" in n.via]
            agree += set(meaning) <= set(top) and result.by_meaning == HALF
        cold_t = []
        for q in qs[:20]:
            fresh = Diary(node, embedder=GivenQueries({}, space))  # type: ignore[arg-type]
            t = time.perf_counter()
            fresh.scan(AGENT, space, q)
            cold_t.append((time.perf_counter() - t) * 1000)
        p95 = percentile(floor_t, 95)
        print(f"  recall (limit 30)  {ms(recall_t)}   {percentile(recall_t, 95) / p95:5.1f}× the floor at p95")
        print(f"  scan alone         {ms(scan_t)}   {percentile(scan_t, 95) / p95:5.1f}× the floor at p95")
        print(f"  floor (in memory)  {ms(floor_t)}")
        print(f"  cold first scan    {ms(cold_t)}   (20 fresh processes' first read of every vector)")
        print(f"  the meaning half equals the floor's exact top-50 in {agree} of {queries} queries; load {machine_load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[384, 1536])
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="crewlet-bench-diary-") as tmp:
        for dims in args.dims:
            run(dims, args.notes, args.queries, Path(tmp))


if __name__ == "__main__":
    main()
