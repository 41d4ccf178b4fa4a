"""How fast records go through the log into SQLite, next to plain SQLite inserts of the same rows.

    python bench/apply_bench.py [--creates 10000] [--saves 10000] [--batch 1000] [--interactive 1000] [--dir D]

Two shapes of writing, each measured in the same run as its plain-SQLite peer:

* batched — page creates, then saves of every one of those pages, through `Node.submit` in batches
  of --batch records (one flock + one fsync of the log per batch, one SQLite transaction per batch).
  Peer: the same rows (one per record: page id, revision, container, title, body, author, at) into a
  plain table, one INSERT each, all in one transaction (synchronous=FULL: one fsync at commit).
* interactive — one record per `Node.submit` (an fsync of the log each), as a person saving does:
  --interactive records, half creates and half saves. Peer: one transaction per row, fsync at each
  commit (synchronous=FULL).

* replay — a fresh database applying the batched run's log from nothing (`applier.catch_up`, as a
  node that joins or a `log repair` rebuild does). Peer: the plain batched inserts above.

The figure is the ratio: how many times slower the log path is than writing the rows directly.
Records are built before the clock starts for both sides; the engine's time includes encoding,
framing, CRC, append, fsync, applying and storing each outcome. Wall and CPU time (user + system of
this process) are both printed: on a shared machine the CPU figure is the one that does not move with
the load, which is printed too.
"""
from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_load  # noqa: E402
from core import config as config_mod  # noqa: E402
from core.log import FileLog, Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages import applier  # noqa: E402
from core.paths import Home  # noqa: E402
from core.store import connect, sqlite3  # noqa: E402

BODY = ("# A runbook\n\n" + "Step: check the dashboard, then roll forward or back.\n" * 12)  # ~650 bytes


def make_records(n_creates: int, n_saves: int, tag: str) -> tuple[list[Record], list[Record]]:
    ids = [uuid.uuid4().hex[:16] for _ in range(n_creates)]
    creates = [Record.new("page.create", "alex", {"page_id": pid, "container": "ENG", "title": f"{tag} page {i:06d}",
                                                  "body": BODY, "parent_id": None})
               for i, pid in enumerate(ids)]
    saves = [Record.new("page.save", "sam", {"page_id": ids[i % n_creates], "base_revision": 1 + i // n_creates,
                                             "body": BODY + f"\nedit {i}\n"})
             for i in range(n_saves)]
    return creates, saves


def plain_rows(records: list[Record]) -> list[tuple]:
    """One row per record, the values the record carries: what a plain writer would insert."""
    out = []
    revs: dict[str, int] = {}
    for r in records:
        p = r.payload
        rev = revs.get(p["page_id"], 0) + 1
        revs[p["page_id"]] = rev
        out.append((p["page_id"], rev, p.get("container", "ENG"), p.get("title", ""), p["body"], r.actor, r.at))
    return out


def fresh_home(base: Path, name: str) -> Home:
    home = Home(base / name)
    init_home(home, config_mod.example_config())
    return home


