"""An agent's own memory over MCP: remember / recall_memory / forget and onboarding_status / mark_onboarded,
each through a real MCP client session from the SDK that spawns `crewlet mcp` over stdio
(tests/mcp_client.py). Nothing here calls the server's functions behind the protocol; notes that only
set a scene are written through the engine's Diary, as another session of the agent would have."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from embed_server import EmbedServer
from mcp_client import call, connect, crewlet, crewlet_json, refused

from core import config as config_mod
from core.agents.diary import Diary
from core.mcp.tools import TOOLS
from core.node import Node
from core.paths import Home

pytestmark = pytest.mark.anyio

# who is offered what, as the registry says it
KNOWLEDGE_APP = {t.name for t in TOOLS if t.audience == "anyone"}
PERSON_ONLY = {t.name for t in TOOLS if t.audience == "person"}
AGENT_ONLY = {t.name for t in TOOLS if t.audience == "agent"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example_home(tmp_path_factory) -> Home:
    """The bundled example (its HOME, ENG, LEAD and PROD Onboarding pages) with a second agent, ops-bot, whose
    space OPS has no Onboarding page; indexed and embedded once for the module (tests copy it)."""
    root = tmp_path_factory.mktemp("diary") / "example"
    assert crewlet(root, "init", "--example").returncode == 0
    edit_actor(Home(root), "ops-bot", kind="agent", space="OPS")
    res = crewlet(root, "worker", "--once")
    assert res.returncode == 0, res.stderr
    return Home(root)


@pytest.fixture
def home(example_home, tmp_path) -> Home:
    root = tmp_path / "home"
    subprocess.run(["cp", "-a", str(example_home.root), str(root)], check=True)
    return Home(root)


def edit_actor(home: Home, handle: str, **fields) -> None:
    data = config_mod.load(home.config_file).raw
    data.setdefault("actors", {}).setdefault(handle, {}).update(fields)
    config_mod.write(home.config_file, data)


def edit_embeddings(home: Home, table: dict) -> None:
    data = config_mod.load(home.config_file).raw
    data["providers"] = {"embeddings": table}
    config_mod.write(home.config_file, data)


def seed(home: Home, agent: str, texts: list[str]) -> list[int]:
    with Node.open(home) as node:
        diary = Diary(node)
        return [diary.remember(t, actor=agent).note.id for t in texts]


# -- the tools offered ----------------------------------------------------------------------------------------

async def test_the_memory_tools_are_an_agent_s_and_described_for_a_model(home):
    async with connect(home.root, "alex") as client:
        assert {t.name for t in (await client.list_tools()).tools} == KNOWLEDGE_APP | PERSON_ONLY  # no diary
    async with connect(home.root, "eng-bot") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("recall_memory", {"query": "x", "agent": "ops-bot"})
    assert set(tools) == KNOWLEDGE_APP | AGENT_ONLY
    assert {"remember", "recall_memory", "forget", "onboarding_status", "mark_onboarded"} <= AGENT_ONLY
    for name in AGENT_ONLY:
        t = tools[name]
        assert len(t.description) > 150 and "Returns" in t.description and "Use it" in t.description, name
        for prop, schema in t.input_schema.get("properties", {}).items():
            assert len(schema.get("description", "")) > 20, (name, prop)
        assert "agent" not in t.input_schema.get("properties", {}), name      # always the caller's own
    assert tools["recall_memory"].annotations.read_only_hint and not tools["remember"].annotations.read_only_hint
    assert result.is_error and "'agent'" in result.content[0].text             # no way to name another agent


# -- the diary ----------------------------------------------------------------------------------------------------

async def test_two_agents_remember_and_recall_and_never_see_each_other_s_notes(home):
    async with connect(home.root, "eng-bot") as eng, connect(home.root, "ops-bot") as ops:
        _, mine = await call(eng, "remember", fact="The ENG staging cluster needs the VPN before kubectl works")
        _, theirs = await call(ops, "remember", fact="The OPS pager rotates every Monday at 09:00 UTC")
        assert mine["embedded"] and theirs["embedded"]
        text, got = await call(eng, "recall_memory", query="what does the pager rotation look like", limit=100)
        assert [n["id"] for n in got["notes"]] == [mine["note"]["id"]] and "pager" not in text.lower().split("1.")[1]
        _, got = await call(ops, "recall_memory", query="kubectl staging VPN", limit=100)
        assert [n["id"] for n in got["notes"]] == [theirs["note"]["id"]]
        # forgetting another's note is answered as a missing one, and leaves it where it is
        line, data = await refused(eng, "forget", note_id=theirs["note"]["id"])
        assert data["error"] == "note_not_found" and f"no note {theirs['note']['id']} in eng-bot's diary" in line
        _, got = await call(ops, "recall_memory", query="pager", limit=100)
        assert len(got["notes"]) == 1
        text, gone = await call(eng, "forget", note_id=mine["note"]["id"])
        assert gone["forgotten"]["id"] == mine["note"]["id"] and "Forgot note" in text
        _, got = await call(eng, "recall_memory", query="VPN")
        assert got["notes"] == [] and "empty" in got["message"]
    # a person reads any agent's diary; an agent is refused another's
    assert [n["text"] for n in crewlet_json(home.root, "diary", "ops-bot")["notes"]] == [theirs["note"]["text"]]
    res = crewlet(home.root, "diary", "ops-bot", actor="eng-bot")
    assert res.returncode == 1 and "only its own diary" in res.stderr and "pager" not in res.stdout


async def test_the_union_of_the_two_halves_is_at_most_100(home):
    seed(home, "eng-bot", [f"Service {i} keeps its logs for {i % 9 + 1} days and alerts in channel ops-{i % 5}"
                           for i in range(150)])
    async with connect(home.root, "eng-bot") as client:
        text, got = await call(client, "recall_memory", query="how long are logs kept", limit=100)
        default_text, default = await call(client, "recall_memory", query="how long are logs kept")
    ids = [n["id"] for n in got["notes"]]
    assert got["by_meaning"] == 50 and got["by_recency"] == 50 and got["total"] == 150
    assert 50 < got["union"] <= 100 and len(ids) == got["union"] == len(set(ids))
    assert {v for n in got["notes"] for v in n["via"]} == {"meaning", "recent"}
    assert all(n["age"] and n["age_s"] >= 0 for n in got["notes"])
    assert len(default["notes"]) == 30 and f"30 of {got['union']} notes" in default_text
    assert [n["id"] for n in default["notes"]] == ids[:30]


async def test_recent_notes_surface_for_a_query_they_do_not_match(home):
    topical = [f"Deploying the payments service step {i}: roll out one zone at a time and watch the error rate"
               for i in range(60)]
    seed(home, "eng-bot", topical)
    rules = seed(home, "eng-bot", ["Always post in the #ops channel before touching production",
                                   "Lunch orders for the team go through the office manager"])
    async with connect(home.root, "eng-bot") as client:
        text, got = await call(client, "recall_memory", query="rolling out the payments deploy")
    by_id = {n["id"]: n for n in got["notes"]}
    for rule in rules:
        assert rule in by_id, "a recent rule that does not match the query was left out"
        assert by_id[rule]["via"] == ["recent"]                  # the meaning half did not find it
    # the meaning half leads, and the recent notes it missed take every other place
    assert got["notes"][0]["via"][0] == "meaning" and by_id[rules[1]]["rank"] == 2
    assert "Always post in the #ops channel" in text


async def test_without_an_embeddings_provider_the_diary_still_writes_and_recalls_by_recency(home):
    edit_embeddings(home, {"provider": "none"})
    async with connect(home.root, "eng-bot") as client:
        text, done = await call(client, "remember", fact="Releases are tagged from the main branch only")
        assert not done["embedded"] and "not embedded yet" in text and 'provider = "none"' in text
        await call(client, "remember", fact="The staging database is reset every night")
        text, got = await call(client, "recall_memory", query="how are releases tagged")
    assert got["mode"] == "recency" and got["degraded"] == "no_provider"
    assert "recency alone" in text and "no embeddings provider" in text
    assert [n["via"] for n in got["notes"]] == [["recent"], ["recent"]]
    assert all(n["similarity"] is None for n in got["notes"])


async def test_after_a_model_change_recall_says_so_and_the_fill_duty_embeds_every_note_again(home):
    with EmbedServer(dimensions=16) as server:
        table = {"provider": "openai", "base_url": server.url, "model": "model-one", "dimensions": 16}
        edit_embeddings(home, table)
        async with connect(home.root, "eng-bot") as client:
            for fact in ("The build cache lives on the shared runner", "Flaky tests are quarantined, never skipped",
                         "Database migrations run before the app starts"):
                _, done = await call(client, "remember", fact=fact)
                assert done["embedded"]
        edit_embeddings(home, table | {"model": "model-two"})
        async with connect(home.root, "eng-bot") as client:
            text, before = await call(client, "recall_memory", query="where is the build cache")
            assert before["degraded"] == "partly_embedded" and before["embedded"] == 0
            assert "3 of 3 notes are not embedded under the current model yet" in text
            server.batches.clear()
            res = crewlet(home.root, "worker", "--once")
            assert res.returncode == 0, res.stderr
            assert "diary-fill" in res.stdout + res.stderr
            filled = sorted(t for batch in server.batches for t in batch if t.startswith(("The build", "Flaky",
                                                                                          "Database migrations")))
            assert len(filled) == 3
            text, after = await call(client, "recall_memory", query="where is the build cache")
    assert after["mode"] == "hybrid" and not after["degraded"] and after["embedded"] == 3
    assert all(n["similarity"] is not None for n in after["notes"])
    assert crewlet_json(home.root, "agents")[0]["diary_embedded"] == 3


@pytest.mark.parametrize("fact", [
    "The CI deploy user is AKIAIOSFODNN7EXAMPLE",
    "Pushes use github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "Auth header was eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJ",
    "The mirror token=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg== still works",
    "-----BEGIN RSA PRIVATE KEY----- is the deploy key's first line",
])
async def test_a_note_that_looks_like_a_credential_is_refused_and_nothing_is_kept(home, fact):
    async with connect(home.root, "eng-bot") as client:
        line, data = await refused(client, "remember", fact=fact)
        _, got = await call(client, "recall_memory", query="")
    assert data["error"] == "note_credential" and "looks like it holds a credential" in line
    assert max(fact.split(), key=len) not in line
    assert got["total"] == 0


async def test_an_empty_a_long_and_a_listed_note_are_refused_naming_why(home):
    async with connect(home.root, "eng-bot") as client:
        assert (await refused(client, "remember", fact="   "))[1]["error"] == "note_empty"
        assert (await refused(client, "remember", fact="word " * 200))[1]["error"] == "note_too_long"
        assert (await refused(client, "remember", fact="- one\n- two"))[1]["error"] == "note_is_list"


# -- onboarding -----------------------------------------------------------------------------------------------------

async def test_onboarding_names_the_pages_root_first_and_moving_the_agent_asks_again(home):
    async with connect(home.root, "eng-bot") as client:
        text, st = await call(client, "onboarding_status")
        assert st["state"] == "to_read" and st["chain"] == ["HOME", "ENG"]
        assert [(p["space"], p["title"]) for p in st["to_read"]] == [("HOME", "Onboarding"), ("ENG", "Onboarding")]
        assert text.index("HOME/Onboarding") < text.index("ENG/Onboarding")
        for p in st["to_read"]:
            await call(client, "get_page", ref=p["id"])
        text, marked = await call(client, "mark_onboarded")
        assert marked["state"] == "onboarded"
        _, st = await call(client, "onboarding_status")
        assert st["state"] == "onboarded" and st["to_read"] == []
        assert crewlet_json(home.root, "agents")[0]["onboarding"] == "onboarded"
        edit_actor(home, "eng-bot", space="PROD")              # the agent moves to another space
        text, st = await call(client, "onboarding_status")
    assert st["state"] == "to_read" and st["stale_marker"] and st["chain"] == ["HOME", "PROD"]
    assert [(p["space"], p["title"]) for p in st["to_read"]] == [("HOME", "Onboarding"), ("PROD", "Onboarding")]
    assert "changed since you were marked" in text
    line = {a["agent"]: a for a in crewlet_json(home.root, "agents")}["eng-bot"]
    assert line["onboarding"] in ("to_read", "onboarding_elsewhere") and line["stale_marker"]


async def test_a_new_onboarding_page_in_the_chain_asks_again_and_an_edit_does_not(home):
    async with connect(home.root, "ops-bot") as client:
        _, st = await call(client, "onboarding_status")
        assert [(p["space"]) for p in st["to_read"]] == ["HOME"] and st["chain"] == ["HOME", "OPS"]
        await call(client, "mark_onboarded")
        # a person edits the root's Onboarding page: upkeep, not a new chain
        page = crewlet_json(home.root, "page", "show", "HOME/Onboarding")
        body = home.root / "body.md"
        body.write_text(page["body"] + "\n\nOne more paragraph.\n")
        assert crewlet(home.root, "page", "save", "HOME/Onboarding", "--body-file", str(body), "--base-rev",
                       str(page["revision"])).returncode == 0
        _, st = await call(client, "onboarding_status")
        assert st["state"] == "onboarded"
        # a person publishes an Onboarding page in OPS: the chain has a new page
        body.write_text("# Onboarding\n\nOPS runs the pager.\n")
        assert crewlet(home.root, "page", "create", "OPS", "Onboarding", "--body-file", str(body)).returncode == 0
        _, st = await call(client, "onboarding_status")
    assert st["state"] == "to_read" and st["stale_marker"]
    assert [p["space"] for p in st["to_read"]] == ["HOME", "OPS"]


async def test_the_pass_lease_stops_two_sessions_onboarding_one_agent_at_once(home):
    async with connect(home.root, "eng-bot") as first, connect(home.root, "eng-bot") as second:
        _, st = await call(first, "onboarding_status")
        assert st["state"] == "to_read" and st["lease_holder"] == "this session"
        text, other = await call(second, "onboarding_status")
        assert other["state"] == "onboarding_elsewhere" and other["to_read"] == []
        assert "Another session is onboarding eng-bot" in text and "crewlet mcp as eng-bot" in text
        line, data = await refused(second, "mark_onboarded")
        assert data["error"] == "onboarding_elsewhere"
        await call(first, "mark_onboarded")
        _, st = await call(second, "onboarding_status")
        assert st["state"] == "onboarded"


async def test_a_session_that_ends_without_marking_frees_the_pass(home):
    async with connect(home.root, "eng-bot") as first:
        _, st = await call(first, "onboarding_status")
        assert st["state"] == "to_read"
    async with connect(home.root, "eng-bot") as second:
        _, st = await call(second, "onboarding_status")
    assert st["state"] == "to_read" and st["lease_holder"] == "this session"


async def test_marking_after_the_chain_changed_under_the_reading_is_refused(home):
    async with connect(home.root, "eng-bot") as client:
        await call(client, "onboarding_status")
        edit_actor(home, "eng-bot", space="LEAD")
        line, data = await refused(client, "mark_onboarded")
        assert data["error"] == "chain_changed" and "call onboarding_status again" in line
        _, st = await call(client, "onboarding_status")
        assert [p["space"] for p in st["to_read"]] == ["HOME", "LEAD"]
        _, done = await call(client, "mark_onboarded")
    assert done["state"] == "onboarded"
