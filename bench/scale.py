"""One node at scale (issue 27): the repeated-trees corpus, imported and searched, every row of the issue's
table measured side by side with SQLite FTS5 over the same rows.

    .venv/bin/python bench/scale.py --pages 250000 [--dir /work/cache/scale-250000] [--rows ...] [--runs 15]

The corpus is the four shared trees (windows-driver-docs, powershell-docs, hugo-docs, textual-docs) copied
again and again under `tree/copy-K/` until the import would make N pages (files and the folder pages of
their directories), each file's title made distinct per copy (" (copy K)" on its frontmatter `title:`
and on the H1 that agrees with it, so every copy imports as the first does). A file the importer would
refuse (five PowerShell frontmatters YAML cannot parse) gets a title of its own and no frontmatter. It is
written once under `--dir` (default /work/cache/scale-N, never the repo or /tmp) and reused by later runs;
the home is made there too, and `--reuse` keeps an imported home between runs.

Rows (`--rows`, default all, in this order):

- import: `crewlet import tree --into DOCS --json` as a process — files/s, peak RSS (wait4's maxrss),
  bytes written (/proc/<pid>/io write_bytes, read as the process exits), the home's size after, the JSON's
  size (piped here and counted, so not among the bytes written);
- index: `crewlet index build` — seconds and peak RSS of its whole process tree (sampled);
  FTS5 (porter + unicode61) built over the same rows in its own file beside it;
- query: keyword queries warm in one process (NativeSearcher.search, mode keyword, limit 8: hits, snippets,
  exclusions) against FTS5 with snippet(), p50/p95 each;
- process: `crewlet search --mode keyword` as a process, median/p95 of --runs, alternated with a process
  that opens the FTS5 file and answers the same query with snippet();
- commands: `crewlet spaces`, `index status`, `sync status`, `pages DOCS`, `pages DOCS --parent DOCS/copy-3`,
  a home opened (Node.open), each a process, median of --runs, beside the scan each replaces
  (`SELECT container, count(*) … GROUP BY` and the level's `count(*)` over the rows);
- app: the app's spaces screen painted in a pseudo-terminal (a real process), the DOCS outline's first window
  and a search painted (Pilot, in this process).

Every figure is printed with the load average at that moment: the machine is shared. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Fts5, find_corpus, machine_load, percentile, tree_rss  # noqa: E402

from core.importer import source as import_source  # noqa: E402
from core.importer.titles import find_h1, inline_to_plain  # noqa: E402
from core.pages.model import clean_title, normalise_title  # noqa: E402

SPACE = "DOCS"
TREES = [("windows-driver-docs", "windows-driver-docs-pr"), ("powershell-docs", "reference"),
         ("hugo-docs", "content"), ("textual-docs", "docs")]
CACHE = Path("/work/cache")
PYTHON = sys.executable
CREWLET = [PYTHON, "-m", "crewlet_tui.cli"]


# -- the corpus ------------------------------------------------------------------------------------------

def _quoted(title: str) -> str:
    return "'" + title.replace("'", "''") + "'"


@dataclass
class Template:
    """One source file as text pieces around the places its title is written: a copy is the pieces joined
    with each slot filled by the title and the copy's suffix (a YAML line, or an H1 line)."""

    tree: str
    rel: str
    pieces: list[str]
    slots: list[tuple[str, str]]          # (kind 'yaml' | 'h1' | 'front', title)

    def render(self, suffix: str) -> str:
        out = [self.pieces[0]]
        for (kind, title), piece in zip(self.slots, self.pieces[1:]):
            titled = f"{title} {suffix}"
            if kind == "yaml":
                out.append(f"title: {_quoted(titled)}\n")
            elif kind == "h1":
                out.append(f"# {titled}\n")
            else:
                out.append(f"---\ntitle: {_quoted(titled)}\n---\n")
            out.append(piece)
        return "".join(out)


