"""`crewlet ask` against a real OpenAI-compatible chat server on 127.0.0.1 (tests/chat_server.py): what the
model is sent (only the sources, the instruction to cite), what a person is shown (checked, unchecked,
refused, failed, no model, nothing matched), the answer cache at a corpus position (retired by a write,
here and on another node of a shared directory), and the company's spend windows. Real homes, real logs,
real SQLite and Whoosh; every command through the CLI where a person would use it."""
from __future__ import annotations

import json
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, Reply
from conftest import new_home
from typer.testing import CliRunner

from core import config as config_mod
from core.ask import spend as spend_mod
from core.ask.answer import Asker
from core.ask.prompt import INSTRUCTION
from core.ask.spend import Ledger
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200", "CHAT_KEY": None}

RUNBOOK = """How a change reaches production.

## Before you deploy

1. The change is merged and CI is green.
2. Nobody else is deploying: check the #deploys channel.

## Rolling back

Roll back first, investigate second: run `nimbus rollback --to previous` and watch the error rate.
The on-call engineer may roll back without asking anyone.

## Afterwards

Write a short incident note within a week.
"""


def cli(root: Path, *args: str, env: dict[str, Any] | None = None):
    return CliRunner().invoke(app, ["--home", str(root), *args], env=ENV | (env or {}))


def ask_json(root: Path, *args: str, code: int = 0, env: dict[str, Any] | None = None) -> dict[str, Any]:
    res = cli(root, "ask", "--json", *args, env=env)
    assert res.exit_code == code, (res.stdout, res.stderr)
    return json.loads(res.stdout)


def one_line(res: Any) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crewlet: "), res.stderr
    assert "Traceback" not in res.stdout + res.stderr
    return lines[0]


def with_llm(home: Home, **settings: Any) -> None:
    data = config_mod.load(home.config_file).raw
    data = dict(data, providers={"llm": settings}) if settings else {k: v for k, v in data.items() if k != "providers"}
    config_mod.write(home.config_file, data)


def populate(home: Home) -> dict[str, str]:
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        ids = {
            "runbook": kb.create_page("ENG", "Deploy Runbook", RUNBOOK).id,
            "rollback": kb.create_page("ENG", "Rollback", "Anyone on call may roll back a deploy; say so in "
                                                          "#deploys afterwards.").id,
            "roadmap": kb.create_page("PROD", "Roadmap", "Faster deploys next quarter.").id,
            # LEAD's page shares the question's words: a narrowed ask must never send it
            "pay": kb.create_page("LEAD", "Compensation", "SALARY-BANDS-SECRET: a roll back of a raise needs "
                                                          "the deploy of a new band.").id,
        }
    return ids


@pytest.fixture
def server():
    with ChatServer() as s:
        yield s


@pytest.fixture
def home(tmp_path, server):
    h = new_home(tmp_path / "home")
    populate(h)
    with_llm(h, base_url=server.url, model="test-model", max_output_tokens=200, timeout_s=10)
    return h


def build_index(home: Home) -> None:
    from core.search.indexer import Indexer

    with Indexer(home) as indexer:
        indexer.run_pass(wait=True)


def sources_sent(body: dict[str, Any]) -> list[str]:
    """The addresses of the sources in a request, in their numbered order."""
    user = body["messages"][1]["content"]
    found = re.findall(r'<source n="(\d+)">\n\[(\d+)\] (\S+/[^\n(]+?)(?: \(in [^\n]*\))?\n', user)
    assert all(a == b for a, b, _ in found)
    assert [int(a) for a, _, _ in found] == list(range(1, len(found) + 1))
    return [addr for _, _, addr in found]


# -- what is sent, and what is shown ----------------------------------------------------------------------

