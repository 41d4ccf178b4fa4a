"""The embedding duty against a real OpenAI-compatible server on 127.0.0.1 (tests/embed_server.py).

For every fault the server plays: no vector is filed against the wrong page (the server's vectors are a
function of the text, so each stored vector is checked against its own page's text), no page is starved,
and the coverage the duty reports is what the rows say.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from embed_server import NAN_MARK, REFUSE_MARK, ZERO_MARK, EmbedServer, vector_for

from core import config as config_mod
from core.diagnostics import Diagnostics
from core.duties import embedding as duty_mod
from core.duties.embedding import EmbeddingDuty, coverage
from core.embed.text import bucket, embed_text
from core.log import Record
from core.node import Node, init_home
from core.pages.service import KnowledgeBase, new_id
from core.paths import Home
from core.duties.runner import DutyRunner, read_duty_records

DIMS = 16


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dimensions=DIMS, delay=2.0) as s:
        yield s


def config_for(url: str, **embeddings: object) -> dict:
    data = config_mod.example_config()
    data["providers"] = {"embeddings": {"provider": "openai", "base_url": url, "model": "test-embed",
                                        "dimensions": DIMS, **embeddings}}
    return data


def make_node(tmp_path: Path, url: str, name: str = "h", **embeddings: object) -> Node:
    home = Home(tmp_path / name)
    init_home(home, config_for(url, **embeddings))
    return Node.open(home)


def add_pages(node: Node, n: int, *, marks: dict[int, str] | None = None, container: str = "ENG") -> list[str]:
    marks = marks or {}
    ids = [new_id() for _ in range(n)]
    records = [Record.new("page.create", "alex", {"page_id": ids[i], "container": container,
                                                 "title": f"Page {i:04d}", "parent_id": None,
                                                 "body": f"body of page {i} {marks.get(i, '')}\n\nmore  text"})
               for i in range(n)]
    node.submit(records)
    return ids


def run(node: Node, *, duty: EmbeddingDuty | None = None, until_idle: bool = True) -> list:
    duty = duty or EmbeddingDuty(node)
    runner = DutyRunner(node, [duty])
    try:
        if until_idle:
            return runner.run_until_idle()
        return runner.tick(stop=threading.Event(), force=True)
    finally:
        runner.release()


def space_of(node: Node) -> str:
    return f"openai:test-embed:{DIMS}"


def assert_every_vector_is_its_pages(node: Node) -> int:
    """Each stored vector is the server's vector for exactly the text its page would send now."""
    rows = node.conn.execute("SELECT v.source_id, v.vector, v.digest, v.revision, v.bucket, p.title, p.body, "
                             "p.revision AS page_revision FROM vectors v JOIN pages p ON p.id = v.source_id").fetchall()
    for r in rows:
        text, digest = embed_text(r["title"], r["body"])
        assert r["digest"] == digest and r["revision"] == r["page_revision"]
        assert np.allclose(np.frombuffer(r["vector"], dtype="<f4"), vector_for(text, DIMS), atol=1e-6), r["source_id"]
        assert r["bucket"] == bucket(r["source_id"])
    return len(rows)


def events(node: Node) -> list[str]:
    return [e["event"] for e in Diagnostics(node.home.diagnostics_file).events()]


# -- the ordinary path ----------------------------------------------------------------------------------

def test_every_page_is_embedded_once_and_a_second_tick_asks_nothing(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 300)
        reports = run(node)
        assert assert_every_vector_is_its_pages(node) == 300
        # 300 inputs at 128 a request: three requests, one tick
        assert server.requests == 3 and all(len(b) <= 128 for b in server.batches)
        assert reports[-1].result.status["coverage"] == 1.0
        before = server.requests
        run(node)
        assert server.requests == before           # a caught-up company asks the provider nothing
        code = node.conn.execute("SELECT code FROM vector_codes").fetchone()[0]
        assert len(code) == DIMS // 8              # the narrow table holds one bit a dimension


def test_a_tick_stops_at_1024_sources_and_32_requests(tmp_path, server):
    with make_node(tmp_path, server.url, max_batch_inputs=16) as node:
        add_pages(node, 700)
        first = run(node, until_idle=False)[0]
        assert server.requests == 32 and first.result.counts["embedded"] == 512 and first.result.more
        run(node)
        assert assert_every_vector_is_its_pages(node) == 700


def test_requests_are_packed_by_the_byte_limits(tmp_path, server):
    # 8 KiB inputs against a 20,000-token request total: two inputs a request
    with make_node(tmp_path, server.url, max_batch_tokens=20_000) as node:
        ids = [new_id() for _ in range(5)]
        node.submit([Record.new("page.create", "alex", {"page_id": pid, "container": "ENG", "title": f"Long {i}",
                                                         "body": ("word " * 3000), "parent_id": None})
                     for i, pid in enumerate(ids)])
        run(node)
        assert [len(b) for b in server.batches] == [2, 2, 1]
        assert all(sum(len(t.encode()) for t in b) <= 20_000 for b in server.batches)
        assert all(len(t.encode()) <= 8192 for b in server.batches for t in b)


