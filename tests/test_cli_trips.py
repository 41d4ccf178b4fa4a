"""What a new user still trips on in the CLI (issue 33), each through the `crewlet` process as a person runs it:
an option named by the engine's field, a closed pipe called a failure, container keys that mind their case, an
`address` that meant two things, and words in the output and the help that were not true. Each failed before
its fix."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from chat_server import ChatServer, Reply

from core import config as config_mod
from core.agents.diary import Diary
from core.node import Node
from core.paths import Home

ROOT = Path(__file__).resolve().parent.parent
CREWLET = [sys.executable, "-c", "import sys; from crewlet_tui.cli import main; sys.argv[0] = 'crewlet'; main()"]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("CREWLET_")} | {"COLUMNS": "200"}


def crewlet(home: Path, *args: str, stdout: int | None = subprocess.PIPE,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CREWLET, "--home", str(home), *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          env=ENV | (env or {}), cwd=ROOT, timeout=300)


def one_line(res: subprocess.CompletedProcess[str]) -> str:
    """Exit 1 and exactly one line on stderr."""
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crewlet: "), res.stderr
    return lines[0]


def ok_json(res: subprocess.CompletedProcess[str]) -> dict:
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Home:
    """The bundled example (ENG/Rollback is filed under ENG/Deploy Runbook), its keyword index built, and no
    embedding model (nothing here ranks by meaning: `--mode keyword` where a search runs)."""
    root = tmp_path_factory.mktemp("trips") / "example"
    assert crewlet(root, "init", "--example").returncode == 0
    data = config_mod.load(Home(root).config_file).raw
    data["providers"] = {"embeddings": {"provider": "none"}}
    config_mod.write(Home(root).config_file, data)
    assert crewlet(root, "index", "build").returncode == 0
    return Home(root)


@pytest.fixture
def home(example, tmp_path) -> Home:
    root = tmp_path / "home"
    subprocess.run(["cp", "-a", str(example.root), str(root)], check=True)
    return Home(root)


# -- the option a person typed, not the engine's field ------------------------------------------------------

def test_a_refused_parent_names_the_parent_option_not_parent_id(home):
    cycle = one_line(crewlet(home.root, "page", "move", "ENG/Deploy Runbook", "--parent", "ENG/Rollback"))
    assert "--parent" in cycle and "parent_id" not in cycle, cycle
    assert "ENG/Rollback" in cycle and "cycle" in cycle
    missing = one_line(crewlet(home.root, "page", "create", "ENG", "Child", "--parent", "ENG/No Such Page"))
    assert missing.startswith("crewlet: --parent ENG/No Such Page names no page") and "parent_id" not in missing
    refusal = json.loads(crewlet(home.root, "page", "move", "ENG/Deploy Runbook", "--parent", "ENG/Rollback",
                                 "--json").stdout)
    assert refusal["error"] == "invalid_parent" and "parent_id" not in refusal["message"]


# -- a closed pipe is not a failure ---------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("search", "deploy", "--mode", "keyword"), ("page", "show", "ENG/Deploy Runbook"),
                                  ("page", "show", "ENG/Deploy Runbook", "--json"), ("ask", "how do we roll back"),
                                  ("--help",), ("page", "--help")],
                         ids=["search", "page show", "page show --json", "ask", "--help", "page --help"])
def test_a_reader_that_closed_the_pipe_is_not_a_failure(home, args):
    """`crewlet search deploy | head -1`: the reader is gone before the command writes (a pipe whose read end
    is closed, the case `head` makes by exiting), and the command exits 0 saying nothing."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        res = crewlet(home.root, *args, stdout=write_end)
    finally:
        os.close(write_end)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr


# -- container keys are folded to the declared one ------------------------------------------------------------

def test_a_container_key_in_another_case_names_the_declared_container(home):
    shown = ok_json(crewlet(home.root, "page", "show", "eng/deploy runbook", "--json"))
    assert (shown["container"], shown["title"]) == ("ENG", "Deploy Runbook")
    listed = ok_json(crewlet(home.root, "pages", "eng", "--json"))
    assert listed["container"] == "ENG" and "Deploy Runbook" in {p["title"] for p in listed["pages"]}
    table = crewlet(home.root, "pages", "eng")
    assert table.returncode == 0 and "ENG — " in table.stdout
    found = ok_json(crewlet(home.root, "search", "rollback", "--mode", "keyword", "--container", "eng", "--json"))
    assert found["hits"] and {h["container"] for h in found["hits"]} == {"ENG"}
    created = ok_json(crewlet(home.root, "page", "create", "eng", "Pager rota", "--json"))
    assert created["container"] == "ENG"
    # a key nothing declares is still refused, in any case
    one_line(crewlet(home.root, "pages", "nosuch"))


