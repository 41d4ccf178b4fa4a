"""`crewlet mcp`: a warm hybrid search_knowledge through a real client session, beside the same search
through the CLI process and through the searcher in this process; and how soon a server answers
`initialize`.

    python bench/mcp_search.py --home COPY [--queries 120] [--cli 20] [--starts 7] [--as HANDLE]

COPY is a home holding windows-driver-docs with its keyword index and vectors — a COPY (this bench adds
an agent actor to its company.toml, and an agent's searches are recorded as knowledge_reads): e.g.
`cp -a /path/to/wdd /tmp/wdd-mcp`. Queries are distinct (the server caches query vectors): the
windows-driver-docs questions of bench/questions plus page titles drawn with a fixed seed. Each query
runs, in turn, through the MCP session (timed at the client: the JSON-RPC round trip, the catch-up check,
the query embedded, both halves, fusion, hits, the knowledge_read), through the in-process
NativeSearcher (the floor: the same search with no protocol and no record), and for the first --cli of
them through `crewlet search --json` as a process. The first 5 MCP queries warm the server and are not
counted. Prints p50/p95, the ratios and the load. Then --starts spawns of `crewlet mcp`, each timed from
spawn to its `initialize` answer on the pipe, alternating with `python -c pass` and `crewlet --help`.
Benchmarks print; they never assert.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, machine_load, percentile

import anyio
from mcp import Client, StdioServerParameters

CREWLET = [sys.executable, "-c", "from crewlet_tui.cli import main; main()"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("CREWLET_")}
WARM = 5


def questions() -> list[str]:
    rows = [json.loads(line) for line in (ROOT / "bench" / "questions" / "corpora.jsonl").read_text().splitlines()
            if line.strip()]
    return [r["question"] for r in rows if r["corpus"].startswith("windows-driver-docs")]


def titles(home: Path, n: int) -> list[str]:
    from core.store.driver import sqlite3

    conn = sqlite3.connect(f"file:{home / 'crewlet.db'}?mode=ro", uri=True)
    rows = [r[0] for r in conn.execute("SELECT title FROM pages WHERE trashed_at IS NULL ORDER BY id")]
    conn.close()
    return random.Random(7).sample(rows, min(n, len(rows)))


def ensure_agent(home: Path, handle: str) -> None:
    from core import config as config_mod

    file = home / "company.toml"
    data = config_mod.load(file).raw
    if handle not in data.get("actors", {}):
        data.setdefault("actors", {})[handle] = {"kind": "agent"}
        config_mod.write(file, data)


def ms(values: list[float]) -> str:
    return f"p50 {1000 * statistics.median(values):7.1f} ms  p95 {1000 * percentile(values, 95):7.1f} ms  (n={len(values)})"


async def search_through_mcp(home: Path, actor: str, queries: list[str], cli_n: int) -> dict[str, list[float]]:
    from core.node import Node
    from core.search.native import NativeSearcher
    from core.search.seam import Query

    times: dict[str, list[float]] = {"mcp": [], "in-process": [], "cli": []}
    params = StdioServerParameters(command=CREWLET[0], args=[*CREWLET[1:], "--home", str(home), "--as", actor, "mcp"],
                                   env=ENV, cwd=str(ROOT))
    from core.paths import Home

    node = Node.open(Home(home), sync_containers=False)
    searcher = NativeSearcher(node)
    try:
        async with Client(params, cache=None, read_timeout_seconds=120) as client:
            served = set()
            for i, q in enumerate(queries):
                started = time.perf_counter()
                result = await client.call_tool("search_knowledge", {"query": q, "limit": 8})
                took = time.perf_counter() - started
                assert not result.is_error, result.content[0].text
                served.add(result.structured_content["served_mode"])
                started = time.perf_counter()
                searcher.search(Query(q, actor=None, limit=8))  # the operator: no knowledge_read
                floor = time.perf_counter() - started
                if i >= WARM:
                    times["mcp"].append(took)
                    times["in-process"].append(floor)
                    if len(times["cli"]) < cli_n:
                        started = time.perf_counter()
                        res = subprocess.run([*CREWLET, "--home", str(home), "--as", actor, "search", q, "--json",
                                              "--limit", "8"], env=ENV, cwd=ROOT, capture_output=True, text=True)
                        times["cli"].append(time.perf_counter() - started)
                        assert res.returncode == 0, res.stderr
            print(f"served modes: {sorted(m or 'none' for m in served)}")
            last = result.content[0].text.splitlines()[0]
            print(f"last outcome: {last}")
    finally:
        searcher.close()
        node.close()
    return times


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_initialize(home: Path, actor: str, cpu: list[float]) -> float:
    """Spawn to the initialize answer (wall); `cpu` gets the whole process's CPU time (it exits at once
    after the answer, when its stdin closes: the CPU a start costs, whatever the machine's load)."""
    before = children_cpu()
    started = time.perf_counter()
    proc = subprocess.Popen([*CREWLET, "--home", str(home), "--as", actor, "mcp"], env=ENV, cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}) + "\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    took = time.perf_counter() - started
    assert answer.get("id") == 1 and "result" in answer, answer
    proc.stdin.close()
    proc.wait(timeout=60)
    cpu.append(children_cpu() - before)
    return took


def time_process(argv: list[str], cpu: list[float]) -> float:
    before = children_cpu()
    started = time.perf_counter()
    subprocess.run(argv, env=ENV, cwd=ROOT, capture_output=True, check=True)
    took = time.perf_counter() - started
    cpu.append(children_cpu() - before)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True, type=Path, help="A COPY of a windows-driver-docs home (it is written to).")
    ap.add_argument("--queries", type=int, default=120, help="Distinct queries through the MCP session.")
    ap.add_argument("--cli", type=int, default=20, help="How many of them also run as a `crewlet search` process.")
    ap.add_argument("--starts", type=int, default=7, help="Server starts timed to their initialize answer.")
    ap.add_argument("--as", dest="actor", default="bench-bot", help="The agent the server acts as.")
    args = ap.parse_args()
    home = args.home.resolve()
    ensure_agent(home, args.actor)
    queries = list(dict.fromkeys(questions() + titles(home, args.queries)))[: args.queries + WARM]
    print(f"home {home}; {len(queries)} distinct queries; before: {machine_load()}")
    times = anyio.run(search_through_mcp, home, args.actor, queries, args.cli)
    for name in ("mcp", "in-process", "cli"):
        print(f"{name:>11}  {ms(times[name])}")
    mcp95, floor95, cli95 = (percentile(times[k], 95) for k in ("mcp", "in-process", "cli"))
    print(f"ratios (p95): mcp / in-process {mcp95 / floor95:.2f}x, cli process / mcp {cli95 / mcp95:.1f}x")
    print(f"after searches: {machine_load()}")
    names = ("crewlet mcp → initialize", "crewlet --help", "python -c pass")
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.starts):
        wall[names[0]].append(time_initialize(home, args.actor, cpu[names[0]]))
        wall[names[1]].append(time_process([*CREWLET, "--help"], cpu[names[1]]))
        wall[names[2]].append(time_process([sys.executable, "-c", "pass"], cpu[names[2]]))
    for name in names:
        w, c = wall[name], cpu[name]
        print(f"{name:>26}  wall median {statistics.median(w):.3f} s  best {min(w):.3f} s  worst {max(w):.3f} s;"
              f"  CPU median {statistics.median(c):.3f} s")
    print(f"initialize / crewlet --help (median wall): {statistics.median(wall[names[0]]) / statistics.median(wall[names[1]]):.2f}x")
    print(f"after starts: {machine_load()}")


if __name__ == "__main__":
    main()
