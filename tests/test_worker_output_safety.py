"""An embedding endpoint's error text reaches no terminal raw (issue 19, part 6).

Reproduction: `crewlet worker --once` wrote an endpoint's error message — ESC sequences, an OSC 52 (set the
clipboard), BEL — straight to stderr whenever stderr was not a terminal: the engine's warning went through
Python's last-resort log handler, not the one sanitiser. Now every warning the engine logs is said through
it, terminal or not."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import new_home
from embed_server import EmbedServer

from core import config as config_mod
from core.node import Node
from core.pages.service import KnowledgeBase

ROOT = Path(__file__).resolve().parent.parent
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_an_endpoint_s_hostile_error_text_is_made_inert_on_stderr_when_it_is_not_a_terminal(tmp_path):
    with EmbedServer(dimensions=16) as server:
        data = config_mod.example_config()
        data["providers"] = {"embeddings": {"provider": "openai", "base_url": server.url, "model": "test-embed",
                                            "dimensions": 16}}
        home = new_home(tmp_path / "home", data)
        with Node.open(home) as node:
            KnowledgeBase(node).create_page("ENG", "Page", "text to embed")
        server.mode = "hostile_error"
        res = subprocess.run([sys.executable, "-m", "crewlet_tui.cli", "--home", str(home.root), "worker", "--once"],
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert "upstream" in res.stderr and "broke" in res.stderr        # the error is said …
    assert not RAW.findall(res.stderr), [hex(ord(c)) for c in RAW.findall(res.stderr)]   # … inert
    assert not RAW.findall(res.stdout)
    assert "\u241b" in res.stderr                                       # ESC shown as ␛
