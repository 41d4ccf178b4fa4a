"""The knowledge bank's tools over MCP (issue 35, "What agents get"): add_entry, supersede_entry, load_context and
get_page's entries, through a real MCP client session on a `crewlet mcp` process (tests/mcp_client.py), over a
real git repository the test makes. Every refusal in one line without the server's paths; tiers with their ages;
exact repeats folded; a context never over its budget and in its order; a cited file changed at the branch head
served as UNGROUNDED; every serve recorded."""
from __future__ import annotations

from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any

import pytest
from conftest import config_with, new_home
from mcp_client import call, connect, refused, server_side
from mcp_client import anyio_backend  # noqa: F401 - a fixture, by name
from test_repos_support import GitRepo, numbered

from core.bank.entries import EntryBank
from core.embed.tokens import count as count_tokens
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home

pytestmark = pytest.mark.anyio

CACHE = "".join(f"TTL_{i} = {i * 60}\n" for i in range(1, 21))          # apps/server/src/cache.py: 20 lines


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    g = GitRepo(tmp_path / "server")
    g.write("apps/server/pyproject.toml", "[project]\nname = 'server'\n")
    g.write("apps/server/src/cache.py", CACHE)
    g.write("apps/server/prisma/schema.prisma", numbered(30, "model"))
    g.write("apps/web/package.json", "{}\n")
    g.write("apps/web/src/app.ts", numbered(10, "const"))
    g.commit("first")
    return g


@pytest.fixture
def bank_home(tmp_path: Path, repo: GitRepo) -> Home:
    """The example company with one repository and a budget of two proposed entries per agent per page."""
    return new_home(tmp_path / "home", config_with(repositories={"server": {"path": str(repo.path)}},
                                                   knowledge={"page_proposed_entry_budget": 2}))


def _sha(repo: GitRepo) -> str:
    return repo.git("rev-parse", "HEAD").strip()


def cite(repo: GitRepo, path: str = "apps/server/src/cache.py", lines: tuple[int, int] = (1, 3),
         quote: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"repository": "server", "path": path, "lines": list(lines), "commit": _sha(repo)}
    if quote:
        out["quote"] = quote
    return out


def _page(home: Home, title: str, policy: str | None = None) -> str:
    with Node.open(home) as node:
        page_id = KnowledgeBase(node).create_page("ENG", title, f"about {title}", actor="alex").id
        if policy:
            EntryBank(node).set_policy(page_id, policy, actor="alex")
    return page_id


def _rows(home: Home, sql: str, args: tuple = ()) -> list[tuple]:
    with Node.open(home) as node:
        node.catch_up()
        return [tuple(r) for r in node.conn.execute(sql, args)]


def _later(hours: int) -> dict[str, str]:
    """The bank's calendar `hours` from now (CREWLET_NOW), for ages said by the server."""
    at = datetime.now(UTC) + timedelta(hours=hours, minutes=5)
    return {"CREWLET_NOW": at.isoformat()}


# -- add_entry: written, folded, refused ---------------------------------------------------------------------

async def test_an_agents_entry_is_written_proposed_with_its_citation_read_and_a_repeat_is_folded(bank_home, repo):
    page = _page(bank_home, "Caching")
    async with connect(bank_home.root, "eng-bot") as client:
        text, data = await call(client, "add_entry", page="ENG/Caching", body="The session cache holds for a minute.",
                                kind="gotcha", scope="apps/server",
                                citations=[cite(repo, quote="TTL_1 = 60")])
        entry = data["entry"]
        assert data["written"] is True and (entry["status"], entry["tier"], entry["kind"], entry["scope"]) == (
            "PROPOSED", "UNGROUNDED", "GOTCHA", "server:apps/server")
        assert f"Added entry {entry['id']} under ENG/Caching" in text and "waits for a person" in text
        assert f"held, checked just now at {_sha(repo)[:7]}" in text
        again, data = await call(client, "add_entry", page=page, body="  the session CACHE holds for a minute. ")
        assert data["written"] is False and data["entry"]["id"] == entry["id"] and data["corroborations"] == 1
        assert "counted as a corroboration" in again and entry["id"] in again
    assert _rows(bank_home, "SELECT count(*) FROM entries") == [(1,)]
    assert _rows(bank_home, "SELECT actor FROM entry_corroborations") == [("eng-bot",)]


