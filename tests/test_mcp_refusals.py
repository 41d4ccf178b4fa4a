"""What an agent is told when a call is refused (issue 33): what it can do with its tools — never a `crewlet`
command to run, nor where the server keeps its files — and the same mistake refused alike by every tool.
Through a real MCP client session (tests/mcp_client.py)."""
from __future__ import annotations


import pytest
from mcp_client import call, connect, refused
from mcp_client import anyio_backend, example_home, home, server_side  # noqa: F401 - fixtures, by name


pytestmark = pytest.mark.anyio


async def test_an_unknown_container_is_the_same_tool_error_from_list_pages_and_search_knowledge(home):
    async with connect(home.root, "eng-bot") as client:
        listed, listed_data = await refused(client, "list_pages", container="NOPE")
        searched, searched_data = await refused(client, "search_knowledge", query="rollback", mode="keyword",
                                                container="NOPE")
        # a known container still searches, and a declared one that holds nothing is a fact, not a mistake
        text, _ = await call(client, "search_knowledge", query="rollback", mode="keyword", container="ENG")
        assert "matched" in text.lower()
    assert listed == searched and listed_data == searched_data
    assert listed.startswith("no space 'NOPE': it is not declared and holds no pages")
    assert listed_data["error"] == "unknown_container" and listed_data["container"] == "NOPE"
    assert "list_pages without a container" in listed      # the tool that lists the spaces there are
    server_side(home, listed)


async def test_a_refusal_names_the_agents_next_step_not_the_servers_command_or_file(home):
    async with connect(home.root, "eng-bot") as client:
        undeclared, data = await refused(client, "write_page", container="NOPE", title="Lost", body="x")
        unknown_note, _ = await refused(client, "forget", note_id=999_999)
    assert data["error"] == "not_declared" and "pick one of: ENG" in undeclared
    server_side(home, undeclared)
    server_side(home, unknown_note)
    async with connect(home.root, "sam") as client:      # answer_knowledge is a person's tool
        empty, data = await refused(client, "answer_knowledge", question="   ")
    assert data["error"] == "empty_question" and "answer_knowledge with the person's question" in empty
    server_side(home, empty)


async def test_a_configuration_that_drops_the_agent_under_a_running_server_is_said_without_its_path(home):
    config = home.root / "company.toml"
    async with connect(home.root, "eng-bot") as client:
        await call(client, "list_pages")
        # an admin renames the agent while the server runs: the configuration applies at once
        config.write_text(config.read_text(encoding="utf-8").replace("[actors.eng-bot]", "[actors.eng-robot]"),
                          encoding="utf-8")
        text, data = await refused(client, "list_pages")
    assert data["error"] == "config" and data["key"] == "actors.eng-bot" and data["file"] == "company.toml"
    assert text.startswith("company.toml: actors.eng-bot: no actor 'eng-bot' is configured")
    assert "tell the person who runs it" in text and "add [actors.eng-bot]" not in text    # a fix only they can make
    server_side(home, text)
    server_side(home, str(data))


async def test_an_answer_without_a_model_says_where_to_configure_it_without_the_servers_path(home):
    async with connect(home.root, "sam") as client:
        text, data = await call(client, "answer_knowledge", question="how do we roll back a deploy?")
    assert data["status"] == "no_model" and "add a [providers.llm] table" in text and "company.toml" in text
    server_side(home, text)
    assert str(home.root) not in data["reason"]
