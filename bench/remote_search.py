"""What a remote search costs beyond the request itself: the Confluence and Plane searchers against a bare
HTTP GET of the same answer, side by side in one run.

Both talk to the tests' servers on 127.0.0.1 (tests/remote_servers.py), loaded with real documentation
pages (the corpora's Markdown rendered to storage XHTML / HTML by crewlet's own writer). The peer is an
httpx.Client kept open (one pool, as the searcher keeps) sending the very request the searcher sends and
parsing its JSON — the floor for "one HTTP round trip plus parsing". The searcher adds the access
decision, the query's escaping, reading each result into a hit and the exclusions. Runs alternate A/B;
the load average is printed; the ratio is what to read (the servers are Python, so absolute times say
more about them than about crewlet).

    .venv/bin/python bench/remote_search.py [--pages 2000] [--runs 200]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench._common import machine_load  # noqa: E402
from core import config as config_mod  # noqa: E402
from core.remote.confluence import ConfluenceSearcher, build_cql  # noqa: E402
from core.remote.convert import markdown_to_html, markdown_to_storage  # noqa: E402
from core.remote.plane import PlaneSearcher  # noqa: E402
from core.search.seam import Query  # noqa: E402
from remote_servers import ConfluenceServer, PlaneServer  # noqa: E402

CORPORA = Path("/work/shared/corpora")
QUERIES = ["driver", "interrupt request", "power management", "registry key", "device object", "kernel mode",
           "install", "debugger", "memory", "usb"]


def pages(n: int) -> list[tuple[str, str]]:
    files = sorted((CORPORA / "windows-driver-docs").rglob("*.md"))
    if not files:
        sys.exit(f"no corpus under {CORPORA}")
    random.Random(3).shuffle(files)
    out = []
    for f in files[:n]:
        text = f.read_text(encoding="utf-8", errors="replace")
        out.append((f.stem.replace("-", " ")[:120], text[:6000]))
    return out


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1] * 1000


def measure(name: str, searcher_run, peer_run, runs: int) -> None:
    a: list[float] = []
    b: list[float] = []
    for i in range(runs):
        q = QUERIES[i % len(QUERIES)]
        for fn, out in ((searcher_run, a), (peer_run, b)) if i % 2 == 0 else ((peer_run, b), (searcher_run, a)):
            t0 = time.perf_counter()
            fn(q)
            out.append(time.perf_counter() - t0)
    print(f"{name:10} searcher p50 {pct(a, 50):6.2f} ms p95 {pct(a, 95):6.2f} ms | bare GET + JSON p50 {pct(b, 50):6.2f} ms "
          f"p95 {pct(b, 95):6.2f} ms | ratio p50 {pct(a, 50) / pct(b, 50):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    docs = pages(args.pages)
    print(f"{len(docs)} windows-driver-docs pages, {args.runs} searches each ({machine_load()})")
    env = {"CF": "t", "PL": "k"}

    with ConfluenceServer() as cf:
        cf.user("t", "svc")
        cf.space("ENG")
        cf.space("SKILLS")
        for title, body in docs:
            cf.page("ENG", title, markdown_to_storage(body))
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
        data["integrations"] = {"confluence": {"url": cf.url, "token_env": "CF"}}
        company = config_mod.parse(data, Path("company.toml"))
        searcher = ConfluenceSearcher(lambda: company, env=env)
        peer = httpx.Client(headers={"Authorization": "Bearer t", "Accept": "application/json"})

        def cf_peer(q: str) -> None:
            r = peer.get(f"{cf.url}/rest/api/content/search", params={
                "cql": build_cql(q, ["ENG"], ["SKILLS"]), "limit": 16, "expand": "space,ancestors"})
            json.loads(r.content)

        measure("confluence", lambda q: searcher.search(Query(q, actor="alex", mode="keyword")), cf_peer, args.runs)
        searcher.close()
        peer.close()

    with PlaneServer() as pl:
        pl.key("k", "svc")
        eng = pl.project("ENG", members={"svc"})
        pl.project("SKILLS", members={"svc"})
        for title, body in docs:
            pl.page(eng, title, markdown_to_html(body))
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "plane", "plane_projects": ["ENG"]}
        data["integrations"] = {"plane": {"url": pl.url, "workspace": "acme", "token_env": "PL"}}
        company = config_mod.parse(data, Path("company.toml"))
        searcher = PlaneSearcher(lambda: company, env=env)
        peer = httpx.Client(headers={"X-API-Key": "k", "Accept": "application/json"})

        def pl_peer(q: str) -> None:
            r = peer.get(f"{pl.url}/api/v1/workspaces/acme/pages/search/",
                         params=[("search", q), ("limit", 16), ("project_id", eng)])
            json.loads(r.content)

        searcher.search(Query("warm", actor="alex", mode="keyword"))   # the project list, remembered
        measure("plane", lambda q: searcher.search(Query(q, actor="alex", mode="keyword")), pl_peer, args.runs)
        searcher.close()
        peer.close()


if __name__ == "__main__":
    main()
