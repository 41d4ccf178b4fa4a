"""The convergence fuzz: three nodes sharing one company's logs — on a shared directory, or on NATS
JetStream (`--backend jetstream`) — a writer process on each issuing random records — creates (titles from
a small pool, so they collide), saves (some from a stale revision, through the knowledge base, so a losing
save's text is rescued), renames onto taken titles, moves (some into cycles, sent without the writer's own
check), trashes, restores and comments — while one writer is killed with SIGKILL at a random moment. On
JetStream the server is also killed and restarted mid-run (`--fault restart`), or the company runs on a
3-server cluster with one server stopped mid-run (`--fault cluster`). At the end every node must hold the
same content digest, every write a writer saw acknowledged must be on every node and decided the same,
every losing save's text must be in its node's rescued/, and no page may sit in a cycle.

    python bench/sync_fuzz.py [--ops 2000] [--rounds 3] [--seed N] [--backend file|jetstream]
                              [--fault restart|cluster|none] [--sync always|default]

`tests/test_sync_fuzz.py` runs `run(...)` at a size that fits CI; this runs it bigger.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.paths import Home  # noqa: E402
from core.sync import join as join_mod  # noqa: E402
from core.store.digest import content_digest  # noqa: E402

TITLES = [f"Topic {i}" for i in range(16)]
ACTORS = ("alex", "sam")

# The writer, run as its own process: `python -c WRITER home ack_file seed ops root slow_after`. Past
# `slow_after` acknowledged writes (-1: never) it goes on writing a record every few milliseconds, so the
# harness can kill it mid-run, at an unchosen point of an append, however fast the machine writes.
WRITER = r'''
import json, random, sys, time, uuid
sys.path.insert(0, sys.argv[5])
slow_after = int(sys.argv[6])
from core.errors import CrewletError, StaleRevision
from core.log import LogFailed, Record
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home

from pathlib import Path
home, ack_path, seed, ops = Home(Path(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
TITLES = [f"Topic {i}" for i in range(16)]
rnd = random.Random(seed)

def pick(node, where="trashed_at IS NULL"):
    rows = node.conn.execute(f"SELECT id, revision, trashed_at FROM pages WHERE container = 'ENG' AND {where}").fetchall()
    return rnd.choice(rows) if rows else None

def record(node):
    actor = rnd.choice(("alex", "sam"))
    roll = rnd.random()
    page = pick(node)
    if roll < 0.25 or page is None:
        parent = pick(node) if rnd.random() < 0.3 else None
        return Record.new("page.create", actor, {"page_id": uuid.uuid4().hex[:16], "container": "ENG",
                          "title": rnd.choice(TITLES), "body": f"body {rnd.random()}", "parent_id": parent["id"] if parent else None})
    if roll < 0.50:
        base = page["revision"] - (1 if rnd.random() < 0.2 and page["revision"] > 1 else 0)  # some stale
        return ("save", actor, page["id"], base, f"save {rnd.random()}")
    if roll < 0.60:
        return Record.new("page.rename", actor, {"page_id": page["id"], "title": rnd.choice(TITLES)})
    if roll < 0.75:
        other = pick(node)
        parent = other["id"] if other is not None and rnd.random() < 0.8 else None
        return Record.new("page.move", actor, {"page_id": page["id"], "parent_id": parent})  # cycles included
    if roll < 0.83:
        return Record.new("page.trash", actor, {"page_id": page["id"]})
    if roll < 0.90:
        gone = pick(node, "trashed_at IS NOT NULL")
        if gone is not None:
            return Record.new("page.restore", actor, {"page_id": gone["id"]})
    return Record.new("comment.add", actor, {"comment_id": uuid.uuid4().hex[:16], "page_id": page["id"],
                      "body": f"comment {rnd.random()}"})

def submit(node, rec):
    # the log's servers may be away for a moment (killed and restarted, a cluster member stopped): the same
    # record is sent again (its op_id: a copy that did land is answered "duplicate", never stored twice)
    deadline = time.monotonic() + 120
    while True:
        try:
            return node.submit([rec])[0]
        except (CrewletError, LogFailed) as exc:
            if getattr(exc, "code", "") not in ("offline", "not_applied", "write_failed") and not isinstance(exc, LogFailed) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.05)

def save(node, actor, page_id, base, body):
    kb = KnowledgeBase(node)
    deadline = time.monotonic() + 120
    while True:
        try:
            kb.save_page(page_id, body, base_revision=base, actor=actor)
            return ["save", "applied", None, None]
        except StaleRevision as exc:
            return ["save", "refused", "stale_revision", [exc.rescued_to, body]]
        except CrewletError as exc:
            if exc.code in ("offline", "not_applied", "write_failed") and time.monotonic() < deadline:
                time.sleep(0.05)   # not saved (its text rescued all the same): the writer saves again
                continue
            return ["save", "refused", exc.code, None]

with Node.open(home, sync_containers=False) as node, open(ack_path, "a", encoding="utf-8") as ack:
    print("ready", flush=True)
    for n in range(ops):
        with node.lock:
            rec = record(node)
        if isinstance(rec, tuple):
            line = save(node, *rec[1:])
        else:
            out = submit(node, rec)
            line = [rec.op_id, out.status, out.code, None]
        ack.write(json.dumps(line) + "\n")
        ack.flush()
        if 0 <= slow_after <= n:
            time.sleep(rnd.uniform(0.002, 0.006))
'''


@dataclass
class FuzzResult:
    nodes: int
    ops: int
    acked: int
    records: int
    killed: str                  # the node whose writer was killed ("" when none was)
    killed_after_s: float
    backend: str = "file"
    fault: str = "none"          # what happened to the log's servers mid-run (JetStream)
    faulted: bool = False        # it did happen while the writers were writing
    rescued: int = 0             # losing saves whose text was found in their node's rescued/
    digests: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)     # status/code -> count, over the acked writes
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def converged(self) -> bool:
        return not self.problems and len(set(self.digests.values())) == 1


class Fleet:
    """Three homes of one company, on a shared directory or on NATS JetStream (servers this fleet started)."""

    def __init__(self, base: Path, n: int = 3, *, backend: str = "file", fault: str = "none",
                 sync: str = "always") -> None:
        self.base, self.backend, self.fault = base, backend, fault
        self.servers: list = []
        self.cluster = None
        first = Home(base / "node0")
        init_home(first, config_mod.example_config())
        if backend == "jetstream":
            sys.path.insert(0, str(ROOT / "tests"))
            from nats_server import NatsCluster, NatsServer

            if fault == "cluster":
                cluster = NatsCluster(base / "nats", size=3, sync=sync).start()
                self.servers, target, self.cluster = cluster.servers, cluster.url, cluster
            else:
                server = NatsServer(base / "nats", sync=sync).start()
                self.servers, target = [server], server.url
        else:
            target = str(base / "shared")
        self.target = target
        join_mod.join(first, target)
        self.homes = [Home(first.root)]
        for i in range(1, n):
            join_mod.join(Home(base / f"node{i}"), target)
            self.homes.append(Home(base / f"node{i}"))

    def strike(self) -> None:
        """The fault, mid-run: the single server killed (SIGKILL) and started again, or one of three stopped."""
        if self.fault == "restart":
            self.servers[0].kill()
            time.sleep(0.3)    # the writers meet a server that is away (they retry), then it is back
            self.servers[0].start()
        elif self.fault == "cluster":
            self.servers[1].kill()

    def settle(self) -> None:
        """Before the nodes are compared: the stopped server's streams and buckets have new leaders among the
        other two (until the election, seconds after the stop, a request to them gets no answer and a node
        opened then is offline for a while: the nodes are compared once the cluster can answer)."""
        if self.cluster is not None:
            self.cluster.wait_leaders()

    def records(self) -> int:
        with Node.open(self.homes[0], sync_containers=False) as node:
            return node.log.last_seq() if self.backend == "jetstream" else node.log.scan().last_seq

    def close(self) -> None:
        for server in self.servers:
            server.kill()


def make_fleet(base: Path, n: int = 3) -> tuple[Path, list[Home]]:
    fleet = Fleet(base, n)
    return Path(fleet.target), fleet.homes


def _cycles(node: Node) -> list[str]:
    parent = {r[0]: r[1] for r in node.conn.execute("SELECT id, parent_id FROM pages")}
    bad = []
    for start in parent:
        seen, cur = set(), start
        while cur is not None:
            if cur in seen:
                bad.append(start)
                break
            seen.add(cur)
            cur = parent.get(cur)
    return bad


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def run(base: Path, *, ops: int = 150, seed: int | None = None, kill: bool = True, backend: str = "file",
        fault: str = "none", sync: str = "always") -> FuzzResult:
    """One round: three nodes, three writers of `ops` records each, one of them killed at a random moment
    (and on JetStream, the servers' `fault` mid-run)."""
    rnd = random.Random(seed)
    started = time.perf_counter()
    fleet = Fleet(base, backend=backend, fault=fault if backend == "jetstream" else "none", sync=sync)
    try:
        return _run(fleet, base, ops, rnd, kill, started)
    finally:
        fleet.close()


def _run(fleet: Fleet, base: Path, ops: int, rnd: random.Random, kill: bool, started: float) -> FuzzResult:
    homes = fleet.homes
    env = {**os.environ}
    env.pop("CREWLET_HOME", None)
    env.pop("CREWLET_AS", None)
    procs = []
    victim = rnd.randrange(len(homes))
    after_acks = rnd.randrange(max(1, ops // 10), max(2, ops // 2))
    for i, home in enumerate(homes):
        ack = base / f"ack{i}.jsonl"
        slow_after = after_acks if kill and i == victim else -1
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, str(home.root), str(ack), str(rnd.randrange(1 << 30)),
                                       str(ops), str(ROOT), str(slow_after)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        line = p.stdout.readline() if p.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(f"a writer did not start: {line!r} {p.stderr.read() if p.stderr else ''}")
    faulted = False
    if fleet.fault != "none":
        # mid-run by what the writers did, not by the clock: once the survivors acknowledged a share of theirs
        survivor = base / f"ack{(victim + 1) % len(homes)}.jsonl"
        while procs[(victim + 1) % len(homes)].poll() is None and _lines(survivor) < ops // 4:
            time.sleep(0.005)
        faulted = procs[(victim + 1) % len(homes)].poll() is None
        fleet.strike()
    killed_after = 0.0
    sigkilled = False
    if kill:
        # mid-run, by what the victim did rather than by the clock (a fast writer must not finish first):
        # once it has acknowledged a random share of its writes
        victim_acks = base / f"ack{victim}.jsonl"
        t = time.monotonic()
        while procs[victim].poll() is None and _lines(victim_acks) < after_acks:
            time.sleep(0.005)
        killed_after = time.monotonic() - t
        if procs[victim].poll() is None:
            os.kill(procs[victim].pid, signal.SIGKILL)
            sigkilled = True
    problems = []
    for i, p in enumerate(procs):
        _, err = p.communicate(timeout=600)
        if p.returncode != 0 and not (kill and i == victim):
            problems.append(f"writer {i} failed ({p.returncode}): {err.strip().splitlines()[-1:] if err else ''}")
    acked: dict[str, tuple[str, str | None]] = {}
    losers: list[tuple[str, str, str]] = []          # (node, rescued file, text) of every losing save
    saves = 0
    for i in range(len(homes)):
        path = base / f"ack{i}.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    op_id, status, code, extra = json.loads(line)
                    if op_id == "save":
                        saves += 1
                        if code == "stale_revision":
                            losers.append((f"node{i}", extra[0], extra[1]))
                        key = f"save:{status}:{code}" if code else f"save:{status}"
                        acked[f"save-{i}-{saves}"] = ("save", key)
                        continue
                    acked[op_id] = (status, code)
    result = FuzzResult(len(homes), ops, len(acked), 0, f"node{victim}" if sigkilled else "", killed_after,
                        backend=fleet.backend, fault=fleet.fault, faulted=faulted, problems=problems)
    for status, code in acked.values():
        key = code if status == "save" else (f"{status}:{code}" if code else status)
        result.outcomes[key] = result.outcomes.get(key, 0) + 1
    for node_name, rescued, text in losers:
        try:
            held = Path(rescued).read_text(encoding="utf-8")
        except OSError:
            held = None
        if held is None or text not in held:
            result.problems.append(f"{node_name}: a losing save's text is not in {rescued}")
        else:
            result.rescued += 1
    by_op = {op: out for op, out in acked.items() if out[0] != "save"}
    fleet.settle()
    for home in homes:
        with Node.open(home, sync_containers=False) as node:
            if node.damage is not None or node.offline is not None:
                result.problems.append(f"{home.root.name}: {node.damage or node.offline.line()}")
                continue
            result.digests[home.root.name] = content_digest(node.conn).content
            decided = {r[0]: (r[1], r[2]) for r in node.conn.execute("SELECT op_id, status, code FROM applied_ops")}
            lost = [op for op in by_op if op not in decided]
            differ = [op for op, out in by_op.items() if op in decided and decided[op] != out]
            if lost:
                result.problems.append(f"{home.root.name}: {len(lost)} acknowledged write(s) missing, e.g. {lost[0]}")
            if differ:
                result.problems.append(f"{home.root.name}: {len(differ)} write(s) decided otherwise than acknowledged")
            cycles = _cycles(node)
            if cycles:
                result.problems.append(f"{home.root.name}: {len(cycles)} page(s) in a cycle")
    result.records = fleet.records()
    result.seconds = time.perf_counter() - started
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=2000, help="records each writer issues")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--backend", choices=("file", "jetstream"), default="file")
    ap.add_argument("--fault", choices=("none", "restart", "cluster"), default="restart",
                    help="JetStream: the server killed and restarted mid-run, or one of a 3-server cluster stopped")
    ap.add_argument("--sync", default="always", help="JetStream: the servers' sync_interval (always, or default)")
    args = ap.parse_args(argv)
    logging.getLogger("crewlet").setLevel(logging.ERROR)  # every salvaged cycle is a warning: the counts say it
    failed = 0
    where = "a shared directory" if args.backend == "file" else f"NATS JetStream (fault {args.fault}, sync_interval {args.sync})"
    print(f"convergence fuzz on {where}: 3 nodes, 3 writers x {args.ops} records, one killed a round; "
          f"load {os.getloadavg()[0]:.2f}")
    for r in range(args.rounds):
        base = Path(tempfile.mkdtemp(prefix="crewlet-sync-fuzz-", dir=args.dir))
        res = run(base, ops=args.ops, seed=None if args.seed is None else args.seed + r, backend=args.backend,
                  fault=args.fault, sync=args.sync)
        verdict = "converged" if res.converged else "DIVERGED"
        print(f"round {r + 1}: {verdict} — {res.records:,} records on the log, {res.acked:,} acknowledged, "
              f"{res.killed} killed after {res.killed_after_s:.2f} s, {res.seconds:.1f} s; digest "
              f"{next(iter(res.digests.values()), '-')}")
        print("  acknowledged outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(res.outcomes.items())))
        print(f"  losing saves whose text was rescued: {res.rescued:,}" + (f"; server fault: {res.fault}" if res.fault != "none" else ""))
        for p in res.problems:
            print(f"  problem: {p}")
        failed += not res.converged
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