def test_a_cited_answer_is_checked_and_the_model_was_sent_only_the_sources_and_the_instruction(home, server):
    server.script = [Reply("Roll back first with `nimbus rollback --to previous` [1]. Anyone on call may do it [2].")]
    out = ask_json(home.root, "how do we roll back a deploy?", "--container", "ENG")
    assert (out["status"], out["checked"], out["cached"]) == ("answered", True, False)
    assert [s["address"] for s in out["sources"]] == ["ENG/Deploy Runbook", "ENG/Rollback"]
    assert out["citations"]["cited"] == [1, 2] and out["citations"]["unknown"] == []
    assert [c["cites"] for c in out["citations"]["claims"]] == [[1], [2]]

    (body,) = server.bodies
    assert body["model"] == "test-model" and body["max_tokens"] == 200
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    system, user = body["messages"]
    assert system == {"role": "system", "content": INSTRUCTION}
    assert "Cite every claim" in system["content"] and '"The sources do not"' in system["content"]
    assert sources_sent(body) == ["ENG/Deploy Runbook", "ENG/Rollback"]
    # the best-matching part of the runbook, not only its opening; and nothing from outside ENG
    assert "nimbus rollback --to previous" in user["content"] and "§ Rolling back" in user["content"]
    assert "SALARY-BANDS-SECRET" not in user["content"] and "Roadmap" not in user["content"]
    assert user["content"].endswith("Question: how do we roll back a deploy?")
    # what the model was given is what the answer lists
    for source in out["sources"]:
        for passage in source["passages"]:
            assert passage in user["content"]

    shown = cli(home.root, "ask", "how do we roll back a deploy?", "--container", "ENG")
    assert shown.exit_code == 0 and "✓ checked" in shown.stdout and "cached: true" in shown.stdout
    assert "[1] Deploy Runbook  ENG/Deploy Runbook" in shown.stdout


def test_a_reply_citing_a_source_that_was_not_given_is_shown_unchecked(home, server):
    server.script = [Reply("Roll back with the CLI [1]. The CFO must approve it [7].")]
    out = ask_json(home.root, "how do we roll back a deploy?", "--container", "ENG")
    assert out["status"] == "answered" and out["checked"] is False
    assert out["citations"]["unknown"] == [7] and "[7]" in out["reason"] and "2 sources were given" in out["reason"]
    claims = {c["text"]: c for c in out["citations"]["claims"]}
    assert claims["The CFO must approve it [7]."]["unknown"] == [7]
    assert claims["Roll back with the CLI [1]."]["cites"] == [1]
    server.script = [Reply("Roll back with the CLI [1]. The CFO must approve it [7].")]
    shown = cli(home.root, "ask", "how do we roll back a deploy?", "--container", "ENG", "--fresh")
    assert shown.exit_code == 0
    assert "⚠ unchecked: it cites [7], but only 2 sources were given" in shown.stdout


def test_a_reply_citing_nothing_is_shown_unchecked(home, server):
    server.script = [Reply("Just roll it back, it is fine.")]
    out = ask_json(home.root, "how do we roll back a deploy?")
    assert out["checked"] is False and out["citations"]["cited"] == []
    assert out["reason"] == "unchecked: it cites no source, so nothing in it can be traced to a page"
    assert out["citations"]["uncited"] == 1


def test_sources_that_do_not_answer_are_said_so_in_one_sentence(home, server):
    server.script = [Reply("The sources do not say who approves a rollback.")]
    out = ask_json(home.root, "who approves a rollback of a deploy?")
    assert out["status"] == "not_answered" and out["checked"] is True and out["citations"]["not_answered"]
    shown = cli(home.root, "ask", "who approves a rollback of a deploy?")
    assert "The sources below do not answer the question." in shown.stdout


def test_a_refusal_is_an_answer_with_its_reason_and_its_spend_recorded(home, server):
    server.script = [Reply(refusal="I cannot help with that.", usage=(321, 7))]
    res = cli(home.root, "ask", "how do we roll back a deploy?")
    assert res.exit_code == 1
    assert one_line(res) == "crewlet: the model refused to answer: I cannot help with that."
    assert "Sources" in res.stdout and "ENG/Deploy Runbook" in res.stdout
    day = Ledger(home.log_dir).windows(None)[0]
    assert (day.prompt_tokens, day.completion_tokens, day.answers) == (321, 7, 1)   # its prompt was billed