async def test_every_refusal_is_one_line_that_says_why_and_nothing_is_written(bank_home, repo):
    _page(bank_home, "Caching")
    _page(bank_home, "Runbook", policy="locked")
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    async with connect(bank_home.root, "eng-bot") as client:
        many, data = await refused(client, "add_entry", page="ENG/Caching", body="Retries double the load.",
                                   citations=[{"link": f"acme/api#{i}", "kind": "issue"} for i in range(11)])
        assert "at most 10" in many
        cred, cred_data = await refused(client, "add_entry", page="ENG/Caching",
                                        body=f"The deploy token is {secret}.")
        assert cred_data["error"] == "entry_credential" and secret not in cred and secret not in str(cred_data)
        listed, data = await refused(client, "add_entry", page="ENG/Caching", body=(
            "- Deploys need the VPN\n- The cache clears on Sunday\n- Staging uses Postgres 14"))
        assert data["error"] == "entry_several_claims" and "one entry per fact" in listed
        past_end, data = await refused(client, "add_entry", page="ENG/Caching", body="The cache holds for a minute.",
                                       citations=[cite(repo), cite(repo, lines=(18, 40))])
        assert data["error"] == "citation_failed" and data["citation"] == 2
        assert "apps/server/src/cache.py" in past_end and "citation 2" in past_end
        wrong_quote, data = await refused(client, "add_entry", page="ENG/Caching", body="The cache holds an hour.",
                                          citations=[cite(repo, quote="TTL_60 = 3600")])
        assert data["error"] == "citation_failed" and "quote" in wrong_quote
        locked, data = await refused(client, "add_entry", page="ENG/Runbook", body="Deploys run on Tuesdays.")
        assert data["error"] == "locked" and "LOCKED" in locked
        # the CURATED page's budget: two proposed entries of this agent wait there, the third is refused
        await call(client, "add_entry", page="ENG/Caching", body="Deploys run on Tuesdays.")
        await call(client, "add_entry", page="ENG/Caching", body="The queue drains nightly.")
        budget, data = await refused(client, "add_entry", page="ENG/Caching", body="Builds take four minutes.")
        assert data["error"] == "budget" and "PAGE_PROPOSED_ENTRY_BUDGET = 2" in budget
        kind, data = await refused(client, "add_entry", page="ENG/Caching", body="Builds take four minutes.",
                                   kind="RUMOUR")
        assert data["error"] == "entry_invalid_kind"
        nowhere, data = await refused(client, "add_entry", page="ENG/Nowhere", body="Builds take four minutes.")
    for text in (many, cred, listed, past_end, wrong_quote, locked, budget, kind, nowhere):
        server_side(bank_home, text)
    assert _rows(bank_home, "SELECT body FROM entries ORDER BY body") == [("Deploys run on Tuesdays.",),
                                                                          ("The queue drains nightly.",)]


async def test_an_agents_correction_waits_and_the_old_entry_stays_in_use(bank_home, repo):
    page = _page(bank_home, "Caching")
    with Node.open(bank_home) as node, EntryBank(node) as bank:
        old = bank.add(page, "The session cache holds for ten minutes.", citations=[cite(repo)], actor="alex")
    async with connect(bank_home.root, "eng-bot") as client:
        text, data = await call(client, "supersede_entry", entry_id=old.id,
                                body="The session cache holds for one minute.",
                                citations=[cite(repo, lines=(1, 1), quote="TTL_1 = 60")])
        fix = data["entry"]
        assert (fix["status"], fix["kind"], fix["scope"]) == ("PROPOSED", "FACT", None)
        assert f"corrects entry {old.id}, which stays in use until a person accepts" in text
        gone, data = await refused(client, "supersede_entry", entry_id="nope", body="The cache holds a day.")
        assert data["error"] == "no_entry"
        server_side(bank_home, gone)
        page_text, page_data = await call(client, "get_page", ref=page)
    assert [e["id"] for e in page_data["entries"]] == [old.id]          # the correction is not in use yet
    assert _rows(bank_home, "SELECT status FROM entries WHERE id = ?", (old.id,)) == [("STANDING",)]


