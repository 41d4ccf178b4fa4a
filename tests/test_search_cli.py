"""`crewlet search`, `crewlet index status|build` and `crewlet worker --once`: JSON shapes, exit codes,
the catch-up before answering, and escaping what pages say."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core.node import Node
from core.pages.service import KnowledgeBase
from core.search.indexer import Indexer
from crewlet_tui.cli import app


@pytest.fixture
def home(tmp_path):
    return new_home(tmp_path / "home")


def run(home, *args: str, actor: str | None = None):
    argv = ["--home", str(home.root)]
    if actor:
        argv += ["--as", actor]
    return CliRunner().invoke(app, [*argv, *args])


def add(home, container: str, title: str, body: str, **kw) -> str:
    with Node.open(home) as node:
        return KnowledgeBase(node).create_page(container, title, body, **kw).id


def test_search_json_shape_and_a_small_home_built_on_first_search(home):
    pid = add(home, "ENG", "Deploy Runbook", "How to **deploy** the service.")
    r = run(home, "search", "deploy", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out) == {"hits", "outcome"}
    (hit,) = out["hits"]
    assert set(hit) == {"title", "url", "container", "page_id", "snippet", "ancestors", "score"}
    assert (hit["title"], hit["container"], hit["page_id"]) == ("Deploy Runbook", "ENG", pid)
    assert hit["snippet"] == "How to deploy the service." and hit["url"] == f"#/knowledge/pages/{pid}"
    o = out["outcome"]
    assert (o["served_mode"], o["modes"], o["degraded"]) == ("keyword", ["hybrid", "keyword", "semantic"], "no_embeddings")
    assert set(o["coverage"]) >= {"indexed_seq", "applied_seq", "pages_indexed", "complete", "behind"}


def test_search_catches_up_with_the_users_own_edits(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    assert run(home, "search", "deploy", "--json").exit_code == 0
    add(home, "ENG", "Rollback guide", "how to roll back a deploy")
    out = json.loads(run(home, "search", "roll", "back", "--json").stdout)
    assert [h["title"] for h in out["hits"]] == ["Rollback guide"]
    assert out["outcome"]["coverage"]["behind"] == 0


def test_not_searchable_yet_exits_1_with_one_line_and_the_outcome(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    r = run(home, "search", "deploy", "--no-catch-up", "--json")
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["hits"] == [] and out["outcome"]["served_mode"] is None
    assert out["outcome"]["degraded"] == "not_searchable_yet"
    assert "not searchable yet" in r.stderr and "crewlet worker --once" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_large_home_is_left_to_the_worker(home, monkeypatch):
    from core.search import indexer

    monkeypatch.setattr(indexer, "INLINE_BUILD_MAX_PAGES", 1)     # the one catch-up `crewlet mcp` runs too
    add(home, "ENG", "Deploy Runbook", "deploy")
    add(home, "ENG", "Deploy FAQ", "deploy")
    r = run(home, "search", "deploy")
    assert r.exit_code == 1 and "crewlet worker --once" in r.stderr
    w = run(home, "worker", "--once", "--json")
    assert w.exit_code == 0, w.output
    duties = {d["duty"]: d for d in json.loads(w.stdout)["duties"]}
    assert duties["keyword-index"]["status"]["pass"] == "build"
    assert duties["keyword-index"]["counts"]["indexed"] == 2
    assert set(duties["trash-reaper"]["counts"]) == {"purged", "refused", "passes"}
    assert run(home, "search", "deploy").exit_code == 0


def test_nothing_matched_exits_0_and_says_so(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    r = run(home, "search", "kubernetes")
    assert r.exit_code == 0 and "nothing matched" in r.stdout
    out = json.loads(run(home, "search", "kubernetes", "--json").stdout)
    assert out["hits"] == [] and out["outcome"]["served_mode"] == "keyword"


def test_modes_and_usage_errors(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    assert json.loads(run(home, "search", "deploy", "--mode", "keyword", "--json").stdout)["outcome"]["degraded"] is None
    r = run(home, "search", "deploy", "--mode", "semantic")
    assert r.exit_code == 1 and "shares no word" in r.stderr
    assert run(home, "search", "deploy", "--mode", "telepathy").exit_code == 2
    assert run(home, "search").exit_code == 2


def test_limit_and_containers(home):
    for c in ("ENG", "PROD"):
        for i in range(3):
            add(home, c, f"Deploy {c} {i}", "deploy")
    out = json.loads(run(home, "search", "deploy", "--limit", "2", "--json").stdout)
    assert len(out["hits"]) == 2
    out = json.loads(run(home, "search", "deploy", "-c", "PROD", "--limit", "20", "--json").stdout)
    assert {h["container"] for h in out["hits"]} == {"PROD"} and len(out["hits"]) == 3


def test_people_see_titles_ancestors_and_highlighted_snippets_escaped(home):
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        parent = kb.create_page("ENG", "[bold]Ops[/bold]", "")
        kb.create_page("ENG", "Deploy [red]now[/red]", "Run [link=x]deploy[/link] with care.", parent=parent.id)
    r = run(home, "search", "deploy")
    assert r.exit_code == 0, r.output
    assert "Deploy [red]now[/red]" in r.stdout             # markup in a title is shown, never applied
    assert "ENG/Deploy [red]now[/red]" in r.stdout
    assert "[bold]Ops[/bold]" in r.stdout                   # the ancestor line
    assert "Run [link=x]deploy[/link] with care." in r.stdout


def test_an_agents_cli_search_is_recorded(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    assert run(home, "search", "deploy", "--json", actor="eng-bot").exit_code == 0
    assert run(home, "search", "deploy", "--json", actor="sam").exit_code == 0
    with Node.open(home) as node:
        reads = KnowledgeBase(node).reads()
    assert [(r["actor"], r["via"], r["query"]) for r in reads] == [("eng-bot", "search", "deploy")]


def test_index_status_and_build(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    r = run(home, "index", "status", "--json")
    assert r.exit_code == 0
    st = json.loads(r.stdout)
    assert st["first_build_done"] is False and st["pages_indexed"] == 0 and st["behind"] > 0
    assert "not yet" in run(home, "index", "status").stdout
    r = run(home, "index", "build", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["pass"]["kind"] == "build" and out["status"]["first_build_done"] is True
    assert out["status"]["pages_indexed"] == 1 and out["status"]["behind"] == 0
    human = run(home, "index", "status").stdout
    assert "pages indexed" in human and "up to date" in human and "derivation" in human
    r = run(home, "index", "build", "--rebuild", "--json")
    assert json.loads(r.stdout)["pass"]["kind"] == "rebuild"


def test_worker_once_catches_the_index_up(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    with Indexer(home) as ix:
        ix.run_pass()
    add(home, "ENG", "Deploy FAQ", "deploy")
    r = run(home, "worker", "--once")
    assert r.exit_code == 0, r.output
    assert "keyword-index: caught up" in r.stdout and "trash-reaper:" in r.stdout
    with Indexer(home) as ix:
        assert ix.status().behind == 0


def test_a_missing_index_is_one_line_exit_1_and_an_unavailable_outcome(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    assert run(home, "search", "deploy").exit_code == 0
    state = json.loads((home.index_dir / "state.json").read_text())
    shutil.rmtree(home.index_dir / state["dir"])
    r = run(home, "search", "deploy", "--no-catch-up")
    assert r.exit_code == 1
    (line,) = r.stderr.strip().splitlines()          # no traceback, no second copy of the warning
    assert "could not be searched" in line and "missing or damaged" in line and "Traceback" not in r.stderr
    out = json.loads(run(home, "search", "deploy", "--no-catch-up", "--json").stdout)
    assert out["outcome"]["served_mode"] is None and out["outcome"]["degraded"] == "unavailable"
    assert run(home, "search", "deploy").exit_code == 0    # the catch-up derives it again


def test_a_query_without_a_searchable_word_is_not_nothing_matched(home):
    add(home, "ENG", "Deploy Runbook", "deploy")
    assert run(home, "search", "deploy").exit_code == 0
    for text, code in (("", 2), ("   ", 2), ("!!! ???", 1), ("the and of", 1)):
        r = run(home, "search", text)
        assert r.exit_code == code, (text, r.output)
        assert len(r.stderr.strip().splitlines()) == 1 and "nothing matched" not in r.stdout
    out = json.loads(run(home, "search", "the and of", "--json").stdout)
    assert out["outcome"]["served_mode"] is None and out["outcome"]["degraded"] == "no_terms"


def test_a_container_outside_the_scope_or_without_pages_is_named(tmp_path):
    from conftest import config_with

    home = new_home(tmp_path / "scoped", config_with(knowledge={"scope": ["ENG"]}))
    add(home, "ENG", "Deploy Runbook", "deploy")
    add(home, "PROD", "Deploy Prod", "deploy")
    r = run(home, "search", "deploy", "-c", "PROD")
    assert r.exit_code == 1 and "PROD is outside knowledge.scope" in r.stderr
    r = run(home, "search", "deploy", "-c", "ENG", "-c", "PROD", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 0 and [h["container"] for h in out["hits"]] == ["ENG"]
    assert "PROD is outside knowledge.scope" in out["outcome"]["message"]


def test_the_cli_analyses_the_query_once_and_builds_one_term_finder(home, monkeypatch):
    from core.search import lexical, snippets

    for i in range(3):
        add(home, "ENG", f"Deploy {i}", "deploy the service")
    assert run(home, "search", "deploy").exit_code == 0
    analysed, finders = [], []
    real_analyze, real_init = lexical.analyze, snippets.TermFinder.__init__
    monkeypatch.setattr(lexical, "analyze", lambda *a, **k: (analysed.append(a[1]), real_analyze(*a, **k))[1])

    def init(self, *a, **k):
        finders.append(1)
        real_init(self, *a, **k)

    monkeypatch.setattr(snippets.TermFinder, "__init__", init)
    r = run(home, "search", "deploy", "service")
    assert r.exit_code == 0 and r.stdout.count("Deploy ") >= 3
    assert analysed == ["deploy service"] and len(finders) == 1