def test_two_declared_keys_that_differ_only_in_case_make_the_folded_key_ambiguous(home):
    data = config_mod.load(home.config_file).raw
    data["spaces"]["Eng"] = {"name": "Engines", "purpose": "the other one"}
    config_mod.write(home.config_file, data)
    line = one_line(crewlet(home.root, "pages", "eng"))
    assert "ENG" in line and "Eng" in line and "differ only in case" in line
    assert ok_json(crewlet(home.root, "pages", "ENG", "--json"))["total"] > 0      # the exact key still names it
    assert ok_json(crewlet(home.root, "pages", "Eng", "--json"))["total"] == 0
    one_line(crewlet(home.root, "search", "rollback", "--mode", "keyword", "--container", "eng"))


# -- one meaning of `address` -----------------------------------------------------------------------------------

def test_address_is_container_and_title_in_every_json_answer(home):
    shown = ok_json(crewlet(home.root, "page", "show", "ENG/Deploy Runbook", "--json"))
    assert shown["address"] == "ENG/deploy runbook" and shown["title"] == "Deploy Runbook"
    listed = ok_json(crewlet(home.root, "pages", "ENG", "--json"))
    assert all(p["address"].startswith("ENG/") for p in listed["pages"])
    # the address opens the page again
    assert ok_json(crewlet(home.root, "page", "show", shown["address"], "--json"))["id"] == shown["id"]


# -- words in the output -----------------------------------------------------------------------------------------

def test_a_cached_answer_says_what_it_cost_and_that_this_ask_spent_nothing(home):
    with ChatServer() as server:
        server.default = Reply("Roll back first [1].", usage=(900, 30))
        data = config_mod.load(home.config_file).raw
        data["providers"] = dict(data["providers"], llm={"base_url": server.url, "model": "test-model",
                                                          "max_output_tokens": 200, "timeout_s": 10})
        config_mod.write(home.config_file, data)
        first = crewlet(home.root, "ask", "how do we roll back a deploy?")
        again = crewlet(home.root, "ask", "how do we roll back a deploy?")
    assert first.returncode == 0 and again.returncode == 0, (first.stderr, again.stderr)
    assert "900 tokens in, 30 out" in first.stdout and "spent nothing" not in first.stdout
    facts = next(line for line in again.stdout.splitlines() if "900 tokens in" in line)
    assert "nothing spent" not in facts
    cost, spent = facts.index("900 tokens in, 30 out"), facts.index("this ask spent nothing")
    assert cost < spent, facts           # what the answer cost first, then what this ask spent


def test_a_diary_window_past_the_oldest_note_is_one_line(home):
    with Node.open(home) as node:
        ids = [Diary(node).remember(fact, actor="eng-bot").note.id
               for fact in ("The staging cluster needs the VPN", "Deploys freeze on Fridays")]
    res = crewlet(home.root, "diary", "eng-bot", "--before", str(min(ids)))
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, res.stdout
    assert f"no notes before {min(ids)}" in lines[0] and "eng-bot" in lines[0] and "2 in all" in lines[0]


# -- help that is true ----------------------------------------------------------------------------------------

def _help(home: Home, *command: str) -> str:
    res = crewlet(home.root, *command, "--help")
    assert res.returncode == 0, res.stderr
    return " ".join(res.stdout.replace("│", " ").split())


def test_page_create_help_says_how_to_make_a_folder_in_words(home):
    words = _help(home, "page", "create")
    assert "None makes" not in words and "Without it the page is a folder" in words


def test_ask_help_says_no_model_exits_0_as_it_does(home):
    words = _help(home, "ask")
    assert "exit 1: no answer" not in words
    assert re.search(r"Exit 0 with an answer: .*the passages when no model is configured", words), words
    res = crewlet(home.root, "ask", "how do we roll back a deploy?")
    assert res.returncode == 0 and "No model is configured" in res.stdout


def test_sync_join_help_keeps_the_log_table_s_name(home):
    assert "kept in [log] creds" in _help(home, "sync", "join")
