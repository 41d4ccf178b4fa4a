"""Triage and the review queue end to end (issue 36): agents add entries through a real MCP client session on a
`crewlet mcp` process, `crewlet triage run` triages them as a separate process against a chat model served over
real HTTP on 127.0.0.1 (tests/chat_server.py, answering "Judgment 1 of 2" and "Judgment 2 of 2" as each test
wants), and a person decides with the CLI (`crewlet review`, `crewlet triage status|show`), each its own process.

Shadow records and changes nothing; with KNOWLEDGE_AUTO_TRIAGE=on a fold acts and, at audit rate 1, is audited;
a person's disagreement undoes it; the draw at rate 0.5 is worked out again from the decision ids with
core.stats.drawn; people's decisions are verdicts whose kappa per type `crewlet triage status` reports, worked by
hand below; and an agent (`--as eng-bot`) is refused every person's action in one line, nothing written.
"""
from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, Reply
from conftest import config_with, new_home
from mcp_client import call, connect, crewlet, crewlet_json
from mcp_client import anyio_backend  # noqa: F401 - a fixture, by name
from test_repos_support import GitRepo

from core.node import Node
from core.paths import Home
from core.stats import drawn

pytestmark = pytest.mark.anyio

CACHE = "".join(f"TTL_{i} = {i * 60}\n" for i in range(1, 21))          # apps/server/src/cache.py: 20 lines
RETRY = "MAX_RETRIES = 5\nBACKOFF = 'exponential'\n"
AGENT = "eng-bot"
ON = {"KNOWLEDGE_AUTO_TRIAGE": "on"}

# a person's entries in use, and an agent's near repeat of each (neighbours by meaning; no rule in code can tell
# how the two relate, so the two model judgments decide). Measured with the shipped local model: each new body's
# only neighbour is its own, at similarity 0.91–0.94.
PAIRS = [
    ("Deploys to staging need the VPN.", "Staging deploys require a VPN connection."),
    ("The billing service retries a failed charge three times.", "A failed charge is retried by billing three times over."),
    ("The search index is rebuilt every night at two.", "Every night at two the search index gets rebuilt from scratch."),
    ("Uploads larger than ten megabytes are rejected by the API gateway.", "The API gateway refuses uploads above ten megabytes."),
    ("The worker pool holds eight threads.", "Eight threads make up the worker pool."),
]


# -- the chat model: two judgments, answered as the test wants ----------------------------------------------

Judgment = dict[str, Any]


class JudgingServer(ChatServer):
    """The chat server answering each triage judgment from `answer(number, prompt)`: the judgment's number (1
    or 2, read from its prompt's "Judgment N of 2") and the whole prompt; it returns the judgment's JSON
    object. Every prompt it was sent is kept in `judgments` as (number, prompt)."""

    def __init__(self, answer: Callable[[int, str], Judgment]) -> None:
        super().__init__(model="judge-model")
        self.answer = answer
        self.judgments: list[tuple[int, str]] = []

    def _handle(self, h: Any) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        h.rfile = io.BytesIO(raw)            # the server reads the request again, as it came
        try:
            prompt = "\n".join(str(m.get("content", "")) for m in json.loads(raw)["messages"])
        except (ValueError, KeyError, TypeError):
            prompt = ""
        found = re.search(r"Judgment ([12]) of 2", prompt)
        if found:
            number = int(found.group(1))
            with self._lock:
                self.judgments.append((number, prompt))
                self.script.insert(0, Reply(json.dumps(self.answer(number, prompt))))
        super()._handle(h)


def judgment(*, accept: bool = True, one_claim: bool = True, relations: dict[str, str] | None = None,
             reason: str = "as the test wants") -> Judgment:
    return {"one_claim": one_claim, "accept": accept, "relations": relations or {}, "reason": reason}


def relations_in(prompt: str, related: dict[str, str]) -> dict[str, str]:
    """The relations of the neighbours this prompt shows (by id), from `related`: id -> relation."""
    return {eid: rel for eid, rel in related.items() if eid in prompt}


# -- a home: the repository, the company, a page, and the CLI and MCP as their own processes ------------------

@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    g = GitRepo(tmp_path / "server")
    g.write("apps/server/pyproject.toml", "[project]\nname = 'server'\n")
    g.write("apps/server/src/cache.py", CACHE)
    g.write("apps/server/src/retry.py", RETRY)
    g.commit("first")
    return g


def make_home(tmp_path: Path, repo: GitRepo, server: ChatServer, **knowledge: object) -> Home:
    config = config_with(repositories={"server": {"path": str(repo.path)}},
                         knowledge={"page_proposed_entry_budget": 50} | knowledge)
    config["providers"] = {"llm": {"base_url": server.url, "model": "judge-model", "timeout_s": 30}}
    home = new_home(tmp_path / "home", config)
    ok(crewlet(home.root, "page", "create", "ENG", "Caching", "--body-file", "/dev/null"))
    return home


