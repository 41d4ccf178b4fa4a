"""Shared by the benchmarks: a throwaway home, bulk-loading documents as pages, the SQLite FTS5 peer,
BEIR-format collections and their measures. Benchmarks print; they never assert a time."""
from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.log import Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.model import MAX_TITLE, clean_title, normalise_title  # noqa: E402
from core.paths import Home  # noqa: E402
from core.store.driver import sqlite3  # noqa: E402

BATCH = 1000
ACTOR = "alex"
OUT = ROOT / "bench" / ".out"      # homes a bench keeps between runs (ignored by git)
SHARED_ENV = "CREWLET_SHARED"


def find_corpus(*parts: str) -> Path:
    """A tree of the shared corpora (`shared/corpora/<parts>`): under $CREWLET_SHARED, else in a `shared/`
    beside this checkout or beside any directory above it (a clone, a worktree and CI all keep it at
    `../shared` from some level), else beside the working directory or above it."""
    tried: list[Path] = []
    if os.environ.get(SHARED_ENV):
        tried.append(Path(os.environ[SHARED_ENV]).expanduser())
    for start in (ROOT, Path.cwd().resolve()):
        tried.extend(d / "shared" for d in (start, *start.parents))
    for shared in tried:
        path = shared.joinpath("corpora", *parts)
        if path.is_dir():
            return path
    raise SystemExit(f"no shared corpus corpora/{'/'.join(parts)} found: set {SHARED_ENV}=DIR (the directory "
                     f"holding corpora/), or keep it at ../shared beside the checkout; looked in "
                     f"{', '.join(str(t) for t in dict.fromkeys(tried))}")


def new_home(spaces: Iterable[str], root: Path | None = None) -> Home:
    root = Path(root) if root else Path(tempfile.mkdtemp(prefix="crewlet-bench-"))
    data = config_mod.example_config()
    for key in spaces:
        data["spaces"][key] = {"name": key, "purpose": "benchmark corpus", "lead": ACTOR}
    home = Home(root / "home")
    init_home(home, data)
    return home


def unique_title(title: str, doc_id: str, seen: set[str]) -> str:
    """A page title from a document's: cleaned, at most 255 characters, unique in its container
    (a duplicate gets its document id appended)."""
    title = "".join(ch if ord(ch) >= 32 else " " for ch in (title or ""))
    title = clean_title(title) or f"#{doc_id}"
    if len(title) > MAX_TITLE:
        title = title[:MAX_TITLE].rstrip()
    if normalise_title(title) in seen:
        suffix = f" [{doc_id}]"
        title = title[:MAX_TITLE - len(suffix)].rstrip() + suffix
    seen.add(normalise_title(title))
    return title


@dataclass
class Doc:
    doc_id: str
    title: str
    body: str
    container: str


def load_pages(node: Node, docs: list[Doc], *, progress: Callable[[int, int], None] | None = None) -> dict[str, str]:
    """Create every document as a page, 1,000 records a batch; returns page id -> document id."""
    mapping: dict[str, str] = {}
    seen: dict[str, set[str]] = {}
    records: list[Record] = []
    done = 0

    def flush() -> None:
        nonlocal done
        if not records:
            return
        outs = node.submit(records, sync=False)
        bad = [o for o in outs if o.status != "applied"]
        if bad:
            raise RuntimeError(f"{len(bad)} pages refused, e.g. {bad[0].reason}")
        done += len(records)
        records.clear()
        if progress:
            progress(done, len(docs))

    for d in docs:
        page_id = uuid.uuid4().hex[:16]
        title = unique_title(d.title, d.doc_id, seen.setdefault(d.container, set()))
        records.append(Record.new("page.create", ACTOR, {"page_id": page_id, "container": d.container, "title": title,
                                                         "body": d.body, "parent_id": None}))
        mapping[page_id] = d.doc_id
        if len(records) >= BATCH:
            flush()
    flush()
    return mapping


# -- the FTS5 peer -----------------------------------------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)


