"""A snippet never changes what a command says: `<previous version>` in the example Rollback page's
command is a placeholder, not an HTML tag, and `search` (its process) and `search_knowledge` (a real MCP
client) show it as the page does. Only a tag naming an HTML element is markup."""
from __future__ import annotations

import json

import pytest
from mcp_client import call, connect, crewlet

from core.text.markdown import plain_text

pytestmark = pytest.mark.anyio

COMMAND = "nimbus deploy --env production --version <previous version>"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    root = tmp_path_factory.mktemp("angles") / "home"
    assert crewlet(root, "init", "--example").returncode == 0
    return root


@pytest.mark.parametrize("body, kept", [
    ("```\nnimbus deploy --version <previous version>\n```", "--version <previous version>"),
    ("Run `cp <src> <dst>` first.", "cp <src> <dst>"),
    ("A `<div>` in code is what the listing says.", "<div> in code"),
    ("Outside code a placeholder <previous version> is text too.", "placeholder <previous version> is"),
    ("Generics: List<String> and Map<K, V>.", "List<String> and Map<K, V>."),
])
def test_angle_brackets_that_are_not_html_are_text(body, kept):
    assert kept in plain_text(body)


def test_real_html_tags_are_still_markup():
    assert plain_text('A <b>bold</b> <span class="x">word</span><br/> here') == "A bold word here"


def test_cli_search_snippet_keeps_the_placeholder(example):
    res = crewlet(example, "search", "rollback previous version", "--json")
    assert res.returncode == 0, res.stderr
    hits = {h["title"]: h for h in json.loads(res.stdout)["hits"]}
    assert COMMAND in hits["Rollback"]["snippet"]


async def test_search_knowledge_snippet_keeps_the_placeholder(example):
    async with connect(example, "eng-bot") as client:
        text, data = await call(client, "search_knowledge", query="rollback previous version")
    assert COMMAND in text, text
