"""Start-up: crewlet's commands as whole processes, each next to a peer measured in the same run.

    python bench/startup.py [--runs 15] [--docs DIR] [--home DIR] [--compile] [--keep]

What a person waits for is a process: the interpreter, the imports, the work, the output. Builds (or
takes, --home) a home holding the windows-driver-docs tree with its keyword index, an example home whose
pages are embedded with the default local model (for a hybrid search), and an SQLite FTS5 table of the
same pages; then runs, alternating, round after round:

| crewlet                                   | peer                                                     |
| `crewlet --help`                          | `python -c pass`; a bare typer app's `--help`            |
| `crewlet page show REF`                   | `python -c pass`                                         |
| `crewlet search --mode keyword QUERY`     | a small Python script querying the FTS5 table with snippet() |
| `crewlet search QUERY` (hybrid, example)  | `crewlet search --mode keyword QUERY` on the same home: what hybrid adds (the model load) |
| `crewlet` to the spaces screen painted    | a bare Textual app to its first screen painted (both in a pseudo-terminal) |

Prints each one's median and best wall time, its median CPU time, the ratios, and the load average
`uptime` shows before and after (the machine is shared: only ratios in one run mean anything), and
whether the project's own modules have compiled bytecode (an editable install under
PYTHONDONTWRITEBYTECODE has none, and every process compiles them again: `--compile` compiles them
first, as `python -m compileall -q core crewlet_tui` does). Benchmarks print; they never assert.
"""
from __future__ import annotations

import argparse
import compileall
import fcntl
import importlib.util
import os
import pty
import re
import resource
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import Fts5, find_corpus  # noqa: E402

KEYWORD_QUERY = "IRP major function code"
EXAMPLE_QUERY = "roll back a deploy"
SPACES_MARKER = "Engineering"            # a space name the example's spaces screen shows
BARE_MARKER = "bare textual app ready"
ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]")

BARE_TYPER = '''import typer
app = typer.Typer()
@app.command()
def hello(name: str = typer.Option("x", help="A name.")):
    """Say hello."""
@app.command()
def bye():
    """Say bye."""
app()
'''
BARE_TEXTUAL = f'''from textual.app import App
from textual.widgets import Static
class Bare(App):
    def compose(self):
        yield Static("{BARE_MARKER}")
Bare().run()
'''
# the FTS5 peer of `crewlet search`: open the table, rank by bm25 with the title weighted 2:1 (as crewlet
# does), print titles and snippets
FTS_QUERY = '''import re, sys
try:
    import pysqlite3.dbapi2 as sqlite3
except ImportError:
    import sqlite3
db = sqlite3.connect(sys.argv[1])
words = list(dict.fromkeys(w.lower() for w in re.findall(r"\\w+", sys.argv[2])))
match = " OR ".join('"' + w + '"' for w in words)
rows = db.execute("SELECT title, snippet(docs, 2, '[', ']', '…', 24) FROM docs WHERE docs MATCH ? "
                  "ORDER BY bm25(docs, 0.0, 2.0, 1.0) LIMIT 8", (match,)).fetchall()
for i, (title, snip) in enumerate(rows, 1):
    print(f"{i}. {title}\\n   {snip}")
print(f"{len(rows)} hits")
'''


def crewlet_argv() -> list[str]:
    script = Path(sys.executable).with_name("crewlet")
    return [str(script)] if script.exists() else [sys.executable, "-m", "crewlet_tui.cli"]


def uptime() -> str:
    try:
        return "load average " + ", ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "load average unknown"


def bytecode_state() -> str:
    sources = [p for p in (ROOT / "core").rglob("*.py")] + [p for p in (ROOT / "crewlet_tui").rglob("*.py")]
    cached = sum(1 for p in sources if Path(importlib.util.cache_from_source(str(p))).exists())
    return f"{cached} of {len(sources)} project modules have compiled bytecode"


# -- running one process -----------------------------------------------------------------------------

