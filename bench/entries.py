"""The knowledge bank's MCP tools at scale: `add_entry` with three code citations, and `load_context` at 100,000
entries, each beside a peer, on one core.

    .venv/bin/python bench/entries.py [--entries 100000] [--calls 200] [--keep DIR]

A real git repository (20 modules of 10 files, one commit) and a real home that configures it. The home's
100,000 entries are made by appending `entry.add` records straight to the log, 1,000 a batch (what
`EntryBank.add` appends, without reading git for each): a fifth unscoped, the rest scoped to a module, a folder
of it or a folder below that (140 scopes); 70% a person's (STANDING), 30% an agent's (PROPOSED); 0.1%
conventions (each scoped);
three quarters citing one to three code lines (held at the commit, with the file's real blob), a tenth an issue,
the rest nothing; then 2% verified by a person and 5% archived. Then every entry in the bank is given a vector as
the embedding duty files one (a `vector.put` of kind entry on the vector log, revision the row's version, digest
its body's), 1,000 a batch: random unit vectors 384 wide in the shipped local model's space (embedding 100,000
bodies with the model would take ~15 min on this machine; the check's cost is the ranking, not what the vectors
say).

- add_entry     the tool's function with a real session (`core/mcp/tools/add_entry.run`: the bank's checks, the
                neighbour check over the bank's vectors — core/bank/neighbours.py through the session searcher's
                semantic engine —, the three citations read by cat-file at their commit, the record appended and
                applied, the reply); peers: the same add saying `distinct` (the neighbour check off), and one
                citing nothing. Embedding aside: each new body was embedded beforehand by the local model and the
                check's provider answers it from memory; after each call the duty's vector of what was written is
                filed (else each add would embed the earlier ones again).
- load_context  `core/mcp/tools/load_context.run` over areas drawn among the modules' folders, deeper folders
                and the whole repository ('.'): the scopes, the top K read newest-first a scope at a time, the
                served entries built, each cited file read at the head, the tokens counted, the serve recorded;
                peers: the floor — its selection alone (Selector: the scopes, the ids of the conventions and of
                the top K), nothing built, read at the head, counted or recorded; the plain way — one SQL
                statement taking the K newest entries in use whose scope serves the area, without tiers; and the
                naive reading — every entry in use read and built (EntryBank's rows and checks), filtered by
                scope, ranked by tier in Python — on one call in forty (it takes seconds).

Calls alternate between a tool and its peer, so load that comes and goes falls on both. The load average is
printed before and after. Nothing is asserted.
"""
from __future__ import annotations

import os

if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})   # one core, inherited by git's children

import argparse  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_load, percentile  # noqa: E402
from core import config as config_mod  # noqa: E402
from core.bank.context import Selector, area_modules, closeness, stored_scope  # noqa: E402
from core.bank.entries import EntryBank  # noqa: E402
from core.bank.neighbours import NeighbourFinder  # noqa: E402
from core.bank.trust import TIER_RANK  # noqa: E402
from core.log import Record  # noqa: E402
from core.mcp.session import Session  # noqa: E402
from core.mcp.tools import add_entry, load_context  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages import records  # noqa: E402
from core.paths import Home  # noqa: E402
from core.repos import parse_scope  # noqa: E402
from core.search.entry_docs import IN_BANK_SQL, doc_id  # noqa: E402
from core.vectors import records as vector_records  # noqa: E402

MODULES, FILES, LINES = 20, 10, 80
PAGES = 200
AGENT, PERSON = "eng-bot", "alex"
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@example.com", "GIT_CONFIG_NOSYSTEM": "1"}
WORDS = ("cache session token queue retry deploy schema index worker tenant migration config build import export "
         "lock timeout batch shard replica webhook billing invoice report cron search vector page").split()