def test_an_http_error_is_one_line_with_the_sources_and_spends_nothing(home, server):
    server.script = [Reply(status=500)]
    res = cli(home.root, "ask", "how do we roll back a deploy?")
    assert res.exit_code == 1
    line = one_line(res)
    assert "HTTP 500" in line and "chat/completions" in line
    assert "ENG/Deploy Runbook" in res.stdout
    server.script = [Reply(status=500)]
    out = ask_json(home.root, "how do we roll back a deploy?", code=1)
    assert (out["status"], out["failure"], out["checked"]) == ("failed", "http", None)
    assert out["sources"] and out["spent"] == 0
    assert Ledger(home.log_dir).windows(None)[0].spent == 0


def test_a_reply_slower_than_timeout_s_is_a_timeout_with_the_sources(home, server):
    with_llm(home, base_url=server.url, model="test-model", timeout_s=0.5)
    gate = threading.Event()
    server.script = [Reply("too late [1]", hold=gate)]
    try:
        out = ask_json(home.root, "how do we roll back a deploy?", code=1)
    finally:
        gate.set()
    assert (out["status"], out["failure"]) == ("failed", "timeout")
    assert "no complete reply within 0.5 s (providers.llm.timeout_s)" in out["reason"]
    assert out["sources"]
    # the prompt was sent: what it cost is estimated, and says so
    assert out["usage"]["reported"] is False and out["usage"]["prompt_tokens"] > 0
    day = Ledger(home.log_dir).windows(None)[0]
    assert day.spent == out["spent"] > 0 and day.reserved == 0


def test_a_reply_that_is_no_chat_completion_is_garbage(home, server):
    server.script = [Reply(garbage=b"<html>gateway says hello</html>")]
    out = ask_json(home.root, "how do we roll back a deploy?", code=1)
    assert (out["status"], out["failure"]) == ("failed", "garbage") and "not JSON" in out["reason"]
    server.script = [Reply(events=['{"choices": [{"delta": {"content": "half an ans"}}]}'])]   # cut off mid-stream
    out = ask_json(home.root, "how do we roll back a deploy?", code=1)
    assert out["failure"] == "garbage" and "ended before the reply was complete" in out["reason"]
    assert out["answer"] == "half an ans"


def test_a_streamed_reply_arrives_in_pieces_and_a_whole_one_is_read_too(home, server):
    text = "Roll back first [1]. Anyone on call may [2]."
    server.script = [Reply(text, pieces=["Roll back ", "first [1]", ". Anyone on ", "call may [2]."])]
    pieces: list[str] = []
    build_index(home)
    with Node.open(home) as node:
        asker = Asker(node)
        try:
            streamed = asker.answer("how do we roll back a deploy?", containers=["ENG"], on_text=pieces.append)
            server.script = [Reply(text, stream=False)]           # a server that ignores `stream`
            whole = asker.answer("how do we roll back a deploy?", containers=["ENG"], use_cache=False)
        finally:
            asker.close()
    assert pieces == ["Roll back ", "first [1]", ". Anyone on ", "call may [2]."]
    assert streamed.text == whole.text == text and streamed.checked and whole.checked
    assert streamed.usage is not None and streamed.usage.reported


def test_a_cut_reply_says_it_was_cut(home, server):
    server.script = [Reply("Roll back first [1]", finish_reason="length")]
    out = ask_json(home.root, "how do we roll back a deploy?")
    assert out["checked"] is True and out["finish_reason"] == "length"
    assert "the reply was cut at max_output_tokens = 200" in out["reason"]


# -- the key --------------------------------------------------------------------------------------------

