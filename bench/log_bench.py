"""How fast the log file takes a big batch and gives back a big log, next to SQLite doing the same.

    python bench/log_bench.py [--append 10000] [--read 100000] [--repeat 3] [--dir D]

These were wall-clock asserts in tests/test_log.py (a 10k batch under 1 s, 100k records read under
2 s), which a busy machine fails for no fault of the code; here they are measured beside a peer in
the same run and printed as ratios, so a slow machine slows both sides.

* append — --append records in one `FileLog.append(sync=True)` (one flock, one write per frame, one
  fsync). Peer: the same record bodies as rows of a plain SQLite table, one INSERT each, in one
  transaction (synchronous=FULL: one fsync at commit).
* read — every record of a --read record log decoded back into `Record`s. Peer: the same bodies
  selected back from SQLite in order and decoded with `Record.from_body`.

The best of --repeat runs is reported for each side.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.log import FileLog, Record  # noqa: E402
from core.store import sqlite3  # noqa: E402


def records(n: int) -> list[Record]:
    return [Record.new("page.create", "alice", {"i": i, "title": f"Page {i}", "text": "lorem ipsum " * 4})
            for i in range(n)]


def best(repeat: int, run: Callable[[int], float]) -> float:
    return min(run(i) for i in range(repeat))


def append_log(base: Path, batch: list[Record]) -> Callable[[int], float]:
    def run(i: int) -> float:
        log = FileLog(base / f"append-{i}.log")
        started = time.perf_counter()
        log.append(batch, sync=True)
        return time.perf_counter() - started
    return run


def append_sqlite(base: Path, batch: list[Record]) -> Callable[[int], float]:
    def run(i: int) -> float:
        db = sqlite3.connect(str(base / f"append-{i}.db"), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.execute("CREATE TABLE log (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        started = time.perf_counter()   # encoding the bodies is on the clock, as it is in append()
        rows = [(seq, rec.body()) for seq, rec in enumerate(batch, start=1)]
        db.execute("BEGIN")
        db.executemany("INSERT INTO log (seq, body) VALUES (?, ?)", rows)
        db.execute("COMMIT")
        elapsed = time.perf_counter() - started
        db.close()
        return elapsed
    return run


def read_log(path: Path, n: int) -> Callable[[int], float]:
    def run(_: int) -> float:
        started = time.perf_counter()
        count = sum(1 for _ in FileLog(path).read())
        elapsed = time.perf_counter() - started
        assert count == n
        return elapsed
    return run


def read_sqlite(path: Path, n: int) -> Callable[[int], float]:
    def run(_: int) -> float:
        db = sqlite3.connect(str(path), isolation_level=None)
        started = time.perf_counter()
        count = sum(1 for seq, body in db.execute("SELECT seq, body FROM log ORDER BY seq")
                    if Record.from_body(body, seq))
        elapsed = time.perf_counter() - started
        db.close()
        assert count == n
        return elapsed
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--append", type=int, default=10_000, help="records in the one appended batch")
    ap.add_argument("--read", type=int, default=100_000, help="records in the log read back")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side; the best is reported")
    ap.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    args = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="crewlet-logbench-", dir=args.dir))
    try:
        print(f"crewlet log benchmark — {base}, Python {platform.python_version()}, "
              f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        batch = records(args.append)
        log_s = best(args.repeat, append_log(base, batch))
        sql_s = best(args.repeat, append_sqlite(base, batch))
        print(f"\nappend: one batch of {args.append:,} records, fsync once")
        print(f"  FileLog.append            {log_s:8.3f} s {args.append / log_s:>12,.0f} rec/s")
        print(f"  SQLite, one transaction   {sql_s:8.3f} s {args.append / sql_s:>12,.0f} rec/s")
        print(f"  ratio SQLite / log: {sql_s / log_s:.2f}x  (above 1: the log is faster)")

        log_path, db_path = base / "big.log", base / "big.db"
        big = records(args.read)
        FileLog(log_path).append(big, sync=False)
        db = sqlite3.connect(str(db_path), isolation_level=None)
        db.execute("CREATE TABLE log (seq INTEGER PRIMARY KEY, body BLOB NOT NULL)")
        db.execute("BEGIN")
        db.executemany("INSERT INTO log VALUES (?, ?)", ((s, r.body()) for s, r in enumerate(big, start=1)))
        db.execute("COMMIT")
        db.close()
        log_r = best(args.repeat, read_log(log_path, args.read))
        sql_r = best(args.repeat, read_sqlite(db_path, args.read))
        print(f"\nread: {args.read:,} records decoded back")
        print(f"  FileLog.read              {log_r:8.3f} s {args.read / log_r:>12,.0f} rec/s")
        print(f"  SQLite select + decode    {sql_r:8.3f} s {args.read / sql_r:>12,.0f} rec/s")
        print(f"  ratio SQLite / log: {sql_r / log_r:.2f}x  (above 1: the log is faster)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
