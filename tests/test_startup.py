"""What a command imports before it answers: heavy modules load only when a command needs them.

Each check runs the real entry point (`crewlet_tui.cli.main`) in a fresh interpreter and reads which
modules it loaded — never a time: the machine is shared, and imports are what the start-up is made of.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import new_home
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("textual", "onnxruntime", "tokenizers", "numpy", "numkong", "whoosh", "sqlite_vec", "pydantic", "Stemmer")

# runs argv through the console script's entry point, then reports the top-level packages loaded
PROBE = """
import json, sys
sys.path.insert(0, {root!r})
sys.argv = ["crewlet", *{argv!r}]
from crewlet_tui.cli import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
loaded = sorted({{m.split(".")[0] for m in sys.modules}})
executed = "asyncio.base_events" in sys.modules
modules = sorted(m for m in sys.modules if m.startswith(("core", "crewlet_tui")))
import os
blas = os.environ.get("OPENBLAS_NUM_THREADS")
print("@@" + json.dumps({{"code": code, "loaded": loaded, "modules": modules, "asyncio": executed, "blas": blas}}),
      file=sys.stderr)
"""


def probe(*argv: str, env: dict[str, str] | None = None) -> dict:
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT), argv=list(argv))],
                         capture_output=True, text=True, timeout=120, env=env)
    line = [ln for ln in out.stderr.splitlines() if ln.startswith("@@")]
    assert line, out.stderr
    report = json.loads(line[-1][2:])
    report["stdout"] = out.stdout
    return report


@pytest.fixture
def example_home(tmp_path: Path) -> tuple[Home, str]:
    home = new_home(tmp_path / "home")
    with Node.open(home) as node:
        page = KnowledgeBase(node).create_page("ENG", "Deploy Runbook", "Roll back with `deploy --undo`.\n",
                                               actor="alex")
    return home, page.id


def test_help_imports_no_engine_and_no_heavy_module():
    report = probe("--help")
    assert report["code"] == 0 and "Usage" in report["stdout"]
    assert not set(HEAVY) & set(report["loaded"]), set(HEAVY) & set(report["loaded"])


def test_page_show_imports_neither_textual_nor_the_search_engines(example_home):
    home, page_id = example_home
    report = probe("--home", str(home.root), "page", "show", page_id)
    assert report["code"] == 0 and "Deploy Runbook" in report["stdout"]
    loaded = set(report["loaded"])
    # sqlite-vec's extension is loaded into the connection; its Python package (and numpy) is not imported
    assert not set(HEAVY) & loaded, set(HEAVY) & loaded
    assert not report["asyncio"]


def test_status_commands_load_no_engine(example_home):
    """`index status`, `spaces`, `sync status` and `pages` answer from rows and the index's small files: at a
    million pages their cost is the interpreter's, so none of them may pull in numpy, Whoosh or a model."""
    home, _ = example_home
    with Node.open(home) as node:        # a keyword index to report on, and a local model configured
        from core.search.indexer import Indexer

        with Indexer(node.home) as indexer:
            indexer.run_pass(wait=True)
    for argv in (["index", "status"], ["index", "status", "--json"], ["spaces"], ["sync", "status"], ["pages", "ENG"]):
        report = probe("--home", str(home.root), *argv)
        assert report["code"] == 0, (argv, report)
        assert not set(HEAVY) & set(report["loaded"]), (argv, set(HEAVY) & set(report["loaded"]))
    report = probe("--home", str(home.root), "index", "status", "--json")
    status = json.loads(report["stdout"])
    assert status["pages_indexed"] == 1 and status["behind"] == 0 and status["first_build_done"]
    assert status["semantic"]["model"] and status["semantic"]["total"] == 1   # the provider was read, not loaded


def test_a_keyword_search_loads_no_model_and_no_app(example_home):
    home, _ = example_home
    report = probe("--home", str(home.root), "search", "--mode", "keyword", "roll back")
    assert report["code"] == 0 and "Deploy Runbook" in report["stdout"]
    loaded = set(report["loaded"])
    assert {"numpy", "whoosh"} <= loaded                      # what ranking needs
    assert not {"textual", "onnxruntime", "tokenizers", "pydantic", "numkong"} & loaded
    assert "core.search.semantic" not in report["modules"]   # the semantic engine loads for a search by meaning
    assert not report["asyncio"]                              # Whoosh imports it; nothing here runs it
    assert report["blas"] == "1"                              # numpy started one OpenBLAS thread, not one a core


