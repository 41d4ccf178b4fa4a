"""Benchmark `crewlet import` on a real tree, next to plain SQLite inserts of the same bodies.

    python bench/import_bench.py                       # windows-driver-docs, --into DOCS
    python bench/import_bench.py --layout spaces       # the spec's layout (--declare-spaces)
    python bench/import_bench.py --corpus DIR --runs 3

The corpus is found under $CREWLET_SHARED, or in a `shared/` beside the checkout or any directory above
it (bench/_common.find_corpus), so a clean clone next to the shared directory finds it.

Each run imports into a fresh temporary home (under /tmp, removed afterwards), then imports again to
show that an unchanged tree writes zero records, then inserts the same (id, container, title, body)
rows into a plain sqlite3 table in one transaction — once with the node's pragmas (WAL,
synchronous=NORMAL) and once with SQLite's defaults — and prints pages/s and the ratios.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.importer import import_directory  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.service import KnowledgeBase  # noqa: E402
from core.paths import Home  # noqa: E402
from core.store.driver import sqlite3  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import find_corpus  # noqa: E402


def plain_inserts(path: Path, rows: list[tuple[str, str, str, str]], *, wal: bool) -> float:
    conn = sqlite3.connect(str(path), isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE pages (id TEXT PRIMARY KEY, container TEXT NOT NULL, title TEXT NOT NULL, "
                 "body TEXT NOT NULL)")
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO pages (id, container, title, body) VALUES (?,?,?,?)", rows)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def plain_loader(corpus: Path, path: Path) -> float:
    """The simplest way to get the same tree into SQLite: walk it, read every .md file, insert its text
    (no frontmatter, titles, rules, log or history) — what an import competes with from a user's seat."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE pages (path TEXT PRIMARY KEY, body TEXT NOT NULL)")
    started = time.perf_counter()
    rows = []
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if name.endswith(".md"):
                full = os.path.join(dirpath, name)
                with open(full, "rb") as fh:
                    rows.append((full, fh.read().decode("utf-8", errors="replace")))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO pages (path, body) VALUES (?,?)", rows)
    conn.execute("COMMIT")
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def one_run(corpus: Path, layout: str, work: Path) -> dict[str, float]:
    home = Home(work / "home")
    init_home(home, config_mod.empty_config("admin"))
    kw = dict(actor="admin", declare_spaces=True, title_from_name=True)
    if layout == "into":
        kw["into"] = "DOCS"
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        report = import_directory(kb, corpus, **kw)
        before = node.log.last_seq()
        again = import_directory(kb, corpus, **kw)
        second_records = node.log.last_seq() - before
    rows = [(p.page_id or "", p.container, p.title, p.body) for p in report.pages]
    plain_wal = plain_inserts(work / "plain-wal.db", rows, wal=True)
    plain_default = plain_inserts(work / "plain-default.db", rows, wal=False)
    loader = plain_loader(corpus, work / "plain-loader.db")
    return {"loader": loader, "pages": report.created, "files": report.files, "seconds": report.seconds,
            "plan": report.timings.get("plan", 0.0), "write": report.timings.get("write", 0.0),
            "failures": len(report.failures), "second_seconds": again.seconds,
            "second_records": second_records, "plain_wal": plain_wal, "plain_default": plain_default}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=None, help="default: the shared windows-driver-docs tree")
    ap.add_argument("--layout", choices=("into", "spaces"), default="into")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if args.corpus is None:
        args.corpus = find_corpus("windows-driver-docs", "windows-driver-docs-pr")
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus} — pass --corpus DIR")
    results = []
    for i in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="crewlet-import-bench-", dir="/tmp"))
        try:
            r = one_run(args.corpus, args.layout, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results.append(r)
        print(f"run {i + 1}: {r['pages']} pages from {r['files']} files in {r['seconds']:.2f} s "
              f"(plan {r['plan']:.2f} s, write {r['write']:.2f} s) = {r['pages'] / r['seconds']:,.0f} pages/s; "
              f"second run {r['second_seconds']:.2f} s, {r['second_records']} records; "
              f"plain inserts {r['plain_wal']:.2f} s (WAL) / {r['plain_default']:.2f} s (default)")
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    pages = med["pages"]
    layout = "--into DOCS" if args.layout == "into" else "the spec's layout (--declare-spaces)"
    print()
    print(f"corpus   {args.corpus}  ({layout}; median of {len(results)})")
    print(f"import   {pages:,.0f} pages in {med['seconds']:.2f} s = {pages / med['seconds']:,.0f} pages/s "
          f"(plan {med['plan']:.2f} s: read, parse, title, match; write {med['write']:.2f} s = "
          f"{pages / med['write']:,.0f} pages/s)")
    print(f"rerun    {med['second_seconds']:.2f} s, {med['second_records']:.0f} records written")
    print(f"plain    {med['plain_wal']:.3f} s = {pages / med['plain_wal']:,.0f} pages/s (WAL, synchronous=NORMAL, "
          f"like the node); {med['plain_default']:.3f} s = {pages / med['plain_default']:,.0f} pages/s (defaults)")
    print(f"loader   {med['loader']:.3f} s = {pages / med['loader']:,.0f} pages/s (walk, read every file, insert its "
          f"text: the same tree into SQLite with no titles, rules, log or history)")
    print(f"ratio    whole import {med['seconds'] / med['loader']:.1f}x the plain loader; "
          f"inserts alone: whole import {med['seconds'] / med['plain_wal']:.1f}x plain (WAL), "
          f"write phase {med['write'] / med['plain_wal']:.1f}x; "
          f"vs defaults {med['seconds'] / med['plain_default']:.1f}x / {med['write'] / med['plain_default']:.1f}x")
    rate, vs_loader = pages / med["seconds"], med["seconds"] / med["loader"]
    ok = rate >= 3000 and vs_loader <= 4 and med["second_records"] == 0 and not med["failures"]
    print(f"target   >= 3,000 pages/s ({rate:,.0f}), <= 4x the plain loader ({vs_loader:.1f}x) and a second run "
          "that writes nothing: " + ("met" if ok else "MISSED"))
    try:
        print("machine  " + f"{os.cpu_count()} cores, load average " + ", ".join(Path("/proc/loadavg").read_text().split()[:3]))
    except OSError:
        pass


if __name__ == "__main__":
    main()
