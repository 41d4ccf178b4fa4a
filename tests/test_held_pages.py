"""Pages the provider refused are named, and searches say why they are not ranked by meaning (issue 19, part 6).

Reproduction: `crewlet index status` showed only a count of held pages and the latest refusal event by page
id; a search told a person to wait for the embedding duty for pages the provider had refused (waiting would
not bring them). Now `index status` names each held page by its title (and why, and when it is offered
again), and a search says "held back: the provider refused it"."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import new_home
from embed_server import REFUSE_MARK, EmbedServer
from typer.testing import CliRunner

from core import config as config_mod
from core.duties.roster import default_duties
from core.node import Node
from core.pages.service import KnowledgeBase
from core.duties.runner import DutyRunner
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}


def test_index_status_names_held_pages_by_title_and_search_says_they_are_held_back(tmp_path):
    with EmbedServer(dimensions=16) as server:
        data = config_mod.example_config()
        data["providers"] = {"embeddings": {"provider": "openai", "base_url": server.url, "model": "test-embed",
                                            "dimensions": 16}}
        home = new_home(tmp_path / "home", data)
        with Node.open(home) as node:
            kb = KnowledgeBase(node)
            for i in range(4):
                kb.create_page("ENG", f"Runbook {i}", f"deploy steps {i}\n")
            kb.create_page("ENG", "Too Long For The Model", f"deploy steps {REFUSE_MARK}\n")
            runner = DutyRunner(node, default_duties(node))
            runner.run_until_idle()
            runner.close()

        def cli(*args: str):
            return CliRunner().invoke(app, ["--home", str(home.root), *args], env=ENV)

        res = cli("index", "status")
        assert res.exit_code == 0, res.stderr
        assert "ENG/Too Long For The Model" in res.stdout and "context_length_exceeded" in res.stdout
        meaning = json.loads(cli("index", "status", "--json").stdout)["semantic"]
        assert [h["title"] for h in meaning["held_pages"]] == ["Too Long For The Model"]

        out = json.loads(cli("search", "deploy", "steps", "--json").stdout)
        message = out["outcome"]["message"]
        assert "1 page is held back: the provider refused it" in message
        assert "wait for the embedding duty" not in message
