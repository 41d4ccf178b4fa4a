"""Replication, measured: how long a write on one node takes to be visible on another, and how fast a
node applies a shared log — a fresh node catching up vs the writer applying as it appends, next to plain
SQLite inserts of the same rows in the same run.

    python bench/sync.py [--records 100000] [--lag-writes 200] [--dir D] [--skip-lag] [--skip-apply]
                         [--backend file|jetstream]

`--backend jetstream` runs every row on NATS JetStream too, beside the file backend in the same run: a
nats-server (from the `test` extra) started by the bench with `sync_interval` at its lazy default (2 min)
and at `always`, each on its own storage; the rows say which. Its lag reader is a node kept open whose
consumer on the streams wakes the apply (no polling), as the app's worker is.

Lag: node A writes a page, waits 20-100 ms, writes the next; a reader process on node B looks for each
page in turn — (cli) through the CLI's read path, a fresh `Node.open` (which applies what the log holds)
and a lookup by address, again and again; (watch) as the app's background worker does, a node kept open
whose log watcher wakes the apply. The lag of a write is the time from A's acknowledgement to B seeing it.

Apply: A writes `--records` records (40% creates, 40% saves, 10% comments, 5% renames, 5% moves) in
batches of 1,000 through `Node.submit` (append + apply); then a new node joins the shared directory and
applies the whole log from nothing (and, for comparison, the same log is applied into another fresh
database one record at a time, as the applier did before it worked a batch at a time). The peer inserts one row per record into a plain SQLite table with
one INSERT each, 2,000 to a transaction. Wall and CPU time are both printed (the CPU figure is the one
that does not move with the machine's load); ratios are of rates measured in this run.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
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
from _common import machine_load, percentile  # noqa: E402
from core import config as config_mod  # noqa: E402
from core.log import FileLog, Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.service import KnowledgeBase  # noqa: E402
from core.pages import applier  # noqa: E402
from core.replica import engine  # noqa: E402
from core.paths import Home  # noqa: E402
from core.store import connect  # noqa: E402
from core.store.driver import sqlite3  # noqa: E402
from core.sync import join as join_mod  # noqa: E402
from core.sync.watch import INTERVAL_S  # noqa: E402

BODY = "# A runbook\n\n" + "Step: check the dashboard, then roll forward or back.\n" * 12   # ~650 bytes

READER = r'''
import sys, threading, time
sys.path.insert(0, sys.argv[4])
from pathlib import Path
from core.errors import NotFound
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.sync import watch

home, n, mode = Home(Path(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
print("ready", flush=True)
k = 0
if mode == "cli":
    while k < n:
        with Node.open(home) as node:   # what every CLI command does: open (applying the log), then read
            try:
                KnowledgeBase(node).resolve(f"ENG/lag {k:05d}")
            except NotFound:
                continue
        print(k, time.time(), flush=True)
        k += 1
else:
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        wake, stop = threading.Event(), threading.Event()
        watch.start_node(node, wake, stop)      # what the app's worker starts: a stat watcher, or a consumer
        while k < n:
            try:
                kb.resolve(f"ENG/lag {k:05d}")
            except NotFound:
                wake.wait(1.0)
                wake.clear()
                node.catch_up()
                continue
            print(k, time.time(), flush=True)
            k += 1
        stop.set()
'''


class OneAtATime:
    """The pages log applied one record at a time (`apply_record`: a savepoint, an op_id lookup and an
    outcome INSERT each), as the applier did before it applied a chunk at a time: the peer below."""

    position = applier.APPLIER
    batch = engine.TXN_RECORDS

    def apply(self, conn, records, *, careful=False):
        return [o for o in (applier.apply_record(conn, r) for r in records) if o is not None]


def fleet(base: Path, target: str | None = None) -> tuple[str, Home, Home]:
    """Two nodes A and B of one company: on a shared directory under `base`, or on the NATS servers `target`
    (streams of their own on them: named after `base`)."""
    a = Home(base / "A")
    init_home(a, config_mod.example_config())
    shared = target or str(base / "shared")
    prefix = {"prefix": "".join(c for c in base.name if c.isalnum())[:32]} if target else {}
    join_mod.join(a, shared, **prefix)
    join_mod.join(Home(base / "B"), shared, **prefix)
    return shared, Home(a.root), Home(base / "B")


def bench_lag(base: Path, writes: int, mode: str, target: str | None = None) -> list[float]:
    _, a, b = fleet(base / mode, target)
    env = {k: v for k, v in os.environ.items() if k not in ("CREWLET_HOME", "CREWLET_AS")}
    reader = subprocess.Popen([sys.executable, "-c", READER, str(b.root), str(writes), mode, str(ROOT)],
                              stdout=subprocess.PIPE, text=True, env=env)
    assert reader.stdout is not None
    if reader.stdout.readline().strip() != "ready":
        raise SystemExit("the reader did not start")
    acked: list[float] = []
    rnd = random.Random(13)
    with Node.open(a) as node:
        kb = KnowledgeBase(node)
        for k in range(writes):
            kb.create_page("ENG", f"Lag {k:05d}", f"written on A, number {k}")
            acked.append(time.time())
            time.sleep(rnd.uniform(0.02, 0.1))
    seen: dict[int, float] = {}
    for line in reader.stdout:
        k, t = line.split()
        seen[int(k)] = float(t)
    reader.wait(timeout=120)
    return [max(0.0, seen[k] - acked[k]) * 1000 for k in range(writes) if k in seen]


def make_records(n: int) -> list[Record]:
    rnd = random.Random(7)
    ids: list[str] = []
    revs: dict[str, int] = {}
    out: list[Record] = []
    creates = int(n * 0.4)
    for i in range(n):
        kind = "create" if i < creates // 4 or not ids else rnd.choices(
            ["create", "save", "comment", "rename", "move"], [40, 40, 10, 5, 5])[0]
        if kind == "create":
            pid = uuid.uuid4().hex[:16]
            ids.append(pid)
            revs[pid] = 1
            out.append(Record.new("page.create", "alex", {"page_id": pid, "container": "ENG", "title": f"Page {i:07d}",
                                                          "body": BODY, "parent_id": None}))
        elif kind == "save":
            pid = rnd.choice(ids)
            out.append(Record.new("page.save", "sam", {"page_id": pid, "base_revision": revs[pid],
                                                       "body": BODY + f"\nedit {i}\n"}))
            revs[pid] += 1
        elif kind == "comment":
            out.append(Record.new("comment.add", "sam", {"comment_id": uuid.uuid4().hex[:16], "page_id": rnd.choice(ids),
                                                         "body": f"a remark, number {i}"}))
        elif kind == "rename":
            pid = rnd.choice(ids)
            out.append(Record.new("page.rename", "alex", {"page_id": pid, "title": f"Renamed {i:07d}"}))
            revs[pid] += 1
        else:
            out.append(Record.new("page.move", "alex", {"page_id": rnd.choice(ids), "parent_id": None}))
    return out


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def write_all(node: Node, records: list[Record]) -> None:
    """The writer's side: every record submitted, 1,000 a submit; a refusal ends the bench."""
    for i in range(0, len(records), 1000):
        outs = node.submit(records[i:i + 1000])
        bad = [o for o in outs if o.status == "refused"]
        if bad:
            raise SystemExit(f"refused while writing: {bad[0]}")