# -- load_context --------------------------------------------------------------------------------------------

def _grow_bank(home: Home, repo: GitRepo) -> dict[str, str]:
    """A page of entries a person wrote (STANDING) around apps/server/prisma: which the area is served, and not."""
    page = _page(home, "Server")
    schema = cite(repo, "apps/server/prisma/schema.prisma", (2, 4), quote="model 3")
    with Node.open(home) as node, EntryBank(node) as bank:
        ids = {
            "convention": bank.add(page, "Migrations are written by hand, never generated.", kind="CONVENTION",
                                   scope="apps/server", actor="alex").id,
            "sibling_convention": bank.add(page, "Every cache key carries its tenant.", kind="CONVENTION",
                                           scope="apps/server/src", actor="alex").id,
            "web_convention": bank.add(page, "Components are named in PascalCase.", kind="CONVENTION",
                                       scope="apps/web", actor="alex").id,
            "exact": bank.add(page, "The schema keeps soft-deleted rows for thirty days.", scope="apps/server/prisma",
                              citations=[schema], actor="alex").id,
            "above": bank.add(page, "The server reads its settings once at start.", scope="apps/server",
                              citations=[cite(repo)], actor="alex").id,
            "unscoped": bank.add(page, "Deploys run on Tuesdays.", citations=[{"link": "acme/ops#4", "kind": "issue"}],
                                 actor="alex").id,
            "verified": bank.add(page, "Every table has a created_at column.", scope="apps/server/prisma/models",
                                 actor="alex").id,
            "plain": bank.add(page, "The prisma client is generated at build.", scope="apps/server/prisma",
                              actor="alex").id,                    # cites nothing: UNGROUNDED, not served
            "web": bank.add(page, "The web app polls every five seconds.", scope="apps/web",
                            citations=[cite(repo, "apps/web/src/app.ts", (1, 2))], actor="alex").id,
            "proposed": bank.add(page, "The schema has forty models.", scope="apps/server/prisma",
                                 citations=[schema], actor="eng-bot").id,
        }
        bank.verify(ids["verified"], actor="sam")
    return ids


