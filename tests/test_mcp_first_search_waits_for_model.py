"""An MCP session loads the embedding model when it starts, and its first search waits for that load to end
(however long a busy machine takes) instead of answering by keywords alone after the query's 2 s bound.
The load is held at a gate (tests/gated_model.py: a FIFO the test opens) in a real `crewlet mcp` process,
so "still loading" is made, not hoped for."""
from __future__ import annotations

import asyncio
import os
import sys

import pytest
from mcp import Client, StdioServerParameters
from mcp_client import ENV, ROOT, crewlet

from core.search.query_vectors import TIMEOUT_S

pytestmark = pytest.mark.anyio

HANG_GUARD_S = 600   # only so a broken build fails instead of hanging


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def embedded_home(tmp_path_factory):
    root = tmp_path_factory.mktemp("first-search") / "home"
    assert crewlet(root, "init", "--example").returncode == 0
    res = crewlet(root, "worker", "--once")
    assert res.returncode == 0, res.stderr
    return root


def _gated_server(home, fifo) -> StdioServerParameters:
    code = "import gated_model; from crewlet_tui.cli import main; main()"
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)]), "CREWLET_TEST_MODEL_GATE": str(fifo)}
    return StdioServerParameters(command=sys.executable, args=["-c", code, "--home", str(home), "--as", "eng-bot", "mcp"],
                                 env=env, cwd=str(ROOT))


def _open_gate(fifo) -> None:
    fd = os.open(fifo, os.O_WRONLY)      # the server's reader has it open since it started: no wait here
    os.close(fd)


async def test_the_first_search_waits_for_the_model_and_is_served_by_meaning(embedded_home, tmp_path):
    fifo = tmp_path / "model-gate"
    os.mkfifo(fifo)
    async with Client(_gated_server(embedded_home, fifo), cache=None, read_timeout_seconds=HANG_GUARD_S) as client:
        first = asyncio.ensure_future(client.call_tool("search_knowledge", {"query": "how do I roll back a bad deploy"}))
        # past the query's own bound (the server's clock, generously): a server that answers without the
        # model has answered by now; one that waits for the load has not
        done, _ = await asyncio.wait({first}, timeout=3 * TIMEOUT_S + 4)
        assert not done, f"the first search was answered while the model was still loading: {first.result()}"
        await asyncio.to_thread(_open_gate, fifo)
        result = await asyncio.wait_for(first, HANG_GUARD_S)
        assert not result.is_error, result
        assert result.structured_content["served_mode"] == "hybrid", result.structured_content
        # the search after it does not wait for anything: the model is loaded
        again = await client.call_tool("search_knowledge", {"query": "who approves a production deploy"})
        assert again.structured_content["served_mode"] == "hybrid", again.structured_content


async def test_only_the_first_search_waits_a_later_one_keeps_its_bound(embedded_home, tmp_path):
    """Two searches at once while the load is held: one waits for the model, the other is answered by words
    after the query's own bound (a stuck provider never holds every search of a session)."""
    fifo = tmp_path / "model-gate"
    os.mkfifo(fifo)
    async with Client(_gated_server(embedded_home, fifo), cache=None, read_timeout_seconds=HANG_GUARD_S) as client:
        calls = {asyncio.ensure_future(client.call_tool("search_knowledge", {"query": q}))
                 # questions no other test asks: a vector asked before is kept on disk, no model needed
                 for q in ("what to do when the deploy breaks checkout", "where are the onboarding notes")}
        done, waiting = await asyncio.wait(calls, timeout=HANG_GUARD_S, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and len(waiting) == 1
        quick = next(iter(done)).result()
        assert quick.structured_content["served_mode"] == "keyword"
        assert quick.structured_content["degraded"] == "provider_slow"
        await asyncio.to_thread(_open_gate, fifo)
        waited = await asyncio.wait_for(next(iter(waiting)), HANG_GUARD_S)
        assert waited.structured_content["served_mode"] == "hybrid", waited.structured_content