def template(tree: str, rel: str, data: bytes) -> Template | None:
    """The file's title slots, found as the importer reads the file (core/importer: frontmatter, H1)."""
    text, problem = import_source.decode(rel, data)
    if text is None:
        return None
    stem = rel.rsplit("/", 1)[-1][:-3]
    src, problem = import_source.split(rel, text)
    if src is None:                                   # a frontmatter YAML cannot parse: dropped, titled by name
        m = import_source._CLOSE.search(text, text.find("\n"))
        body = text[min(m.end() + 1, len(text)):] if m else text
        return Template(tree, rel, ["", body], [("front", clean_title(stem) or "untitled")])
    body_at = len(text) - len(src.body)
    close = None
    if src.fm_text is not None:
        m = import_source._CLOSE.search(text, text.find("\n"))
        close = m.start() + 1 if m else None
    fm_title = src.frontmatter.get("title")
    fm_title = clean_title(str(fm_title)) if isinstance(fm_title, str) and fm_title.strip() else None
    h1 = find_h1(src.body)
    cuts: list[tuple[int, int, str, str]] = []        # (start, end, kind, title) in text offsets
    if fm_title is not None and close is not None:
        title = fm_title
        if h1 is not None and normalise_title(h1[0]) in (normalise_title(fm_title),
                                                          normalise_title(inline_to_plain(fm_title))):
            title = h1[0]
            cuts.append((body_at + h1[1], body_at + h1[2], "h1", title))
        cuts.insert(0, (close, close, "yaml", title))  # a second title: line, last in the block, wins
    elif h1 is not None:
        cuts.append((body_at + h1[1], body_at + h1[2], "h1", h1[0]))
    elif close is not None:
        cuts.append((close, close, "yaml", clean_title(stem) or "untitled"))
    else:
        cuts.append((0, 0, "front", clean_title(stem) or "untitled"))
    pieces, slots, at = [], [], 0
    for start, end, kind, title in cuts:
        pieces.append(text[at:start])
        slots.append((kind, title))
        at = end
    pieces.append(text[at:])
    return Template(tree, rel, pieces, slots)


def templates() -> list[Template]:
    out = []
    for corpus, sub in TREES:
        src = find_corpus(corpus, sub)
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.lower().endswith(".md"):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, src).replace(os.sep, "/")
                    with open(path, "rb") as fh:
                        t = template(sub, rel, fh.read())
                    if t is not None:
                        out.append(t)
    return out


def build_corpus(tree: Path, pages: int) -> dict:
    """`tree/copy-K/<tree>/…` until the import makes `pages` pages (a folder page per directory holding a
    file, at any depth); kept, and reused while its manifest says the same size."""
    manifest = tree / "manifest.json"
    if manifest.exists():
        got = json.loads(manifest.read_text())
        if got.get("pages") == pages and got.get("complete"):
            return got
    if tree.exists():
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    started = time.perf_counter()
    tpls = templates()
    count = files = nbytes = 0
    copy = 0
    folders: set[str] = set()
    while count < pages:
        copy += 1
        for t in tpls:
            rel = f"copy-{copy}/{t.tree}/{t.rel}"
            parts = rel.split("/")[:-1]
            new = [d for d in ("/".join(parts[:i + 1]) for i in range(len(parts))) if d not in folders]
            if count + len(new) + 1 > pages:
                break
            for d in new:
                folders.add(d)
                (tree / d).mkdir(exist_ok=True)
            data = t.render(f"(copy {copy})").encode("utf-8")
            with open(tree / rel, "wb") as fh:
                fh.write(data)
            count += len(new) + 1
            files += 1
            nbytes += len(data)
        else:
            continue
        break
    got = {"pages": pages, "files": files, "folders": len(folders), "copies": copy, "bytes": nbytes,
           "complete": True, "seconds": round(time.perf_counter() - started, 1)}
    manifest.write_text(json.dumps(got))
    return got


# -- measuring a process ---------------------------------------------------------------------------------

@dataclass
class Ran:
    seconds: float
    rc: int
    maxrss: int                      # bytes (wait4)
    write_bytes: int = 0
    read_bytes: int = 0
    stdout_bytes: int = 0
    peak_tree: int = 0               # sampled RSS of the process and its descendants
    stdout: bytes = b""
    stderr: bytes = b""


def _io(pid: int) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in (line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())}
    except OSError:
        return {}