def bench_apply_backend(base: Path, records: list[Record], target: str | None) -> dict[str, tuple[int, float, float]]:
    """The writer's append + apply (1,000 a submit) and a new node applying the whole log, on one backend."""
    shared, a, _ = fleet(base, target)
    out: dict[str, tuple[int, float, float]] = {}
    with Node.open(a) as node:
        out["append"] = (len(records), *timed(lambda: write_all(node, records)))
    applied: list[int] = []
    prefix = {"prefix": "".join(c for c in base.name if c.isalnum())[:32]} if target else {}
    wall, cpu = timed(lambda: applied.append(join_mod.join(Home(base / "C"), shared, **prefix).applied))
    out["fresh"] = (applied[0], wall, cpu)
    return out


def loop_handoff_us(target: str, n: int = 2000) -> float:
    """What one hand-off to the JetStream log's event loop thread costs (a coroutine that does nothing)."""
    from core.log.nats_loop import LoopThread

    loop = LoopThread()

    async def nothing() -> None:
        return None

    t = time.perf_counter()
    for _ in range(n):
        loop.run(nothing(), 5)
    us = (time.perf_counter() - t) / n * 1e6
    loop.close()
    return us


def bench_apply(base: Path, n: int) -> dict[str, tuple[int, float, float]]:
    records = make_records(n)
    shared, a, _ = fleet(base / "apply")
    results: dict[str, tuple[int, float, float]] = {}
    with Node.open(a) as node:
        results["writer: append + apply, 1,000 a submit"] = (n, *timed(lambda: write_all(node, records)))
    fresh = Home(base / "apply" / "C")
    applied: list[int] = []

    def catch_up() -> None:
        applied.append(join_mod.join(fresh, shared).applied)
    wall, cpu = timed(catch_up)
    results["fresh node: join + apply the whole log"] = (applied[0], wall, cpu)

    # the same log applied one record at a time (a savepoint, an op_id lookup and an outcome INSERT each),
    # as the applier did before it applied a batch at a time
    single = connect(base / "apply" / "one-at-a-time.db")
    with FileLog(Path(shared) / "pages.log", readonly=True) as flog:
        counted: list[int] = []
        wall, cpu = timed(lambda: counted.append(engine.catch_up(single, flog, OneAtATime())))
    single.close()
    results["fresh node, one record at a time (before)"] = (counted[0], wall, cpu)

    rows = [(r.payload.get("page_id", ""), i, r.type, r.payload.get("title", ""), r.payload.get("body", ""), r.actor, r.at)
            for i, r in enumerate(records)]
    conn = sqlite3.connect(str(base / "plain.db"), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE rows (page_id TEXT NOT NULL, seq INTEGER PRIMARY KEY, type TEXT NOT NULL, "
                 "title TEXT NOT NULL, body TEXT NOT NULL, author TEXT NOT NULL, at INTEGER NOT NULL)")

    def plain() -> None:
        for i in range(0, len(rows), 2000):
            conn.execute("BEGIN")
            for row in rows[i:i + 2000]:
                conn.execute("INSERT INTO rows VALUES (?,?,?,?,?,?,?)", row)
            conn.execute("COMMIT")
    results["plain SQLite: one INSERT a row, 2,000 a txn"] = (n, *timed(plain))
    conn.close()
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--lag-writes", type=int, default=200)
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--skip-lag", action="store_true")
    ap.add_argument("--skip-apply", action="store_true")
    ap.add_argument("--backend", choices=("file", "jetstream"), default="file",
                    help="jetstream: every row on NATS JetStream too (sync_interval lazy and always), beside the file backend")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="crewlet-bench-sync-", dir=args.dir))
    print(f"crewlet sync benchmark — {base}; {machine_load()}")
    if args.backend == "jetstream":
        try:
            jetstream_rows(base, args)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return 0
    try:
        if not args.skip_lag:
            print(f"\nreplication lag, {args.lag_writes} writes on A, each looked for on B (ms from A's acknowledgement):")
            for mode, label in (("cli", "B through the CLI's read path (open, apply, read)"),
                                ("watch", f"B as the app's worker (watcher every {INTERVAL_S} s, then apply)")):
                lags = bench_lag(base, args.lag_writes, mode)
                print(f"  {label:<58} p50 {statistics.median(lags):7.1f}  p95 {percentile(lags, 95):7.1f}  "
                      f"max {max(lags):7.1f}  ({len(lags)} seen)")
            print(f"  {machine_load()}")
        if not args.skip_apply:
            print(f"\napply throughput, {args.records:,} records:")
            res = bench_apply(base, args.records)
            for label, (n, wall, cpu) in res.items():
                print(f"  {label:<46} {n:>8,} rec  {wall:7.2f} s wall {n / wall:>9,.0f} rec/s   "
                      f"{cpu:7.2f} s CPU {n / cpu:>9,.0f} rec/s")
            rate = {k: (v[0] / v[1], v[0] / v[2]) for k, v in res.items()}
            fresh = rate["fresh node: join + apply the whole log"]
            writer = rate["writer: append + apply, 1,000 a submit"]
            plain = rate["plain SQLite: one INSERT a row, 2,000 a txn"]
            before = rate["fresh node, one record at a time (before)"]
            print(f"  fresh node / writer: {fresh[0] / writer[0]:.2f}x wall, {fresh[1] / writer[1]:.2f}x CPU")
            print(f"  batched / one record at a time: {fresh[0] / before[0]:.2f}x wall, {fresh[1] / before[1]:.2f}x CPU")
            print(f"  plain SQLite / fresh node: {plain[0] / fresh[0]:.1f}x wall, {plain[1] / fresh[1]:.1f}x CPU "
                  "(how many times faster writing the rows directly is)")
            print(f"  plain SQLite / writer: {plain[0] / writer[0]:.1f}x wall, {plain[1] / writer[1]:.1f}x CPU")
            print(f"  {machine_load()}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def jetstream_rows(base: Path, args: argparse.Namespace) -> None:
    """The file backend and JetStream (sync_interval lazy and always) side by side, alternating where it can."""
    sys.path.insert(0, str(ROOT / "tests"))
    from nats_server import NatsServer

    servers = {"lazy": NatsServer(base / "nats-lazy").start(), "always": NatsServer(base / "nats-always", sync="always").start()}
    backends = {"file": None, "jetstream, sync lazy": servers["lazy"].url, "jetstream, sync always": servers["always"].url}
    try:
        print(f"\nthe JetStream log's event loop thread: one hand-off {loop_handoff_us(servers['lazy'].url):.0f} µs")
        if not args.skip_lag:
            print(f"\nreplication lag, {args.lag_writes} writes on A, each looked for on B kept open (ms from A's "
                  "acknowledgement to B reading the page; B woken by the stat watcher / the consumer):")
            for label, target in backends.items():
                lags = bench_lag(base / f"lag-{label.replace(' ', '').replace(',', '-')}", args.lag_writes, "watch", target)
                print(f"  {label:<24} p50 {statistics.median(lags):7.1f}  p95 {percentile(lags, 95):7.1f}  "
                      f"max {max(lags):7.1f}  ({len(lags)} seen)")
            print(f"  {machine_load()}")
        if not args.skip_apply:
            records = make_records(args.records)
            print(f"\nappend and apply, {args.records:,} records (the writer: 1,000 a submit, append + apply; a new "
                  "node: join + apply the whole log):")
            rates: dict[str, dict[str, float]] = {}
            for label, target in backends.items():
                res = bench_apply_backend(base / f"apply-{label.replace(' ', '').replace(',', '-')}", records, target)
                rates[label] = {}
                for row, (n, wall, cpu) in res.items():
                    rates[label][row] = n / wall
                    what = "writer: append + apply" if row == "append" else "new node: join + apply"
                    print(f"  {label:<24} {what:<24} {n:>8,} rec  {wall:7.2f} s wall {n / wall:>9,.0f} rec/s   "
                          f"{cpu:7.2f} s CPU {n / cpu:>9,.0f} rec/s")
            for label in list(backends)[1:]:
                print(f"  {label} / file: append {rates[label]['append'] / rates['file']['append']:.2f}x, "
                      f"new node {rates[label]['fresh'] / rates['file']['fresh']:.2f}x")
            lazy, always = rates["jetstream, sync lazy"], rates["jetstream, sync always"]
            print(f"  the cost of sync_interval always: append {lazy['append'] / always['append']:.2f}x slower than lazy")
            print(f"  {machine_load()}")
    finally:
        for server in servers.values():
            server.kill()


if __name__ == "__main__":
    raise SystemExit(main())
