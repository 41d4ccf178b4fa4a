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
from mcp_client import call, connect, crewlet, crewlet_json, refused

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
        server.space("HOME", "Company")
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
    assert page["address"] == "ENG/Deploy Runbook"              # as get_page opens it again
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
    # refused in one line saying where to write: nothing "succeeds" into a local store no search reads
    assert wrote.is_error, wrote
    text = wrote.content[0].text
    assert "lives in Confluence" in text and "write it there" in text, text


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


# -- an agent's own memory on a remote company (main's h-diary) -------------------------------------------------
# The diary is this node's own (agent_diary rows, never on a log, never on the site): it works wherever the
# knowledge lives. Onboarding reads the Onboarding pages where the knowledge lives — here, on the site — so an
# agent is never told "nothing to read" because this node keeps no copy of them.

async def test_an_agents_diary_works_on_a_remote_company_and_stays_on_this_node(root, cf):
    async with connect(root, "eng-bot", env=ENV) as client:
        _, kept = await call(client, "remember", fact="Deploys to staging need the VPN on first")
        await call(client, "remember", fact="The rollback job takes about ten minutes")
        text, got = await call(client, "recall_memory", query="deploying to staging")
        assert {n["text"] for n in got["notes"]} == {"Deploys to staging need the VPN on first",
                                                      "The rollback job takes about ten minutes"}
        _, gone = await call(client, "forget", note_id=kept["note"]["id"])
        _, after = await call(client, "recall_memory", query="")
    assert gone["forgotten"]["id"] == kept["note"]["id"]
    assert [n["text"] for n in after["notes"]] == ["The rollback job takes about ten minutes"]
    assert cf.writes() == []                                  # nothing of a diary reaches the site
    with Node.open(Home(root)) as node:
        assert node.conn.execute("SELECT count(*) FROM agent_diary WHERE agent = 'eng-bot'").fetchone()[0] == 1
        assert node.conn.execute("SELECT count(*) FROM knowledge_reads").fetchone()[0] == 0


async def test_onboarding_reads_the_chain_s_onboarding_pages_from_the_site(root, cf):
    config_mod.write(root / "company.toml", cf_company(cf, ["HOME", "ENG"]))
    home_page = cf.page("HOME", "Onboarding", "<p>what is true of the whole company</p>")
    eng_page = cf.page("ENG", "Onboarding", "<p>how ENG ships</p>")
    cf.page("HR", "Onboarding", "<p>pay day</p>")                        # outside the read floor
    async with connect(root, "eng-bot", env=ENV) as client:
        text, st = await call(client, "onboarding_status")
        assert st["state"] == "to_read" and st["chain"] == ["HOME", "ENG"], text
        assert [(p["space"], p["id"]) for p in st["to_read"]] == [("HOME", home_page), ("ENG", eng_page)]
        assert text.index(f"HOME/Onboarding (id {home_page})") < text.index(f"ENG/Onboarding (id {eng_page})")
        for p in st["to_read"]:                                           # the ids it names open on the site
            _, page = await call(client, "get_page", ref=p["id"])
            assert page["backend"] == "confluence"
        _, marked = await call(client, "mark_onboarded")
        assert marked["state"] == "onboarded"
        _, st = await call(client, "onboarding_status")
        assert st["state"] == "onboarded"
        assert crewlet_json(root, "agents", env=ENV)[0]["onboarding"] == "onboarded"   # the overview reads the site
        cf.page("ENG", "Onboarding 2", "<p>not the page</p>")
        data = cf_company(cf, ["HOME", "ENG", "HR"])
        data["actors"]["eng-bot"]["space"] = "HR"                        # moved: HR's page is in the floor now
        config_mod.write(root / "company.toml", data)
        _, st = await call(client, "onboarding_status")
    assert st["state"] == "to_read" and st["stale_marker"] and st["chain"] == ["HOME", "HR"]
    assert [p["space"] for p in st["to_read"]] == ["HOME", "HR"]
    with Node.open(Home(root)) as node:              # finding the pages is not reading them: two get_page reads
        reads = node.conn.execute("SELECT via FROM knowledge_reads").fetchall()
    assert [r["via"] for r in reads] == ["get_page", "get_page"]


async def test_onboarding_on_a_site_that_cannot_be_read_refuses_rather_than_says_nothing_to_read(root, cf):
    cf.page("HOME", "Onboarding", "<p>welcome</p>")
    async with connect(root, "eng-bot", env={"CF_TOKEN": ""}) as client:       # no credential to read the site
        text, data = await refused(client, "onboarding_status")
    assert "no credential" in text and data["error"] != "nothing_to_read"
    res = crewlet(root, "agents")                   # and the agents' overview says so in one line
    assert res.returncode == 1 and "no credential" in res.stderr and len(res.stderr.strip().splitlines()) == 1