def test_only_a_search_asks_for_one_blas_thread(example_home):
    home, page_id = example_home
    assert probe("--home", str(home.root), "page", "show", page_id)["blas"] is None
    # a value the environment sets is kept
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    assert probe("--home", str(home.root), "search", "--mode", "keyword", "roll back", env=env)["blas"] == "2"
    from crewlet_tui.cli import _searches_eval

    assert _searches_eval(["search", "eval"]) and _searches_eval(["--home", "h", "search", "eval", "--json"])
    assert not _searches_eval(["search", "roll", "eval"]) and not _searches_eval(["--home", "search", "search", "x"])


def test_a_search_that_embeds_its_question_is_told_so_before_the_typer_parse():
    """`crewlet search` lines that will embed their question (hybrid, the default, or semantic) open the model's
    session without prepacking (core/embed/local.py one_question_process); a keyword line, `--help`, and the
    eval and floor subcommands are not taken for one. A hint read ahead of typer: a wrong guess costs an import."""
    from crewlet_tui.cli import _ranks_by_meaning

    for line in (["search", "roll", "back"], ["--home", "h", "search", "-m", "semantic", "x"],
                 ["search", "--mode=hybrid", "x"], ["search", "--", "--mode", "keyword"], ["search", "keyword"]):
        assert _ranks_by_meaning(line), line
    for line in (["search", "--mode", "keyword", "x"], ["search", "-m", "KEYWORD", "x"], ["search", "-mkeyword", "x"],
                 ["search", "--mode=keyword", "x"], ["search", "--help"], ["search", "eval"], ["search", "floor"]):
        assert not _ranks_by_meaning(line), line


def test_the_app_command_line_runs_the_app_without_typer(tmp_path):
    """`crewlet` alone (with --home/--as, or their environment variables) goes straight to the app."""
    script = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
import crewlet_tui.launch as launch
import gc
def fake(home, actor=None, **kw):
    print(json.dumps({{"home": str(home.root), "actor": actor, "typer": "typer" in sys.modules,
                      "gc_paused": not gc.isenabled()}}))
launch.run_app = fake
sys.argv = ["crewlet", *sys.argv[1:]]
from crewlet_tui.cli import main
main()
assert gc.isenabled()
"""
    env = {k: v for k, v in os.environ.items() if k != "CREWLET_HOME"} | {"CREWLET_AS": "sam"}
    for argv, actor in ((["--home", str(tmp_path / "h")], "sam"), ([f"--home={tmp_path / 'h'}", "--as", "alex"], "alex")):
        out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=60,
                             env=env)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        assert got == {"home": str((tmp_path / "h").resolve()), "actor": actor, "typer": False, "gc_paused": True}


def test_command_lines_are_told_apart():
    from crewlet_tui.cli import _command, _globals_only

    assert _globals_only([]) is not None                     # `crewlet` alone: the app
    assert _globals_only(["--home", "x", "--as", "sam"])["--home"] == "x"
    assert _globals_only(["--home=x"])["--home"] == "x"
    assert _globals_only(["--home"]) is None                  # typer says what is missing
    assert _globals_only(["-h"]) is None and _globals_only(["search", "x"]) is None
    assert _command(["--home", "search", "page"]) == "page"   # "search" is --home's value here
    assert _command(["--as", "sam", "open", "X"]) == "open" and _command(["--home", "h"]) is None


def test_the_apps_duty_names_are_cores():
    from core.duties.roster import ApplyDuty
    from core.duties.embedding import EmbeddingDuty
    from core.duties.keyword_index import KeywordIndexDuty
    from core.duties.semantic_index import IndexTrainingDuty
    from crewlet_tui import app

    assert (app.APPLY_DUTY, app.KEYWORD_INDEX_DUTY, app.EMBEDDING_DUTY, app.INDEX_TRAINING_DUTY) == \
        (ApplyDuty.name, KeywordIndexDuty.name, EmbeddingDuty.name, IndexTrainingDuty.name)


def test_a_session_makes_its_searcher_on_first_use(example_home):
    home, _ = example_home
    script = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from pathlib import Path
from core.paths import Home
from crewlet_tui.session import Session
s = Session.open(Home(Path({str(home.root)!r})))
before = "core.search.native" in sys.modules or "numpy" in sys.modules
searcher = s.searcher
again = s.searcher
s.close()
print(before, type(searcher).__name__, searcher is again)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "NativeSearcher", "True"]


LAUNCH = """
import asyncio, gc, json, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from textual.css.stylesheet import Stylesheet
reparses = []
_reparse = Stylesheet.reparse
def counted(self):
    reparses.append(1)
    return _reparse(self)
