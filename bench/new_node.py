"""A new node's apply, measured alone: `crewlet sync join` of a new home on a company whose pages log holds
`--records` records, on a shared directory and on NATS JetStream side by side, alternating, in one run.

    python bench/new_node.py [--records 100000] [--rounds 3] [--dir D] [--engine]

The company is written once per backend (bench/sync.py's mix of creates, saves, comments, renames and
moves, 1,000 a submit; JetStream on a nats-server with its lazy default `sync_interval`, started by the
bench). Then each round joins a new home on each backend in turn — the order swapped every round, so load
that comes and goes falls on both — and times the whole join (reading the company, opening the node,
applying every record, publishing its position). `--engine` also times the engine alone
(`applier.catch_up` of the pages log into an empty database, nothing else), the floor a join sits on.

Wall and CPU seconds (this process, every thread: the JetStream log decodes on its event loop thread) are
printed with the rates and the load; the nats-server's own CPU is not in them.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))
from _common import machine_load  # noqa: E402
from sync import fleet, make_records, timed  # noqa: E402
from core.log import FileLog  # noqa: E402
from core.node import Node  # noqa: E402
from core.pages import applier  # noqa: E402
from core.paths import Home  # noqa: E402
from core.store import connect  # noqa: E402
from core.sync import join as join_mod  # noqa: E402


def write_company(base: Path, records: list, target: str | None) -> tuple[str, dict]:
    shared, a, _ = fleet(base, target)
    with Node.open(a) as node:
        for i in range(0, len(records), 1000):
            bad = [o for o in node.submit(records[i:i + 1000]) if o.status == "refused"]
            if bad:
                raise SystemExit(f"refused while writing: {bad[0]}")
    prefix = {"prefix": "".join(c for c in base.name if c.isalnum())[:32]} if target else {}
    return shared, prefix


def join_once(home: Path, shared: str, prefix: dict) -> tuple[int, float, float]:
    applied: list[int] = []
    wall, cpu = timed(lambda: applied.append(join_mod.join(Home(home), shared, **prefix).applied))
    shutil.rmtree(home, ignore_errors=True)
    return applied[0], wall, cpu


def engine_once(db: Path, shared: str, prefix: dict, target: str | None) -> tuple[int, float, float]:
    """The pages log applied into an empty database by the engine alone (no join, no node)."""
    conn = connect(db)
    counted: list[int] = []
    try:
        if target is None:
            with FileLog(Path(shared) / "pages.log", readonly=True) as flog:
                counted.append(0)
                wall, cpu = timed(lambda: counted.__setitem__(0, applier.catch_up(conn, flog)))
        else:
            from core import config as config_mod
            from core.log import jetstream

            settings = config_mod.LogSettings(backend="jetstream", url=(target,), stream_prefix=prefix["prefix"])
            flog, vlog = jetstream.open_logs(settings)
            try:
                counted.append(0)
                wall, cpu = timed(lambda: counted.__setitem__(0, applier.catch_up(conn, flog)))
            finally:
                vlog.close()
                flog.close()
    finally:
        conn.close()
    for p in db.parent.glob(db.name + "*"):
        p.unlink()
    return counted[0], wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--engine", action="store_true", help="also time the engine alone (applier.catch_up)")
    ap.add_argument("--only", choices=("file", "jetstream"), default=None, help="one backend (to profile it)")
    args = ap.parse_args(argv)
    from nats_server import NatsServer

    base = Path(tempfile.mkdtemp(prefix="crewlet-bench-newnode-", dir=args.dir))
    print(f"a new node's join + apply — {base}; {machine_load()}")
    server = NatsServer(base / "nats").start() if args.only != "file" else None
    try:
        records = make_records(args.records)
        targets = {"file": None, "jetstream": server.url if server else None}
        if args.only:
            targets = {args.only: targets[args.only]}
        companies = {}
        for label, target in targets.items():
            companies[label] = write_company(base / f"co{label}", records, target)
        print(f"  {len(records):,} records written on each backend; {machine_load()}")
        rows: dict[str, list[tuple[int, float, float]]] = {}
        for r in range(args.rounds):
            order = list(targets) if r % 2 == 0 else list(reversed(targets))
            for label in order:
                shared, prefix = companies[label]
                kinds = [("join", lambda: join_once(base / f"new-{label}-{r}", shared, prefix))]
                if args.engine:
                    kinds.append(("engine", lambda: engine_once(base / f"engine-{label}.db", shared, prefix,
                                                                targets[label])))
                for kind, run in kinds:
                    n, wall, cpu = run()
                    rows.setdefault(f"{label} {kind}", []).append((n, wall, cpu))
                    print(f"  round {r + 1} {label:<9} {kind:<6} {n:>8,} rec  {wall:6.2f} s wall {n / wall:>8,.0f} rec/s  "
                          f"{cpu:6.2f} s CPU {n / cpu:>8,.0f} rec/s   {machine_load()}", flush=True)
        print("\nmedian of the rounds:")
        med: dict[str, tuple[float, float]] = {}
        for key, vals in rows.items():
            med[key] = (statistics.median(n / w for n, w, _ in vals), statistics.median(n / c for n, _, c in vals))
            print(f"  {key:<18} {med[key][0]:>8,.0f} rec/s wall  {med[key][1]:>8,.0f} rec/s per CPU s")
        if "file join" in med and "jetstream join" in med:
            j, f = med["jetstream join"], med["file join"]
            print(f"  jetstream / file (new node): {j[0] / f[0]:.2f}x wall, {j[1] / f[1]:.2f}x CPU")
        for label in targets:
            if f"{label} engine" in med:
                e, j = med[f"{label} engine"], med[f"{label} join"]
                print(f"  {label}: the join's rate / the engine's alone: {j[0] / e[0]:.2f}x wall, {j[1] / e[1]:.2f}x CPU")
        print(f"  {machine_load()}")
    finally:
        if server:
            server.kill()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