def test_the_key_is_read_from_the_named_variable_and_redacted_from_every_message(tmp_path):
    key = "sk-test-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"
    with ChatServer(api_key=key) as server:
        h = new_home(tmp_path / "home")
        populate(h)
        with_llm(h, base_url=server.url, model="test-model", api_key_env="CHAT_KEY")
        missing = cli(h.root, "ask", "how do we roll back a deploy?")
        assert missing.exit_code == 1 and server.requests == 0
        assert "providers.llm.api_key_env names CHAT_KEY, which is not set" in one_line(missing)
        wrong = cli(h.root, "ask", "how do we roll back a deploy?", env={"CHAT_KEY": key[:-1] + "X"})
        line = one_line(wrong)
        assert "HTTP 401" in line and "CHAT_KEY" in line and key[:-1] not in line + wrong.stdout
        right = ask_json(h.root, "how do we roll back a deploy?", env={"CHAT_KEY": key})
        assert right["status"] == "answered" and server.headers[-1]["authorization"] == f"Bearer {key}"
        assert key not in (h.log_dir / "spend.jsonl").read_text()


# -- no model, nothing matched ------------------------------------------------------------------------------

def test_with_no_model_configured_the_sources_are_the_answer_and_say_how_to_configure_one(tmp_path):
    h = new_home(tmp_path / "home")
    populate(h)
    res = cli(h.root, "ask", "how do we roll back a deploy?", "--container", "ENG")
    assert res.exit_code == 0, res.stderr
    assert "No model is configured, so no answer was written" in res.stdout
    assert "[providers.llm]" in res.stdout and str(h.config_file) in res.stdout.replace("\n", "")
    assert "ENG/Deploy Runbook" in res.stdout and "nimbus rollback --to previous" in res.stdout
    out = ask_json(h.root, "how do we roll back a deploy?", "--container", "ENG")
    assert (out["status"], out["answer"], out["checked"], out["spent"]) == ("no_model", "", None, 0)
    assert [s["address"] for s in out["sources"]] == ["ENG/Deploy Runbook", "ENG/Rollback"]
    assert any("nimbus rollback --to previous" in p for p in out["sources"][0]["passages"])
    assert not (h.log_dir / "spend.jsonl").exists()


def test_a_question_nothing_matches_is_answered_without_a_model_and_costs_nothing(home, server):
    res = cli(home.root, "ask", "kubernetes helm chart")
    assert res.exit_code == 0 and "Nothing you may read matches the question" in res.stdout
    out = ask_json(home.root, "kubernetes helm chart")
    assert (out["status"], out["sources"], out["spent"]) == ("no_match", [], 0)
    assert server.requests == 0 and not (home.log_dir / "spend.jsonl").exists()


def test_a_question_no_page_is_near_by_meaning_is_answered_without_a_model_on_an_embedded_home(tmp_path, server):
    """With vectors on, search by meaning always has a nearest page: the search's relevance floor leaves it out, so
    the ask sends nothing (before the floor, this question went out with 8 pages as its sources, and was paid)."""
    root = tmp_path / "example"
    assert cli(root, "init", "--example").exit_code == 0
    worker = cli(root, "worker", "--once")
    assert worker.exit_code == 0, worker.stderr
    h = Home(root)
    with_llm(h, base_url=server.url, model="test-model", max_output_tokens=200, timeout_s=10)
    out = ask_json(root, "zebra quartz xylophone")
    assert (out["status"], out["sources"], out["spent"]) == ("no_match", [], 0)
    assert out["search"]["served_mode"] == "hybrid" and "nothing close enough" in out["reason"]
    assert server.requests == 0
    # the same home answers a question its pages hold, by a model: the floor cut noise, not the search
    assert ask_json(root, "how do we roll back a deploy?")["status"] == "answered" and server.requests == 1