def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one process to its exit; its output is discarded (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=300)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr.decode(errors='replace')[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def launch(argv: list[str], marker: str, env: dict[str, str], timeout: float = 60.0) -> tuple[float, float]:
    """Wall seconds from starting a terminal app in a pseudo-terminal (120x40) to `marker` painted on
    it; then ctrl+q. (CPU is not comparable here: the app lives on until it is told to quit.)"""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    started = time.perf_counter()
    seen = b""
    found = None
    try:
        while time.perf_counter() - started < timeout:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            seen += data
            if marker.encode() in ANSI.sub(b"", seen):
                found = time.perf_counter() - started
                break
        try:
            os.write(fd, b"\x11")  # ctrl+q
        except OSError:
            pass
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:
                if select.select([fd], [], [], 0.1)[0]:
                    os.read(fd, 1 << 16)
            except OSError:
                pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if found is None:
        tail = ANSI.sub(b"", seen)[-300:].decode(errors="replace")
        raise SystemExit(f"{' '.join(argv)} never showed {marker!r} (last: {tail!r})")
    return found, 0.0


# -- the homes ---------------------------------------------------------------------------------------

def build_docs_home(work: Path, docs: Path, env: dict[str, str]) -> Path:
    from core import config as config_mod
    from core.importer import import_directory
    from core.node import Node, init_home
    from core.pages.service import KnowledgeBase
    from core.paths import Home
    from core.search.indexer import Indexer

    home = Home(work / "docs-home")
    init_home(home, config_mod.example_config())
    started = time.perf_counter()
    with Node.open(home) as node:
        report = import_directory(KnowledgeBase(node), docs, actor="alex", into="WDD", declare_spaces=True,
                                  title_from_name=True)
    with Indexer(home) as ix:
        ix.run_pass()
    print(f"home      {report.created:,} pages of {docs} imported and indexed in {time.perf_counter() - started:.1f} s")
    return home.root


def build_example_home(work: Path, env: dict[str, str]) -> Path:
    root = work / "example-home"
    subprocess.run([*crewlet_argv(), "--home", str(root), "init", "--example"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    started = time.perf_counter()
    subprocess.run([*crewlet_argv(), "--home", str(root), "worker", "--once"], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    print(f"example   home with its pages embedded by the local model (worker --once: {time.perf_counter() - started:.1f} s)")
    return root


def fts_table(work: Path, home: Path) -> Path:
    from core.store import connect

    conn = connect(home / "crewlet.db", migrate_schema=False)
    rows = conn.execute("SELECT id, title, body FROM pages WHERE trashed_at IS NULL").fetchall()
    conn.close()
    fts = Fts5(work / "fts5.db", title_weight=2.0)
    seconds = fts.build((r[0], r[1], r[2]) for r in rows)
    fts.db.close()
    print(f"fts5      {len(rows):,} pages in an FTS5 table (porter unicode61) in {seconds:.1f} s")
    return work / "fts5.db"


def a_page(home: Path) -> str:
    from core.store import connect

    conn = connect(home / "crewlet.db", migrate_schema=False)
    try:
        return conn.execute("SELECT id FROM pages WHERE trashed_at IS NULL AND length(body) > 2000 "
                            "ORDER BY id LIMIT 1").fetchone()[0]
    finally:
        conn.close()


# -- the run ---------------------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="rounds (each runs every command once)")
    ap.add_argument("--docs", type=Path, default=None, help="the Markdown tree (default: windows-driver-docs)")
    ap.add_argument("--home", type=Path, default=None, help="an existing home with its index built")
    ap.add_argument("--compile", action="store_true", help="compile the project's modules first (compileall)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    env = dict(os.environ, TERM=os.environ.get("TERM", "xterm-256color"), COLUMNS="120", LINES="40")
    env.pop("CREWLET_HOME", None)
    if args.compile:
        for pkg in ("core", "crewlet_tui"):
            compileall.compile_dir(str(ROOT / pkg), quiet=1)
    print(f"machine   {os.cpu_count()} cores; {uptime()}")
    print(f"bytecode  {bytecode_state()}")
    work = Path(tempfile.mkdtemp(prefix="crewlet-startup-"))
    try:
        if args.home is not None:
            home = args.home.resolve()
        else:
            docs = args.docs or find_corpus("windows-driver-docs", "windows-driver-docs-pr")
            home = build_docs_home(work, docs, env)
        example = build_example_home(work, env)
        fts_db = fts_table(work, home)
        ref = a_page(home)
        (work / "bare_typer.py").write_text(BARE_TYPER)
        (work / "bare_textual.py").write_text(BARE_TEXTUAL)
        (work / "fts_query.py").write_text(FTS_QUERY)
        py, cr = sys.executable, crewlet_argv()
        commands: dict[str, tuple[str, list[str], str | None]] = {
            "python -c pass": ("run", [py, "-c", "pass"], None),
            "bare typer --help": ("run", [py, str(work / "bare_typer.py"), "--help"], None),
            "crewlet --help": ("run", [*cr, "--help"], None),
            "crewlet page show": ("run", [*cr, "--home", str(home), "page", "show", ref], None),
            "fts5 query script": ("run", [py, str(work / "fts_query.py"), str(fts_db), KEYWORD_QUERY], None),
            "crewlet search --mode keyword": ("run", [*cr, "--home", str(home), "search", "--mode", "keyword",
                                                      KEYWORD_QUERY], None),
            "example: search --mode keyword": ("run", [*cr, "--home", str(example), "search", "--mode", "keyword",
                                                       EXAMPLE_QUERY], None),
            "example: search (hybrid)": ("run", [*cr, "--home", str(example), "search", EXAMPLE_QUERY], None),
            "bare Textual app, first paint": ("launch", [py, str(work / "bare_textual.py")], BARE_MARKER),
            "crewlet app, spaces painted": ("launch", [*cr, "--home", str(example)], SPACES_MARKER),
        }
        for kind, argv, marker in commands.values():   # one warm-up each (the OS's file cache)
            (launch(argv, marker, env) if kind == "launch" else run(argv, env))
        walls: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        names = list(commands)
        for r in range(args.runs):
            order = names[r % len(names):] + names[:r % len(names)]   # alternate who goes first
            for name in order:
                kind, argv, marker = commands[name]
                wall, cpu = launch(argv, marker, env) if kind == "launch" else run(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        print(f"\n{args.runs} rounds, alternating; {uptime()} after\n")
        print(f"{'process':34} {'median':>9} {'best':>9} {'CPU':>9}")
        med = {k: statistics.median(v) for k, v in walls.items()}
        for name in names:
            cpu = f"{statistics.median(cpus[name]):8.3f}s" if commands[name][0] == "run" else "        —"
            print(f"{name:34} {med[name]:8.3f}s {min(walls[name]):8.3f}s {cpu}")

        def ratio(a: str, b: str) -> str:
            return f"{med[a] / med[b]:.1f}x"

        print()
        print(f"crewlet --help                 {ratio('crewlet --help', 'python -c pass')} python -c pass, "
              f"{ratio('crewlet --help', 'bare typer --help')} a bare typer app")
        print(f"crewlet page show              {ratio('crewlet page show', 'python -c pass')} python -c pass")
        print(f"crewlet search --mode keyword  {ratio('crewlet search --mode keyword', 'fts5 query script')} "
              f"the FTS5 script")
        hybrid = med["example: search (hybrid)"] - med["example: search --mode keyword"]
        print(f"hybrid search                  +{hybrid:.3f} s over keyword on the same home (the query embedded: "
              f"the local model loaded)")
        print(f"app to the spaces screen       {ratio('crewlet app, spaces painted', 'bare Textual app, first paint')} "
              f"a bare Textual app")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
