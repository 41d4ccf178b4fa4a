"""recall_knowledge (spec 003, "What agents get"): the entries and pages that answer a question, each entry with its
trust tier (read at serve time, against a real git repository) and its page, grounded and verified first; with a
chat model served over real HTTP on 127.0.0.1 (tests/chat_server.py), an answer citing them [n] as `crewlet ask`
writes one; every serve recorded. Through the core function and through a real MCP client session spawning
`crewlet mcp` (tests/mcp_client.py)."""
from __future__ import annotations

import pytest
from chat_server import ChatServer, Reply
from conftest import config_with, new_home
from mcp_client import call, connect, refused
from test_ask import with_llm
from test_repos_support import GitRepo, numbered

from core.ask.recall import recall
from core.bank.entries import EntryBank
from core.bank.trust import GROUNDED, HUMAN_VERIFIED, UNGROUNDED
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search.indexer import Indexer

QUESTION = "How long does the session cache hold an entry?"


def build(tmp_path) -> tuple[Home, GitRepo, dict[str, str]]:
    """A home whose [repositories.server] is a real git checkout, a page and four entries on the session cache:
    one verified, one grounded (accepted, its citation held), one standing with no citation (ungrounded), one an
    agent's still proposed — and a page that mentions the cache."""
    g = GitRepo(tmp_path / "server")
    g.write("src/cache.py", "TTL_SECONDS = 600\n" + numbered(9))
    sha = g.commit("first")
    home = new_home(tmp_path / "home", config_with(repositories={"server": {"path": str(g.path)}}))
    cite = {"repository": "server", "path": "src/cache.py", "lines": [1, 1], "commit": sha, "quote": "TTL_SECONDS"}
    with Node.open(home) as node, EntryBank(node) as bank:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Caching", "The session cache sits in front of the database.", actor="alex").id
        ids = {"page": page}
        # written first, so the search ranks it no better than the others: only its tier puts it first
        ids["ungrounded"] = bank.add(page, "The session cache holds an entry until the process restarts.",
                                     actor="alex").id
        grounded = bank.add(page, "The session cache holds an entry for ten minutes.", citations=[cite],
                            distinct=True, actor="eng-bot")
        bank.accept(grounded.id, actor="alex")
        ids["grounded"] = grounded.id
        verified = bank.add(page, "The session cache is shared by every worker process of a node.", distinct=True,
                            actor="alex")
        bank.verify(verified.id, actor="alex")
        ids["verified"] = verified.id
        ids["proposed"] = bank.add(page, "The session cache holds an entry for an hour on staging.", distinct=True,
                                   actor="eng-bot").id
    with Indexer(home) as ix:
        ix.run_pass()
    return home, g, ids


def test_an_agent_recalls_entries_with_tiers_grounded_and_verified_first_and_the_serve_is_recorded(tmp_path):
    home, g, ids = build(tmp_path)
    with Node.open(home) as node:
        found = recall(node, QUESTION, "eng-bot")
        kinds = [(r.entry.id if r.entry else "page", r.entry.tier if r.entry else None) for r in found.found]
        tiers = [t for _, t in kinds if t is not None]
        # the trusted ones first, then the rest in the search's order; an agent never sees the proposed entry
        assert tiers[:2] and set(tiers[:2]) == {HUMAN_VERIFIED, GROUNDED}
        assert ids["proposed"] not in [k for k, _ in kinds]
        assert (ids["ungrounded"], UNGROUNDED) in kinds and ("page", None) in kinds
        # the search ranks grounded, ungrounded, the page, verified (its words are further from the question's):
        # the verified entry is moved up past the ungrounded entry and the page, which keep their order
        assert [k for k, _ in kinds] == [ids["grounded"], ids["verified"], ids["ungrounded"], "page"]
        grounded = next(r for r in found.found if r.entry and r.entry.id == ids["grounded"])
        assert grounded.hit.where() == "entry under ENG/Caching" and grounded.entry.page == "ENG/Caching"
        assert grounded.entry.citations[0].said(grounded.entry.citations[0].checked_at or 0).startswith("held")
        text = found.to_text()
        assert "No model is configured" in text and f"GROUNDED · FACT entry under ENG/Caching (entry {ids['grounded']}" in text
        assert "citation 1: held, checked" in text
        served = [tuple(r) for r in node.conn.execute(
            "SELECT entry_id, actor, via, rank FROM entry_serves ORDER BY rank")]
        entries_given = [r.entry.id for r in found.found if r.entry]
        assert served == [(e, "eng-bot", "recall_knowledge", i) for i, e in enumerate(entries_given, 1)]