def test_a_change_that_leaves_the_text_alone_costs_no_call_and_a_save_re_embeds(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Deploy Runbook", "deploy with care", actor="alex")
        other = kb.create_page("ENG", "Runbooks", "", actor="alex")
        run(node)
        calls = server.requests
        kb.move_page(page.id, other.id, actor="alex")
        kb.add_comment(page.id, "nice", actor="alex")
        kb.set_labels(page.id, ["ops"], actor="alex")
        run(node)
        assert server.requests == calls
        # a save that only re-spaces the text moves the revision, not the text: restamped, not embedded
        kb.save_page(page.id, "deploy   with\n\ncare", base_revision=1, actor="alex")
        report = run(node)[-1]
        assert server.requests == calls and report.result.counts["restamped"] == 1
        kb.save_page(page.id, "deploy with great care", base_revision=2, actor="alex")
        run(node)
        assert server.requests == calls + 1 and server.batches[-1] == [embed_text("Deploy Runbook", "deploy with great care")[0]]
        assert assert_every_vector_is_its_pages(node) == 2


# -- refusals -------------------------------------------------------------------------------------------

def test_one_refused_input_among_128_is_isolated_in_at_most_15_requests(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        ids = add_pages(node, 128, marks={77: REFUSE_MARK})
        run(node)
        assert server.requests <= 15
        assert assert_every_vector_is_its_pages(node) == 127
        held = node.conn.execute("SELECT source_id, reason FROM embed_holds").fetchall()
        assert [h["source_id"] for h in held] == [ids[77]] and "context_length_exceeded" in held[0]["reason"]
        latest = Diagnostics(node.home.diagnostics_file).latest()["search_embed_input_refused"]
        assert latest["source_id"] == ids[77] and "context_length_exceeded" in latest["message"]
        cov = coverage(node.conn, space_of(node))
        assert (cov.covered, cov.total, cov.held) == (127, 128, 1)
        # held: the next ticks spend nothing on it
        before = server.requests
        run(node)
        assert server.requests == before


def test_a_held_source_is_offered_again_alone_after_its_hour_and_a_rewrite_at_once(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        ids = add_pages(node, 4, marks={1: REFUSE_MARK, 2: REFUSE_MARK})
        run(node)
        assert node.conn.execute("SELECT count(*) FROM embed_holds").fetchone()[0] == 2
        node.conn.execute("UPDATE embed_holds SET held_until = 0")   # the hour is up
        before = server.requests
        run(node)
        assert server.requests == before + 2 and all(len(b) == 1 for b in server.batches[-2:])
        # a rewritten source is a new text: offered at once, with its neighbours
        KnowledgeBase(node).save_page(ids[1], "a clean body now", base_revision=1, actor="alex")
        run(node)
        assert assert_every_vector_is_its_pages(node) == 3
        assert node.conn.execute("SELECT source_id FROM embed_holds").fetchall()[0][0] == ids[2]


def test_an_unfinished_isolation_resumes_at_the_next_tick(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 128, marks={5: REFUSE_MARK})
        # a tick of three requests: the isolation is three splits deep when the tick ends
        orig = duty_mod.MAX_REQUESTS_TICK
        duty_mod.MAX_REQUESTS_TICK = 3
        try:
            run(node, until_idle=False)
        finally:
            duty_mod.MAX_REQUESTS_TICK = orig
        cursor = read_duty_records(node.conn)["embedding"].cursor
        assert '"isolating": [[' in cursor            # the halves not reached are kept
        assert server.requests == 3
        run(node)
        assert server.requests <= 15              # the isolation went on where it stopped, not from the top
        assert assert_every_vector_is_its_pages(node) == 127


def test_nan_and_zero_vectors_are_refused_per_source_and_their_neighbours_embedded(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        ids = add_pages(node, 10, marks={3: NAN_MARK, 6: ZERO_MARK})
        run(node)
        assert assert_every_vector_is_its_pages(node) == 8
        assert {r[0] for r in node.conn.execute("SELECT source_id FROM embed_holds")} == {ids[3], ids[6]}
        assert events(node).count("search_embed_vector_refused") == 2


def test_every_request_refused_is_said_once_as_the_configuration(tmp_path, server):
    server.mode = "refuse_all"
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 6)
        run(node)
        assert events(node).count("search_embed_every_request_refused") == 1
        assert node.conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0


def test_one_refused_document_beside_accepted_ones_never_blames_the_configuration(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 8, marks={2: REFUSE_MARK, 5: REFUSE_MARK})
        run(node)
        assert "search_embed_every_request_refused" not in events(node)


def test_a_configuration_change_forgets_the_refusals(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 3, marks={0: REFUSE_MARK})
        run(node)
        assert node.conn.execute("SELECT count(*) FROM embed_holds").fetchone()[0] == 1
        text = node.home.config_file.read_text()
        node.home.config_file.write_text(text.replace("dimensions = 16", "dimensions = 16\nmax_input_tokens = 4000"))
        before = server.requests
        run(node)
        assert node.conn.execute("SELECT count(*) FROM embed_holds").fetchone()[0] == 1   # refused again, anew
        assert server.requests > before       # offered at once under the new configuration


# -- provider failures end the tick -------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["rate_limit", "status:500", "slow", "missing_index", "duplicate_index",
                                  "null_index", "string_index", "too_many", "too_few", "wrong_width", "not_json"])
def test_a_failing_or_non_conformant_provider_files_nothing_and_the_next_tick_catches_up(tmp_path, server, mode,
                                                                                          monkeypatch):
    monkeypatch.setattr(duty_mod, "REQUEST_TIMEOUT_S", 0.5)
    monkeypatch.setattr(duty_mod, "SINGLE_TIMEOUT_S", 0.5)
    with make_node(tmp_path, server.url, max_batch_inputs=4) as node:
        add_pages(node, 10)
        server.script = ["ok", mode]
        report = run(node)[-1]
        assert server.requests == 2                # the failure ended the tick's requests
        assert report.result.counts["embedded"] == 4 and report.result.status["failure"]
        assert assert_every_vector_is_its_pages(node) == 4
        run(node)
        assert assert_every_vector_is_its_pages(node) == 10


@pytest.mark.parametrize("mode", ["shuffled", "no_index"])
def test_results_are_filed_by_their_index_or_in_arrival_order_when_none_has_one(tmp_path, server, mode):
    server.mode = mode
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 20)
        run(node)
        assert assert_every_vector_is_its_pages(node) == 20


