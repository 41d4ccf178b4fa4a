"""Agent runs (issue 37; spec 003 "What agents get", "The holdout"): `crewlet run start|context|finish|show` over a
real home and a real git repository made here, and `crewlet mcp --run ID` through a real MCP client session.

The arm is drawn from a hash of the run id (recomputed here with core.stats.drawn); a holdout run is given nothing
and records no serve; a treatment run's context is load_context over its modules, recorded against the run; each
outcome counts helpful or harmful for the entries the run was given, by scope; a harmful outcome re-reads those
entries' citations at once (and says so when the repository cannot be read); bad input is one line, exit 1 or 2,
and nothing written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with, new_home
from mcp_client import call, connect
from mcp_client import anyio_backend  # noqa: F401 - a fixture, by name
from test_first_hour_cli import refused
from test_repos_support import GitRepo, numbered
from typer.testing import CliRunner

from core.bank.entries import EntryBank
from core.node import Node
from core.paths import Home
from core.stats import drawn
from crewlet_tui.cli import app

CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "CREWLET_NOW": None, "CREWLET_RUN": None,
             "KNOWLEDGE_HOLDOUT_RATE": None, "COLUMNS": "200"}
CACHE = "".join(f"TTL_{i} = {i * 60}\n" for i in range(1, 11))
HOLDOUT_WORDS = "holdout run: no knowledge, by design"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    g = GitRepo(tmp_path / "server")
    g.write("apps/server/pyproject.toml", "[project]\nname = 'server'\n")
    g.write("apps/server/cache.py", CACHE)
    g.write("apps/web/package.json", "{}\n")
    g.write("apps/web/app.ts", numbered(10, "const"))
    g.commit("first")
    return g


def cite(repo: GitRepo, path: str, lines: tuple[int, int]) -> dict[str, Any]:
    return {"repository": "server", "path": path, "lines": list(lines), "commit": repo.git("rev-parse", "HEAD").strip()}


class Bank:
    """A home on `repo` with three grounded entries a person wrote under ENG/Caching: one scoped to apps/server,
    one to apps/web, one with no scope (it serves every area); and the CLI in process."""

    def __init__(self, tmp_path: Path, repo: GitRepo, **knowledge: Any) -> None:
        self.home = new_home(tmp_path / "home", config_with(knowledge=knowledge,
                                                            repositories={"server": {"path": str(repo.path)}}))
        self.runner = CliRunner()
        with Node.open(self.home) as node, EntryBank(node) as bank:
            page = bank.kb.create_page("ENG", "Caching", "How the cache works.", actor="alex").id
            self.server = bank.add(page, "The session cache holds for a minute.", scope="apps/server",
                                   citations=[cite(repo, "apps/server/cache.py", (1, 1))], actor="alex").id
            self.web = bank.add(page, "The web app renders ten constants.", scope="apps/web",
                                citations=[cite(repo, "apps/web/app.ts", (1, 2))], actor="alex").id
            self.anywhere = bank.add(page, "Every TTL is a whole number of minutes.",
                                     citations=[cite(repo, "apps/server/cache.py", (2, 3))], actor="alex").id

    def cli(self, *args: str, env: dict | None = None):
        return self.runner.invoke(app, ["--home", str(self.home.root), *args], env={**CLEAN_ENV, **(env or {})})

    def json(self, *args: str, env: dict | None = None) -> dict[str, Any]:
        res = self.cli(*args, "--json", env=env)
        assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
        return json.loads(res.stdout)

    def rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with Node.open(self.home) as node:
            return [tuple(r) for r in node.conn.execute(sql, args)]

    def log_size(self) -> int:
        return self.home.log_file.stat().st_size


@pytest.fixture
def bank(tmp_path: Path, repo: GitRepo) -> Bank:
    return Bank(tmp_path, repo, holdout_rate=0.0)


# -- the holdout ---------------------------------------------------------------------------------------------

def test_the_arm_is_drawn_from_a_hash_of_the_run_id_and_a_holdout_run_gets_nothing_and_records_no_serve(
        tmp_path, repo):
    b = Bank(tmp_path, repo, holdout_rate=0.5)
    arms = {}
    for i in range(12):
        run_id = f"run-{i}"
        started = b.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server", "--id", run_id)
        # recomputed here: sha256("holdout" + id), its first 8 bytes over 2^64, below the rate
        assert started["arm"] == ("holdout" if drawn(run_id, 0.5, "holdout") else "treatment"), run_id
        assert (started["holdout_rate"], started["modules"]) == (0.5, ["server:apps/server"])
        arms[run_id] = started["arm"]
    assert set(arms.values()) == {"holdout", "treatment"}       # twelve ids at one half fall in both arms
    assert b.rows("SELECT id, arm FROM runs ORDER BY id") == sorted(arms.items())

    held = next(r for r, arm in arms.items() if arm == "holdout")
    res = b.cli("run", "context", held)
    assert res.exit_code == 0 and res.stdout.strip() == HOLDOUT_WORDS
    given = b.json("run", "context", held)
    assert (given["holdout"], given["entries"], given["conventions"]) == (True, [], [])
    assert b.rows("SELECT count(*) FROM entry_serves WHERE run = ?", (held,)) == [(0,)]

    treated = next(r for r, arm in arms.items() if arm == "treatment")
    given = b.json("run", "context", treated)
    assert given["holdout"] is False
    assert {e["id"] for e in given["entries"]} == {b.server, b.anywhere}       # apps/web's entry is not for it
    assert all(e["tier"] == "GROUNDED" for e in given["entries"])
    assert sorted(b.rows("SELECT entry_id, actor, via FROM entry_serves WHERE run = ?", (treated,))) == sorted(
        [(b.server, "eng-bot", "load_context"), (b.anywhere, "eng-bot", "load_context")])
    # the holdout's outcomes count for no entry, whatever they are
    done = b.json("run", "finish", held, "--checks", "failed", "--review", "failed", "--pr", "closed")
    assert (done["entries_given"], done["helpful"], done["harmful"]) == (0, 0, 0)
    assert b.rows("SELECT count(*) FROM entry_outcomes WHERE run_id = ?", (held,)) == [(0,)]


def test_a_rate_of_one_holds_every_run_out_and_zero_none_the_environment_winning(bank):
    for i in range(4):
        assert bank.json("run", "start", "--agent", "eng-bot", "--id", f"all-{i}",
                         env={"KNOWLEDGE_HOLDOUT_RATE": "1"})["arm"] == "holdout"
        assert bank.json("run", "start", "--agent", "eng-bot", "--id", f"none-{i}")["arm"] == "treatment"


# -- outcomes by scope, and the recheck a harmful one starts --------------------------------------------------

def test_each_outcome_counts_helpful_or_harmful_for_the_entries_given_where_it_falls_under_their_scope(bank, repo):
    run_id = bank.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server", "--issue", "ENG-12")["id"]
    assert run_id.startswith("run-")
    bank.json("run", "context", run_id)                     # apps/server's entry and the unscoped one
    with Node.open(bank.home) as node, EntryBank(node) as eb:   # the web entry reached the run another way
        eb.record_serve("eng-bot", "recall_knowledge", [eb.show(bank.web)], query="web", run=run_id)
    # the code moves: every cited file changes at the head, so a recheck has something to write
    repo.write("apps/server/cache.py", "# moved down one line\n" + CACHE)
    repo.write("apps/web/app.ts", "// moved\n" + numbered(10, "const"))
    repo.commit("shift")
    checks_before = dict(bank.rows("SELECT entry_id, count(*) FROM citation_checks GROUP BY entry_id"))

    done = bank.json("run", "finish", run_id, "--checks", "passed", "--review", "failed", "--pr", "merged",
                     "--cost", "1.25", "--finding", "apps/server: retries need a backoff")
    assert (done["entries_given"], done["helpful"], done["harmful"]) == (3, 4, 2)
    assert done["harmful_entries"] == sorted([bank.server, bank.anywhere])
    assert sorted(bank.rows("SELECT entry_id, outcome, effect FROM entry_outcomes WHERE run_id = ?", (run_id,))) == \
        sorted([(e, o, eff) for e in (bank.server, bank.anywhere)
                for o, eff in (("checks", "helpful"), ("review", "harmful"), ("pr", "helpful"))])
    # the harmful review re-read the citations of the two entries it counted against — and no other entry's
    after = dict(bank.rows("SELECT entry_id, count(*) FROM citation_checks GROUP BY entry_id"))
    assert after[bank.server] == checks_before[bank.server] + 1 and after[bank.anywhere] == checks_before[bank.anywhere] + 1
    assert after[bank.web] == checks_before[bank.web]
    assert bank.rows("SELECT result FROM citation_checks WHERE entry_id = ? ORDER BY seq DESC LIMIT 1",
                     (bank.server,)) == [("shifted",)]
    assert done["recheck"]["counts"]["reanchored"] == 2
    listed = bank.json("run", "list", "--agent", "eng-bot")["runs"]
    assert [(r["id"], r["finished"], r["pr"]) for r in listed] == [(run_id, True, "merged")]
    assert bank.json("run", "list", "--agent", "ops-bot")["runs"] == []
    assert run_id in bank.cli("run", "list").stdout
    shown = bank.json("run", "show", run_id)
    assert (shown["checks"], shown["review"], shown["pr"], shown["cost"], shown["issue"], shown["served"]) == (
        "passed", "failed", "merged", 1.25, "ENG-12", 3)
    assert shown["findings"] == [{"module": "server:apps/server", "text": "retries need a backoff"}]


def test_a_run_on_another_module_counts_only_the_unscoped_entries_it_was_given(bank):
    run_id = bank.json("run", "start", "--agent", "eng-bot", "--modules", "apps/web")["id"]
    given = bank.json("run", "context", run_id)
    assert {e["id"] for e in given["entries"]} == {bank.web, bank.anywhere}
    with Node.open(bank.home) as node, EntryBank(node) as eb:   # apps/server's entry, served to it by a search
        eb.record_serve("eng-bot", "search_knowledge", [eb.show(bank.server)], query="cache", run=run_id)
    done = bank.json("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none")
    assert (done["helpful"], done["harmful"], done["harmful_entries"], done["recheck"]) == (4, 0, [], None)
    assert sorted(bank.rows("SELECT entry_id, outcome FROM entry_outcomes")) == sorted(
        [(e, o) for e in (bank.web, bank.anywhere) for o in ("checks", "review")])   # pr none: no outcome


def test_a_run_on_two_modules_gets_both_and_one_naming_none_the_whole_repository(bank):
    both = bank.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server, apps/web")
    assert both["modules"] == ["server:apps/server", "server:apps/web"]
    given = bank.json("run", "context", both["id"])
    assert given["area"] == "server:apps/server, server:apps/web"
    assert {e["id"] for e in given["entries"]} == {bank.server, bank.web, bank.anywhere}
    narrow = bank.json("run", "context", both["id"], "--token-budget", "150")        # never over the budget
    assert narrow["tokens"] <= 150 and sum(narrow["left_out_for_budget"].values()) >= 1
    anywhere = bank.json("run", "start", "--agent", "eng-bot")
    assert anywhere["modules"] == []
    given = bank.json("run", "context", anywhere["id"])
    assert given["area"] == "server:." and {e["id"] for e in given["entries"]} == {bank.server, bank.web,
                                                                                   bank.anywhere}


def test_a_harmful_outcome_says_so_when_the_repository_cannot_be_read(bank, repo):
    run_id = bank.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server")["id"]
    bank.json("run", "context", run_id)
    shutil.rmtree(repo.path / ".git")          # the checkout is there; git cannot read it
    res = bank.cli("run", "finish", run_id, "--checks", "failed", "--review", "passed", "--pr", "none")
    assert res.exit_code == 0, res.stderr
    assert "their citations were read again now" in res.stdout
    assert "repository 'server' not read" in res.stdout and "read again next pass" in res.stdout
    assert bank.rows("SELECT count(*) FROM entry_outcomes WHERE effect = 'harmful'") == [(2,)]


# -- bad input: one line, nothing written ---------------------------------------------------------------------

def test_bad_input_is_one_line_with_exit_one_or_two_and_nothing_written(bank):
    run_id = bank.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server")["id"]
    size = bank.log_size()
    refused(bank.cli("run", "finish", "nope", "--checks", "passed", "--review", "passed", "--pr", "none"),
            "no run 'nope'", "crewlet run start")
    refused(bank.cli("run", "context", "nope"), "no run 'nope'")
    for bad in (("--checks", "passed", "--review", "passed", "--pr", "maybe"),
                ("--checks", "green", "--review", "passed", "--pr", "none")):
        wrong = bank.cli("run", "finish", run_id, *bad)            # a word outside the choices: a usage error
        assert wrong.exit_code == 2 and ("'maybe'" in wrong.stderr or "'green'" in wrong.stderr), wrong.stderr
    refused(bank.cli("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none",
                     "--finding", "no module here"), "not MODULE:TEXT")
    refused(bank.cli("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none",
                     "--finding", "web:apps/web: a finding"), "--finding 'web:apps/web: …'", "no configured repository")
    refused(bank.cli("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none",
                     "--cost", "-1"), "--cost")
    refused(bank.cli("run", "start", "--agent", "alex"), "--agent 'alex' is not a configured agent", "eng-bot")
    refused(bank.cli("run", "start", "--agent", "eng-bot", "--id", run_id), "started already")
    refused(bank.cli("run", "start", "--agent", "eng-bot", "--modules", "web:apps"), "names no configured repository")
    refused(bank.cli("--as", "eng-bot", "run", "finish", run_id, "--checks", "passed", "--review", "passed",
                     "--pr", "none"), "cannot report its own run")
    missing = bank.cli("run", "finish", run_id, "--checks", "passed", "--review", "passed")
    assert missing.exit_code == 2 and "--pr" in missing.stderr
    assert bank.log_size() == size                              # not a byte of any of them
    bank.json("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none")
    size = bank.log_size()
    refused(bank.cli("run", "finish", run_id, "--checks", "failed", "--review", "failed", "--pr", "closed"),
            f"run {run_id} finished already", "reported once")
    assert bank.log_size() == size
    assert bank.rows("SELECT checks, review, pr FROM runs WHERE id = ?", (run_id,)) == [("passed", "passed", "none")]


def test_the_applier_decides_what_depends_on_order_a_second_finish_or_start_refused_on_every_node(bank):
    from core.pages import records

    run_id = bank.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server")["id"]
    bank.json("run", "context", run_id)
    with Node.open(bank.home) as node:
        # two finishes that both passed the writer's look (two CI jobs at once): the first applies, the second is
        # refused by the applier, and the outcomes are the first's alone
        first = node.submit_one(records.run_finish("alex", run_id=run_id, checks="passed", review="passed",
                                                   pr="merged"))
        second = node.submit_one(records.run_finish("alex", run_id=run_id, checks="failed", review="failed",
                                                    pr="closed"))
        again = node.submit_one(records.run_start("alex", run_id=run_id, agent="eng-bot", modules=[],
                                                  arm="treatment", holdout_rate=0.0))
        odd = node.submit_one(records.run_start("alex", run_id="run-odd", agent="eng-bot", modules=[], arm="control",
                                                holdout_rate=0.0))
    assert (first.status, second.status, second.code) == ("applied", "refused", "run_finished")
    assert (again.code, odd.code) == ("run_exists", "invalid_arm")
    assert bank.rows("SELECT DISTINCT effect FROM entry_outcomes") == [("helpful",)]
    # reading a finished run's context serves no work: nothing more is recorded against it
    served = bank.rows("SELECT count(*) FROM entry_serves WHERE run = ?", (run_id,))
    assert bank.json("run", "context", run_id)["entries"]
    assert bank.rows("SELECT count(*) FROM entry_serves WHERE run = ?", (run_id,)) == served


# -- a run's MCP session --------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_a_runs_mcp_session_serves_load_context_recorded_against_the_run(bank):
    async with connect(bank.home.root, "eng-bot", "--run", "run-mcp-1") as client:
        text, data = await call(client, "load_context", area="apps/server")
        assert data["run"] == "run-mcp-1" and bank.server in text
        _text, data = await call(client, "search_knowledge", query="session cache minute", mode="keyword")
        searched = {h["entry_id"] for h in data["hits"] if h.get("entry_id")}
        assert bank.server in searched
        _text, data = await call(client, "get_page", ref="ENG/Caching")
        assert {e["id"] for e in data["entries"]} == {bank.server, bank.web, bank.anywhere}
    assert bank.rows("SELECT agent, arm, started_by FROM runs WHERE id = 'run-mcp-1'") == [
        ("eng-bot", "treatment", "eng-bot")]                  # the runtime's id: started by the session
    assert sorted(bank.rows("SELECT entry_id, via FROM entry_serves WHERE run = 'run-mcp-1'")) == sorted(
        [(bank.server, "load_context"), (bank.anywhere, "load_context"), *[(e, "search_knowledge") for e in searched],
         *[(e, "get_page") for e in (bank.server, bank.web, bank.anywhere)]])
    # the same run again (CREWLET_RUN): its arm was drawn at its start, whatever the rate is now
    async with connect(bank.home.root, "eng-bot", env={"CREWLET_RUN": "run-mcp-1",
                                                        "KNOWLEDGE_HOLDOUT_RATE": "1"}) as client:
        _text, data = await call(client, "load_context", area="apps/web")
        assert data["run"] == "run-mcp-1" and {e["id"] for e in data["entries"]} == {bank.web, bank.anywhere}


@pytest.mark.anyio
async def test_a_holdout_runs_mcp_session_is_given_no_knowledge_and_records_no_use(bank):
    async with connect(bank.home.root, "eng-bot", "--run", "run-mcp-2",
                       env={"KNOWLEDGE_HOLDOUT_RATE": "1"}) as client:
        text, data = await call(client, "load_context", area="apps/server")
        assert text == HOLDOUT_WORDS and data["holdout"] is True and data["entries"] == []
        text, data = await call(client, "recall_knowledge", question="how long does the session cache hold?")
        assert text == HOLDOUT_WORDS and data["hits"] == []
        _text, data = await call(client, "search_knowledge", query="session cache minute", mode="keyword")
        assert data["hits"] and not any(h.get("entry_id") for h in data["hits"])     # the page, not its entries
        _text, data = await call(client, "get_page", ref="ENG/Caching")
        assert data["entries"] == [] and data["title"] == "Caching"
    assert bank.rows("SELECT arm FROM runs WHERE id = 'run-mcp-2'") == [("holdout",)]
    assert bank.rows("SELECT count(*) FROM entry_serves") == [(0,)]


def test_a_run_served_as_someone_else_is_refused_before_the_server_starts(bank, tmp_path):
    from mcp_client import crewlet

    run_id = bank.json("run", "start", "--agent", "eng-bot")["id"]
    for actor, words in (("alex", "a run is an agent's work"), ("eng-bot", None)):
        if words is None:           # its own agent is served: finish the run, and it is refused as finished
            bank.json("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none")
            words = "finished already"
        done = crewlet(bank.home.root, "mcp", "--run", run_id, actor=actor)
        assert done.returncode == 1 and words in done.stderr and len(done.stderr.strip().splitlines()) == 1


# -- across nodes ---------------------------------------------------------------------------------------------

def test_a_run_started_on_one_node_and_finished_on_another_counts_alike_on_both(tmp_path, repo):
    """A shared log directory (`crewlet sync join`): the runtime on A starts the run and hands it its context, CI on B
    reports its outcomes; B's applier counts them for the entries A served, every node holds the same rows (the
    same content digest), and A's late second report is refused."""
    from test_sync import cli as sync_cli
    from test_sync import ok as sync_ok

    from core.store.digest import content_digest

    b = Bank(tmp_path, repo, holdout_rate=0.0)
    shared = tmp_path / "shared"
    sync_ok(sync_cli(b.home.root, "sync", "join", str(shared)))
    sync_ok(sync_cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam"))
    run_id = b.json("run", "start", "--agent", "eng-bot", "--modules", "apps/server")["id"]
    b.json("run", "context", run_id)
    other = CliRunner().invoke(app, ["--home", str(tmp_path / "B"), "run", "finish", run_id, "--checks", "failed",
                                     "--review", "passed", "--pr", "merged", "--json"], env=CLEAN_ENV)
    assert other.exit_code == 0, other.stderr
    assert (json.loads(other.stdout)["helpful"], json.loads(other.stdout)["harmful"]) == (4, 2)
    refused(b.cli("run", "finish", run_id, "--checks", "passed", "--review", "passed", "--pr", "none"),
            "finished already")
    with Node.open(b.home) as na, Node.open(Home(tmp_path / "B")) as nb:
        na.catch_up()
        nb.catch_up()
        tables = ("runs", "run_findings", "entry_outcomes", "entry_serves")
        da, db = content_digest(na.conn), content_digest(nb.conn)
        assert [da.tables[t] for t in tables] == [db.tables[t] for t in tables] and da.content == db.content
        assert da.rows["entry_outcomes"] == 6 and da.rows["runs"] == 1
