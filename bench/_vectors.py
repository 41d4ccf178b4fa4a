"""Synthetic clustered corpora for the semantic benchmarks, built into real homes.

A corpus is topical the way an embedded wiki is: subjects, each split into topics, each topic a cloud of
documents around its centre — so a document's nearest neighbours are its topic's, then its subject's —
and each space (container) holds its subjects' pages. Vectors are published through `Node.submit_vectors` (the vector log, then the applier), so the
SQLite file is exactly what a node holds. Built homes are kept under bench/.out/ (keyed by their shape)
and reused: building 40,000 × 3,072 writes ~650 MB of log and ~500 MB of database.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.log import Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.paths import Home  # noqa: E402
from core.vectors import records as vectors  # noqa: E402

OUT = Path(os.environ.get("CREWLET_BENCH_OUT") or ROOT / "bench" / ".out")   # big homes: set it to a disk with room
SPACE_OF = {384: "local:all-MiniLM-L6-v2-int8:384:bench", 3072: "openai:text-embedding-3-large:3072"}


def space_of(dims: int) -> str:
    """The embedding space a synthetic corpus of `dims` is filed under (any width: 1,536 has no named model here)."""
    return SPACE_OF.get(dims, f"bench:synthetic:{dims}")

CONTAINERS = 20
BATCH = 1000


@dataclass
class Corpus:
    vectors: np.ndarray          # (n, dims) float32, unit length
    topics: np.ndarray           # (n,) the topic each document was drawn from
    containers: np.ndarray       # (n,) 0..CONTAINERS-1
    super_dirs: np.ndarray       # what drew them: queries are drawn the same way
    topic_dirs: np.ndarray
    topic_super: np.ndarray
    shared: np.ndarray
    shape: dict


def clustered(n: int, dims: int, *, seed: int = 7, topic_size: int = 100, topics_per_super: int = 8,
              spread: float = 0.55, noise: float = 0.75, mean: float = 0.0) -> Corpus:
    """Unit vectors in topics of ~`topic_size` documents grouped under subjects. A document is its
    subject's direction + `spread` × its topic's + `noise` × its own; `mean` adds one direction every
    document shares (real embeddings are not centred, which costs sign codes recall)."""
    rng = np.random.default_rng(seed)
    topics = max(1, n // topic_size)
    supers = max(1, topics // topics_per_super)
    scale = 1.0 / np.sqrt(dims)
    super_dirs = rng.standard_normal((supers, dims)).astype(np.float32) * scale
    topic_dirs = rng.standard_normal((topics, dims)).astype(np.float32) * scale
    topic_super = rng.integers(0, supers, topics)
    doc_topic = rng.integers(0, topics, n)
    out = np.empty((n, dims), dtype=np.float32)
    shared = rng.standard_normal(dims).astype(np.float32) * scale * mean
    for start in range(0, n, 8192):
        t = doc_topic[start:start + 8192]
        block = super_dirs[topic_super[t]] + spread * topic_dirs[t] + shared
        block += noise * rng.standard_normal((len(t), dims)).astype(np.float32) * scale
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:start + len(t)] = block
    # a space holds its subjects' pages, as a wiki's spaces do (a page filed far from its subject would be a
    # query whose nearest pages in its space are noise to a 1-bit code: the scan's own head misses)
    containers = (topic_super[doc_topic] % CONTAINERS).astype(np.int32)
    return Corpus(out, doc_topic, containers, super_dirs, topic_dirs, topic_super, shared,
                  dict(spread=spread, noise=noise))


def queries(corpus: Corpus, count: int, *, seed: int = 11) -> np.ndarray:
    """Fresh documents of the corpus's own topics, drawn as its documents were (never in it)."""
    rng = np.random.default_rng(seed)
    dims = corpus.vectors.shape[1]
    scale = 1.0 / np.sqrt(dims)
    t = corpus.topics[rng.integers(0, len(corpus.topics), count)]
    q = corpus.super_dirs[corpus.topic_super[t]] + corpus.shape["spread"] * corpus.topic_dirs[t] + corpus.shared
    q += corpus.shape["noise"] * rng.standard_normal((count, dims)).astype(np.float32) * scale
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def build_home(root: Path, corpus: Corpus, space: str, *, page_size: int | None = None,
               progress: bool = True) -> tuple[Home, list[str]]:
    """A home whose pages and vectors are the corpus: one page a document (CONTAINERS spaces), one
    vector.put each through the vector log. Returns the home and the page ids in corpus order."""
    if root.exists():
        shutil.rmtree(root)
    data = config_mod.example_config()
    for c in range(CONTAINERS):
        data["spaces"][f"C{c:02d}"] = {"name": f"C{c:02d}", "purpose": "benchmark corpus", "lead": "alex"}
    home = Home(root)
    if page_size:
        home.root.mkdir(parents=True, exist_ok=True)
        from core.store.driver import sqlite3
        pre = sqlite3.connect(str(home.db_file))
        pre.execute(f"PRAGMA page_size = {int(page_size)}")
        pre.execute("VACUUM")
        pre.close()
    init_home(home, data)
    n = len(corpus.vectors)
    ids = [f"{i:016x}" for i in range(n)]
    started = time.perf_counter()
    with Node.open(home) as node:
        for start in range(0, n, BATCH):
            recs = [Record.new("page.create", "alex", {"page_id": ids[i], "container": f"C{corpus.containers[i]:02d}",
                                                       "title": f"Document {i}", "body": f"synthetic {i}",
                                                       "parent_id": None}) for i in range(start, min(n, start + BATCH))]
            node.submit(recs, sync=False)
        for start in range(0, n, BATCH):
            recs = [vectors.put_record(ids[i], space, f"C{corpus.containers[i]:02d}", 1, f"d{i}", 100, 0,
                                       corpus.vectors[i]) for i in range(start, min(n, start + BATCH))]
            node.submit_vectors(recs, sync=False)
            if progress:
                print(f"\r  built {min(n, start + BATCH):,} of {n:,} ({time.perf_counter() - started:.0f}s)",
                      end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return home, ids


def cached_home(n: int, dims: int, *, seed: int = 7, page_size: int | None = None,
                **shape: float) -> tuple[Home, list[str], Corpus]:
    """The corpus and its home, built once under bench/.out/ and reused while the shape is the same."""
    corpus = clustered(n, dims, seed=seed, **shape)  # type: ignore[arg-type]
    key = f"sem-{n}x{dims}-s{seed}-subjects" + (f"-p{page_size}" if page_size else "") + "".join(
        f"-{k}{v}" for k, v in sorted(shape.items()))
    root = OUT / key
    ids = [f"{i:016x}" for i in range(n)]
    done = root / "built.ok"
    if not done.exists():
        print(f"building {key} (once; kept in {root})", file=sys.stderr)
        build_home(root / "home", corpus, space_of(dims), page_size=page_size)
        done.write_text("ok")
    return Home(root / "home"), ids, corpus