async def test_load_context_serves_conventions_then_grounded_entries_with_ages_and_records_the_serve(bank_home, repo):
    ids = _grow_bank(bank_home, repo)
    sha7 = _sha(repo)[:7]
    runbook = _page(bank_home, "Server Runbook")
    _page(bank_home, "Web Guide")
    with Node.open(bank_home) as node, EntryBank(node) as bank:
        bank.link_page("ENG/Server Runbook", module="apps/server", actor="alex")
        bank.link_page("ENG/Web Guide", module="apps/web", actor="alex")          # another module: not served
    async with connect(bank_home.root, "eng-bot", env=_later(3)) as client:
        text, data = await call(client, "load_context", area="apps/server/prisma")
    assert data["area"] == "server:apps/server/prisma" and data["modules"] == ["server:apps/server"]
    # the pages linked to its module first, by address
    assert data["pages"] == [{"id": runbook, "address": "ENG/Server Runbook", "linked_to": "server:apps/server"}]
    assert text.index("ENG/Server Runbook") < text.index("Conventions of its modules:") and "Web Guide" not in text
    # the conventions of its module (the sibling folder's too, not the web module's), then the relevant entries
    assert [e["id"] for e in data["conventions"]] == [ids["convention"], ids["sibling_convention"]]
    served = [e["id"] for e in data["entries"]]
    assert served == [ids["verified"], ids["exact"], ids["above"], ids["unscoped"]]
    assert [e["tier"] for e in data["entries"]] == ["HUMAN_VERIFIED", "GROUNDED", "GROUNDED", "GROUNDED"]
    assert not {ids["plain"], ids["web"], ids["proposed"], ids["web_convention"]} & set(served + [
        e["id"] for e in data["conventions"]])
    # in the text, in that order, each with its tier, citation and age
    at = [text.index(f"entry {ids[k]}") for k in ("convention", "sibling_convention", "verified", "exact", "above",
                                                   "unscoped")]
    assert at == sorted(at)
    assert f"cites [1] server:apps/server/prisma/schema.prisma lines 2-4: held, checked 3 h ago at {sha7}" in text
    assert "cites [1] acme/ops#4 (issue): held, checked 3 h ago" in text and "added 3 h ago" in text
    assert data["tokens"] == count_tokens(text) <= 1500 and data["counted_with"]
    assert "1 more entry in use here ranks lower." in text and data["ranked_lower"] == 1     # the plain one
    # one serve: who, which tool, the area, each entry's rank in the order given
    rows = _rows(bank_home, "SELECT entry_id, actor, via, query, rank FROM entry_serves ORDER BY rank")
    order = [ids[k] for k in ("convention", "sibling_convention", "verified", "exact", "above", "unscoped")]
    assert rows == [(e, "eng-bot", "load_context", "server:apps/server/prisma", i) for i, e in enumerate(order, 1)]


async def test_load_context_is_never_over_its_budget_and_says_what_it_left_out(bank_home, repo):
    ids = _grow_bank(bank_home, repo)
    async with connect(bank_home.root, "eng-bot") as client:
        full, full_data = await call(client, "load_context", area="apps/server/prisma", token_budget=2000)
        seen = []
        for budget in (100, 140, 190, 260, 600):
            text, data = await call(client, "load_context", area="apps/server/prisma", token_budget=budget)
            assert count_tokens(text) == data["tokens"] <= budget, (budget, text)
            left = sum(data["left_out_for_budget"].values())
            kept = len(data["conventions"]) + len(data["entries"])
            assert kept + left == len(full_data["conventions"]) + len(full_data["entries"])
            if left:
                assert "Left out for the budget:" in text
            # what fits is in the order the full context gives it
            got = [e["id"] for e in data["conventions"] + data["entries"]]
            whole = [e["id"] for e in full_data["conventions"] + full_data["entries"]]
            assert got == [i for i in whole if i in got]
            seen.append(kept)
        too_small, data = await refused(client, "load_context", area="apps/server/prisma", token_budget=20)
        assert data["error"] == "invalid_arguments" and "token_budget" in too_small
        bad_area, data = await refused(client, "load_context", area="../etc")
        assert "climbs out of the repository" in bad_area
    assert seen[0] < seen[-1] == len(full_data["conventions"]) + len(full_data["entries"])   # more room, more
    assert ids["convention"] in [e["id"] for e in full_data["conventions"]]