def test_usage_errors_and_an_agent_is_refused(home, server):
    assert cli(home.root, "ask").exit_code == 2
    assert cli(home.root, "ask", "   ").exit_code == 2
    assert cli(home.root, "ask", "--spend", "why").exit_code == 2
    typo = cli(home.root, "ask", "--container", "NOPE", "how do we roll back a deploy?")
    assert typo.exit_code == 1 and typo.stdout == "" and "no space 'NOPE': it is not declared" in one_line(typo)
    res = cli(home.root, "--as", "eng-bot", "ask", "how do we roll back a deploy?")
    assert res.exit_code == 1 and "eng-bot is an agent: answers are written for a person" in one_line(res)
    assert server.requests == 0


# -- the cache ---------------------------------------------------------------------------------------------

def answer_rows(home: Home) -> list[tuple[int, int]]:
    with Node.open(home) as node:
        return [tuple(r) for r in node.conn.execute("SELECT pages_seq, vectors_seq FROM answer_cache")]


def test_a_repeat_is_cached_until_a_write_moves_the_position(home, server):
    server.default = Reply("Roll back first [1].")
    first = ask_json(home.root, "How do we roll back a deploy?")
    assert first["cached"] is False and server.requests == 1
    again = ask_json(home.root, "  how DO we   roll back a deploy? ")          # case and spacing folded
    assert again["cached"] is True and again["spent"] == 0 and server.requests == 1
    assert again["answer"] == first["answer"] and again["sources"] == first["sources"]
    spent_before = Ledger(home.log_dir).windows(None)[0].spent
    # the set of spaces read is part of the key: another narrowing is another answer
    assert ask_json(home.root, "how do we roll back a deploy?", "--container", "ENG")["cached"] is False
    assert server.requests == 2
    # a write moves the position: the old answers are retired, the next ask writes a new one
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", "Incident notes", "Write them within a week.")
    after = ask_json(home.root, "how do we roll back a deploy?")
    assert after["cached"] is False and server.requests == 3
    rows = answer_rows(home)
    assert rows == [(after["position"]["pages"], after["position"]["vectors"])]
    assert Ledger(home.log_dir).windows(None)[0].spent > spent_before


def test_an_answer_paid_for_stands_when_the_cache_cannot_keep_it(home, server, monkeypatch):
    from core.ask.cache import AnswerCache
    from core.store.driver import sqlite3

    def full(*_a, **_k):
        raise sqlite3.OperationalError("database or disk is full")

    server.default = Reply("Roll back first [1].")
    build_index(home)
    with Node.open(home) as node:
        asker = Asker(node)
        monkeypatch.setattr(asker.cache, "put", full)      # the disk fills between the reply and the cache
        try:
            got = asker.answer("how do we roll back a deploy?", containers=["ENG"])
        finally:
            asker.close()
    assert got.text == "Roll back first [1]." and not got.cached and server.requests == 1
    assert isinstance(asker.cache, AnswerCache)