def make_repo(path: Path) -> tuple[str, dict[str, str], list[str]]:
    """The repository: its commit, each file's blob, its folders."""
    folders = []
    for m in range(MODULES):
        root = path / f"apps/m{m:02d}"
        (root / "src").mkdir(parents=True)
        (root / "pyproject.toml").write_text(f"[project]\nname = 'm{m:02d}'\n")
        folders += [f"apps/m{m:02d}", f"apps/m{m:02d}/src"]
        for f in range(FILES):
            sub = root / "src" / f"sub{f % 5}"
            sub.mkdir(exist_ok=True)
            (sub / f"file{f}.py").write_text("".join(f"value_{m}_{f}_{i} = {i}\n" for i in range(1, LINES + 1)))
            folders.append(f"apps/m{m:02d}/src/sub{f % 5}")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "the code"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, env=GIT_ENV)
    sha, blobs, _ = read_repo(path)
    return sha, blobs, sorted(set(folders))


def read_repo(path: Path) -> tuple[str, dict[str, str], list[str]]:
    sha = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    blobs = {}
    for line in subprocess.run(["git", "-C", str(path), "ls-tree", "-r", "HEAD"], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        meta, file = line.split("\t", 1)
        blobs[file] = meta.split()[2]
    folders = sorted({f.rsplit("/", 1)[0] for f in blobs if f.endswith(".py")} | {f"apps/m{m:02d}" for m in
                     range(MODULES)} | {f"apps/m{m:02d}/src" for m in range(MODULES)})
    return sha, blobs, folders


def make_home(root: Path, repo: Path) -> Home:
    data = config_mod.example_config()
    data["repositories"] = {"code": {"path": str(repo)}}
    # the agent adds hundreds on one CURATED page: its budget of proposed entries is not what is measured
    data["knowledge"] = {**data["knowledge"], "page_proposed_entry_budget": 1_000_000}
    home = Home(root / "home")
    init_home(home, data)
    return home


def fill(node: Node, n: int, sha: str, blobs: dict[str, str], folders: list[str], rng: random.Random) -> list[str]:
    """`n` entries appended as records, 1,000 a batch; then some verified and some archived. Returns page ids."""
    pages = [records.new_id() for _ in range(PAGES)]
    node.submit([Record.new("page.create", PERSON, {"page_id": p, "container": "ENG", "title": f"Area {i}",
                                                    "body": "", "parent_id": None}) for i, p in enumerate(pages)])
    files = sorted(f for f in blobs if f.endswith(".py"))
    ids: list[str] = []
    batch: list[Record] = []
    people: list[str] = []
    for i in range(n):
        entry_id = records.new_id()
        by = "person" if rng.random() < 0.7 else "agent"
        kind = "CONVENTION" if rng.random() < 0.001 else rng.choice(("FACT", "FACT", "DECISION", "GOTCHA"))
        # a convention is how a module does things: always scoped
        scope = None if rng.random() < 0.2 and kind != "CONVENTION" else "code:" + rng.choice(folders)
        draw = rng.random()
        citations: list[dict[str, Any]] = []
        checks: list[dict[str, Any]] = []
        if draw < 0.75:
            for k in range(rng.randint(1, 3)):
                path = rng.choice(files)
                start = rng.randint(1, LINES - 4)
                citations.append({"repository": "code", "path": path, "lines": [start, start + rng.randint(0, 3)],
                                  "commit": sha})
                checks.append({"index": k + 1, "result": "held", "commit": sha, "blob": blobs[path]})
        elif draw < 0.85:
            citations.append({"link": f"acme/api#{rng.randint(1, 5000)}", "kind": "issue"})
            checks.append({"index": 1, "result": "held", "commit": None, "blob": None})
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 16)))
        body = f"Fact {i}: the {words} holds for {rng.randint(1, 90)} minutes."
        batch.append(records.entry_add(PERSON if by == "person" else AGENT, entry_id=entry_id,
                                       page_id=rng.choice(pages), kind=kind, body=body, by=by, scope=scope,
                                       citations=citations, checks=checks))
        ids.append(entry_id)
        if by == "person":
            people.append(entry_id)
        if len(batch) >= 1000:
            node.submit(batch, sync=False)
            batch.clear()
            print(f"  {i + 1:,} entries", file=sys.stderr, end="\r")
    node.submit(batch, sync=False)
    later = [records.entry_status(PERSON, entry_id=e, action="verify", by="person") for e in
             rng.sample(people, len(people) // 35)]
    later += [records.entry_status(PERSON, entry_id=e, action="archive", by="person") for e in
              rng.sample(ids, n // 20)]
    for k in range(0, len(later), 1000):
        node.submit(later[k:k + 1000], sync=False)
    node.submit([], sync=True)
    return pages


def file_vectors(node: Node, ids: list[str] | None, space: str, given: dict[str, Any] | None = None,
                 seed: int = 11) -> int:
    """Each entry in the bank (of `ids`, or every one) a vector as the embedding duty files one: `given[body]`, else
    a random unit vector; 1,000 a batch. Returns how many were filed."""
    import numpy as np

    from core.embed.text import embed_text

    rng = np.random.default_rng(seed)
    sql = ("SELECT e.id, e.body, e.version, p.container FROM entries e JOIN pages p ON p.id = e.page_id "
           f"WHERE e.{IN_BANK_SQL}")
    with node.lock:
        if ids is None:
            rows = node.conn.execute(sql).fetchall()
        else:
            rows = [r for i in ids for r in node.conn.execute(sql + " AND e.id = ?", (i,)).fetchall()]
    filed = 0
    for start in range(0, len(rows), 1000):
        chunk = rows[start:start + 1000]
        recs = []
        for r in chunk:
            text, digest = embed_text("", r["body"])
            vec = (given or {}).get(r["body"])
            if vec is None:
                vec = rng.standard_normal(384).astype(np.float32)
                vec /= np.linalg.norm(vec)
            recs.append(vector_records.put_record(doc_id(r["id"]), space, r["container"], r["version"], digest,
                                                  len(text.encode("utf-8")), 0, vec, kind="entry"))
        node.submit_vectors(recs, sync=False)
        filed += len(recs)
        if ids is None:
            print(f"  {filed:,} vectors", file=sys.stderr, end="\r")
    return filed


class Remembered:
    """The configured provider, answering the texts it was given beforehand from memory (the bench's bodies,
    embedded by the model before the timing: embedding aside)."""

    def __init__(self, real: Any, known: dict[str, Any]) -> None:
        self.real, self.known = real, known
        self.space, self.limits, self.fingerprint = real.space, real.limits, real.fingerprint

    def embed(self, texts: list[str], *, timeout: float) -> list[Any]:
        missing = [t for t in texts if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.real.embed(missing, timeout=timeout)))
        return [self.known[t] for t in texts]

    def close(self) -> None:
        pass


# -- the peers ----------------------------------------------------------------------------------------------

def selection_only(bank: EntryBank, area_text: str, k: int) -> list[str]:
    """The floor: load_context's selection alone (the scopes, the conventions' ids, the top K's ids by their
    last checks) — nothing built, read at the head, counted or recorded."""
    area = parse_scope(area_text, ["code"])
    assert area is not None
    with bank.node.lock:
        sel = Selector(bank, area, area_modules(bank, area))
        return [i for i, _ in sel.conventions()] + sel.relevant(k)


def one_statement(node: Node, area_text: str, k: int) -> list[str]:
    """The plain way: the K newest entries in use whose scope serves the area, in one SQL statement — no tiers, no
    conventions apart, nothing built, read at the head, counted or recorded."""
    scope = parse_scope(area_text, ["code"])
    assert scope is not None
    parts = scope.folder.split("/") if scope.folder else []
    holding = ["code:" + ("/".join(parts[:i]) or ".") for i in range(len(parts) + 1)]
    below = f"code:{scope.folder}/" if scope.folder else "code:"
    marks = ",".join("?" * len(holding))
    with node.lock:
        return [r[0] for r in node.conn.execute(
            f"SELECT id FROM entries WHERE status IN ('STANDING', 'CONSOLIDATED') AND (scope IS NULL OR scope IN "
            f"({marks}) OR (scope >= ? AND scope < ?)) ORDER BY created_at DESC LIMIT ?",
            [*holding, below, below[:-1] + chr(ord(below[-1]) + 1), k])]


def naive_context(bank: EntryBank, area_text: str, k: int) -> list[str]:
    """The naive reading: every entry in use built as EntryBank builds one, filtered by scope, ranked by tier."""
    area = parse_scope(area_text, ["code"])
    assert area is not None
    with bank.node.lock:
        rows = bank.conn.execute("SELECT * FROM entries WHERE status IN ('STANDING', 'CONSOLIDATED')").fetchall()
        built = [bank._build(r) for r in rows if closeness(stored_scope(r["scope"]), area) is not None]
    built.sort(key=lambda e: (TIER_RANK[e.tier], closeness(stored_scope(e.scope), area), -e.created_at))
    return [e.id for e in built[:k]]


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def line(name: str, times: list[float], peer: list[float] | None = None, peer_name: str = "") -> str:
    out = f"  {name:<34} p50 {percentile(times, 50):8.2f} ms  p95 {percentile(times, 95):8.2f} ms  (n={len(times)})"
    if peer:
        out += f"  ×{percentile(times, 95) / percentile(peer, 95):.1f} {peer_name}'s p95"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--keep", type=Path, help="make the repository and the home here and keep them")
    args = ap.parse_args()
    rng = random.Random(7)
    print(f"before: {machine_load()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        made = 0.0
        if (root / "home").exists():          # kept from an earlier run (--keep): measured again as it is
            sha, blobs, folders = read_repo(root / "repo")
            home = Home(root / "home")
        else:
            (root / "repo").mkdir(parents=True)
            sha, blobs, folders = make_repo(root / "repo")
            home = make_home(root, root / "repo")
        t = time.perf_counter()
        with Node.open(home) as node:
            if not made and not node.conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone():
                fill(node, args.entries, sha, blobs, folders, rng)
                made = time.perf_counter() - t
            from core.embed.registry import make_provider

            provider = make_provider(node.company)
            assert provider is not None, "the bench's home embeds (knowledge.vectors)"
            space = provider.space.key()
            if not node.conn.execute("SELECT 1 FROM vectors WHERE kind = 'entry' LIMIT 1").fetchone():
                t = time.perf_counter()
                filed = file_vectors(node, None, space)
                print(f"{filed:,} entry vectors filed in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            in_use = node.conn.execute("SELECT count(*) FROM entries WHERE status IN ('STANDING', 'CONSOLIDATED')"
                                       ).fetchone()[0]
            total = node.conn.execute("SELECT count(*) FROM entries").fetchone()[0]
            print(f"{total:,} entries ({in_use:,} in use, {len(folders)} folders)"
                  + (f", made in {made:.1f} s ({made / total * 1e6:.0f} µs an entry, appended as records and "
                     "applied)" if made else ", kept from an earlier run"))
            session = Session(node, AGENT)
            try:
                run(node, session, args, rng, sha, folders, total, provider)
            finally:
                session.close()
    print(f"after: {machine_load()}")


def run(node: Node, session: Session, args: argparse.Namespace, rng: random.Random, sha: str,
        folders: list[str], total: int, provider: Any) -> None:
    bank = session.bank
    k = node.company.bank.context_top_k
    areas = [rng.choice(folders) + ("/deeper" if rng.random() < 0.2 else "") for _ in range(args.calls)]
    areas[::25] = ["."] * len(areas[::25])                    # the whole repository now and then
    ctx_args = [load_context.LoadContextArgs(area=a) for a in areas]
    # warm: the tokenizer loaded, git's processes started, the modules listed at the head
    load_context.run(session, ctx_args[0])
    ctx_t, floor_t, plain_t, naive_t = [], [], [], []
    for i, a in enumerate(ctx_args):
        ctx_t.append(timed(lambda a=a: load_context.run(session, a)))
        floor_t.append(timed(lambda a=a: selection_only(bank, a.area, k)))
        plain_t.append(timed(lambda a=a: one_statement(node, a.area, k)))
        if i % 40 == 0:
            naive_t.append(timed(lambda a=a: naive_context(bank, a.area, k)))
    sample = load_context.run(session, load_context.LoadContextArgs(area="apps/m03/src/sub1")).data
    print(f"\nload_context at {total:,} entries, K={k}, budget {sample['token_budget']} tokens "
          f"(a sample: {len(sample['conventions'])} conventions + {len(sample['entries'])} entries, "
          f"{sample['tokens']} tokens, {sample['ranked_lower']:,} more ranked lower):")
    print(line("load_context (the tool)", ctx_t, floor_t, "the selection"))
    print(line("the selection alone (the floor)", floor_t))
    print(line("one SQL statement, no tiers", plain_t, ctx_t, "load_context"))
    print(line("naive: every entry in use built", naive_t))
    print(f"  the naive reading's p95 is ×{percentile(naive_t, 95) / percentile(ctx_t, 95):.0f} load_context's")

    # add_entry: three code citations read at their commit, with the neighbour check, beside the same add saying
    # distinct (the check off) and one citing nothing
    import numpy as np

    from core.embed.text import embed_text

    files = [f"apps/m{m:02d}/src/sub{f % 5}/file{f}.py" for m in range(MODULES) for f in range(FILES)]
    page = "ENG/Area 0"
    plans = []
    for i in range(args.calls):
        cits = []
        for _ in range(3):
            start = rng.randint(1, LINES - 4)
            cits.append({"repository": "code", "path": rng.choice(files), "lines": [start, start + 2], "commit": sha})
        scope = rng.choice((None, "apps/m01", "apps/m01/src/sub2"))
        plans.append((add_entry.AddEntryArgs(page=page, body=f"Bench {i}: the {rng.choice(WORDS)} waits {i} seconds.",
                                             citations=cits, scope=scope),
                      add_entry.AddEntryArgs(page=page, body=f"Bench off {i}: the {rng.choice(WORDS)} waits {i} s.",
                                             citations=cits, scope=scope, distinct=True),
                      add_entry.AddEntryArgs(page=page, body=f"Bench bare {i}: the {rng.choice(WORDS)} waits {i} s.",
                                             scope=scope)))
    bodies = [a.body for plan in plans for a in plan]
    t = time.perf_counter()
    vecs = provider.embed([embed_text("", b)[0] for b in bodies], timeout=3600)
    embed_ms = (time.perf_counter() - t) * 1000 / len(bodies)
    known = {embed_text("", b)[0]: np.asarray(v, dtype=np.float32) for b, v in zip(bodies, vecs)}
    bank.neighbours = NeighbourFinder(node, provider_factory=lambda company: Remembered(provider, known),
                                      semantic=lambda: getattr(session.searcher, "semantic", None))
    space = provider.space.key()
    # warm: the engine's code table read, its vector file written (behind the first search past 20,000 sources)
    warm = add_entry.AddEntryArgs(page=page, body="Bench warm: the cache waits.", distinct=False)
    add_entry.run(session, warm)
    engine = bank.neighbours.semantic()
    if engine._writer is not None:
        engine._writer.join()
    add_entry.run(session, add_entry.AddEntryArgs(page=page, body="Bench warm again: the queue waits."))
    on_t, off_t, bare_t, refused = [], [], [], 0
    for on, off, bare in plans:
        out: dict[str, Any] = {}
        on_t.append(timed(lambda on=on, out=out: out.update(r=add_entry.run(session, on))))
        refused += out["r"].data.get("written") is False
        off_t.append(timed(lambda off=off: add_entry.run(session, off)))
        bare_t.append(timed(lambda bare=bare: add_entry.run(session, bare)))
        with node.lock:
            written = [r[0] for r in node.conn.execute("SELECT id FROM entries WHERE body IN (?, ?, ?)",
                                                       (on.body, off.body, bare.body))]
        file_vectors(node, written, space, seed=len(on_t))   # the duty's, untimed (random: never near the next)
    ranking = engine.last_read
    print(f"\nadd_entry at {total:,} entries with vectors (an agent's, on a CURATED page; scopes none, apps/m01, "
          f"apps/m01/src/sub2; embedding aside: one body by the local model here took {embed_ms:.1f} ms, "
          f"in a batch; {refused} refused as near; stage one's last read: {ranking[0]} of {ranking[1]:,} rows):")
    print(line("add_entry, three code citations", on_t, off_t, "the check off"))
    print(line("— the same saying distinct (check off)", off_t))
    print(line("— citing nothing (check on)", bare_t))

if __name__ == "__main__":
    main()