async def test_a_cited_file_changed_at_the_head_serves_as_ungrounded_below_the_grounded(bank_home, repo):
    ids = _grow_bank(bank_home, repo)
    repo.write("apps/server/prisma/schema.prisma", numbered(31, "model"))      # a line added at the end
    repo.commit("a new model")
    async with connect(bank_home.root, "eng-bot") as client:
        text, data = await call(client, "load_context", area="apps/server/prisma")
        page_text, page_data = await call(client, "get_page", ref="ENG/Server")
    tiers = {e["id"]: e["tier"] for e in data["entries"]}
    assert tiers[ids["exact"]] == "UNGROUNDED" and tiers[ids["above"]] == "GROUNDED"
    assert [e["id"] for e in data["entries"]][-1] == ids["exact"]          # grounded and verified above it
    exact = next(e for e in data["entries"] if e["id"] == ids["exact"])
    assert exact["citations"][0]["changed_since"] is True
    assert "; the file changed since" in text and "check it against the code before relying on it" in text
    # get_page lists the page's entries in use the same way: kind, tier, body, id; the proposed one left out
    listed = {e["id"]: (e["kind"], e["tier"]) for e in page_data["entries"]}
    assert listed[ids["exact"]] == ("FACT", "UNGROUNDED") and listed[ids["convention"]] == ("CONVENTION",
                                                                                            "UNGROUNDED")
    assert listed[ids["verified"]] == ("FACT", "HUMAN_VERIFIED") and ids["proposed"] not in listed
    assert f"- entry {ids['verified']} · FACT · HUMAN_VERIFIED: Every table has a created_at column." in page_text
    assert page_text.index(f"entry {ids['verified']}") < page_text.index(f"entry {ids['exact']}")
    serves = _rows(bank_home, "SELECT count(DISTINCT entry_id) FROM entry_serves WHERE via = 'get_page' "
                              "AND actor = 'eng-bot'")
    assert serves == [(len(listed),)]


# -- neighbours ------------------------------------------------------------------------------------------------

def test_entries_that_say_nearly_the_same_come_back_as_a_result_with_nothing_written_and_are_served(bank_home):
    """SimilarEntries is not an error: add_entry's reply lists the neighbours with their similarity, tier and page,
    says how to go on, and records them as served. (Which entries are near is the search branch's finding; until
    it lands, the bank finds none, so the reply is built here from the bank's own entries.)"""
    from core.mcp.session import Session
    from core.mcp.tools.add_entry import similar_reply

    page = _page(bank_home, "Caching")
    with Node.open(bank_home) as node:
        bank = EntryBank(node)
        near = bank.add(page, "The session cache holds for ten minutes.", actor="alex")
        session = Session(node, "eng-bot")
        try:
            reply = similar_reply(session, [(near, 0.91)])
        finally:
            session.close()
        bank.close()
        rows = [tuple(r) for r in node.conn.execute("SELECT entry_id, actor, via, rank FROM entry_serves")]
    assert reply.data["written"] is False and "distinct: true" in reply.data["hint"]
    [listed] = reply.data["similar"]
    assert (listed["id"], listed["similarity"], listed["tier"], listed["page"]) == (near.id, 0.91, "UNGROUNDED",
                                                                                    "ENG/Caching")
    assert f"entry {near.id} · similarity 0.91" in reply.text and "supersede_entry" in reply.text
    assert rows == [(near.id, "eng-bot", "add_entry", 1)]


async def test_a_near_entry_comes_back_over_mcp_with_nothing_written_and_distinct_writes_it(bank_home, repo):
    """The real finding end to end: a person's entry in the bank, an agent's add_entry of nearly the same fact over
    a real MCP session gets {"written": false, "similar": [...]} (by meaning, with the local model in the server)
    and nothing is written; said `distinct: true`, the same add is written PROPOSED."""
    page = _page(bank_home, "Caching")
    with Node.open(bank_home) as node, EntryBank(node) as bank:
        near = bank.add(page, "The session cache expires entries after ten minutes.", scope="apps/server",
                        actor="alex")
        far = bank.add(page, "Deploys to production happen on Tuesdays.", actor="alex")
    body = "Entries in the session cache expire after 10 minutes."
    count = "SELECT count(*) FROM entries"
    async with connect(bank_home.root, "eng-bot") as client:
        text, data = await call(client, "add_entry", page="ENG/Caching", body=body, scope="apps/server/src",
                                citations=[cite(repo, lines=(1, 2))])
        assert data["written"] is False and "entry" not in data
        [listed] = data["similar"]
        assert listed["id"] == near.id and listed["id"] != far.id and listed["similarity"] > 0.75
        assert listed["page"] == "ENG/Caching" and f"entry {near.id} · similarity" in text
        assert "distinct: true" in data["hint"]
        assert _rows(bank_home, count) == [(2,)]
        text, data = await call(client, "add_entry", page="ENG/Caching", body=body, scope="apps/server/src",
                                citations=[cite(repo, lines=(1, 2))], distinct=True)
        assert data["written"] is True and data["entry"]["status"] == "PROPOSED" and data["entry"]["body"] == body
    assert _rows(bank_home, count) == [(3,)]
    served = _rows(bank_home, "SELECT entry_id, actor, via FROM entry_serves")
    assert served == [(near.id, "eng-bot", "add_entry")]