def test_a_home_migrated_before_the_answer_cache_gains_it_and_keeps_its_diary(tmp_path, server,
                                                                                               monkeypatch):
    """A home made by the crewlet before the answer cache has m009 (the diary) and no m010. Migrations are known
    by name, so opening it here runs m010 alone, and nothing it held is lost."""
    from core.agents.diary import Diary
    from core.store import migrations

    mains = [fn for fn in migrations.MIGRATIONS if fn is not migrations.m010_answer_cache]
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", mains)       # the crewlet before the cache: m001..m009
        h = new_home(tmp_path / "home")
        ids = populate(h)
        with Node.open(h) as node:
            note = Diary(node).remember("Deploys to staging need the VPN on first", actor="eng-bot").note
            done = [r[0] for r in node.conn.execute("SELECT name FROM _migrations ORDER BY name")]
            tables = {r[0] for r in node.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "m009_agent_diary" in done and "m010_answer_cache" not in done and "answer_cache" not in tables

    with_llm(h, base_url=server.url, model="test-model", max_output_tokens=200, timeout_s=10)
    server.default = Reply("Roll back first [1].")
    first = ask_json(h.root, "How do we roll back a deploy?")            # the first open migrates
    assert first["cached"] is False and server.requests == 1
    assert ask_json(h.root, "how do we roll back a deploy?")["cached"] is True and server.requests == 1
    with Node.open(h) as node:
        names = [r[0] for r in node.conn.execute("SELECT name FROM _migrations ORDER BY applied_at, name")]
        assert names[-1] == "m010_answer_cache" and sorted(names) == sorted(fn.__name__ for fn in migrations.MIGRATIONS)
        assert migrations.migrate(node.conn) == []                      # nothing runs twice
        assert [n.text for n in Diary(node).notes("eng-bot", actor="eng-bot").notes] == [note.text]  # whole
        assert KnowledgeBase(node).get_page(ids["runbook"]).title == "Deploy Runbook"


def test_a_write_on_another_node_retires_the_cached_answer(tmp_path, server):
    a = new_home(tmp_path / "A")
    populate(a)
    shared = tmp_path / "shared"
    assert cli(a.root, "sync", "join", str(shared)).exit_code == 0
    assert cli(tmp_path / "B", "sync", "join", str(shared), "--operator", "sam").exit_code == 0
    a, b = Home(a.root), Home(tmp_path / "B")
    with_llm(a, base_url=server.url, model="test-model")          # company.toml is the shared one
    server.default = Reply("Roll back first [1].")
    assert ask_json(a.root, "how do we roll back a deploy?")["cached"] is False
    assert ask_json(a.root, "how do we roll back a deploy?")["cached"] is True
    assert cli(b.root, "page", "create", "ENG", "Rollback drills").exit_code == 0
    again = ask_json(a.root, "how do we roll back a deploy?")
    assert again["cached"] is False and server.requests == 2
    assert len(answer_rows(a)) == 1
    # the spend is the company's: both nodes see the same windows
    mine = json.loads(cli(b.root, "ask", "--spend", "--json").stdout)
    theirs = json.loads(cli(a.root, "ask", "--spend", "--json").stdout)
    assert mine["windows"] == theirs["windows"] and mine["windows"][0]["answers"] == 2
    assert mine["ledger"] == theirs["ledger"] == str(shared / "spend.jsonl")


# -- spend windows ---------------------------------------------------------------------------------------

def test_a_window_with_no_room_refuses_before_the_call_naming_the_window(home, server):
    with_llm(home, base_url=server.url, model="test-model", max_output_tokens=200, budget_tokens_day=4500,
             budget_tokens_month=1_000_000)
    server.default = Reply("Roll back first [1].", usage=(4000, 100))
    assert ask_json(home.root, "how do we roll back a deploy?")["spent"] == 4100
    res = cli(home.root, "ask", "who may roll back a deploy?")
    assert res.exit_code == 1 and server.requests == 1                          # refused before the call
    line = one_line(res)
    assert "the company's day window has no room: 4,100 of 4,500 tokens spent" in line
    assert "budget_tokens_day" in line and "opens again at" in line
    out = json.loads(cli(home.root, "ask", "--spend", "--json").stdout)
    by = {w["window"]: w for w in out["windows"]}
    assert (by["day"]["spent"], by["day"]["budget"], by["day"]["room"]) == (4100, 4500, 400)
    assert (by["month"]["budget"], by["week"]["budget"], by["week"]["room"]) == (1_000_000, None, None)
    shown = cli(home.root, "ask", "--spend")
    assert shown.exit_code == 0 and re.search(r"day\s+4,100\s+4,000\s+100\s+1\s+4,500\s+400", shown.stdout)


def test_a_budget_smaller_than_one_answer_says_so(home, server):
    with_llm(home, base_url=server.url, model="test-model", max_output_tokens=200, budget_tokens_week=100)
    res = cli(home.root, "ask", "how do we roll back a deploy?")
    assert res.exit_code == 1 and server.requests == 0
    assert "the company's week window allows 100 tokens and one answer needs up to" in one_line(res)


def test_windows_are_utc_calendar_windows_and_reservations_hold_room_until_settled(tmp_path):
    settings = config_mod.parse(dict(config_mod.example_config(), providers={"llm": {
        "base_url": "http://127.0.0.1:9/v1", "model": "m", "budget_tokens_day": 1000, "timeout_s": 10}}),
        tmp_path / "c.toml").llm
    assert settings is not None
    ledger = Ledger(tmp_path)
    def ms(*when: int) -> int:
        return int(datetime(*when, tzinfo=timezone.utc).timestamp() * 1000)

    sunday_noon = ms(2026, 1, 11, 12)
    assert spend_mod.window_bounds("day", sunday_noon) == (ms(2026, 1, 11), ms(2026, 1, 12))
    assert spend_mod.window_bounds("week", sunday_noon) == (ms(2026, 1, 5), ms(2026, 1, 12))   # Monday to Monday
    assert spend_mod.window_bounds("month", sunday_noon) == (ms(2026, 1, 1), ms(2026, 2, 1))
    assert spend_mod.window_bounds("month", ms(2026, 12, 31, 23)) == (ms(2026, 12, 1), ms(2027, 1, 1))
    # yesterday's spend is in the week and the month, not the day
    ledger.record(None, 300, 20, reported=True, actor="alex", outcome="answered", model="m",
                  at_ms=sunday_noon - 86_400_000)
    rid = ledger.reserve(settings, 900, actor="alex", at_ms=sunday_noon)
    windows = {w.name: w for w in ledger.windows(settings, sunday_noon)}
    assert (windows["day"].spent, windows["day"].reserved, windows["day"].room) == (0, 900, 100)
    assert (windows["week"].spent, windows["month"].spent) == (320, 320)
    with pytest.raises(spend_mod.NoRoom) as refused:                # a second ask while the first is written
        ledger.reserve(settings, 200, actor="sam", at_ms=sunday_noon + 1)
    assert refused.value.window.name == "day" and "900 held by answers being written" in str(refused.value)
    ledger.record(rid, 150, 40, reported=True, actor="alex", outcome="answered", model="m", at_ms=sunday_noon + 2)
    windows = {w.name: w for w in ledger.windows(settings, sunday_noon + 3)}
    assert (windows["day"].spent, windows["day"].reserved, windows["day"].room) == (190, 0, 810)
    # a reservation nobody settled (a killed process) stops counting once its call's deadline has long passed
    ledger.reserve(settings, 500, actor="alex", at_ms=sunday_noon + 4)
    late = sunday_noon + 4 + 10_000 + spend_mod.RESERVATION_GRACE_MS + 1
    assert {w.name: w for w in ledger.windows(settings, late)}["day"].reserved == 0
    # a torn last line (a crash mid-append) is skipped
    with ledger.file.open("ab") as f:
        f.write(b'{"v":1,"kind":"spent","id":"x","at":')
    assert {w.name: w for w in ledger.windows(settings, sunday_noon + 5)}["day"].spent == 190


def test_the_ledger_is_read_from_its_end(tmp_path, monkeypatch):
    """A year of answers: the windows read only the blocks that reach back to the month's start."""
    monkeypatch.setattr(spend_mod, "TAIL_BLOCK", 4096)
    ledger = Ledger(tmp_path)
    now = 1_768_176_000_000 + 12 * 3_600_000
    lines = []
    for i in range(4000):                     # one answer every ~2 hours over the year before `now`
        at = now - (4000 - i) * 7_884_000
        lines.append(json.dumps({"v": 1, "kind": "spent", "id": f"e{i}", "at": at, "in": 10, "out": 1}))
    ledger.file.write_text("\n".join(lines) + "\n")
    reads: list[int] = []
    real_open = Path.open

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        f = real_open(self, *args, **kwargs)
        if self == ledger.file:
            real_read = f.read

            def read(n: int = -1) -> Any:
                data = real_read(n)
                reads.append(len(data))
                return data

            f.read = read  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(Path, "open", counting_open)
    windows = {w.name: w for w in ledger.windows(None, now)}
    month_start = spend_mod.window_bounds("month", now)[0]
    expected = sum(1 for i in range(4000) if now - (4000 - i) * 7_884_000 >= month_start)
    assert windows["month"].answers == expected and windows["month"].spent == 11 * expected
    assert sum(reads) < ledger.file.stat().st_size / 4


def test_the_answer_as_text_for_an_assistant_says_what_it_is_worth_and_lists_its_sources(home, server):
    build_index(home)
    server.script = [Reply("Roll back first [1]."), Reply("It is fine [9].")]
    with Node.open(home) as node:
        asker = Asker(node)
        try:
            good = asker.answer("how do we roll back a deploy?", containers=["ENG"])
            bad = asker.answer("who may roll back a deploy?", containers=["ENG"])
            again = asker.answer("how do we roll back a deploy?", containers=["ENG"])
        finally:
            asker.close()
    text = good.to_text()
    assert text.startswith("Roll back first [1].\n\nchecked: every citation names a source below\n\nSources:\n[1] ENG/")
    assert f"(id {good.sources[0].page_id})" in text
    assert "unchecked: it cites [9], but only 2 sources were given" in bad.to_text()
    assert again.cached and "(cached) checked" in again.to_text()


def test_what_the_model_writes_reaches_the_terminal_inert(home, server):
    server.script = [Reply("Roll back \x1b[2J\x1b]52;c;aGVsbG8=\x07 first \x9b31m [1].")]
    res = cli(home.root, "ask", "how do we roll back a deploy?")
    assert res.exit_code == 0 and "Roll back" in res.stdout
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", res.stdout + res.stderr)
    assert "\u241b[2J" in res.stdout                      # shown, not executed


# -- a company on Confluence -------------------------------------------------------------------------------

def test_a_confluence_company_is_answered_from_the_site_and_never_cached(tmp_path, server):
    from tests.remote_servers import ConfluenceServer

    with ConfluenceServer() as cf:
        cf.user("company-token", "svc")
        cf.space("ENG", "Engineering")
        pid = cf.page("ENG", "Deploy Runbook", "<h2>Rolling back</h2><p>To roll back a deploy, run the "
                                               "<code>rollback</code> job.</p>")
        cf.page("ENG", "Holidays", "<p>Nothing to do with deploys.</p>")
        data = config_mod.example_config()
        data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG"]}
        data["integrations"] = {"confluence": {"url": cf.url, "token_env": "CF_TOKEN"}}
        data["providers"] = {"llm": {"base_url": server.url, "model": "test-model"}}
        h = new_home(tmp_path / "home", data)
        server.default = Reply("Run the rollback job [1].")
        env = {"CF_TOKEN": "company-token"}
        first = ask_json(h.root, "roll back a deploy", env=env)
        assert (first["status"], first["checked"], first["cached"]) == ("answered", True, False)
        assert [s["address"] for s in first["sources"]] == ["ENG/Deploy Runbook"]
        source = first["sources"][0]
        assert source["page_id"] == pid and source["url"].startswith(cf.url + "/spaces/ENG/pages/")
        assert "run the `rollback` job" in server.bodies[0]["messages"][1]["content"]   # the page API's Markdown
        again = ask_json(h.root, "roll back a deploy", env=env)
        assert again["cached"] is False and server.requests == 2          # the site changes unheard: no cache
        with Node.open(h) as node:
            assert node.conn.execute("SELECT count(*) FROM answer_cache").fetchone()[0] == 0


def test_max_sources_and_max_source_tokens_bound_what_is_sent(home, server):
    with_llm(home, base_url=server.url, model="test-model", max_sources=1, max_source_tokens=200)
    out = ask_json(home.root, "how do we roll back a deploy?")
    assert len(out["sources"]) == 1 and out["source_tokens"] <= 200
    assert len(sources_sent(server.bodies[-1])) == 1
    with_llm(home, base_url=server.url, model="test-model")
    assert len(ask_json(home.root, "how do we roll back a deploy?")["sources"]) == 4   # the default: up to 8