def cite(repo: GitRepo, path: str, lines: tuple[int, int], quote: str) -> dict[str, Any]:
    return {"repository": "server", "path": path, "lines": list(lines),
            "commit": repo.git("rev-parse", "HEAD").strip(), "quote": quote}


def ok(res: Any) -> str:
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    return res.stdout


def refused_to_agent(home: Home, *args: str) -> str:
    """`crewlet --as eng-bot ARGS`: exit 1, one line on stderr, and not a byte added to the log."""
    before = home.log_file.stat().st_size
    res = crewlet(home.root, *args, actor=AGENT)
    assert res.returncode == 1, (args, res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crewlet: "), (args, res.stderr)
    assert "Traceback" not in res.stderr and AGENT in lines[0], lines[0]
    assert home.log_file.stat().st_size == before, args
    return lines[0]


def person_adds(home: Home, body: str) -> str:
    """A person's entry (STANDING at once), through the CLI."""
    data = crewlet_json(home.root, "entry", "add", "ENG/Caching", body, "--distinct")
    assert data["status"] == "STANDING", data
    return data["id"]


async def agent_adds(client: Any, body: str, **more: Any) -> str:
    _, data = await call(client, "add_entry", page="ENG/Caching", body=body, **more)
    assert data["written"] is True and data["entry"]["status"] == "PROPOSED", data
    return data["entry"]["id"]


def rows(home: Home, sql: str, args: tuple = ()) -> list[tuple]:
    with Node.open(home) as node:
        node.catch_up()
        return [tuple(r) for r in node.conn.execute(sql, args)]


def statuses(home: Home, *ids: str) -> list[str]:
    return [crewlet_json(home.root, "entry", "show", i)["status"] for i in ids]


@pytest.fixture
def judge() -> Iterator[dict[str, Any]]:
    """What the chat model answers, set by each test before triage runs: `verdicts` maps a marker (a few words
    of the new entry's body) to its two judgments; `related` maps neighbour ids to the relation both judgments
    give them. Anything else: both accept, one claim, no relations."""
    yield {"verdicts": {}, "related": {}}


@pytest.fixture
def server(judge: dict[str, Any]) -> Iterator[JudgingServer]:
    def answer(number: int, prompt: str) -> Judgment:
        for marker, pair in judge["verdicts"].items():
            if marker in prompt:
                return pair[number - 1]
        return judgment(relations=relations_in(prompt, judge["related"]))

    with JudgingServer(answer) as s:
        yield s


# -- shadow: decided and recorded, nothing changed; people decide, and their decisions are verdicts ----------

async def test_shadow_records_changes_nothing_and_peoples_decisions_are_the_verdicts_status_reports(
        tmp_path, repo, server, judge):
    home = make_home(tmp_path, repo, server, kappa_min_samples=4, kappa_floor=0.6)
    staging = person_adds(home, PAIRS[0][0])
    judge["related"] = {staging: "duplicate"}
    judge["verdicts"] = {"Retries back off": (judgment(accept=True), judgment(accept=False, reason="too vague"))}
    async with connect(home.root, AGENT) as client:
        ttl = await agent_adds(client, "The cache keeps TTL_1 at sixty seconds.", scope="apps/server",
                               citations=[cite(repo, "apps/server/src/cache.py", (1, 1), "TTL_1 = 60")])
        repeat = await agent_adds(client, PAIRS[0][1], distinct=True)
        backoff = await agent_adds(client, "Retries back off exponentially, five times at most.",
                                   scope="apps/server",
                                   citations=[cite(repo, "apps/server/src/retry.py", (1, 2), "MAX_RETRIES = 5")])
        twenty = await agent_adds(client, "The cache module defines twenty TTL constants.", scope="apps/server",
                                  citations=[cite(repo, "apps/server/src/cache.py", (20, 20), "TTL_20 = 1200")])
    log_before = home.log_file.stat().st_size

    # before triage: the queue lists them with no decision yet
    queued = crewlet_json(home.root, "review")
    assert {q["entry"]["id"] for q in queued["entries"]} == {ttl, repeat, backoff, twenty}
    assert all(q["decision"] is None for q in queued["entries"])

    run = crewlet_json(home.root, "triage", "run")           # shadow: the default
    assert run["mode"] == "shadow" and run["triaged"] == 4, run
    assert {n for n, _ in server.judgments} == {1, 2} and len(server.judgments) % 2 == 0
    assert crewlet_json(home.root, "triage", "run")["triaged"] == 0      # each entry is triaged once at a version

    # nothing changed but the records: every entry still PROPOSED, no corroboration counted, nothing acted
    assert statuses(home, ttl, repeat, backoff, twenty) == ["PROPOSED"] * 4
    assert rows(home, "SELECT count(*) FROM entry_corroborations") == [(0,)]
    assert rows(home, "SELECT mode, acted, audited FROM triage_decisions") == [("shadow", 0, 0)] * 4
    assert home.log_file.stat().st_size > log_before

    # the why: the fold triage would have made, with the two judgments it rests on
    shown = crewlet_json(home.root, "triage", "show", repeat)
    decision = shown["decision"]
    assert (decision["decision"], decision["fold_into"], decision["acted"], decision["mode"]) == (
        "corroborate", staging, False, "shadow"), decision
    assert len(decision["inputs"]["judgments"]) == 2 and staging in json.dumps(decision["inputs"]["neighbours"])
    text = ok(crewlet(home.root, "triage", "show", repeat))
    assert f"fold into {staging}" in text and "recorded only (shadow" in text and "judgments" in text
    assert "triage" in ok(crewlet(home.root, "entry", "show", repeat))
    assert crewlet_json(home.root, "entry", "show", repeat)["triage"]["id"] == decision["id"]

    # the queue: each entry with its reasons and triage's decision, filterable by reason
    queue = crewlet_json(home.root, "review")
    by_id = {q["entry"]["id"]: q for q in queue["entries"]}
    assert set(by_id) == {ttl, repeat, backoff, twenty} and queue["proposals"] == [] and queue["audits"] == []
    assert "JUDGES_DISAGREE" in by_id[backoff]["reasons"]
    assert all("UNKNOWN_SOURCE" in by_id[e]["reasons"] for e in (ttl, twenty)), by_id
    assert [by_id[e]["decision"]["decision"] for e in (ttl, repeat, backoff, twenty)] == [
        "accept", "corroborate", "escalate", "accept"]
    disagree = crewlet_json(home.root, "review", "--reason", "judges_disagree")
    assert [q["entry"]["id"] for q in disagree["entries"]] == [backoff] and disagree["reason"] == "JUDGES_DISAGREE"
    listing = ok(crewlet(home.root, "review"))
    assert listing.index("page proposals: none") < listing.index("4 proposed entries") < listing.index("open audit")
    assert "waits for: " in listing and "JUDGES_DISAGREE" in listing and f"fold into {staging}" in listing
    assert f"crewlet review accept|dispute|verify|archive {ttl}" in listing
    bad = crewlet(home.root, "review", "--reason", "BECAUSE")
    assert bad.returncode == 2 and "UNKNOWN_SOURCE" in bad.stderr

    # an agent is refused every person's action, in the store, in one line, nothing written
    for action in ("accept", "dispute", "verify"):
        refused_to_agent(home, "review", action, ttl)
    refused_to_agent(home, "review", "archive", staging)           # not its own, and not proposed

    # a person decides; each decision on an entry triage decided about is a verdict
    ok(crewlet(home.root, "review", "accept", ttl))                # triage: accept   · person: accept
    ok(crewlet(home.root, "review", "archive", repeat))            # triage: fold     · person: out of use
    ok(crewlet(home.root, "review", "archive", backoff))           # triage: escalate · person: out of use
    said = ok(crewlet(home.root, "review", "archive", twenty))     # triage: accept   · person: refuse
    assert f"archived {twenty}" in said and "triage had decided: accept (shadow, decision" in said
    assert sorted(rows(home, "SELECT source FROM triage_verdicts")) == [("action",)] * 4

    # kappa per type over the 4 verdicts, a = [triage's decision == T], b = [the person's label == T]:
    #   entry:     ttl     repeat       backoff    twenty
    #   triage:    accept  corroborate  escalate   accept
    #   person:    accept  corroborate  escalate   refuse
    # accept:      a=1,0,0,1  b=1,0,0,0  p_o=3/4  p_e=(2/4)(1/4)+(2/4)(3/4)=1/2  kappa=(3/4-1/2)/(1/2)=0.5
    # corroborate: a=b=0,1,0,0           p_o=1    p_e=(1/4)^2+(3/4)^2=5/8       kappa=1
    # escalate:    a=b=0,0,1,0                                                    kappa=1
    # refuse:      a=0,0,0,0  b=0,0,0,1  p_o=3/4  p_e=(4/4)(3/4)=3/4             kappa=0
    # accept and refuse fall below the floor 0.6 over 4 verdicts (the minimum): they stop acting; escalation never
    status = crewlet_json(home.root, "triage", "status")
    types = {t["decision_type"]: t for t in status["types"]}
    assert status["mode"] == "shadow" and status["floor"] == 0.6 and status["min_samples"] == 4
    assert types["accept"]["kappa"] == pytest.approx(0.5) and types["refuse"]["kappa"] == pytest.approx(0.0)
    assert types["corroborate"]["kappa"] == pytest.approx(1.0) and types["escalate"]["kappa"] == pytest.approx(1.0)
    assert [types[t]["state"] for t in ("accept", "corroborate", "refuse", "escalate")] == [
        "escalating", "acting", "escalating", "acting"]
    assert types["accept"]["since"] is not None and types["accept"]["acts"] is False
    table = ok(crewlet(home.root, "triage", "status"))
    assert "Can triage decide alone?" in table and "0.50" in table and "escalating" in table
    assert "never backs off" in table


# -- on: a fold acts and is audited; a person's disagreement undoes it; the draw is worked out again ---------

async def test_on_a_fold_acts_is_audited_and_a_persons_disagreement_undoes_it(tmp_path, repo, server, judge):
    home = make_home(tmp_path, repo, server, audit_rate=1.0)
    standing = [person_adds(home, old) for old, _ in PAIRS]
    judge["related"] = {s: "duplicate" for s in standing}
    async with connect(home.root, AGENT) as client:
        first = await agent_adds(client, PAIRS[0][1], distinct=True)

        run = crewlet_json(home.root, "triage", "run", env=ON)
        assert run["mode"] == "on" and run["triaged"] == 1, run
        assert statuses(home, first) == ["ARCHIVED"]
        entry = crewlet_json(home.root, "entry", "show", first)
        assert f"folded into {standing[0]} by triage" in entry["status_reason"]
        assert crewlet_json(home.root, "entry", "show", standing[0])["corroborations"] == 1

        # at audit rate 1 the fold is certainly drawn: an audit waits in the queue
        queue = crewlet_json(home.root, "review")
        assert [a["decision"]["entry_id"] for a in queue["audits"]] == [first]
        audit_id = queue["audits"][0]["decision"]["id"]
        assert drawn(audit_id, 1.0, "audit") and queue["audits"][0]["decision"]["audited"] is True
        listing = ok(crewlet(home.root, "review"))
        assert "1 open audit" in listing and f"crewlet review audit {audit_id} agree|disagree" in listing

        # an agent may not answer it; a person disagrees, and the fold is undone: the entry is put in use
        refused_to_agent(home, "review", "audit", audit_id, "disagree")
        refused_to_agent(home, "review", "audit", audit_id, "agree")
        undone = crewlet_json(home.root, "review", "audit", audit_id, "disagree")
        assert undone["answer"] == "disagree" and undone["entry"]["status"] == "STANDING", undone
        assert crewlet_json(home.root, "review")["audits"] == []
        assert rows(home, "SELECT source FROM triage_verdicts") == [("audit",)]
        assert crewlet(home.root, "review", "audit", audit_id, "agree").returncode == 1   # answered already
        # one verdict against the fold: kappa a=[1] b=[0] -> p_o=0, p_e=0, kappa 0; fewer than the minimum (20,
        # the default) verdicts: the state stays, and folds still act alone
        folds = {t["decision_type"]: t for t in crewlet_json(home.root, "triage", "status", env=ON)["types"]}
        assert folds["corroborate"]["kappa"] == pytest.approx(0.0) and folds["corroborate"]["verdicts"] == 1
        assert (folds["corroborate"]["state"], folds["corroborate"]["acts"]) == ("acting", True)
        table = ok(crewlet(home.root, "triage", "status", env=ON))
        assert "never backs off" in table and "yes" in table.split("corroborate")[1].splitlines()[0]
        assert crewlet(home.root, "review", "audit", audit_id, "maybe").returncode == 2   # usage

        # rate 0.5: whether each fold is audited follows from its id, and is worked out again here
        rest = [await agent_adds(client, new, distinct=True) for _, new in PAIRS[1:]]
    run = crewlet_json(home.root, "triage", "run", env=ON | {"KNOWLEDGE_AUDIT_RATE": "0.5"})
    assert run["triaged"] == len(rest), run
    assert statuses(home, *rest) == ["ARCHIVED"] * len(rest)
    decided = dict(rows(home, "SELECT entry_id, audited FROM triage_decisions WHERE entry_id IN (?, ?, ?, ?)",
                        tuple(rest)))
    ids = dict(rows(home, "SELECT entry_id, op_id FROM triage_decisions WHERE entry_id IN (?, ?, ?, ?)", tuple(rest)))
    assert {e: bool(decided[e]) for e in rest} == {e: drawn(ids[e], 0.5, "audit") for e in rest}
    audits = crewlet_json(home.root, "review")["audits"]
    assert sorted(a["decision"]["entry_id"] for a in audits) == sorted(e for e in rest if decided[e])