def run(argv: list[str], *, env: dict[str, str] | None = None, keep_stdout: bool = True, sample: bool = False,
        cwd: Path | None = None, timeout: float = 6 * 3600) -> Ran:
    """Run a process to its end: wall seconds, its peak RSS, the bytes it wrote to storage (read from
    /proc/<pid>/io once it has exited and before it is reaped), and its output (counted; kept if asked)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    out: dict[str, object] = {"n": 0, "chunks": [], "err": []}
    peak = [0]
    stop = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        while True:
            chunk = proc.stdout.read(1 << 20)
            if not chunk:
                return
            out["n"] = int(out["n"]) + len(chunk)  # type: ignore[arg-type]
            if keep_stdout:
                out["chunks"].append(chunk)  # type: ignore[union-attr]

    def drain_err() -> None:
        assert proc.stderr is not None
        out["err"] = [proc.stderr.read()]

    def sampler() -> None:
        while not stop.wait(0.1):
            peak[0] = max(peak[0], tree_rss(proc.pid))

    threads = [threading.Thread(target=drain, daemon=True), threading.Thread(target=drain_err, daemon=True)]
    if sample:
        threads.append(threading.Thread(target=sampler, daemon=True))
    for t in threads:
        t.start()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    io = _io(proc.pid)
    seconds = time.perf_counter() - started
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    for t in threads:
        t.join(timeout)
    return Ran(seconds, proc.returncode, usage.ru_maxrss * 1024, io.get("write_bytes", 0) - io.get("cancelled_write_bytes", 0),
               io.get("read_bytes", 0), int(out["n"]), peak[0], b"".join(out["chunks"]),  # type: ignore[arg-type]
               b"".join(out["err"]))  # type: ignore[arg-type]


def du(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def ms(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 10 else f"{s:.1f} s"


class Table:
    """The issue's rows, as measured, printed as they come and again at the end."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, step: str, crewlet: str, peer: str = "—", ratio: str = "—") -> None:
        row = (step, crewlet, peer, ratio)
        self.rows.append(row)
        print(f"  {step}: {crewlet}" + (f"  |  {peer}  |  {ratio}" if peer != "—" else "") + f"   [{machine_load()}]",
              flush=True)

    def print(self) -> None:
        print(f"\n| step ({self.pages:,} pages) | crewlet | SQLite FTS5 / the scan | ratio |")
        print("| --- | --- | --- | --- |")
        for row in self.rows:
            print("| " + " | ".join(row) + " |")


# -- the rows -------------------------------------------------------------------------------------------