def plain_db(base: Path, name: str):
    conn = sqlite3.connect(str(base / f"{name}.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE page_rows (page_id TEXT NOT NULL, revision INTEGER NOT NULL, container TEXT NOT NULL, "
                 "title TEXT NOT NULL, body TEXT NOT NULL, author TEXT NOT NULL, at INTEGER NOT NULL, "
                 "PRIMARY KEY (page_id, revision))")
    return conn


INSERT = "INSERT INTO page_rows VALUES (?,?,?,?,?,?,?)"


Timing = tuple[int, float, float]  # records, wall seconds, CPU seconds


def timed(n: int, fn) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return n, time.perf_counter() - wall, time.process_time() - cpu


def check_applied(outcomes, what: str) -> None:
    bad = [o for o in outcomes if o.status != "applied"]
    if bad:
        raise SystemExit(f"{what}: {len(bad)} record(s) not applied, e.g. {bad[0]}")


def bench_batched(base: Path, n_creates: int, n_saves: int, batch: int) -> dict[str, Timing]:
    creates, saves = make_records(n_creates, n_saves, "batched")
    home = fresh_home(base, "batched")
    results: dict[str, Timing] = {}
    with Node.open(home) as node:
        def run(records: list[Record], what: str) -> None:
            for i in range(0, len(records), batch):
                check_applied(node.submit(records[i:i + batch]), what)
        results["engine creates"] = timed(len(creates), lambda: run(creates, "create"))
        results["engine saves"] = timed(len(saves), lambda: run(saves, "save"))
        pages = node.conn.execute("SELECT count(*) FROM pages").fetchone()[0]
        revisions = node.conn.execute("SELECT count(*) FROM revisions").fetchone()[0]
        assert (pages, revisions) == (n_creates, n_creates + n_saves), (pages, revisions)
    c, s = results["engine creates"], results["engine saves"]
    results["engine all"] = (c[0] + s[0], c[1] + s[1], c[2] + s[2])

    replay = connect(base / "replay.db")
    with FileLog(home.log_file, readonly=True) as flog:
        counted: list[int] = []
        n = flog.last_seq()
        results["replay"] = timed(n, lambda: counted.append(applier.catch_up(replay, flog)))
    assert counted == [n], (counted, n)
    replay.close()

    rows = plain_rows(creates + saves)
    conn = plain_db(base, "plain-batched")

    def plain() -> None:
        conn.execute("BEGIN")
        for row in rows:
            conn.execute(INSERT, row)
        conn.execute("COMMIT")
    results["plain one txn"] = timed(len(rows), plain)
    conn.close()
    return results


def bench_interactive(base: Path, n: int) -> dict[str, Timing]:
    creates, saves = make_records(n // 2, n - n // 2, "interactive")
    records = creates + saves
    home = fresh_home(base, "interactive")
    results: dict[str, Timing] = {}
    with Node.open(home) as node:
        def run() -> None:
            for r in records:
                check_applied([node.submit_one(r)], r.type)
        results["engine one a submit"] = timed(len(records), run)

    rows = plain_rows(records)
    conn = plain_db(base, "plain-interactive")

    def plain() -> None:
        for row in rows:
            conn.execute("BEGIN")
            conn.execute(INSERT, row)
            conn.execute("COMMIT")
    results["plain txn per row"] = timed(len(rows), plain)
    conn.close()
    return results


def fs_type(path: Path) -> str:
    try:
        out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True, timeout=5).stdout.splitlines()
        return out[1].split()[1] if len(out) > 1 else "?"
    except Exception:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--creates", type=int, default=10_000)
    ap.add_argument("--saves", type=int, default=10_000)
    ap.add_argument("--batch", type=int, default=1_000, help="records per Node.submit in the batched run")
    ap.add_argument("--interactive", type=int, default=1_000, help="records, one per submit, in the interactive run")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory; use the disk you care about)")
    ap.add_argument("--keep", action="store_true", help="keep the files written")
    args = ap.parse_args(argv)

    base = Path(tempfile.mkdtemp(prefix="crewlet-bench-", dir=args.dir))
    try:
        probe = sqlite3.connect(":memory:")
        sqlite_version = probe.execute("select sqlite_version()").fetchone()[0]
        probe.close()
        print(f"crewlet apply benchmark — {base} ({fs_type(base)}), Python {platform.python_version()}, "
              f"SQLite {sqlite_version} via {sqlite3.__name__}; {machine_load()}")
        batched = bench_batched(base, args.creates, args.saves, args.batch)
        interactive = bench_interactive(base, args.interactive)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)

    def line(label: str, n: int, wall: float, cpu: float) -> None:
        print(f"  {label:<52} {n:>7,} {wall:>7.3f} s wall {n / wall:>9,.0f} rec/s  {cpu:>7.3f} s CPU "
              f"{n / cpu:>9,.0f} rec/s")

    def ratio(label: str, engine: Timing, peer: Timing) -> None:
        wall = (peer[0] / peer[1]) / (engine[0] / engine[1])
        cpu = (peer[0] / peer[2]) / (engine[0] / engine[2])
        print(f"  ratio plain / {label}: {wall:.1f}x wall, {cpu:.1f}x CPU  (the engine runs at {1 / wall:.1%} of "
              "plain inserts)")

    print(f"\nbatched: {args.batch:,} records a submit (one flock + fsync of the log, one SQLite transaction each)")
    line("engine: page.create through the log", *batched["engine creates"])
    line("engine: page.save through the log", *batched["engine saves"])
    line("engine: all", *batched["engine all"])
    line("replay: a fresh database applies that log", *batched["replay"])
    line("plain SQLite: same rows, one INSERT each, one txn", *batched["plain one txn"])
    ratio("engine", batched["engine all"], batched["plain one txn"])
    ratio("replay", batched["replay"], batched["plain one txn"])

    print("\ninteractive: one record a submit (an fsync of the log each)")
    line("engine: create/save, one a submit", *interactive["engine one a submit"])
    line("plain SQLite: one txn per row (synchronous=FULL)", *interactive["plain txn per row"])
    ratio("engine", interactive["engine one a submit"], interactive["plain txn per row"])
    print(f"\n{machine_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
