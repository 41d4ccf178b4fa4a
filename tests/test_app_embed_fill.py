"""The app while its background worker fills the vectors (bench/app_embed.py measures the paint latency).

Against a real OpenAI-compatible server on 127.0.0.1 that answers each request after a delay, so a fill
is under way for as long as a test needs:
- a page saved in the app is keyword-searchable while the fill goes on (the embedding pass hands the
  worker thread back when a write wakes it, and after its budget);
- quitting mid-request lets that request's vectors be published before the node closes, and nothing fails;
- on Linux the worker thread runs at a lower CPU priority than the interface thread.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from embed_server import EmbedServer
from test_app_support import SIZE, app_for, bulk_pages, new_home, open_kb, wait_until

from core import config as config_mod
from core.duties.embedding import EmbeddingDuty, coverage
from core.node import Node
from core.paths import Home
from core.search.indexer import read_state
from core.duties.runner import DutyRunner

DIMS = 16
SPACE = f"openai:test-embed:{DIMS}"


def slow_home(tmp_path: Path, url: str, pages: int, **embeddings: object) -> Home:
    data = config_mod.example_config()
    data["providers"] = {"embeddings": {"provider": "openai", "base_url": url, "model": "test-embed",
                                        "dimensions": DIMS, **embeddings}}
    home = new_home(tmp_path, config=data)
    with open_kb(home) as kb:
        bulk_pages(kb, "ENG", pages)
    return home


def covered(home: Home) -> tuple[int, int]:
    with Node.open(home) as node:
        c = coverage(node.conn, SPACE)
        return c.covered, c.total


async def duties_stopped(app: object) -> None:
    """The app has left; its duties thread outlives it by the rest of a request, then closes the node."""
    deadline = time.monotonic() + 30
    while getattr(app, "session") is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert getattr(app, "session") is None, "the duties thread did not stop and close the node"


def test_a_pass_hands_back_with_work_left_after_its_budget_or_when_asked(tmp_path):
    with EmbedServer(dimensions=DIMS, delay=0.3) as server:
        server.mode = "slow"
        home = slow_home(tmp_path, server.url, 12, max_batch_inputs=2)   # 6 requests of 2
        with Node.open(home) as node:
            wake = threading.Event()
            duty = EmbeddingDuty(node, pass_budget_s=0.1, yield_to=wake)
            runner = DutyRunner(node, [duty])
            try:
                first = runner.run_one(duty, stop=threading.Event())
                assert first.result is not None and first.result.more
                assert first.result.counts["requests"] < 6           # the budget ended the pass early
                assert 0 < first.result.counts["embedded"] < 12      # but never before one request
                wake.set()
                asked = runner.run_one(duty, stop=threading.Event())
                assert asked.result is not None and asked.result.more  # handed back at once, work left
                assert asked.result.counts["requests"] == 0
                wake.clear()
                duty.pass_budget_s = None
                runner.run_until_idle()
            finally:
                runner.close()
            assert coverage(node.conn, SPACE).covered == 12


async def test_a_page_saved_in_the_app_is_searchable_while_a_fill_runs(tmp_path):
    with EmbedServer(dimensions=DIMS, delay=1.0) as server:
        server.mode = "slow"
        # 400 pages in requests of 4: a hundred one-second requests, a fill far longer than this test
        home = slow_home(tmp_path, server.url, 400, max_batch_inputs=4)
        app = app_for(home, start_indexer=True)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: server.requests >= 2, timeout=30, what="the fill under way")
            session = app.session
            assert session is not None
            page = await asyncio.to_thread(session.kb.create_page, "ENG", "Quarantine Runbook", "isolate the host",
                                           actor="alex")
            seq = session.node.applied_seq()
            app.poke_indexer()

            def indexed() -> bool:
                state = read_state(home.index_dir)
                return state is not None and state.indexed_seq >= seq

            await wait_until(pilot, indexed, timeout=20, what="the new page in the keyword index")
            assert page.id
            assert app.meaning_state.phase == "embedding"               # the fill goes on meanwhile
            requests_then = server.requests
        await duties_stopped(app)
        assert requests_then < 100


async def test_quitting_mid_request_publishes_that_request_and_fails_nothing(tmp_path, caplog):
    with EmbedServer(dimensions=DIMS, delay=1.5) as server:
        server.mode = "slow"
        home = slow_home(tmp_path, server.url, 10)                  # one request of all ten
        app = app_for(home, start_indexer=True)
        caplog.set_level(logging.WARNING)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: server.requests >= 1, timeout=30, what="the request in flight")
        await duties_stopped(app)
    assert covered(home) == (10, 10)
    failures = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not failures, failures


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
async def test_the_worker_thread_yields_the_cpu_to_the_interface(tmp_path):
    def nice_of_threads() -> dict[int, int]:
        out = {}
        for task in Path("/proc/self/task").iterdir():
            # /proc/<pid>/task/<tid>/stat: field 19 is the nice value (after the parenthesised name)
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            out[int(task.name)] = int(fields[16])
        return out

    with EmbedServer(dimensions=DIMS, delay=1.0) as server:
        server.mode = "slow"
        home = slow_home(tmp_path, server.url, 40, max_batch_inputs=4)
        app = app_for(home, start_indexer=True)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: server.requests >= 1, timeout=30, what="the fill under way")
            nice = nice_of_threads()
            interface = nice[threading.get_native_id()]
            assert interface + 10 in nice.values() or 19 in nice.values()
            assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == interface  # the interface kept its own
        await duties_stopped(app)