def crewlet_env(home: Path) -> dict[str, str]:
    """A command's environment: this home, and bytecode written and read (a user's install has it: without
    it every command compiles crewlet's modules again, most of a second)."""
    env = {**os.environ, "CREWLET_HOME": str(home), "CREWLET_AS": "", "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def precompile() -> None:
    import compileall

    for package in ("core", "crewlet_tui"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def make_home(home: Path) -> None:
    from core import config as config_mod
    from core.node import init_home
    from core.paths import Home

    data = config_mod.example_config()
    data["spaces"][SPACE] = {"name": "Docs", "purpose": "the repeated trees", "lead": "alex"}
    init_home(Home(home), data)


def row_import(table: Table, work: Path, tree: Path, corpus: dict, reuse: bool) -> None:
    home = work / "home"
    if reuse and (home / "crewlet.db").exists():
        print(f"  import: reusing {home}")
        return
    if home.exists():
        shutil.rmtree(home)
    make_home(home)
    ran = run([*CREWLET, "import", str(tree), "--into", SPACE, "--json"], env=crewlet_env(home), keep_stdout=False)
    if ran.rc != 0:
        raise SystemExit(f"import failed ({ran.rc}): {ran.stderr.decode(errors='replace')[-2000:]}")
    size = du(home)
    table.add("`import --into`", f"{corpus['files'] / ran.seconds:,.0f} files/s ({ran.seconds:.0f} s), peak RSS "
              f"**{gb(ran.maxrss)}**, {gb(ran.write_bytes)} written for a {gb(size)} home "
              f"({ran.write_bytes / size:.2f}× its size)")
    table.add("`import --json`", f"{gb(ran.stdout_bytes)} of JSON, streamed (the import's own peak RSS above)")


def timed_runs(argv: list[str], env: dict[str, str], runs: int, *, cwd: Path | None = None) -> list[float]:
    out = []
    for _ in range(runs):
        ran = run(argv, env=env, keep_stdout=False, cwd=cwd)
        if ran.rc != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({ran.rc}): {ran.stderr.decode(errors='replace')[-800:]}")
        out.append(ran.seconds)
    return out


def med(values: list[float]) -> float:
    return statistics.median(values)


def row_index(table: Table, work: Path) -> None:
    home = work / "home"
    env = crewlet_env(home)
    ran = run([*CREWLET, "index", "build"], env=env, keep_stdout=False, sample=True)
    if ran.rc != 0:
        raise SystemExit(f"index build failed: {ran.stderr.decode(errors='replace')[-800:]}")
    fts_file = work / "fts5.db"
    fts_file.unlink(missing_ok=True)
    started = time.perf_counter()
    build_fts5(home, fts_file)
    fts = time.perf_counter() - started
    table.add("`index build`", f"{ran.seconds:.1f} s, peak {gb(max(ran.peak_tree, ran.maxrss))}",
              f"FTS5 build {fts:.1f} s", f"{ran.seconds / fts:.1f}×")


def build_fts5(home: Path, path: Path) -> None:
    """SQLite FTS5 (porter + unicode61) over the same live rows, read a chunk at a time."""
    from core.store import connect

    src = connect(home / "crewlet.db", readonly=True)
    fts = Fts5(path, title_weight=2.0)
    fts.db.execute("BEGIN")
    cur = src.execute("SELECT id, title, body FROM pages WHERE trashed_at IS NULL")
    while True:
        chunk = cur.fetchmany(5000)
        if not chunk:
            break
        fts.db.executemany("INSERT INTO docs (page_id, title, body) VALUES (?, ?, ?)", [tuple(r) for r in chunk])
    fts.db.execute("COMMIT")
    fts.db.close()
    src.close()


_WORD = re.compile(r"[A-Za-z][A-Za-z]{4,}")


def make_queries(home: Path, n: int, seed: int = 42) -> list[str]:
    """Queries from the corpus itself: the first words of a page's title, or (one in four) two words of its
    body — pages drawn at random by rowid, never the whole table read."""
    from core.store import connect

    rng = random.Random(seed)
    conn = connect(home / "crewlet.db", readonly=True)
    top = conn.execute("SELECT max(rowid) FROM pages").fetchone()[0] or 0
    out: list[str] = []
    while len(out) < n and top:
        r = conn.execute("SELECT title, body FROM pages WHERE rowid = ? AND trashed_at IS NULL AND length(body) > 200",
                         (rng.randint(1, top),)).fetchone()
        if r is None:
            continue
        if len(out) % 4 == 3:
            words = _WORD.findall(r[1])
            if len(words) >= 2:
                out.append(" ".join(rng.sample(words, 2)).lower())
                continue
        title = re.sub(r"\(copy \d+\)", "", r[0]).split()
        if title:
            out.append(" ".join(title[:rng.choice((2, 3, 4))]))
    conn.close()
    return out


def row_query(table: Table, work: Path, nq: int) -> None:
    from core.knowledge import make_searcher
    from core.node import Node
    from core.paths import Home
    from core.search.seam import Query

    home = work / "home"
    queries = make_queries(home, nq)
    fts = Fts5(work / "fts5.db", title_weight=2.0)
    with Node.open(Home(home)) as node:
        searcher = make_searcher(node)
        for q in queries[:20]:                                   # warm: the snapshot, the postings' cache
            searcher.search(Query(q, mode="keyword", limit=8))
        ours, peer = [], []
        for q in queries:
            t = time.perf_counter()
            searcher.search(Query(q, mode="keyword", limit=8))
            ours.append(time.perf_counter() - t)
            m = Fts5.match(q)
            t = time.perf_counter()
            fts.db.execute(f"SELECT page_id, snippet(docs, 2, '', '', '…', 12), {fts.bm25()} AS s FROM docs "
                           "WHERE docs MATCH ? ORDER BY s LIMIT 8", (m,)).fetchall()
            peer.append(time.perf_counter() - t)
    fts.db.close()
    table.add("keyword query, warm in-process", f"p50 {ms(med(ours))}, p95 {ms(percentile(ours, 95))}",
              f"FTS5 with snippet: p50 {ms(med(peer))}, p95 {ms(percentile(peer, 95))}",
              f"{percentile(ours, 95) / percentile(peer, 95):.2f}× (p95)")


FTS_PROCESS = """
import sys, re, sqlite3
db = sqlite3.connect(sys.argv[1])
words = list(dict.fromkeys(w.lower() for w in re.findall(r"\\w+", sys.argv[2])))
m = " OR ".join('"' + w + '"' for w in words)
for row in db.execute("SELECT page_id, snippet(docs, 2, '', '', '…', 12), bm25(docs, 0.0, 2.0, 1.0) AS s FROM docs "
                      "WHERE docs MATCH ? ORDER BY s LIMIT 8", (m,)):
    print(row[0], row[1])
"""


def row_process(table: Table, work: Path, runs: int) -> None:
    home = work / "home"
    env = crewlet_env(home)
    queries = make_queries(home, runs, seed=7)
    ours, peer, floor = [], [], []
    for q in queries:                                            # alternated, one of each a query
        ran = run([*CREWLET, "search", q, "--mode", "keyword"], env=env, keep_stdout=False)
        if ran.rc != 0:
            raise SystemExit(f"search failed: {ran.stderr.decode(errors='replace')[-800:]}")
        ours.append(ran.seconds)
        peer.append(run([PYTHON, "-c", FTS_PROCESS, str(work / "fts5.db"), q], env=env, keep_stdout=False).seconds)
        floor.append(run([*CREWLET, "--help"], env=env, keep_stdout=False).seconds)
    table.add("`crewlet search --mode keyword` process", f"median {ms(med(ours))}, p95 {ms(percentile(ours, 95))} "
              f"(`crewlet --help`: {ms(med(floor))})", f"an FTS5 process with snippet: median {ms(med(peer))}",
              f"{med(ours) / med(peer):.1f}×")


SCANS = {   # what each command's answer was read by before the counts (run in one process, timed)
    "spaces": "SELECT container, count(*) FROM pages WHERE trashed_at IS NULL GROUP BY container",
    "index status": "SELECT count(v.id), count(*) FROM pages p LEFT JOIN vectors v ON v.source_id = p.id AND "
                    "v.space = 'x' AND v.revision = p.revision AND v.container = p.container WHERE p.trashed_at IS NULL",
    "pages DOCS": "SELECT count(*) FROM pages WHERE container = 'DOCS' AND parent_id IS NULL AND trashed_at IS NULL",
}


def scan_seconds(home: Path, sql: str) -> float:
    from core.store import connect

    conn = connect(home / "crewlet.db", readonly=True)
    t = time.perf_counter()
    conn.execute(sql).fetchall()
    took = time.perf_counter() - t
    conn.close()
    return took


OPEN = "import sys; from pathlib import Path; from core.node import Node; from core.paths import Home; " \
       "Node.open(Home(Path(sys.argv[1]))).close()"


def row_commands(table: Table, work: Path, runs: int) -> None:
    home = work / "home"
    env = crewlet_env(home)
    commands = [("spaces", ["spaces"]), ("index status", ["index", "status"]), ("sync status", ["sync", "status"]),
                ("pages DOCS", ["pages", SPACE]), ("pages DOCS --parent DOCS/copy-3", ["pages", SPACE, "--parent",
                                                                                  f"{SPACE}/copy-3"])]
    floor = med(timed_runs([*CREWLET, "--help"], env, runs))
    for label, args in commands:
        took = med(timed_runs([*CREWLET, *args], env, runs))
        sql = SCANS.get(label)
        peer = f"the scan it replaced: {ms(scan_seconds(home, sql))}" if sql else "—"
        table.add(f"`crewlet {label}`", f"median {ms(took)} ({ms(max(0.0, took - floor))} past `crewlet --help`'s "
                  f"{ms(floor)})", peer)
    took = med(timed_runs([PYTHON, "-c", OPEN, str(home)], env, runs, cwd=ROOT))
    table.add("opening the home (`Node.open`, a process)", f"median {ms(took)}")


def row_app(table: Table, work: Path, runs: int) -> None:
    import asyncio

    from startup import launch

    home = work / "home"
    env = crewlet_env(home)
    # the DOCS row painted (its purpose is only on the spaces screen): the first screen with its counts
    painted = [launch([*CREWLET], "the repeated trees", env, timeout=180)[0] for _ in range(max(3, runs // 3))]
    outline, searched = asyncio.run(app_windows(home, max(3, runs // 3)))
    table.add("the app: spaces screen painted (a process in a pty)", f"median {ms(med(painted))}")
    table.add("the app: DOCS outline's first window / a search", f"median {ms(med(outline))} / {ms(med(searched))}")


async def app_windows(home: Path, runs: int) -> tuple[list[float], list[float]]:
    """In the app (Pilot, headless): from asking for DOCS's outline to its first window painted, and from a
    keyword search asked to its hits listed and painted."""
    import asyncio

    from core.paths import Home
    from crewlet_tui.app import make_app
    from crewlet_tui.screens.search import Searched
    from crewlet_tui.widgets.page_tree import PageTree

    painted: dict[str, float] = {}
    done = asyncio.Event()
    render_lines = PageTree.render_lines

    def stamped_render_lines(tree, crop):  # type: ignore[no-untyped-def]
        strips = render_lines(tree, crop)
        if tree.id == "outline-tree" and tree.first_window_shown and "at" not in painted:
            painted["at"] = time.perf_counter()
            done.set()
        return strips

    def stamp_searched(message: object) -> None:
        # the search screen's answer arrives as a Searched message: once its handler has shown the hits (the
        # screen's next callback), stamp the refresh that paints them
        if isinstance(message, Searched):
            app.screen.call_next(lambda: app.call_after_refresh(
                lambda: (painted.setdefault("at", time.perf_counter()), done.set())))

    PageTree.render_lines = stamped_render_lines  # type: ignore[method-assign]
    app = make_app(Home(home), cursor_blink=False, start_indexer=False, allow_external=False)
    outline, searched = [], []
    queries = make_queries(home, runs, seed=3)
    try:
        async with app.run_test(size=(120, 36), message_hook=stamp_searched) as pilot:
            deadline = time.monotonic() + 120
            while type(app.screen).__name__ != "SpacesScreen":
                await pilot.pause(0.05)
                if time.monotonic() > deadline:
                    raise SystemExit("the app did not open")
            for i in range(runs):
                painted.clear()
                done.clear()
                t0 = time.perf_counter()
                app.open_outline(SPACE)
                await asyncio.wait_for(done.wait(), 120)
                outline.append(painted["at"] - t0)
                await app.pop_screen()
                await pilot.pause(0.05)
                painted.clear()
                done.clear()
                t0 = time.perf_counter()
                # opened in the app's own task, as the key does: a screen started from this task would run
                # outside the context that carries run_test's message_hook, and its Searched go unseen
                app.call_later(app.open_search, queries[i])
                await asyncio.wait_for(done.wait(), 120)
                searched.append(painted["at"] - t0)
                await app.pop_screen()
                await pilot.pause(0.05)
    finally:
        PageTree.render_lines = render_lines  # type: ignore[method-assign]
    return outline, searched


ROWS = ["import", "index", "query", "process", "commands", "app"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, required=True, help="pages the corpus imports as (files and folders)")
    ap.add_argument("--dir", type=Path, help="where the corpus and the home go (default /work/cache/scale-N)")
    ap.add_argument("--rows", nargs="+", choices=ROWS, default=ROWS)
    ap.add_argument("--reuse", action="store_true", help="keep a home already imported (skip the import)")
    ap.add_argument("--runs", type=int, default=15, help="processes run per command row")
    ap.add_argument("--queries", type=int, default=200, help="queries of the in-process keyword row")
    ap.add_argument("--corpus-only", action="store_true", help="build the corpus and stop")
    args = ap.parse_args()
    work = args.dir or CACHE / f"scale-{args.pages}"
    work.mkdir(parents=True, exist_ok=True)
    print(f"crewlet scale bench: {args.pages:,} pages in {work}   [{machine_load()}]", flush=True)
    started = time.perf_counter()
    corpus = build_corpus(work / "tree", args.pages)
    print(f"  corpus: {corpus['files']:,} files and {corpus['folders']:,} folders in {corpus['copies']} copies, "
          f"{gb(corpus['bytes'])} ({time.perf_counter() - started:.0f} s)", flush=True)
    if args.corpus_only:
        return
    table = Table(args.pages)
    precompile()
    if "import" in args.rows:
        row_import(table, work, work / "tree", corpus, args.reuse)
    if "index" in args.rows:
        row_index(table, work)
    if "query" in args.rows:
        row_query(table, work, args.queries)
    if "process" in args.rows:
        row_process(table, work, args.runs)
    if "commands" in args.rows:
        row_commands(table, work, args.runs)
    if "app" in args.rows:
        row_app(table, work, args.runs)
    table.print()


if __name__ == "__main__":
    main()
