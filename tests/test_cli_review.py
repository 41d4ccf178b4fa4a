"""`crewlet review …` and `crewlet triage status|run|show` over real homes: the queue's order and its one line
for the page proposals that do not exist yet, `--reason` (any case; an unknown one a usage error naming the
spec's reasons), a person's decisions and their `--json`, an agent (by --as or CREWLET_AS) refused each of them in
one line with nothing written, audits answered (agree keeps, disagree undoes, a second answer refused), and the
triage commands where nothing was decided yet or triage is off.

Decisions here are triage.decide records written to the home's log as triage writes them (the applier decides
from the rows, as for triage's own), so each surface is tested apart from what the engine would decide; the
engine's own decisions through a real MCP client and a chat model are tests/test_triage_mcp_cli.py's.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import config_with, new_home
from test_first_hour_cli import refused
from typer.testing import CliRunner

from core.node import Node
from core.pages.records import SYSTEM_ACTOR, triage_decide
from core.paths import Home
from crewlet_tui.cli import app

CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "CREWLET_NOW": None, "KNOWLEDGE_AUTO_TRIAGE": None,
             "COLUMNS": "200"}
PAGE = "ENG/Caching"
AGENT = {"CREWLET_AS": "eng-bot"}


@pytest.fixture
def home_cli(tmp_path: Path):
    home = new_home(tmp_path / "home", config_with(knowledge={"page_proposed_entry_budget": 20}))
    runner = CliRunner()

    def run(*args: str, env: dict | None = None, input: str | None = None):
        return runner.invoke(app, ["--home", str(home.root), *args], env={**CLEAN_ENV, **(env or {})}, input=input)

    assert run("page", "create", "ENG", "Caching", "--body-file", "-", input="How the cache works.\n").exit_code == 0
    return home, run


def ok(res) -> str:
    assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
    return res.stdout


def ok_json(res) -> dict:
    return json.loads(ok(res))


def add(run, body: str, *, agent: bool = True) -> str:
    data = ok_json(run("entry", "add", PAGE, body, "--distinct", "--json", env=AGENT if agent else None))
    return data["id"]


def decide(home: Home, entry_id: str, decision: str, *, mode: str = "shadow", acted: bool = False,
           reasons: tuple[str, ...] = (), held: tuple[str, ...] = (), fold_into: str | None = None,
           audited: bool = False) -> str:
    """A triage decision about the entry at its current version, as triage records it; returns its id."""
    with Node.open(home) as node:
        node.catch_up()
        version = node.conn.execute("SELECT version FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
        rec = triage_decide(SYSTEM_ACTOR, entry_id=entry_id, entry_version=version, mode=mode, decision=decision,
                            acted=acted, reasons=list(reasons), held=list(held), fold_into=fold_into, refusal=None,
                            inputs={"neighbours": [{"id": fold_into, "similarity": 0.93}] if fold_into else [],
                                    "rules": [], "citations": [],
                                    "judgments": [{"one_claim": True, "accept": True, "relations": {},
                                                   "reason": "it says one thing"}] * 2},
                            audited=audited)
        out = node.submit_one(rec)
        assert out.status == "applied", out
        return rec.op_id


def log_size(home: Home) -> int:
    return home.log_file.stat().st_size


# -- the queue ---------------------------------------------------------------------------------------------

def test_an_empty_queue_says_each_section_and_that_page_proposals_wait_for_consolidation(home_cli):
    _, run = home_cli
    out = ok(run("review"))
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("page proposals: none") and "consolidation" in lines[0]
    assert "0 proposed entries" in out and "0 open audits" in out
    data = ok_json(run("review", "--json"))
    assert (data["proposals"], data["entries"], data["audits"], data["reason"]) == ([], [], [], None)


def test_the_queue_lists_proposed_entries_with_reasons_and_decision_and_filters_by_reason(home_cli):
    home, run = home_cli
    first = add(run, "The cache keeps TTL_1 at sixty seconds.")
    second = add(run, "Retries back off exponentially.")
    person = add(run, "Deploys happen on Tuesdays.", agent=False)
    decision = decide(home, first, "accept", reasons=("UNGROUNDED", "UNKNOWN_SOURCE"), held=("UNKNOWN_SOURCE",))
    data = ok_json(run("review", "--json"))
    by_id = {q["entry"]["id"]: q for q in data["entries"]}
    assert set(by_id) == {first, second} and person not in by_id          # a person's entry is in use already
    assert by_id[first]["decision"]["id"] == decision and by_id[first]["decision"]["decision"] == "accept"
    assert "UNKNOWN_SOURCE" in by_id[first]["reasons"] and by_id[second]["decision"] is None

    out = ok(run("review"))
    assert "2 proposed entries" in out
    assert f"shadow: accept — recorded only (shadow: nothing changed), just now (decision {decision})" in out
    assert "triage: no decision yet" in out
    assert f"decide: crewlet review accept|dispute|verify|archive {second}" in out

    for spelled in ("UNKNOWN_SOURCE", "unknown_source", " Unknown_Source "):
        only = ok_json(run("review", "--reason", spelled, "--json"))
        assert [q["entry"]["id"] for q in only["entries"]] == [first] and only["reason"] == "UNKNOWN_SOURCE"
    none = ok(run("review", "--reason", "BROAD_SCOPE"))
    assert "0 proposed entries waiting for BROAD_SCOPE" in none and "without --reason lists every one" in none


def test_an_unknown_reason_and_listing_options_before_a_decision_are_usage_errors(home_cli):
    home, run = home_cli
    entry = add(run, "The cache keeps TTL_1 at sixty seconds.")
    res = run("review", "--reason", "BECAUSE")
    assert res.exit_code == 2 and "'BECAUSE' is no escalation reason" in res.stderr
    assert "UNKNOWN_SOURCE" in res.stderr and "LOW_AGREEMENT" in res.stderr
    before = log_size(home)
    res = run("review", "--reason", "NO_LLM", "accept", entry)
    assert res.exit_code == 2 and "crewlet review accept" in res.stderr
    assert log_size(home) == before


# -- a person's decisions, refused to an agent --------------------------------------------------------------

def test_a_persons_decisions_from_the_queue_and_the_verdict_they_give(home_cli):
    home, run = home_cli
    a, b, c, d = (add(run, body) for body in ("The cache keeps TTL_1 at sixty seconds.", "Retries back off.",
                                              "Staging needs the VPN.", "The worker pool holds eight threads."))
    decision = decide(home, a, "accept", reasons=("UNKNOWN_SOURCE",), held=("UNKNOWN_SOURCE",))
    said = ok(run("review", "accept", a, "--reason", "checked the code"))
    assert f"accepted {a}: STANDING" in said and "triage had decided: accept (shadow, decision" in said
    data = ok_json(run("review", "verify", b, "--json"))
    assert data["status"] == "STANDING" and data["verified_by"] == "alex" and data["triage"] is None
    assert ok_json(run("review", "dispute", c, "--reason", "we moved to Thursdays", "--json"))["status"] == "DISPUTED"
    assert ok_json(run("review", "archive", d, "--json"))["status"] == "ARCHIVED"
    with Node.open(home) as node:
        verdicts = node.conn.execute("SELECT decision_id, label, verdict, source FROM triage_verdicts").fetchall()
        history = node.conn.execute("SELECT reason FROM entry_history WHERE entry_id = ? AND action = 'accept'",
                                    (a,)).fetchall()
    assert [tuple(v) for v in verdicts] == [(decision, "accept", "accepted", "action")]
    assert [h[0] for h in history] == ["checked the code"]
    refused(run("review", "accept", "e-nothing"), "e-nothing")


def test_an_agent_is_refused_every_persons_action_in_one_line_and_nothing_is_written(home_cli):
    home, run = home_cli
    mine = add(run, "The cache keeps TTL_1 at sixty seconds.")
    accepted = add(run, "Retries back off exponentially.")
    standing = add(run, "Deploys happen on Tuesdays.", agent=False)
    audit = decide(home, accepted, "accept", mode="on", acted=True, audited=True)
    before = log_size(home)
    for args in (("accept", mine), ("verify", mine), ("dispute", mine), ("dispute", standing),
                 ("archive", standing), ("audit", audit, "agree"), ("audit", audit, "disagree")):
        for how in ({"env": AGENT}, {"argv": ("--as", "eng-bot")}):
            res = run(*how.get("argv", ()), "review", *args, env=how.get("env"))
            line = refused(res, "eng-bot")
            assert ("CREWLET_AS=eng-bot" if "env" in how else "--as eng-bot") in line, line
    assert log_size(home) == before
    assert ok_json(run("entry", "show", mine, "--json"))["status"] == "PROPOSED"
    assert ok_json(run("entry", "show", accepted, "--json"))["status"] == "STANDING"   # triage's, audit still open
    assert len(ok_json(run("review", "--json"))["audits"]) == 1
    res = run("review", "archive", standing, "--json", env=AGENT)
    assert res.exit_code == 1 and json.loads(res.stdout.splitlines()[0])["error"] == "forbidden"


# -- audits ---------------------------------------------------------------------------------------------------

def test_an_audit_is_listed_and_agree_keeps_disagree_undoes_and_a_second_answer_is_refused(home_cli):
    home, run = home_cli
    kept = add(run, "The cache keeps TTL_1 at sixty seconds.")
    undone = add(run, "Retries back off exponentially.")
    keep_id = decide(home, kept, "accept", mode="on", acted=True, audited=True)
    undo_id = decide(home, undone, "accept", mode="on", acted=True, audited=True)
    out = ok(run("review"))
    assert "2 open audits" in out and "0 proposed entries" in out
    assert f"crewlet review audit {keep_id} agree|disagree" in out and "on: accept — done, audit open" in out
    assert [a["decision"]["id"] for a in ok_json(run("review", "--json"))["audits"]] == [keep_id, undo_id]

    said = ok(run("review", "audit", keep_id, "agree"))
    assert said.startswith("agreed: triage's on: accept — done, kept by a person's audit") and (
        f"entry {kept} is STANDING") in said
    data = ok_json(run("review", "audit", undo_id, "DISAGREE", "--json"))
    assert data["answer"] == "disagree" and data["decision"]["id"] == undo_id and data["entry"]["status"] == "ARCHIVED"
    assert ok_json(run("review", "--json"))["audits"] == []
    assert ok(run("review", "audit", keep_id, "agree"))              # the same answer again: nothing to do
    refused(run("review", "audit", keep_id, "disagree"))
    refused(run("review", "audit", "no-such-decision", "agree"), "no-such-decision")
    unaudited = decide(home, add(run, "Staging needs the VPN."), "accept", reasons=("UNKNOWN_SOURCE",),
                       held=("UNKNOWN_SOURCE",))
    refused(run("review", "audit", unaudited, "agree"), f"no audit of decision {unaudited}")     # not drawn
    res = run("review", "audit", keep_id, "maybe")
    assert res.exit_code == 2 and "agree or disagree" in res.stderr


# -- triage status | run | show where little has happened ----------------------------------------------------

def test_triage_show_without_a_decision_and_with_one_and_entry_show_carries_it(home_cli):
    home, run = home_cli
    entry = add(run, "The cache keeps TTL_1 at sixty seconds.")
    person = add(run, "Deploys happen on Tuesdays.", agent=False)
    assert "triage has not decided" in ok(run("triage", "show", entry))
    assert ok_json(run("triage", "show", entry, "--json"))["decision"] is None
    assert "triage: no decision yet" in ok(run("entry", "show", entry))
    assert "triage" not in ok(run("entry", "show", person)).split("history")[-1]    # triage never sees it
    standing = add(run, "The cache keeps its entries for ten minutes.", agent=False)
    decision = decide(home, entry, "corroborate", fold_into=standing, reasons=("UNKNOWN_SOURCE",))
    out = ok(run("triage", "show", entry))
    assert f"fold into {standing}" in out and "neighbours" in out and "judgments" in out and "it says one thing" in out
    shown = ok_json(run("entry", "show", entry, "--json"))
    assert shown["triage"]["id"] == decision and shown["triage"]["fold_into"] == standing
    assert f"triage shadow: fold into {standing}" in ok(run("entry", "show", entry))
    refused(run("triage", "show", "e-nothing"), "e-nothing")


def test_triage_status_on_a_fresh_home_and_run_when_triage_is_off(home_cli):
    home, run = home_cli
    status = ok_json(run("triage", "status", "--json"))
    assert status["mode"] == "shadow" and [t["decision_type"] for t in status["types"]] == [
        "accept", "corroborate", "refuse", "escalate"]
    assert all(t["kappa"] is None and t["verdicts"] == 0 and t["state"] == "acting" for t in status["types"])
    table = ok(run("triage", "status"))
    assert "Can triage decide alone? mode shadow" in table and "never backs off" in table and "—" in table
    add(run, "The cache keeps TTL_1 at sixty seconds.")
    off = {"KNOWLEDGE_AUTO_TRIAGE": "off"}
    assert ok_json(run("triage", "status", "--json", env=off))["waiting"] == 1
    before = log_size(home)
    said = ok(run("triage", "run", env=off))
    assert "triage is off" in said and "every entry waits for a person" in said
    assert ok_json(run("triage", "run", "--json", env=off))["mode"] == "off"
    assert log_size(home) == before


def test_triage_run_says_what_it_decided_in_one_line_and_show_and_the_queue_say_why(home_cli):
    home, run = home_cli
    entry = add(run, "The cache keeps TTL_1 at sixty seconds.")
    said = ok(run("triage", "run"))
    lines = [line for line in said.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("triaged 1 in shadow mode (1 escalate), 0 model calls"), said
    assert "nothing changed (shadow" in lines[0]
    assert ok(run("triage", "run")).strip() == "no proposed entry waits for triage"
    shown = ok_json(run("triage", "show", entry, "--json"))["decision"]
    assert shown["decision"] == "escalate" and shown["reasons"] == ["UNGROUNDED"] and shown["acted"] is False
    out = ok(run("triage", "show", entry))
    assert "escalate to a person — recorded only (shadow: nothing changed)" in out and "reasons: UNGROUNDED" in out
    assert [q["entry"]["id"] for q in ok_json(run("review", "--reason", "ungrounded", "--json"))["entries"]] == [entry]
    on = ok_json(run("triage", "run", "--json", env={"KNOWLEDGE_AUTO_TRIAGE": "on"}))
    assert (on["mode"], on["triaged"], on["acted"], on["decided"]) == ("on", 0, 0, [])


def test_triage_run_on_a_terminal_draws_a_progress_bar_then_its_summary(home_cli):
    """Run as a person runs it: stdout a terminal (a pty), so the rich bar is drawn as entries are triaged."""
    import os
    import pty
    import subprocess
    import sys

    home, run = home_cli
    for i in range(3):
        add(run, f"Worker {i} drains the queue on shutdown.")
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CREWLET_", "KNOWLEDGE_"))} | {
        "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-c", "from crewlet_tui.cli import main; main()", "--home",
                             str(home.root), "triage", "run"], stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    out = b""
    while True:                          # read until the process closes the terminal (EIO), not for a time
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=300) == 0, proc.stderr.read() if proc.stderr else ""
    text = out.decode("utf-8", "replace")
    assert "triaging entries" in text and "3/3" in text, text
    assert "triaged 3 in shadow mode (3 escalate)" in text


def test_triage_run_while_the_triage_duty_runs_elsewhere_is_refused_in_one_line(home_cli):
    """`crewlet triage run` takes the triage duty's lease as the worker does: a pass running elsewhere is said."""
    from core.duties.runner import DutyRunner
    from core.duties.triage import TriageDuty

    home, run = home_cli
    add(run, "The cache keeps TTL_1 at sixty seconds.")
    with Node.open(home) as node:
        runner = DutyRunner(node, [TriageDuty(node)], label="crewlet worker")
        try:
            assert runner.leases["triage"].acquire() is None
            before = log_size(home)
            refused(run("triage", "run"), "triage runs elsewhere just now", "crewlet worker", "--status")
            res = run("triage", "run", "--json")
            assert res.exit_code == 1 and json.loads(res.stdout)["error"] == "busy"
            assert log_size(home) == before
        finally:
            runner.close()
    assert ok(run("triage", "run")).startswith("triaged 1 in shadow mode")


def test_an_entry_changed_since_triage_decided_says_so_in_the_queue_and_waits_for_triage_again(home_cli):
    home, run = home_cli
    entry = add(run, "The cache keeps TTL_1 at sixty seconds.")
    decide(home, entry, "accept", reasons=("UNKNOWN_SOURCE",), held=("UNKNOWN_SOURCE",))
    assert "changed since" not in ok(run("review"))
    ok(run("entry", "edit", entry, "The cache keeps TTL_1 at ninety seconds.", env=AGENT))   # its own, proposed
    queued = ok_json(run("review", "--json"))["entries"]
    assert [(q["entry"]["id"], q["stale"]) for q in queued] == [(entry, True)]
    assert "the entry changed since: triage decides again on its next run" in ok(run("review"))
    assert ok(run("triage", "run")).startswith("triaged 1 in shadow mode")
    assert ok_json(run("review", "--json"))["entries"][0]["stale"] is False