async def test_a_repository_that_cannot_be_read_leaves_the_last_checks_standing(bank_home, repo):
    """The checkout unreadable (its .git moved away: git refuses the folder): load_context still serves, each entry at the tier of
    its last checks, without the modules it cannot list; a new citation there is written as not read yet."""
    ids = _grow_bank(bank_home, repo)
    sha = _sha(repo)
    (repo.path / ".git").rename(repo.path.parent / "git-moved-away")
    async with connect(bank_home.root, "eng-bot") as client:
        text, data = await call(client, "load_context", area="apps/server/prisma")
        added, added_data = await call(client, "add_entry", page="ENG/Server", body="The schema has a users table.",
                                       citations=[{"repository": "server", "path": "apps/server/prisma/schema.prisma",
                                                   "lines": [1, 2], "commit": sha}])
        whole, whole_data = await call(client, "load_context", area=".")
    assert data["modules"] == [] and [e["id"] for e in data["conventions"]] == [ids["convention"]]
    assert [(e["id"], e["tier"]) for e in data["entries"]] == [
        (ids["verified"], "HUMAN_VERIFIED"), (ids["exact"], "GROUNDED"), (ids["above"], "GROUNDED"),
        (ids["unscoped"], "GROUNDED")]
    assert "changed since" not in text
    assert added_data["written"] is True and added_data["entry"]["citations"][0]["result"] == "not_read_yet"
    # the whole repository: every scope serves it, the web module's too
    assert ids["web"] in [e["id"] for e in whole_data["entries"]] or whole_data["ranked_lower"] > 0
    assert {ids["web_convention"], ids["convention"], ids["sibling_convention"]} <= {
        e["id"] for e in whole_data["conventions"]}


async def test_a_repository_configured_under_a_running_server_is_read_at_once(tmp_path, repo):
    """company.toml edited while the server runs: the bank is opened again on the new [repositories]; an entry
    scoped before any repository was configured (a bare folder) serves that folder in it."""
    home = new_home(tmp_path / "plain", config_with())
    page = _page(home, "Caching")
    with Node.open(home) as node, EntryBank(node) as bank:        # no repository yet: its scope is a bare folder
        bare = bank.add(page, "The server retries twice.", scope="apps/server",
                        citations=[{"link": "acme/api#9", "kind": "issue"}], actor="alex").id
    async with connect(home.root, "eng-bot") as client:
        _, unnamed = await call(client, "load_context", area="apps/server/prisma")
        assert unnamed["area"] == "apps/server/prisma" and [e["id"] for e in unnamed["entries"]] == [bare]
        before, data = await refused(client, "add_entry", page="ENG/Caching", body="The cache holds a minute.",
                                     citations=[cite(repo)])
        assert data["error"] == "citation_failed" and "server" in before
        config = home.root / "company.toml"
        config.write_text(config.read_text(encoding="utf-8") + f'\n[repositories.server]\npath = "{repo.path}"\n',
                          encoding="utf-8")
        text, data = await call(client, "add_entry", page="ENG/Caching", body="The cache holds a minute.",
                                citations=[cite(repo)])
        _, named = await call(client, "load_context", area="apps/server/prisma")
    assert data["entry"]["citations"][0]["result"] == "held" and f"at {_sha(repo)[:7]}" in text
    # the entry written before the repository was named still serves its folder there
    assert named["area"] == "server:apps/server/prisma" and [e["id"] for e in named["entries"]] == [bare]
