"""The embedding duty's pages/s next to the same model called directly on the same texts, and peak RSS.

    .venv/bin/python bench/embed.py                          # 2,000 windows-driver-docs pages, 2 rounds
    .venv/bin/python bench/embed.py --pages 3000 --rounds 3 --threads 1
    .venv/bin/python bench/embed.py --threads 1 --vs-threads 2   # one thread against `worker --once` (2 cores)
    .venv/bin/python bench/embed.py --threads 1 --vs-threads 2 --vs-sessions 1   # ... as 1 session of 2 threads

Builds one home: a sample of --pages Markdown files of windows-driver-docs (every k-th file of the
sorted list, their directory tree kept), imported with `import_directory(..., into="WDD")` as
`crewlet import DIR --into WDD` does, so every directory is a folder page too. Then alternates, in
fresh processes (peak RSS is a process's high-water mark), duty, peer, duty, peer…:

* duty — a fresh copy of the home with no vectors; a DutyRunner holding the embedding duty runs until
  idle, as `crewlet worker --once` drives it (tick after tick of at most 1,024 pages in requests of 32):
  selection, `embed_text`, the model, vector records appended to the vector log (fsync a request)
  and applied into SQLite, coverage counted after each tick. Also reports the seconds it spent inside
  `provider.embed`, so the remainder is the duty's own cost.
* peer — `LocalProvider.embed` called directly on exactly the texts the duty sends, in the duty's
  order and requests (`core.duties.embedding.pack`), the texts prepared before the clock starts.

Both load the model before their clock starts (a cold load is ~1 s in either). Both check what they
embedded: the duty's stored digests must equal the peer's, or the bench stops. The ratio is the
duty's seconds over the peer's (aim: at most 1.15). Benchmarks print; they never assert a time.

`--vs-threads N` puts the duty at N threads in the peer's place: `crewlet worker --once` gives the local
model every core (N = the cores), the app's fill one thread. The two sides alternate, each in a fresh
process on a fresh copy of the home, and must store byte-identical vectors (a digest of every stored
vector's bytes), or the bench stops. `--vs-sessions S` arranges the N threads as S sessions (default:
the provider's own choice, `core.embed.local.lanes_for`): S 1 is one session with N onnxruntime threads.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import find_corpus, machine_load  # noqa: E402
from core import config as config_mod  # noqa: E402
from core.duties.embedding import REQUEST_TIMEOUT_S, EmbeddingDuty, Item, coverage, pack  # noqa: E402
from core.embed.local import LocalProvider  # noqa: E402
from core.embed.registry import make_provider  # noqa: E402
from core.embed.text import BODY_READ_CHARS, embed_text  # noqa: E402
from core.importer import import_directory  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.service import KnowledgeBase  # noqa: E402
from core.paths import Home  # noqa: E402
from core.store.driver import sqlite3  # noqa: E402
from core.duties.runner import DutyRunner  # noqa: E402

DEFAULT_CORPUS = ""   # the shared windows-driver-docs tree, wherever _common.find_corpus finds it
SPACE = "WDD"
ACTOR = "alex"


# -- the home ------------------------------------------------------------------------------------------

def sample_tree(corpus: Path, count: int, dest: Path) -> int:
    """Copy `count` .md files spread evenly over the corpus's sorted list (0: all) into `dest`, keeping
    their paths; returns how many were copied."""
    files = sorted(p for p in corpus.rglob("*.md") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(corpus).parts))
    if not files:
        sys.exit(f"bench: no .md files under {corpus} — pass --corpus DIR")
    if count and count < len(files):
        step = len(files) / count
        files = [files[int(i * step)] for i in range(count)]
    for path in files:
        target = dest / path.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return len(files)


def build_home(root: Path, corpus: Path, count: int) -> tuple[Home, dict[str, Any]]:
    """A home with a sample of the corpus imported into space WDD (no vectors yet)."""
    source = root / "source"
    files = sample_tree(corpus, count, source)
    data = config_mod.example_config()
    data["spaces"][SPACE] = {"name": "Windows driver docs", "purpose": "benchmark corpus", "lead": ACTOR}
    home = Home(root / "base")
    init_home(home, data)
    started = time.perf_counter()
    with Node.open(home) as node:
        report = import_directory(KnowledgeBase(node), source, actor=ACTOR, into=SPACE, title_from_name=True)
        pages = node.conn.execute("SELECT count(*) FROM pages WHERE trashed_at IS NULL").fetchone()[0]
    shutil.rmtree(source, ignore_errors=True)
    return home, {"files": files, "pages": pages, "created": report.created,
                  "import_s": time.perf_counter() - started}


def copy_home(src: Home, dest: Path) -> Home:
    """A copy of a closed home (its leases left behind: a copy is nobody's)."""
    shutil.copytree(src.root, dest, ignore=shutil.ignore_patterns("leases", "*.lease", "*.lock"))
    return Home(dest)


def duty_requests(db_file: Path, provider: Any) -> list[list[Item]]:
    """What the duty sends on a home with no vectors, request by request: every live page oldest first
    (its selection's order), as `embed_text` makes it, packed by the duty's own `pack`."""
    bound = min(provider.limits.max_input_bytes, provider.limits.max_batch_bytes)
    conn = sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT id, container, title, substr(body, 1, ?), revision FROM pages "
                            "WHERE trashed_at IS NULL ORDER BY updated_at, id", (BODY_READ_CHARS,)).fetchall()
    finally:
        conn.close()
    items = []
    for page_id, container, title, opening, revision in rows:
        text, digest = embed_text(title, opening, bound)
        items.append(Item(page_id, container, revision, text, digest))
    return pack(items, provider)


