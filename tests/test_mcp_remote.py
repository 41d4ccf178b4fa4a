"""`crewlet mcp` on a company whose knowledge lives in Confluence (review finding 3): a real MCP client
session spawns the server over stdio, against a Confluence-shaped server on 127.0.0.1.

Reads go to the site (search_knowledge, get_page, resources) inside the read floor, an agent's reads are
knowledge_reads naming the backend their ids are addresses in, and the tools that would write or list
this node's own copy refuse in one line saying where the knowledge lives.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_client import call, connect, crewlet, refused

from core import config as config_mod
from core.node import Node
from core.paths import Home
from tests.remote_servers import ConfluenceServer

pytestmark = pytest.mark.anyio

ENV = {"CF_TOKEN": "company-token"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cf():
    with ConfluenceServer() as server:
        server.user("company-token", "svc")
        server.user("eng-token", "eng")
        server.space("ENG", "Engineering")
        server.space("HR")
        server.space("SKILLS")
        yield server


def cf_company(server: ConfluenceServer, spaces: list[str]) -> dict:
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "confluence", "confluence_spaces": spaces}
    data["integrations"] = {"confluence": {"url": server.url, "token_env": "CF_TOKEN"}}
    return data


@pytest.fixture
def root(tmp_path, cf) -> Path:
    root = tmp_path / "home"
    assert crewlet(root, "init", "--operator", "alex").returncode == 0
    config_mod.write(root / "company.toml", cf_company(cf, ["ENG"]))
    return root


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


# finding 3: get_page over MCP on a Confluence company read this node's (empty) store, not Confluence
async def test_mcp_get_page_reads_a_confluence_hit(root, cf):
    cf.page("ENG", "Deploy Runbook", "<p>To <strong>roll back</strong> a deploy, run the rollback job.</p>")
    async with connect(root, "eng-bot", env=ENV) as client:
        _, out = await call(client, "search_knowledge", query="roll back", mode="keyword")
        hit = out["hits"][0]
        result = await client.call_tool("get_page", {"ref": hit["id"]})
    text = text_of(result)
    assert not result.is_error, text
    assert "rollback job" in text


async def test_get_page_by_id_or_address_says_where_the_page_lives(root, cf):
    ops = cf.page("ENG", "Operations", "<p>ops</p>")
    pid = cf.page("ENG", "Deploy Runbook", '<h2>Steps</h2><p>Roll back with the <strong>rollback</strong> job.</p>',
                  parent=ops)
    async with connect(root, "eng-bot", env=ENV) as client:
        text, page = await call(client, "get_page", ref="ENG/Deploy Runbook")
        _, by_id = await call(client, "get_page", ref=pid)
    assert page["id"] == by_id["id"] == pid and page["title"] == "Deploy Runbook" and page["container"] == "ENG"
    assert page["body"] == "## Steps\n\nRoll back with the **rollback** job.\n"
    assert page["ancestors"] == ["Operations"] and page["backend"] == "confluence"
    assert page["url"].startswith(cf.url + "/spaces/ENG/pages/") and page["link"] == f"[Deploy Runbook]({page['url']})"
    assert text.startswith("# Deploy Runbook") and "ENG › Operations › Deploy Runbook" in text
    assert f"lives in Confluence at {cf.url}" in text and "save_page" not in text


async def test_get_page_stays_inside_the_read_floor(root, cf):
    secret = cf.page("HR", "Salaries", "<p>everyone's pay</p>")
    skill = cf.page("SKILLS", "Rotate keys", "<p>trigger: rotate</p>")
    async with connect(root, "eng-bot", env=ENV) as client:
        for ref in (secret, skill, "HR/Salaries"):
            text, data = await refused(client, "get_page", ref=ref)
            assert text.startswith(f"no page {ref}") and data["error"] == "not_found", text
            assert "pay" not in text


# finding 3b: write_page on a Confluence company "succeeded" into this node's local store, which no search reads
async def test_mcp_write_page_on_a_confluence_company_is_not_lost(root, cf):
    async with connect(root, "eng-bot", env=ENV) as client:
        wrote = await client.call_tool("write_page", {"container": "ENG", "title": "Incident 42",
                                                      "body": "the database failed over at 03:12"})
        _, found = await call(client, "search_knowledge", query="failed over", mode="keyword")
    assert wrote.is_error or [h["title"] for h in found["hits"]] == ["Incident 42"], (wrote, found)


async def test_the_write_tools_and_list_pages_refuse_in_one_line_saying_where_the_knowledge_lives(root, cf):
    pid = cf.page("ENG", "Deploy Runbook", "<p>roll back</p>")
    async with connect(root, "eng-bot", env=ENV) as client:
        for tool, args in (("write_page", {"container": "ENG", "title": "Incident 42", "body": "x"}),
                           ("save_page", {"ref": pid, "body": "x", "base_revision": 1}),
                           ("comment_on_page", {"ref": pid, "text": "stale?"})):
            text, data = await refused(client, tool, **args)
            assert f"this company's knowledge lives in Confluence at {cf.url}" in text, text
            assert "write it there" in text and data["error"] == "knowledge_elsewhere"
            assert data["backend"] == "confluence" and data["url"] == cf.url
            assert "`" not in text and "import" not in text         # no CLI command in a model's words
        for args in ({"container": "ENG"}, {}):
            text, data = await refused(client, "list_pages", **args)
            assert f"lives in Confluence at {cf.url}" in text and data["error"] == "knowledge_elsewhere"
            assert "search_knowledge" in text and "get_page" in text and "`" not in text
        listed = await client.list_resources()
        assert listed.resources == []
    with Node.open(Home(root)) as node:
        assert node.conn.execute("SELECT count(*) FROM pages").fetchone()[0] == 0
        assert node.conn.execute("SELECT count(*) FROM comments").fetchone()[0] == 0


async def test_a_page_resource_is_read_from_the_site(root, cf):
    pid = cf.page("ENG", "Deploy Runbook", "<p>run the <em>rollback</em> job</p>")
    secret = cf.page("HR", "Salaries", "<p>pay</p>")
    async with connect(root, "eng-bot", env=ENV) as client:
        read = await client.read_resource(f"crewlet://pages/{pid}")
        assert "run the *rollback* job" in read.contents[0].text
        with pytest.raises(Exception, match="no page"):
            await client.read_resource(f"crewlet://pages/{secret}")


async def test_an_agents_remote_reads_are_knowledge_reads_naming_the_backend(root, cf):
    runbook = cf.page("ENG", "Deploy Runbook", "<p>roll back a deploy</p>")
    checklist = cf.page("ENG", "Deploy Checklist", "<p>before you deploy, know how to roll back</p>")
    async with connect(root, "alex", env=ENV) as client:              # a person's reads are not knowledge_reads
        await call(client, "search_knowledge", query="roll back", mode="keyword")
        await call(client, "get_page", ref=runbook)
    async with connect(root, "eng-bot", env=ENV) as client:
        _, found = await call(client, "search_knowledge", query="roll back", mode="keyword")
        await call(client, "get_page", ref=runbook)
        _, none = await call(client, "search_knowledge", query="zebra", mode="keyword")
        await refused(client, "get_page", ref="999999")
    assert none["hits"] == []
    with Node.open(Home(root)) as node:
        rows = node.conn.execute("SELECT actor, via, query, pages, backend FROM knowledge_reads ORDER BY at").fetchall()
    assert [(r["actor"], r["via"], r["backend"]) for r in rows] == [("eng-bot", "search", "confluence"),
                                                                     ("eng-bot", "get_page", "confluence")]
    searched, got = (json.loads(r["pages"]) for r in rows)
    assert [p["id"] for p in searched] == [h["id"] for h in found["hits"]] and {runbook, checklist} == {
        p["id"] for p in searched}
    assert [p["rank"] for p in searched] == [1, 2] and rows[0]["query"] == "roll back"
    assert got == [{"id": runbook, "container": "ENG", "title": "Deploy Runbook", "rank": 1}]
