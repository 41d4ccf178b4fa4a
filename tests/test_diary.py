"""An agent's diary, in the engine: what a note may be, who may read and write it, the hybrid recall, the
fill duty after a model change, and a diary's place on its node (digest, snapshot, adopt, repair).

Real homes, real SQLite, a real OpenAI-compatible server on 127.0.0.1 (tests/embed_server.py: its vectors
are a function of each text) or the local model. The MCP tools are tested through a client session in
tests/test_mcp_diary.py.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from embed_server import NAN_MARK, EmbedServer, vector_for
from typer.testing import CliRunner

from core import config as config_mod
from core.agents.diary import HALF, Diary
from core.duties.diary_fill import DiaryFillDuty
from core.agents.notes import MAX_NOTE_CHARS, check_note, credential_in
from core.errors import Invalid, NotFound, Refused
from core.node import Node, init_home
from core.paths import Home
from core.search.fusion import reciprocal_rank_fusion
from core.store.digest import content_digest
from core.duties.runner import DutyRunner
from crewlet_tui.cli import app

DIMS = 16
ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}


@pytest.fixture
def server() -> Iterator[EmbedServer]:
    with EmbedServer(dimensions=DIMS, delay=2.0) as s:
        yield s


def company_data(url: str | None = None, *, model: str = "m-one", provider: str | None = None,
                 vectors: bool | None = None) -> dict:
    data = config_mod.example_config()
    data["actors"]["ops-bot"] = {"kind": "agent", "space": "OPS"}
    if url:
        data["providers"] = {"embeddings": {"provider": "openai", "base_url": url, "model": model, "dimensions": DIMS}}
    if provider == "none":
        data["providers"] = {"embeddings": {"provider": "none"}}
    if vectors is not None:
        data["knowledge"]["vectors"] = vectors
    return data


def open_home(tmp_path: Path, data: dict, name: str = "h") -> Node:
    home = Home(tmp_path / name)
    init_home(home, data)
    return Node.open(home)


def fill(node: Node) -> list:
    runner = DutyRunner(node, [DiaryFillDuty(node)])
    try:
        return runner.run_until_idle()
    finally:
        runner.close()


def rows(node: Node, sql: str, *params) -> list[tuple]:
    return [tuple(r) for r in node.conn.execute(sql, params)]


# -- what a note may be ----------------------------------------------------------------------------------

CREDENTIALS = {
    "aws": "The deploy user is AKIAIOSFODNN7EXAMPLE in prod",
    "github": "push with ghp_1234567890abcdefghijABCDEFGHIJ123456 from CI",
    "github_pat": "the bot uses github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "sk": "the model key is sk-proj-abcdefghijklmnopqrstuvwxyz123456",
    "slack": "alerts post with xoxb-123456789012-1234567890123-abcdefghijklmnop",
    "jwt": "a session looked like eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJ",
    "pem": "the key file starts -----BEGIN OPENSSH PRIVATE KEY----- and is in ~/.ssh",
    "hex_after_key": "set api_key=9f8e7d6c5b4a39281706f5e4d3c2b1a0 for staging",
    "base64_after_token": "token: Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg== works for the mirror",
    "password": "the staging database password=hunter22",
    "url_password": "connect with postgres://app:Tr0ub4dor@db.internal:5432/app",
}


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_a_note_that_looks_like_it_holds_a_credential_is_refused_naming_why_and_never_repeating_it(name):
    text = CREDENTIALS[name]
    with pytest.raises(Invalid) as err:
        check_note(text)
    assert err.value.code == "note_credential"
    message = str(err.value)
    assert "looks like it holds a credential" in message and "where the secret is kept" in message
    secret = max(text.split(), key=len)          # the token itself never comes back in the refusal
    assert secret not in message and secret not in json.dumps(err.value.to_json())


@pytest.mark.parametrize("text", [
    "The fix landed in commit 4f9c2a1e0b7d3c5a6e8f9012345678abcdef0123",      # a commit hash in prose
    "Request 3f2b1c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d was the one that failed",   # a UUID
    "The staging password is stored in Vault at secret/staging/db",
    "The password: stored in Vault, never in the repository",
    "Set token=$GITHUB_TOKEN in CI, never inline",
    "password=<from vault> in the example config is a placeholder",
    "API key rotation happens on the first Monday of the month",
    "sk-learn is not a package; scikit-learn is",
])
def test_facts_that_only_mention_secrets_are_kept(text):
    assert credential_in(text) is None
    assert check_note(text) == text


@pytest.mark.parametrize("text, code", [
    ("", "note_empty"), ("   \n\t ", "note_empty"),
    ("x" * (MAX_NOTE_CHARS + 1), "note_too_long"),
    ("- deploys need the VPN\n- the cache clears on Sunday", "note_is_list"),
    ("1. one thing\n2. another", "note_is_list"),
    ("hidden\u200bcharacter", "note_invalid"), ("bell\x07", "note_invalid"),
])
def test_a_note_must_be_one_fact_within_the_bound(text, code):
    with pytest.raises(Invalid) as err:
        check_note(text)
    assert err.value.code == code


def test_a_note_at_the_bound_is_kept_and_trimmed():
    assert check_note("  " + "y" * MAX_NOTE_CHARS + "\n") == "y" * MAX_NOTE_CHARS


# -- who may ----------------------------------------------------------------------------------------------

def test_each_agent_reads_and_writes_only_its_own_and_a_person_reads_any(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        diary = Diary(node)
        mine = diary.remember("The ENG cluster drains nodes before upgrades", actor="eng-bot").note
        theirs = diary.remember("OPS pages go to the on-call phone first", actor="ops-bot").note
        assert [n.text for n in diary.notes("eng-bot", actor="eng-bot").notes] == [mine.text]
        assert [n.note.id for n in diary.recall("anything", actor="ops-bot").notes] == [theirs.id]
        with pytest.raises(Refused, match="only its own diary"):
            diary.notes("ops-bot", actor="eng-bot")
        with pytest.raises(Refused, match="only its own diary"):
            diary.recall("x", actor="eng-bot", agent="ops-bot")
        # another agent's note is answered exactly as a missing one, and stays
        with pytest.raises(NotFound) as err:
            diary.forget(theirs.id, actor="eng-bot")
        assert f"no note {theirs.id} in eng-bot's diary" in str(err.value)
        assert diary.notes("ops-bot", actor="alex").total == 1           # a person reads any agent's
        with pytest.raises(Refused, match="a person"):
            diary.remember("people keep pages", actor="alex")              # a person has no diary
        with pytest.raises(Refused, match="a person"):
            diary.forget(mine.id, actor="alex")                          # and writes nobody's
        assert diary.forget(mine.id, actor="eng-bot").id == mine.id
        assert diary.notes("eng-bot", actor="alex").total == 0


def test_remembering_the_same_fact_twice_keeps_one_note(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        diary = Diary(node)
        first = diary.remember("Builds on Friday take twice as long", actor="eng-bot")
        again = diary.remember("  Builds on Friday take twice as long ", actor="eng-bot")
        assert again.duplicate and again.note.id == first.note.id
        assert rows(node, "SELECT count(*) FROM agent_diary") == [(1,)]


def test_a_note_is_embedded_on_write_as_a_unit_vector_of_its_own_text(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        done = Diary(node).remember("The API gateway times out after 30 seconds", actor="eng-bot")
        assert done.embedded
        (space, blob), = rows(node, "SELECT space, vector FROM agent_diary WHERE id = ?", done.note.id)
        assert space == f"openai:m-one:{DIMS}"
        v = np.frombuffer(blob, dtype="<f4")
        assert np.allclose(v, vector_for("The API gateway times out after 30 seconds", DIMS), atol=1e-6)


# -- recall: the union of the two halves ---------------------------------------------------------------------

def seed(node: Node, agent: str, n: int, prefix: str = "fact") -> list[int]:
    diary = Diary(node)
    return [diary.remember(f"{prefix} number {i} about service {i % 7}", actor=agent).note.id for i in range(n)]


def test_recall_is_the_union_of_the_exact_vector_top_50_and_the_50_newest_fused_by_rank(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        ids = seed(node, "eng-bot", 160)
        seed(node, "ops-bot", 30, prefix="ops")      # never in eng-bot's answer
        diary = Diary(node)
        result = diary.recall("where does service 3 log to", actor="eng-bot", limit=100)
        # the vector half, computed here independently over every note's own vector
        q = np.asarray(vector_for("where does service 3 log to", DIMS))
        scores = {i: float(np.dot(vector_for(f"fact number {k} about service {k % 7}", DIMS), q))
                  for k, i in enumerate(ids)}
        meaning = sorted(ids, key=lambda i: (-scores[i], -i))[:HALF]
        recent = sorted(ids, reverse=True)[:HALF]
        union = set(meaning) | set(recent)
        assert result.by_meaning == HALF and result.by_recency == HALF
        assert result.union == len(union) <= 100
        got = [n.note.id for n in result.notes]
        assert set(got) == union and len(got) == len(set(got)) == len(union)
        # the meaning half in its order, the recent notes it missed taking every other place, newest first
        extra = [i for i in recent if i not in set(meaning)]
        assert extra, "the two halves overlap wholly: the test needs recent notes the meaning half missed"
        fused = []
        for k in range(max(len(meaning), len(extra))):
            fused += meaning[k:k + 1] + extra[k:k + 1]
        assert got == fused
        assert fused == [int(i) for i, _ in reciprocal_rank_fusion([[str(i) for i in meaning], [str(i) for i in extra]])]
        for n in result.notes:
            assert set(n.via) == {w for w, s in (("meaning", meaning), ("recent", recent)) if n.note.id in s}
            assert n.similarity == pytest.approx(scores[n.note.id], abs=1e-5)
            assert n.note.agent == "eng-bot"
        assert result.mode == "hybrid" and not result.degraded
        # a limit cuts the same order
        assert [n.note.id for n in diary.recall("where does service 3 log to", actor="eng-bot", limit=7).notes] == fused[:7]
        with pytest.raises(Invalid, match="1 to 100"):
            diary.recall("x", actor="eng-bot", limit=101)


def test_the_vectors_a_recall_keeps_in_memory_follow_what_other_processes_write_and_forget(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        ids = seed(node, "eng-bot", 80)
        diary = Diary(node)
        first = diary.recall("the query", actor="eng-bot", limit=100)
        top = [n.note.id for n in first.notes if "meaning" in n.via][0]
        with Node.open(node.home) as other:          # another process's connection to the same home
            theirs = Diary(other)
            theirs.forget(top, actor="eng-bot")
            exact = theirs.remember("the query", actor="eng-bot").note   # its vector is the query's own
        again = diary.recall("the query", actor="eng-bot", limit=100)
        got = [n.note.id for n in again.notes]
        assert got[0] == exact.id and again.notes[0].similarity == pytest.approx(1.0, abs=1e-5)
        assert top not in got and again.total == len(ids)


def test_without_a_provider_the_diary_writes_and_recalls_by_recency_and_says_so(tmp_path):
    with open_home(tmp_path, company_data(provider="none")) as node:
        assert node.company.knowledge.vectors is False          # derived: no provider, nothing to embed with
        diary = Diary(node)
        done = diary.remember("Release notes go out on Tuesdays", actor="eng-bot")
        assert not done.embedded and 'provider = "none"' in done.why_not_embedded
        for i in range(60):
            diary.remember(f"older fact {i}", actor="eng-bot")
        result = diary.recall("release notes", actor="eng-bot", limit=100)
        assert result.mode == "recency" and result.degraded == "no_provider"
        assert "recency alone" in result.message and 'provider = "none"' in result.message
        assert len(result.notes) == HALF and all(n.via == ["recent"] and n.similarity is None for n in result.notes)
        assert fill(node)[0].result.summary.startswith("no embeddings provider")


def test_vectors_false_stops_the_corpus_embedding_but_not_the_diary(tmp_path, server):
    """Spec 000, Configuration: vectors = false turns off what embeds the corpus; the diary keeps the provider."""
    with open_home(tmp_path, company_data(server.url, vectors=False)) as node:
        diary = Diary(node)
        assert diary.remember("Cron jobs run in UTC", actor="eng-bot").embedded
        assert diary.recall("cron timezone", actor="eng-bot").mode == "hybrid"


def test_a_failing_provider_keeps_the_note_and_recalls_by_recency_then_the_fill_embeds_it(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        diary = Diary(node)
        server.mode = "status:500"
        done = diary.remember("Logs older than 30 days are archived to cold storage", actor="eng-bot")
        assert not done.embedded and "provider failed" in done.why_not_embedded
        result = diary.recall("log retention", actor="eng-bot")
        assert result.mode == "recency" and result.degraded == "provider_failed"
        assert [n.note.id for n in result.notes] == [done.note.id]
        server.mode = "ok"
        fill(node)
        result = diary.recall("log retention", actor="eng-bot")
        assert result.mode == "hybrid" and result.embedded == 1 and result.notes[0].similarity is not None


def test_after_a_model_change_old_vectors_are_set_aside_and_the_fill_embeds_every_note_again(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        seed(node, "eng-bot", 5)
        seed(node, "ops-bot", 3, prefix="ops")
        data = company_data(server.url, model="m-two")
        config_mod.write(node.home.config_file, data)
        diary = Diary(node)
        before = diary.recall("service", actor="eng-bot")
        assert before.degraded == "partly_embedded" and before.embedded == 0 and before.total == 5
        assert "5 of 5 notes are not embedded under the current model" in before.message
        assert all(n.similarity is None for n in before.notes)
        server.batches.clear()
        reports = fill(node)
        assert sum(r.result.counts.get("filled", 0) for r in reports if r.result) == 8
        assert sorted(t for b in server.batches for t in b) == sorted(
            [f"fact number {i} about service {i % 7}" for i in range(5)] + [f"ops number {i} about service {i % 7}"
                                                                           for i in range(3)])
        assert rows(node, "SELECT DISTINCT space FROM agent_diary") == [(f"openai:m-two:{DIMS}",)]
        after = diary.recall("service", actor="eng-bot")
        assert after.mode == "hybrid" and not after.degraded and after.embedded == 5
        assert fill(node)[0].result.counts["filled"] == 0            # nothing left: nothing asked


def test_a_note_the_provider_refuses_is_held_not_retried_every_pass(tmp_path, server):
    with open_home(tmp_path, company_data(provider="none")) as node:
        diary = Diary(node)
        diary.remember("a fine note", actor="eng-bot")
        diary.remember(f"a note the endpoint answers badly {NAN_MARK}", actor="eng-bot")
        config_mod.write(node.home.config_file, company_data(server.url))
        fill(node)
        assert rows(node, "SELECT text, space IS NOT NULL, held IS NOT NULL FROM agent_diary ORDER BY id") == [
            ("a fine note", 1, 0), (f"a note the endpoint answers badly {NAN_MARK}", 0, 1)]
        asked = server.requests
        fill(node)
        assert server.requests == asked


def test_recall_by_meaning_with_the_local_model_finds_the_topical_note(tmp_path):
    with open_home(tmp_path, company_data()) as node:
        diary = Diary(node)
        for text in ("The billing service restarts cleanly only after its queue drains",
                     "Alex prefers short pull requests", "The CI cache is cleared every Sunday night"):
            diary.remember(text, actor="eng-bot")
        result = diary.recall("how do I restart billing", actor="eng-bot")
        assert result.notes[0].note.text.startswith("The billing service") and result.notes[0].via == ["meaning", "recent"]


# -- a diary is this node's own ---------------------------------------------------------------------------------

def test_the_content_digest_leaves_diaries_out_and_says_so(tmp_path, server):
    with open_home(tmp_path, company_data(server.url)) as node:
        before = content_digest(node.conn)
        Diary(node).remember("The VPN drops idle sessions after an hour", actor="eng-bot")
        after = content_digest(node.conn)
        assert after.content == before.content
        assert "agent_diary" in after.to_json()["excluded"]


def cli(root: Path, *args: str):
    return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV)


def test_a_snapshot_carries_no_diary_and_adopting_one_keeps_this_node_s_own(tmp_path, server):
    shared = tmp_path / "shared"
    a = Home(tmp_path / "A")
    init_home(a, company_data(server.url))
    assert cli(a.root, "sync", "join", str(shared)).exit_code == 0
    assert cli(tmp_path / "B", "sync", "join", str(shared)).exit_code == 0
    b = Home(tmp_path / "B")
    with Node.open(a) as node:
        Diary(node).remember("A's agent noted this on node A", actor="eng-bot")
    with Node.open(b) as node:
        kept = Diary(node).remember("B's agent noted this on node B", actor="ops-bot").note
    snap = tmp_path / "a.snapshot"
    assert cli(a.root, "sync", "snapshot", str(snap)).exit_code == 0
    from core.store import connect

    conn = connect(snap, migrate_schema=False)
    try:
        assert conn.execute("SELECT count(*) FROM agent_diary").fetchone()[0] == 0
    finally:
        conn.close()
    res = cli(b.root, "sync", "adopt", str(snap), "--yes")
    assert res.exit_code == 0, res.stderr
    with Node.open(b) as node:
        page = Diary(node).notes("ops-bot", actor="alex")
        assert [(n.id, n.text) for n in page.notes] == [(kept.id, kept.text)]
        assert Diary(node).notes("eng-bot", actor="alex").total == 0     # A's diary stayed on A
    status = json.loads(cli(b.root, "sync", "status", "--json").stdout)
    assert status["diaries"]["replicated"] is False and status["diaries"]["by_agent"] == {"ops-bot": 1}
    assert "kept on this node only" in cli(b.root, "sync", "status").stdout


def test_a_repair_that_rebuilds_the_database_keeps_the_diaries(tmp_path, server):
    """As tests/test_log_repair.py's lost record: node B (on "another machine" for A's repair) applied a record
    the shared log then lost; B's own repair rebuilds B's database from the log — and B's diary comes along."""
    from test_log_repair import HEADER_SIZE, flip, middle_page_create

    shared = tmp_path / "shared"
    a = Home(tmp_path / "A")
    init_home(a, company_data(server.url))
    assert cli(a.root, "sync", "join", str(shared)).exit_code == 0
    assert cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam").exit_code == 0
    b = Home(tmp_path / "B")
    from core.pages.service import KnowledgeBase

    with Node.open(b) as node:
        kept = Diary(node).remember("The repair keeps this note", actor="eng-bot").note
        for i in range(12):
            KnowledgeBase(node).create_page("ENG", f"From B {i}", f"written on B, {i}\n")
    peer_file = next(p for p in (shared / "nodes").glob("*.json") if json.loads(p.read_text())["home"] == str(b.root))
    peer_file.write_text(json.dumps(json.loads(peer_file.read_text()) | {"host": "another-machine"}))
    start, _, _ = middle_page_create(shared / "pages.log")
    flip(shared / "pages.log", start + HEADER_SIZE + 40)
    assert cli(a.root, "log", "repair", "--yes").exit_code == 0
    res = cli(b.root, "log", "repair", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["rebuilt"] is True
    with Node.open(b) as node:
        notes = Diary(node).notes("eng-bot", actor="alex").notes
        assert [(n.id, n.text) for n in notes] == [(kept.id, kept.text)]


# -- the CLI ------------------------------------------------------------------------------------------------------

def test_crewlet_diary_and_agents_for_a_person_and_refusals_for_an_agent(tmp_path, server):
    home = Home(tmp_path / "h")
    init_home(home, company_data(server.url))
    with Node.open(home) as node:
        diary = Diary(node)
        for i in range(3):
            diary.remember(f"eng fact {i}", actor="eng-bot")
        diary.remember("ops fact", actor="ops-bot")
    out = json.loads(cli(home.root, "diary", "eng-bot", "--json").stdout)
    assert out["total"] == 3 and [n["text"] for n in out["notes"]] == ["eng fact 2", "eng fact 1", "eng fact 0"]
    assert all("age" in n and n["embedded"] for n in out["notes"])
    window = json.loads(cli(home.root, "diary", "eng-bot", "--limit", "1", "--before", str(out["notes"][0]["id"]),
                            "--json").stdout)
    assert [n["text"] for n in window["notes"]] == ["eng fact 1"]
    plain = cli(home.root, "diary", "eng-bot").stdout
    assert "eng fact 2" in plain and "ops fact" not in plain
    own = cli(home.root, "--as", "eng-bot", "diary", "eng-bot", "--json")
    assert own.exit_code == 0 and json.loads(own.stdout)["total"] == 3
    other = cli(home.root, "--as", "eng-bot", "diary", "ops-bot")
    assert other.exit_code == 1 and "only its own diary" in other.stderr and "ops fact" not in other.stdout
    person = cli(home.root, "diary", "alex")
    assert person.exit_code == 1 and "is a person, not an agent" in person.stderr
    agents = {a["agent"]: a for a in json.loads(cli(home.root, "agents", "--json").stdout)}
    assert set(agents) == {"eng-bot", "ops-bot"}
    assert agents["eng-bot"]["space"] == "ENG" and agents["eng-bot"]["diary_notes"] == 3
    assert agents["ops-bot"]["diary_notes"] == 1 and agents["eng-bot"]["chain"] == ["HOME", "ENG"]
    table = cli(home.root, "agents").stdout
    assert "eng-bot" in table and "ops-bot" in table and "3 notes" in table


def test_provider_none_derives_vectors_off_and_refuses_an_explicit_vectors_true(tmp_path):
    data = company_data(provider="none")
    assert config_mod.parse(data, tmp_path / "company.toml").knowledge.vectors is False
    data["knowledge"]["vectors"] = True
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.parse(data, tmp_path / "company.toml")
    assert err.value.key == "knowledge.vectors" and 'provider = "none"' in str(err.value)
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.parse(company_data(provider="none") | {"providers": {"embeddings": {"provider": "none", "model": "x"}}},
                         tmp_path / "company.toml")
    assert err.value.key == "providers.embeddings.model"