Stylesheet.reparse = counted
from crewlet_tui.app import make_app

async def main():
    gc.disable()                       # as crewlet's own command line does
    app = make_app(Path({home!r}), cursor_blink=False, start_indexer=False, gc_paused=True)
    async with app.run_test(size=(100, 32)) as pilot:
        for _ in range(500):
            await pilot.pause(0.01)
            tables = app.screen.query("#spaces-table") if type(app.screen).__name__ == "SpacesScreen" else []
            if tables and tables.first().row_count:
                break
        await pilot.pause(0.05)
        sources = sorted(Path(str(src[0])).name for src in app.stylesheet.source if str(src[0]).endswith(".tcss"))
        shown = {{
            "theme": app.theme, "reparses": len(reparses), "tcss": sources, "gc": gc.isenabled(),
            "screens": sorted(m for m in sys.modules if m.startswith("crewlet_tui.screens.")),
            "progress_bar": "textual.widgets._progress_bar" in sys.modules,
            "undeclared_table": bool(app.screen.query("#undeclared-table")),
            "header": [c.label.plain for c in app.screen.query_one("#spaces-table").columns.values()],
        }}
        app.open_search("")
        for _ in range(300):
            await pilot.pause(0.01)
            if type(app.screen).__name__ == "SearchScreen":
                break
        await pilot.pause(0.05)
        results = app.screen.query_one("#search-results")
        shown["search_tcss"] = "search.tcss" in {{Path(str(src[0])).name for src in app.stylesheet.source}}
        shown["search_results_bordered"] = results.styles.border_top[0] == "round"
    print("@@" + json.dumps(shown))

asyncio.run(main())
"""


def test_the_app_launch_parses_styles_once_and_mounts_only_the_first_screen(example_home):
    """To the spaces screen painted: the crewlet theme from the first parse (no reparse), only app.tcss
    (each other screen's .tcss is read when it is first shown), the spaces screen's module alone, no
    progress bar or undeclared-containers table that nothing shows, and the GC back on once painted."""
    home, _ = example_home
    out = subprocess.run([sys.executable, "-c", LAUNCH.format(root=str(ROOT), home=str(home.root))],
                         capture_output=True, text=True, timeout=120)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("@@")]
    assert line, out.stderr[-6000:]
    shown = json.loads(line[-1][2:])
    assert shown["theme"] == "crewlet" and shown["reparses"] == 0
    assert shown["tcss"] == ["app.tcss"]
    # the screen registry is a table of names (it imports no screen): the first screen's module alone is loaded
    assert shown["screens"] == ["crewlet_tui.screens.base", "crewlet_tui.screens.registry", "crewlet_tui.screens.spaces"]
    assert not shown["progress_bar"] and not shown["undeclared_table"]
    assert shown["header"] == ["space", "name", "lead", "pages", "purpose"]
    assert shown["gc"]
    # the search screen's styles were read when it was first shown, and apply
    assert shown["search_tcss"] and shown["search_results_bordered"]


async def test_the_status_lines_progress_bar_is_mounted_when_a_long_work_first_wants_it(example_home):
    from textual.widgets import ProgressBar

    from crewlet_tui.app import make_app
    from crewlet_tui.widgets.status import IndexState, MeaningState
    from test_app_support import wait_screen, wait_until

    home, _ = example_home
    app = make_app(home, cursor_blink=False, start_indexer=False)
    async with app.run_test(size=(100, 32)) as pilot:
        # each state change shows on a later refresh, later still on a busy machine: wait for it, never a fixed pause
        await wait_screen(pilot, "SpacesScreen")
        line = app.screen.query_one("StatusLine")
        assert not line.query(ProgressBar)
        app.index_state = IndexState("indexing", 40, 120)
        await wait_until(pilot, lambda: line.query_one("#status-progress", ProgressBar).display, what="the bar shown")
        bar = line.query_one("#status-progress", ProgressBar)
        await wait_until(pilot, lambda: (bar.progress, bar.total) == (40, 120), what="the index's progress")
        assert bar.region.width == 14 and bar.region.y == line.region.y   # on the status line, as styled
        app.index_state = IndexState("current", 120, 120, 5, 5)
        await wait_until(pilot, lambda: not bar.display, what="the bar hidden")
        app.meaning_state = MeaningState("training", 10, 20, 3, 9)
        await wait_until(pilot, lambda: bar.display and (bar.progress, bar.total) == (3, 9), what="the training's progress")
        assert bar.display and (bar.progress, bar.total) == (3, 9) and len(line.query(ProgressBar)) == 1