def test_a_model_change_at_the_same_width_refills_and_never_mixes_spaces(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 30)
        run(node)
        text = node.home.config_file.read_text()
        node.home.config_file.write_text(text.replace('model = "test-embed"', 'model = "test-embed-2"'))
        node.refresh_config()
        duty = EmbeddingDuty(node)
        runner = DutyRunner(node, [duty])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(duty_mod, "MAX_REQUESTS_TICK", 0)   # nothing sent yet: the refill has not begun
            runner.tick(stop=threading.Event(), force=True)
        spaces = dict(node.conn.execute("SELECT space, count(*) FROM vectors GROUP BY space").fetchall())
        assert spaces == {f"openai:test-embed:{DIMS}": 30}
        assert coverage(node.conn, f"openai:test-embed-2:{DIMS}").covered == 0
        runner.run_until_idle()
        runner.release()
        spaces = dict(node.conn.execute("SELECT space, count(*) FROM vectors GROUP BY space").fetchall())
        assert spaces == {f"openai:test-embed-2:{DIMS}": 30}
        assert server.bodies[-1]["model"] == "test-embed-2"


def test_purged_pages_lose_their_vectors_and_trashed_ones_are_not_counted(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        kb = KnowledgeBase(node)
        a = kb.create_page("ENG", "A", "alpha", actor="alex")
        b = kb.create_page("ENG", "B", "beta", actor="alex")
        run(node)
        kb.trash_page(a.id, actor="alex")
        kb.trash_page(b.id, actor="alex")
        kb.purge_page(b.id, actor="alex")
        run(node)
        assert [r[0] for r in node.conn.execute("SELECT source_id FROM vectors")] == [a.id]
        cov = coverage(node.conn, space_of(node))
        assert (cov.covered, cov.total) == (0, 0)


def test_vectors_off_embeds_nothing(tmp_path, server):
    home = Home(tmp_path / "off")
    data = config_for(server.url)
    data["knowledge"]["vectors"] = False
    init_home(home, data)
    with Node.open(home) as node:
        add_pages(node, 3)
        report = run(node)[-1]
        assert "vectors are off" in report.result.summary and server.requests == 0


def test_a_second_node_on_the_same_logs_applies_the_vectors_without_asking_again(tmp_path, server):
    with make_node(tmp_path, server.url) as node:
        add_pages(node, 12)
        run(node)
        calls = server.requests
        # a fresh database replaying the same logs: the vectors arrive from the vector log
        node.home.db_file.rename(node.home.root / "old.db")
    with Node.open(Home(tmp_path / "h")) as again:
        assert assert_every_vector_is_its_pages(again) == 12
        run(again)
        assert server.requests == calls