def test_a_cited_file_changed_at_the_head_serves_the_entry_as_ungrounded(tmp_path):
    home, g, ids = build(tmp_path)
    g.write("src/cache.py", "TTL_SECONDS = 300\n" + numbered(9))
    g.commit("shorter")
    with Node.open(home) as node:
        found = recall(node, QUESTION, "eng-bot")
    r = next(r for r in found.found if r.entry and r.entry.id == ids["grounded"])
    assert r.entry.tier == UNGROUNDED and r.entry.citations[0].changed_since
    assert "the file changed since" in r.line()


def test_a_person_sees_the_proposed_entry_too(tmp_path):
    home, g, ids = build(tmp_path)
    with Node.open(home) as node:
        found = recall(node, QUESTION, "alex")
    assert ids["proposed"] in [r.entry.id for r in found.found if r.entry]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


@pytest.mark.anyio
async def test_over_mcp_an_agent_gets_an_answer_citing_the_entries_written_by_the_chat_model(tmp_path, server):
    home, g, ids = build(tmp_path)
    with_llm(home, base_url=server.url, model="test-model", max_output_tokens=200, timeout_s=10)
    server.default = Reply("An entry stays ten minutes [1]; the cache is shared by the workers [2].")
    async with connect(home.root, "eng-bot") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools["recall_knowledge"].input_schema["properties"]) == {"question"}
        text, data = await call(client, "recall_knowledge", question=QUESTION)
        empty, _ = await refused(client, "recall_knowledge", question="   ")
    assert "empty" in empty
    answer = data["answer"]
    assert answer["status"] == "answered" and answer["checked"] is True and answer["citations"]["cited"] == [1, 2]
    assert text.startswith("An entry stays ten minutes [1]")
    # what the model was sent: the trusted entries first, each an entry's whole body as its source
    sent = server.bodies[0]["messages"][1]["content"]
    first, second = answer["sources"][0], answer["sources"][1]
    assert {first["entry_id"], second["entry_id"]} == {ids["grounded"], ids["verified"]}
    assert "[1] an entry under ENG/Caching" in sent and "The session cache holds an entry for ten minutes." in sent
    assert "an hour on staging" not in sent                      # the proposed entry is never an agent's
    found = data["found"]
    assert [f["source"] for f in found[:2]] == [1, 2] and {f["tier"] for f in found[:2]} == {GROUNDED, HUMAN_VERIFIED}
    with Node.open(home) as node:
        vias = {r[0] for r in node.conn.execute("SELECT via FROM entry_serves WHERE actor = 'eng-bot'")}
    assert vias == {"recall_knowledge"}


@pytest.mark.anyio
async def test_over_mcp_a_model_that_fails_is_an_answer_with_its_reason_and_the_entries(tmp_path, server):
    home, g, ids = build(tmp_path)
    with_llm(home, base_url=server.url, model="test-model", max_output_tokens=200, timeout_s=10)
    server.default = Reply(status=500)
    async with connect(home.root, "alex") as client:
        text, data = await call(client, "recall_knowledge", question=QUESTION)
    assert data["answer"]["status"] == "failed" and data["found"]
    assert "grounded and verified entries first" in text and ids["verified"] in text