def digests_key(digests: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()[:16]


# -- the two sides, each in its own process -----------------------------------------------------------

def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_duty(home: Home, threads: int, sessions: int | None = None) -> dict[str, Any]:
    warm = LocalProvider(threads=threads, sessions=sessions)
    warm.embed(["warm every session"] * 64, timeout=600)   # the process's sessions, shared with the duty's
    warm.close()
    inside = {"seconds": 0.0, "requests": 0}

    def factory(company: Any, *, threads: int | None = None) -> Any:
        provider = make_provider(company, threads=threads)
        if sessions is not None and isinstance(provider, LocalProvider):
            provider = LocalProvider(threads=provider.threads, sessions=sessions,
                                     batch_inputs=company.embeddings.max_batch_inputs)
        if provider is None:
            return None
        embed = provider.embed

        def timed(texts: list[str], *, timeout: float) -> Any:
            started = time.perf_counter()
            try:
                return embed(texts, timeout=timeout)
            finally:
                inside["seconds"] += time.perf_counter() - started
                inside["requests"] += 1

        provider.embed = timed  # type: ignore[method-assign]
        return provider

    with Node.open(home) as node:
        duty = EmbeddingDuty(node, threads=threads, provider_factory=factory)
        runner = DutyRunner(node, [duty], label="bench")
        try:
            started = time.perf_counter()
            reports = runner.run_until_idle()
            seconds = time.perf_counter() - started
        finally:
            runner.close()
        errors = [r.line() for r in reports if r.error]
        if errors:
            sys.exit(f"bench: the duty failed: {errors[0]}")
        provider = make_provider(node.company, threads=threads)
        assert provider is not None
        cov = coverage(node.conn, provider.space.key())
        digests = [r[0] for r in node.conn.execute("SELECT digest FROM vectors")]
        stored = hashlib.sha256()
        for (blob,) in node.conn.execute("SELECT vector FROM vectors ORDER BY source_id"):
            stored.update(blob)
    return {"seconds": seconds, "pages": cov.covered, "total": cov.total, "ticks": len(reports),
            "embed_s": inside["seconds"], "requests": inside["requests"], "digests": digests_key(digests),
            "vectors": stored.hexdigest()[:16], "peak_rss_mb": peak_rss_mb()}


def run_peer(home: Home, threads: int) -> dict[str, Any]:
    provider = LocalProvider(threads=threads)
    provider.load()
    requests = duty_requests(home.db_file, provider)
    started = time.perf_counter()
    for batch in requests:
        vecs = provider.embed([i.text for i in batch], timeout=REQUEST_TIMEOUT_S)
        assert len(vecs) == len(batch)
    seconds = time.perf_counter() - started
    pages = sum(len(b) for b in requests)
    return {"seconds": seconds, "pages": pages, "total": pages, "requests": len(requests),
            "digests": digests_key([i.digest for b in requests for i in b]), "peak_rss_mb": peak_rss_mb()}


def in_subprocess(side: str, home: Home, threads: int, sessions: int | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", side, "--home", str(home.root), "--threads", str(threads)]
    if sessions is not None:
        cmd += ["--sessions", str(sessions)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bench: the {side} run failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the run -------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=DEFAULT_CORPUS, help="a Markdown tree (default: windows-driver-docs)")
    ap.add_argument("--pages", type=int, default=2000, help="Markdown files to import (0: all of them)")
    ap.add_argument("--rounds", type=int, default=2, help="duty/peer pairs, alternated")
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime threads (0: the duty's default, half the cores)")
    ap.add_argument("--keep", default="", help="build the homes here and keep them (default: a temporary directory)")
    ap.add_argument("--vs-threads", type=int, default=0,
                    help="compare the duty at --threads with the duty at this many threads (no peer)")
    ap.add_argument("--vs-sessions", type=int, default=None, help="with --vs-threads: sessions those threads run as")
    ap.add_argument("--worker", choices=["duty", "peer"], help=argparse.SUPPRESS)
    ap.add_argument("--home", help=argparse.SUPPRESS)
    ap.add_argument("--sessions", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.worker and not args.corpus:
        args.corpus = str(find_corpus("windows-driver-docs", "windows-driver-docs-pr"))
    if args.worker:
        home = Home(Path(args.home))
        out = (run_duty(home, args.threads, args.sessions) if args.worker == "duty"
               else run_peer(home, args.threads))
        print(json.dumps(out))
        return
    if args.vs_threads:
        compare_threads(args)
        return

    from core.embed.provider import default_threads
    threads = args.threads or default_threads()
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="crewlet-bench-embed-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        print(machine_load() + " at start", flush=True)
        base, built = build_home(tmp, Path(args.corpus), args.pages)
        print(f"imported {built['files']:,} files as {built['pages']:,} pages (folders included) "
              f"in {built['import_s']:.1f} s; onnxruntime threads {threads}", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {"duty": [], "peer": []}
        for rnd in range(args.rounds):
            for side in ("duty", "peer"):
                home = base
                if side == "duty":
                    home = copy_home(base, tmp / f"duty-{rnd}")
                out = in_subprocess(side, home, threads)
                out["load"] = os.getloadavg()[0]
                runs[side].append(out)
                if side == "duty":
                    shutil.rmtree(home.root, ignore_errors=True)
                print(f"  round {rnd + 1} {side}: {out['pages']:,} pages in {out['seconds']:.1f} s = "
                      f"{out['pages'] / out['seconds']:.2f} pages/s, peak RSS {out['peak_rss_mb']:.0f} MB, "
                      f"load {out['load']:.2f}" + (f", {out['ticks']} ticks, {out['embed_s']:.1f} s inside "
                                                   f"provider.embed" if side == "duty" else ""), flush=True)
        duty, peer = runs["duty"], runs["peer"]
        if any(d["pages"] != d["total"] for d in duty):
            sys.exit("bench: the duty stopped before every page had a vector")
        if {d["digests"] for d in duty} != {p["digests"] for p in peer}:
            sys.exit("bench: the duty and the peer did not embed the same texts")
        pages = peer[0]["pages"]
        d_rate = statistics.median(d["pages"] / d["seconds"] for d in duty)
        p_rate = statistics.median(p["pages"] / p["seconds"] for p in peer)
        own = statistics.median((d["seconds"] - d["embed_s"]) / d["seconds"] for d in duty)
        pairs = [d["seconds"] / p["seconds"] for d, p in zip(duty, peer)]
        print(f"\n{pages:,} pages, the same texts on both sides (digests match), threads {threads}")
        print(f"{'':24} {'pages/s':>8} {'peak RSS MB':>12}")
        print(f"{'duty (worker --once)':24} {d_rate:>8.2f} {max(d['peak_rss_mb'] for d in duty):>12.0f}")
        print(f"{'peer (provider.embed)':24} {p_rate:>8.2f} {max(p['peak_rss_mb'] for p in peer):>12.0f}")
        print(f"duty overhead: {p_rate / d_rate:.3f}x the peer's time (pairs: "
              f"{', '.join(f'{r:.3f}' for r in pairs)}); {100 * own:.1f}% of the duty's time is outside the model")
        print(machine_load() + " at end")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def compare_threads(args: argparse.Namespace) -> None:
    """The duty at --threads against the duty at --vs-threads, alternating, each on a fresh copy."""
    from core.embed.local import lanes_for

    one, many = args.threads or 1, args.vs_threads
    arrangement = (args.vs_sessions, max(1, many // args.vs_sessions)) if args.vs_sessions else lanes_for(many)
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="crewlet-bench-embed-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        print(machine_load() + " at start", flush=True)
        base, built = build_home(tmp, Path(args.corpus), args.pages)
        print(f"imported {built['files']:,} files as {built['pages']:,} pages (folders included) in "
              f"{built['import_s']:.1f} s; {one} thread(s) against {many} ({arrangement[0]} session(s) of "
              f"{arrangement[1]} thread(s))", flush=True)
        runs: dict[int, list[dict[str, Any]]] = {one: [], many: []}
        for rnd in range(args.rounds):
            for threads in ((one, many) if rnd % 2 == 0 else (many, one)):
                home = copy_home(base, tmp / f"duty-{rnd}-{threads}")
                out = in_subprocess("duty", home, threads, args.vs_sessions if threads == many else None)
                out["load"] = os.getloadavg()[0]
                runs[threads].append(out)
                shutil.rmtree(home.root, ignore_errors=True)
                print(f"  round {rnd + 1}, {threads} thread(s): {out['pages']:,} pages in {out['seconds']:.1f} s = "
                      f"{out['pages'] / out['seconds']:.2f} pages/s, peak RSS {out['peak_rss_mb']:.0f} MB, "
                      f"load {out['load']:.2f}, vectors {out['vectors']}", flush=True)
        every = runs[one] + runs[many]
        if any(d["pages"] != d["total"] for d in every):
            sys.exit("bench: a duty stopped before every page had a vector")
        if len({d["vectors"] for d in every}) != 1:
            sys.exit("bench: the stored vectors differ between thread counts: " +
                     ", ".join(sorted({d["vectors"] for d in every})))
        rate = {t: statistics.median(d["pages"] / d["seconds"] for d in runs[t]) for t in runs}
        pairs = [a["seconds"] / b["seconds"] for a, b in zip(runs[one], runs[many])]
        print(f"\n{every[0]['pages']:,} pages; every run stored the same vector bytes ({every[0]['vectors']})")
        print(f"{'':34} {'pages/s':>8} {'peak RSS MB':>12}")
        for t in (one, many):
            label = f"duty, {t} thread(s)" + (" (worker --once)" if t == (os.cpu_count() or 1) else "")
            print(f"{label:34} {rate[t]:>8.2f} {max(d['peak_rss_mb'] for d in runs[t]):>12.0f}")
        print(f"{many} threads embed {rate[many] / rate[one]:.2f}x the pages/s of {one} (pairs: "
              f"{', '.join(f'{r:.2f}' for r in pairs)})")
        print(machine_load() + " at end")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
