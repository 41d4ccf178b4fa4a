"""answer_knowledge over MCP: a person's assistant asks through a real MCP client session from the SDK that spawns
`crewlet mcp` over stdio (tests/mcp_client.py), and the answer is written by a real OpenAI-compatible chat server
on 127.0.0.1 (tests/chat_server.py) that the server process reaches over HTTP. Nothing here calls the server's
functions behind the protocol: what the model was sent is read from the chat server, what was spent from the
ledger on disk."""
from __future__ import annotations

import pytest
from chat_server import ChatServer, Reply
from conftest import new_home
from mcp_client import call, connect, refused
from test_ask import populate, sources_sent, with_llm

from core.ask.prompt import INSTRUCTION
from core.ask.spend import Ledger
from core.paths import Home

pytestmark = pytest.mark.anyio

QUESTION = "How do we roll back a deploy?"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


@pytest.fixture
def home(tmp_path, server) -> Home:
    h = new_home(tmp_path / "home")
    populate(h)
    with_llm(h, base_url=server.url, model="test-model", max_output_tokens=200, timeout_s=10)
    return h


def spent_by(home: Home) -> dict[str, int]:
    """Tokens recorded on the company's ledger, by the actor they were spent for."""
    out: dict[str, int] = {}
    for e in Ledger(home.log_dir).events(0):
        if e["kind"] == "spent":
            out[e["actor"]] = out.get(e["actor"], 0) + e["in"] + e["out"]
    return out


async def test_a_person_is_offered_answer_knowledge_and_an_agent_is_not(home, server):
    async with connect(home.root, "alex") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        instructions = client.instructions or ""
    tool = tools["answer_knowledge"]
    assert "Returns" in tool.description and "Use it" in tool.description and "[n]" in tool.description
    assert set(tool.input_schema["properties"]) == {"question", "container", "fresh"}
    assert tool.annotations.read_only_hint is False           # it spends the company's tokens
    assert "answer_knowledge" in instructions
    async with connect(home.root, "eng-bot") as client:
        assert "answer_knowledge" not in {t.name for t in (await client.list_tools()).tools}
        text, data = await refused(client, "answer_knowledge", question=QUESTION)
    assert data["error"] == "unknown_tool" and "answer_knowledge" not in text.split("names the tools:")[1]
    assert server.requests == 0 and spent_by(home) == {}      # an agent's call reached no model


async def test_a_persons_question_is_answered_from_the_sources_cited_checked_cached_and_charged(home, server):
    server.default = Reply("Roll back first with `nimbus rollback --to previous` [1]. Anyone on call may [2].")
    async with connect(home.root, "alex") as client:
        text, data = await call(client, "answer_knowledge", question=QUESTION, container="ENG")
        again_text, again = await call(client, "answer_knowledge", question="  how do we ROLL back a deploy? ",
                                       container="ENG")
    # what was shown: the answer, its verdict, the numbered sources with their ids
    assert data["status"] == "answered" and data["checked"] is True and data["cached"] is False
    assert data["citations"]["cited"] == [1, 2]
    assert text.startswith("Roll back first with `nimbus rollback --to previous` [1].")
    assert "checked: every citation names a source below" in text
    addresses = [s["address"] for s in data["sources"]]
    assert set(addresses) == {"ENG/Deploy Runbook", "ENG/Rollback"}
    for s in data["sources"]:
        assert f"[{s['n']}] {s['address']} (id {s['page_id']})" in text
    # what was sent: the instruction to cite, and only the sources of the space asked about
    assert server.requests == 1
    body = server.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": INSTRUCTION}
    assert [a.split(" (")[0] for a in sources_sent(body)] == addresses
    user = body["messages"][1]["content"]
    assert "SALARY-BANDS-SECRET" not in user and "Faster deploys" not in user
    # the repeat: case and spacing folded, served from this node's cache, nothing spent
    assert again["cached"] is True and again["spent"] == 0 and again["answer"] == data["answer"]
    assert again_text.startswith("Roll back first") and "(cached)" in again_text
    assert server.requests == 1
    # charged to the person the server acts as: exactly what the reply spent, once
    assert spent_by(home) == {"alex": data["spent"]} and data["spent"] > 0


async def test_a_reply_citing_a_source_that_was_not_given_is_marked_unchecked(home, server):
    server.default = Reply("Roll back with the lever [7].")
    async with connect(home.root, "alex") as client:
        text, data = await call(client, "answer_knowledge", question=QUESTION, container="ENG")
    assert data["status"] == "answered" and data["checked"] is False
    assert data["citations"]["unknown"] == [7]
    assert "unchecked" in text and "[7]" in text.split("\n\n")[1]     # the verdict line names it


async def test_a_model_failure_is_an_answer_with_its_reason_and_the_sources(home, server):
    server.default = Reply(status=500, text="upstream exploded")
    async with connect(home.root, "alex") as client:
        text, data = await call(client, "answer_knowledge", question=QUESTION, container="ENG")
        # a question nothing matches: no model asked, nothing spent
        none_text, none = await call(client, "answer_knowledge", question="zebra quartz xylophone")
    assert data["status"] == "failed" and data["failure"] == "http" and data["answer"] == ""
    assert text.startswith("No answer was written — ") and "HTTP 500" in text.splitlines()[0]
    assert "Sources:\n[1] ENG/" in text and "Traceback" not in text
    assert none["status"] == "no_match" and none["spent"] == 0 and none["sources"] == []
    assert "nothing you may read matches" in none_text
    assert server.requests == 1 and spent_by(home) == {"alex": 0}   # an HTTP error bills nothing


async def test_an_empty_question_and_an_unknown_space_are_tool_errors(home, server):
    async with connect(home.root, "alex") as client:
        empty, data = await refused(client, "answer_knowledge", question="   ")
        extra, bad = await refused(client, "answer_knowledge", question=QUESTION, agent="eng-bot")
        wrong_text, wrong = await refused(client, "answer_knowledge", question=QUESTION, container="NOPE")
    assert "the question is empty" in empty and data["error"] == "empty_question"
    assert bad["error"] == "invalid_arguments" and "agent" in extra
    assert wrong["error"] == "unknown_container" and wrong["container"] == "NOPE"
    assert wrong_text.startswith("no space 'NOPE': it is not declared and holds no pages")
    assert server.requests == 0 and spent_by(home) == {}