class Fts5:
    """SQLite FTS5 (porter + unicode61, bm25()) over the same rows, in its own database file."""

    def __init__(self, path: Path, title_weight: float = 1.0) -> None:
        self.db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS docs USING fts5(page_id UNINDEXED, title, body, "
                        "tokenize = 'porter unicode61')")
        self.title_weight = title_weight

    def build(self, rows: Iterable[tuple[str, str, str]]) -> float:
        started = time.perf_counter()
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO docs (page_id, title, body) VALUES (?, ?, ?)", rows)
        self.db.execute("COMMIT")
        return time.perf_counter() - started

    def bm25(self) -> str:
        """The ranking expression: bm25() weighs the columns in table order, and the first is the
        unindexed page_id (its weight 0), then title, then body."""
        return f"bm25(docs, 0.0, {self.title_weight}, 1.0)"

    @staticmethod
    def match(text: str) -> str:
        words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
        return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)

    def search(self, text: str, limit: int) -> list[tuple[str, float]]:
        m = self.match(text)
        if not m:
            return []
        rows = self.db.execute(f"SELECT page_id, {self.bm25()} AS s FROM docs WHERE docs MATCH ? "
                               "ORDER BY s LIMIT ?", (m, limit)).fetchall()
        return [(r[0], -r[1]) for r in rows]


def fts5_from_home(node: Node, path: Path, title_weight: float = 1.0) -> tuple[Fts5, float]:
    fts = Fts5(path, title_weight)
    with node.lock:
        rows = node.conn.execute("SELECT id, title, body FROM pages WHERE trashed_at IS NULL").fetchall()
    return fts, fts.build((r[0], r[1], r[2]) for r in rows)


# -- BEIR collections and measures --------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            qid, did, score = parts[0], parts[1], int(parts[2])
            qrels.setdefault(qid, {})[did] = score
    return qrels


def ndcg_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    dcg = sum((2 ** rel.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    relevant = {d for d, r in rel.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def mrr_at(ranked: list[str], rel: dict[str, int], k: int) -> float:
    for i, d in enumerate(ranked[:k]):
        if rel.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def measures(runs: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    qids = [q for q in qrels if any(v > 0 for v in qrels[q].values())]
    return {
        "nDCG@10": statistics.fmean(ndcg_at(runs.get(q, []), qrels[q], 10) for q in qids),
        "recall@100": statistics.fmean(recall_at(runs.get(q, []), qrels[q], 100) for q in qids),
        "MRR@10": statistics.fmean(mrr_at(runs.get(q, []), qrels[q], 10) for q in qids),
        "queries": float(len(qids)),
    }


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    idx = min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))
    return ordered[idx]


class Timer:
    def __enter__(self) -> "Timer":
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


# -- machine load, progress, and the product's own duties ------------------------------------------

def machine_load() -> str:
    """What `uptime` shows, in one phrase: the load averages and the cores they share."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


class Progress:
    """One line on stderr at most every `every_s` seconds: long phases show they are moving."""

    def __init__(self, label: str, every_s: float = 10.0) -> None:
        self.label = label
        self.every_s = every_s
        self.started = time.perf_counter()
        self._last = 0.0

    def __call__(self, done: int, total: int, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        spent = now - self.started
        rate = done / spent if spent > 0 else 0.0
        left = f", about {(total - done) / rate:.0f}s left" if rate > 0 and total > done else ""
        print(f"  {self.label}: {done:,}/{total:,} ({rate:.1f}/s{left})", file=sys.stderr, flush=True)


def run_worker_once(node: Node, *, embed_threads: int | None = None, label: str = "worker --once") -> dict[str, int]:
    """What `crewlet worker --once` does: the node's default duties (apply, keyword index, trash reaper,
    embedding duty with the configured provider — the local model by default) until none has work left.
    Returns the embedding duty's totals; raises when a duty failed or left pages unembedded."""
    from core.duties import EMBEDDING
    from core.duties.roster import run_duties

    totals = {"embedded": 0, "restamped": 0, "refused": 0, "requests": 0, "passes": 0}
    show = Progress(f"{label}: embedding pages")
    state: dict[str, Any] = {}

    def on_progress(duty: str, done: int, total: int, _label: str) -> None:
        if duty == EMBEDDING:
            show(done, total)

    def on_report(report: Any) -> None:
        if report.error:
            raise RuntimeError(f"the {report.duty} duty failed: {report.error}")
        if report.duty == EMBEDDING and report.result is not None:
            totals["passes"] += 1
            for key in ("embedded", "restamped", "refused", "requests"):
                totals[key] += report.result.counts.get(key, 0)
            state.update(report.result.status)

    run_duties(node, label="bench", once=True, progress=on_progress, on_report=on_report, embed_threads=embed_threads)
    if state.get("failure"):
        raise RuntimeError(f"the embedding duty stopped: {state['failure']}")
    totals["covered"] = int(state.get("covered", 0))
    totals["total"] = int(state.get("total", 0))
    return totals


def rss(pids: list[int]) -> int:
    """Resident bytes of these processes together (Linux /proc; a process gone meanwhile counts 0)."""
    total = 0
    for p in pids:
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its descendants (Linux /proc)."""
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return rss(pids)
