"""`crewlet entries`, `crewlet entry …` and `crewlet page policy|link` over real homes and a real git repository
made here: exit codes (0 done, 1 refused with one line on stderr naming the input and the fix, 2 usage), the
`--json` shapes, tiers and each citation's last check with its age, an agent (by --as or CREWLET_AS) refused a
person's actions, a LOCKED page, the CURATED budget, a citation that fails, exact repeats and near ones."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import config_with, new_home
from test_first_hour_cli import refused
from test_repos_support import GitRepo, numbered
from typer.testing import CliRunner

from core.node import Node
from crewlet_tui.cli import app

CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "CREWLET_NOW": None, "COLUMNS": "200"}
PAGE = "ENG/Caching"
HOUR_MS = 3600 * 1000


@pytest.fixture
def repo(tmp_path: Path) -> tuple[GitRepo, str]:
    g = GitRepo(tmp_path / "server")
    g.write("apps/server/pyproject.toml", "[project]\nname = 'server'\n")
    g.write("apps/server/cache.py", "TTL_SECONDS = 600\n" + numbered(9))
    return g, g.commit("first")


def make_home(tmp_path: Path, checkout: Path, **knowledge: object):
    """A home whose company.toml names `checkout` as the repository `server`, with the page ENG/Caching; and a
    function running `crewlet --home HOME ARGS…` in process."""
    config = config_with(knowledge=knowledge, repositories={"server": {"path": str(checkout)}})
    home = new_home(tmp_path / "home", config)
    runner = CliRunner()

    def run(*args: str, env: dict | None = None, input: str | None = None):
        return runner.invoke(app, ["--home", str(home.root), *args], env={**CLEAN_ENV, **(env or {})}, input=input)

    assert run("page", "create", "ENG", "Caching", "--body-file", "-", input="How the cache works.\n").exit_code == 0
    return home, run


@pytest.fixture
def cli(tmp_path, repo):
    return make_home(tmp_path, repo[0].path)[1]


@pytest.fixture
def home_cli(tmp_path, repo):
    return make_home(tmp_path, repo[0].path)


def ok(res) -> str:
    assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
    return res.stdout


def ok_json(res) -> dict:
    return json.loads(ok(res))


def usage(res, *words: str) -> None:
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr)
    for w in words:
        assert w in res.stderr, (w, res.stderr)


def code_cite(sha: str, **more: object) -> str:
    return json.dumps({"repository": "server", "path": "apps/server/cache.py", "lines": [1, 1], "commit": sha,
                       "quote": "TTL_SECONDS"} | more)


def add(cli, body: str, *args: str, env: dict | None = None) -> dict:
    return ok_json(cli("entry", "add", PAGE, body, *args, "--json", env=env))


def entry_count(home) -> int:
    with Node.open(home) as node:
        return node.conn.execute("SELECT count(*) FROM entries").fetchone()[0]


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


# -- listing -----------------------------------------------------------------------------------------------

def test_a_pages_entries_say_kind_status_tier_age_and_each_citations_last_check(cli, repo):
    g, sha = repo
    standing = add(cli, "The cache holds entries for ten minutes.", "--kind", "gotcha", "--scope", "apps/server",
                   "--cite", code_cite(sha), "--cite", '{"link": "acme/api#12", "kind": "issue"}')
    assert (standing["status"], standing["tier"], standing["kind"], standing["scope"]) == (
        "STANDING", "GROUNDED", "GOTCHA", "server:apps/server")
    assert [c["result"] for c in standing["citations"]] == ["held", "held"]
    proposed = add(cli, "The cache is per process.", env={"CREWLET_AS": "eng-bot"})
    assert (proposed["status"], proposed["tier"], proposed["author"]) == ("PROPOSED", "UNGROUNDED", "eng-bot")

    three_hours_on = {"CREWLET_NOW": iso(standing["created_at"] + 3 * HOUR_MS)}
    out = ok(cli("entries", PAGE, env=three_hours_on))
    assert "1 entries in use" not in out and "ENG/Caching — 1 entry in use · policy CURATED" in out
    assert standing["id"] in out and proposed["id"] not in out
    assert "GOTCHA · STANDING · GROUNDED · added 3 h ago by alex" in out
    assert f'server:apps/server/cache.py:1-1 @{sha[:7]} "TTL_SECONDS" — held, checked 3 h ago at {sha[:7]}' in out
    assert "acme/api#12 (issue) — held, checked 3 h ago" in out

    listed = ok_json(cli("entries", PAGE, "--all", "--json", env=three_hours_on))
    assert listed["page"]["container"] == "ENG" and listed["policy"] == "CURATED" and listed["all"] is True
    assert [e["id"] for e in listed["entries"]] == [standing["id"], proposed["id"]]     # grounded first
    first = listed["entries"][0]
    assert first["age"] == "3 h ago" and first["citations"][0]["said"] == f"held, checked 3 h ago at {sha[:7]}"
    assert {"id", "page", "kind", "body", "scope", "status", "tier", "author", "citations", "corroborations",
            "created_at"} <= set(first)


def test_a_cited_file_changed_at_the_branch_head_says_so_and_ungrounds_the_entry(cli, repo):
    g, sha = repo
    entry = add(cli, "The cache holds entries for ten minutes.", "--cite", code_cite(sha))
    g.write("apps/server/cache.py", "TTL_SECONDS = 300\n" + numbered(9))
    g.commit("shorter")
    shown = ok_json(cli("entry", "show", entry["id"], "--json"))
    assert shown["tier"] == "UNGROUNDED" and shown["citations"][0]["changed_since"] is True
    assert "the file changed since" in ok(cli("entries", PAGE))
    assert "UNGROUNDED" in ok(cli("entry", "show", entry["id"]))


def test_needs_person_lists_what_waits_with_why_and_the_commands_to_decide(cli):
    assert "nothing waits for a person" in ok(cli("entries", "--needs-person"))
    proposed = add(cli, "The cache is per process.", env={"CREWLET_AS": "eng-bot"})
    standing = add(cli, "Deploys happen on Tuesdays.")
    ok(cli("entry", "dispute", standing["id"], "--reason", "we moved to Thursdays"))
    out = ok(cli("entries", "--needs-person"))
    assert "2 entries need a person" in out
    assert "why: proposed: waits for a person to accept it" in out
    assert "why: disputed: we moved to Thursdays" in out
    assert f"crewlet entry accept|verify|archive {proposed['id']}" in out
    data = ok_json(cli("entries", "--needs-person", "--json"))
    assert [(n["entry"]["id"], n["entry"]["status"]) for n in data["needs_person"]] == [
        (proposed["id"], "PROPOSED"), (standing["id"], "DISPUTED")]
    assert all(n["reasons"] for n in data["needs_person"])


def test_entry_show_has_history_citations_and_corroborations(cli, repo):
    g, sha = repo
    entry = add(cli, "The cache holds entries for ten minutes.", "--cite", code_cite(sha))
    add(cli, "the cache holds entries   for TEN minutes.", env={"CREWLET_AS": "eng-bot"})
    shown = ok_json(cli("entry", "show", entry["id"], "--json"))
    assert shown["corroborations"] == 1 and shown["corroborated_by"] == ["eng-bot"]
    assert [h["action"] for h in shown["history"]] == ["add"]
    out = ok(cli("entry", "show", entry["id"]))
    assert "under ENG/Caching" in out and "corroborated 1× by eng-bot" in out and "history" in out
    assert "decide: crewlet entry verify|dispute|archive" in out


# -- adding --------------------------------------------------------------------------------------------------

def test_an_exact_repeat_is_not_written_and_says_whose_corroboration_it_became(home_cli):
    home, cli = home_cli
    first = add(cli, "Deploys happen on Tuesdays.")
    out = ok(cli("--as", "eng-bot", "entry", "add", PAGE, "  deploys HAPPEN on tuesdays. "))
    assert f"not written: it repeats entry {first['id']} under ENG/Caching, and was counted as a corroboration " \
           "of it (1 in all)" in out
    again = add(cli, "Deploys happen on TUESDAYS.", env={"CREWLET_AS": "sam"})
    assert again["id"] == first["id"] and again["folded"] is True and again["corroborations"] == 2
    assert entry_count(home) == 1


def test_a_body_from_a_file_or_stdin_and_citations_from_a_file(cli, repo, tmp_path):
    g, sha = repo
    body = tmp_path / "fact.md"
    body.write_text("Cache keys carry the tenant id.\n", encoding="utf-8")
    cites = tmp_path / "cites.json"
    cites.write_text(json.dumps([json.loads(code_cite(sha)), {"link": "https://example.com/pr/4",
                                                              "kind": "pull_request"}]), encoding="utf-8")
    entry = ok_json(cli("entry", "add", PAGE, "--body-file", str(body), "--citations-file", str(cites), "--json"))
    assert entry["body"] == "Cache keys carry the tenant id." and len(entry["citations"]) == 2
    piped = ok_json(cli("entry", "add", PAGE, "--body-file", "-", "--json", input="The cache warms at start.\n"))
    assert piped["body"] == "The cache warms at start."


def test_a_citation_that_fails_is_named_and_nothing_is_written(home_cli, repo):
    home, cli = home_cli
    g, sha = repo
    link = '{"link": "acme/api#12", "kind": "issue"}'
    cases = [
        (code_cite(sha, quote="TTL_MINUTES"), "citation 2 (apps/server/cache.py)"),
        (code_cite(sha, lines=[9, 40]), "citation 2 (apps/server/cache.py)"),
        (code_cite("0" * 40), "citation 2 (apps/server/cache.py)"),
        (code_cite(sha, path="apps/server/missing.py"), "citation 2 (apps/server/missing.py)"),
        (code_cite(sha, repository="client"), "citation 2"),
    ]
    for cite, named in cases:
        refused(cli("entry", "add", PAGE, "The cache holds entries for ten minutes.", "--cite", link, "--cite", cite),
                named)
    many = [link] * 11
    refused(cli("entry", "add", PAGE, "Retries double the load.", *[a for c in many for a in ("--cite", c)]),
            "at most 10")
    assert entry_count(home) == 0


@pytest.mark.parametrize("args, words", [
    (["entry", "add", PAGE, "1. Deploys need the VPN\n2. The cache clears on Sunday\n3. Staging uses Postgres 14"],
     ["one entry per fact"]),
    (["entry", "add", PAGE, "The deploy token is ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8."], ["credential"]),
    (["entry", "add", PAGE, "A fact.", "--kind", "rumour"], ["FACT", "DECISION", "CONVENTION", "GOTCHA"]),
    (["entry", "add", PAGE, "   "], []),
    (["entry", "add", PAGE, "A fact.", "--scope", "other:apps"], ["other"]),
    (["entry", "add", PAGE, "A fact.", "--scope", "../etc"], [".."]),
    (["entry", "add", "ENG/Nowhere", "A fact."], ["ENG/Nowhere", "crewlet pages ENG"]),
    (["entry", "show", "e-missing"], ["e-missing", "crewlet entries"]),
    (["entry", "accept", "e-missing"], ["e-missing"]),
    (["entry", "supersede", "e-missing", "A fact."], ["e-missing"]),
    (["entries", "ENG/Nowhere"], ["ENG/Nowhere"]),
    (["page", "policy", PAGE, "sealed"], ["sealed", "open, curated or locked"]),
    (["--as", "nobody", "entries", PAGE], ["--as nobody", "alex"]),
])
def test_every_refusal_is_one_line_naming_the_input(home_cli, args, words):
    home, cli = home_cli
    refused(cli(*args), *words)
    res = cli(*args, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]
    assert entry_count(home) == 0


def test_files_that_cannot_be_read_are_refused_naming_them(cli, tmp_path):
    refused(cli("entry", "add", PAGE, "A fact.", "--citations-file", str(tmp_path / "none.json")),
            "none.json", "does not exist", "a JSON list of citations")
    refused(cli("entry", "add", PAGE, "A fact.", "--citations-file", str(tmp_path)), "is a directory")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    refused(cli("entry", "add", PAGE, "A fact.", "--citations-file", str(bad)), "bad.json", "not JSON")
    bad.write_text('{"link": "acme/api#1", "kind": "issue"}', encoding="utf-8")
    refused(cli("entry", "add", PAGE, "A fact.", "--citations-file", str(bad)), "bad.json", "JSON list")
    refused(cli("entry", "add", PAGE, "--body-file", str(tmp_path)), "is a directory")


@pytest.mark.parametrize("args, words", [
    (["entries"], ["REF", "--needs-person"]),
    (["entries", PAGE, "--needs-person"], ["--needs-person"]),
    (["entries", "--needs-person", "--all"], ["--needs-person"]),
    (["entry", "add", PAGE], ["BODY"]),
    (["entry", "add", PAGE, "A fact.", "--body-file", "x.md"], ["not both"]),
    (["entry", "add", PAGE, "A fact.", "--cite", "{not json"], ["--cite", "not JSON"]),
    (["entry", "add", PAGE, "A fact.", "--cite", "[1, 2]"], ["--cite", "not an object"]),
    (["entry", "add", PAGE, "A fact.", "--cite", "{}", "--citations-file", "c.json"], ["not both"]),
    (["entry", "add", PAGE, "--body-file", "-", "--citations-file", "-"], ["stdin"]),
    (["entry", "edit", "e-1"], ["BODY", "--kind", "--scope"]),
    (["entry", "accept"], ["ID"]),
    (["entry", "frobnicate", "e-1"], ["frobnicate"]),
    (["page", "policy"], ["REF"]),
])
def test_usage_errors_exit_2(home_cli, args, words):
    home, cli = home_cli
    usage(cli(*args), *words)
    assert entry_count(home) == 0


def test_every_command_has_help(cli):
    for args in (["entries"], ["entry"], ["entry", "show"], ["entry", "add"], ["entry", "supersede"],
                 ["entry", "edit"], ["entry", "accept"], ["entry", "verify"], ["entry", "dispute"],
                 ["entry", "archive"], ["page", "policy"]):
        assert "Usage:" in ok(cli(*args, "--help")), args


# -- who may do what -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("action", ["accept", "verify", "dispute"])
def test_an_agent_is_refused_a_persons_action_naming_how_it_was_made_to_act(cli, action):
    proposed = add(cli, "The cache is per process.", env={"CREWLET_AS": "eng-bot"})
    refused(cli("--as", "eng-bot", "entry", action, proposed["id"]), f"to {action} an entry is a person's",
            "--as eng-bot", "leave out --as")
    refused(cli("entry", action, proposed["id"], env={"CREWLET_AS": "eng-bot"}), "CREWLET_AS=eng-bot",
            "unset CREWLET_AS")
    assert ok_json(cli("entry", "show", proposed["id"], "--json"))["status"] == "PROPOSED"
    done = ok_json(cli("--as", "sam", "entry", action, proposed["id"], "--json"))
    assert (done["status"], done["tier"]) == {"accept": ("STANDING", "UNGROUNDED"),     # it cites nothing
                                              "verify": ("STANDING", "HUMAN_VERIFIED"),
                                              "dispute": ("DISPUTED", "UNGROUNDED")}[action]
    assert done["status_by"] == "sam" and done["history"][-1]["actor"] == "sam"


def test_an_agent_archives_and_edits_only_its_own_proposed_entries(cli):
    mine = add(cli, "The cache is per process.", env={"CREWLET_AS": "eng-bot"})
    theirs = add(cli, "Deploys happen on Tuesdays.")
    refused(cli("--as", "eng-bot", "entry", "archive", theirs["id"]), "its own", "--as eng-bot")
    refused(cli("--as", "eng-bot", "entry", "edit", theirs["id"], "Deploys happen on Mondays."), "its own")
    edited = ok_json(cli("--as", "eng-bot", "entry", "edit", mine["id"], "The cache is per worker process.",
                         "--reason", "more exact", "--json"))
    assert edited["body"] == "The cache is per worker process."
    out = ok(cli("--as", "eng-bot", "entry", "archive", mine["id"], "--reason", "a duplicate"))
    assert f"archived {mine['id']}: ARCHIVED" in out
    shown = ok_json(cli("entry", "show", mine["id"], "--json"))
    assert [(h["action"], h["reason"]) for h in shown["history"]] == [
        ("add", None), ("edit", "more exact"), ("archive", "a duplicate")]
    # a person edits any entry: its kind, and its scope removed with ''
    scoped = add(cli, "The cache warms at start.", "--scope", "apps/server")
    again = ok_json(cli("entry", "edit", scoped["id"], "--kind", "decision", "--scope", "", "--json"))
    assert (again["kind"], again["scope"], again["body"]) == ("DECISION", None, "The cache warms at start.")


def test_a_locked_page_refuses_an_agents_entry_and_takes_a_persons(home_cli):
    home, cli = home_cli
    assert "CURATED" in ok(cli("page", "policy", PAGE))
    refused(cli("--as", "eng-bot", "page", "policy", PAGE, "open"), "a person's to set", "--as eng-bot")
    out = ok(cli("page", "policy", PAGE, "locked"))
    assert "CURATED → LOCKED" in out and "people maintain it by hand" in out
    refused(cli("--as", "eng-bot", "entry", "add", PAGE, "The cache is per process."), "ENG/Caching is LOCKED",
            "--as eng-bot")
    assert entry_count(home) == 0
    assert add(cli, "The cache is per process.")["status"] == "STANDING"
    data = ok_json(cli("page", "policy", PAGE, "LOCKED", "--json"))
    assert (data["policy"], data["was"], data["changed"]) == ("LOCKED", "LOCKED", False)
    assert "already LOCKED" in ok(cli("page", "policy", PAGE, "locked"))
    shown = ok_json(cli("page", "policy", PAGE, "--json"))
    assert shown["page"]["title"] == "Caching" and shown["policy"] == "LOCKED"


def test_the_curated_budget_refusal_names_the_setting(tmp_path, repo):
    home, cli = make_home(tmp_path, repo[0].path, page_proposed_entry_budget=1)
    first = add(cli, "The cache is per process.", env={"CREWLET_AS": "eng-bot"})
    refused(cli("--as", "eng-bot", "entry", "add", PAGE, "The cache warms at start."),
            "PAGE_PROPOSED_ENTRY_BUDGET = 1", "eng-bot has 1 proposed entries on ENG/Caching")
    assert entry_count(home) == 1
    ok(cli("entry", "accept", first["id"]))                    # a person decided: the budget frees
    assert add(cli, "The cache warms at start.", env={"CREWLET_AS": "eng-bot"})["status"] == "PROPOSED"
    # an OPEN page has no budget, and takes repeats
    ok(cli("page", "policy", PAGE, "open"))
    for _ in range(2):
        assert add(cli, "Scratch: the build takes 4 minutes.", env={"CREWLET_AS": "eng-bot"})["folded"] is False


# -- corrections ---------------------------------------------------------------------------------------------

def test_an_agents_correction_waits_for_a_person_whose_acceptance_retires_the_old_entry(cli, repo):
    g, sha = repo
    old = add(cli, "The cache holds entries for five minutes.")
    out = ok(cli("--as", "eng-bot", "entry", "supersede", old["id"], "The cache holds entries for ten minutes.",
                 "--cite", code_cite(sha)))
    assert f"added a correction of {old['id']}:" in out and "stays in use until a person accepts" in out
    new = ok_json(cli("entries", PAGE, "--all", "--json"))["entries"]
    [correction] = [e for e in new if e["supersedes"] == old["id"]]
    assert correction["status"] == "PROPOSED"
    assert ok_json(cli("entry", "show", old["id"], "--json"))["status"] == "STANDING"
    accepted = ok_json(cli("entry", "accept", correction["id"], "--json"))
    assert accepted["status"] == "STANDING" and accepted["retired"]["id"] == old["id"]
    assert accepted["retired"]["status"] == "SUPERSEDED"
    assert "superseded by" in ok(cli("entry", "show", old["id"]))
    # a person's correction retires the old one at once
    out = ok(cli("entry", "supersede", correction["id"], "The cache holds entries for fifteen minutes."))
    assert f"{correction['id']} is SUPERSEDED" in out


# -- near entries (SimilarEntries) -----------------------------------------------------------------------------

def test_near_entries_are_listed_nothing_is_written_and_distinct_writes_it(home_cli):
    """The bank's real finding (core/bank/neighbours.py, the local model): an agent's `entry add` of nearly what a
    person's entry says is refused in one line, the neighbour listed with its similarity and page, nothing written;
    with --distinct it is written."""
    home, cli = home_cli
    near = add(cli, "The session cache expires entries after ten minutes.")
    far = add(cli, "Deploys to production happen on Tuesdays.")
    body = "Entries in the session cache expire after 10 minutes."
    res = cli("--as", "eng-bot", "entry", "add", PAGE, body)
    line = refused(res, "not written: 1 entry says nearly the same", "crewlet entry supersede", "--distinct")
    assert "under ENG/Caching" in res.stdout and near["id"] in res.stdout and far["id"] not in res.stdout
    assert "The session cache expires entries after ten minutes." in res.stdout and near["id"] not in line
    res = cli("--as", "eng-bot", "entry", "add", PAGE, body, "--json")
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["error"] == "similar_entries" and [s["entry"]["id"] for s in data["similar"]] == [near["id"]]
    assert 0.75 < data["similar"][0]["similarity"] <= 1.0
    assert entry_count(home) == 2
    written = add(cli, body, "--distinct", env={"CREWLET_AS": "eng-bot"})
    assert written["status"] == "PROPOSED" and written["body"] == body and entry_count(home) == 3


# -- page link -------------------------------------------------------------------------------------------------

def test_a_page_is_linked_to_a_module_a_space_and_a_page_and_lists_its_links(cli):
    assert "is linked to nothing" in ok(cli("page", "link", PAGE))
    assert ok_json(cli("page", "link", PAGE, "--json"))["links"] == []
    out = ok(cli("page", "link", PAGE, "--module", "apps/server"))
    assert "linked ENG/Caching to module apps/server" in out and "module server:apps/server" in out
    data = ok_json(cli("page", "link", PAGE, "--module", "server:apps/server/", "--json"))
    assert data["changed"] is False and [(link["kind"], link["item"]) for link in data["links"]] == [
        ("module", "server:apps/server")]
    assert "linked ENG/Caching to space ENG" in ok(cli("page", "link", PAGE, "--space", "eng"))
    assert "is already linked to space ENG: nothing changed" in ok(cli("page", "link", PAGE, "--space", "ENG"))
    ok(cli("page", "create", "ENG", "Runbook", "--body-file", "-", input="Steps.\n"))
    ok(cli("page", "link", PAGE, "--page", "ENG/Runbook"))
    listed = ok_json(cli("page", "link", PAGE, "--json"))
    assert [(link["kind"], link["label"]) for link in listed["links"]] == [
        ("module", "server:apps/server"), ("page", "ENG/Runbook"), ("space", "ENG")]
    out = ok(cli("page", "link", PAGE, "--space", "ENG", "--remove"))
    assert "unlinked ENG/Caching from space ENG" in out and "space ENG" not in out.split("is about:")[1]
    assert "was not linked" in ok(cli("page", "link", PAGE, "--space", "ENG", "--remove"))


@pytest.mark.parametrize("args, code, words", [
    (["--space", "NOPE"], 1, ["no space 'NOPE'", "crewlet spaces"]),
    (["--page", "ENG/Nowhere"], 1, ["ENG/Nowhere"]),
    (["--page", PAGE], 1, ["about itself"]),
    (["--module", "../etc"], 1, [".."]),
    (["--module", "other:apps"], 1, ["other"]),
    (["--space", "ENG", "--module", "apps"], 2, ["one item at a time"]),
    (["--remove"], 2, ["which link to remove"]),
])
def test_page_link_refusals_and_usage(cli, args, code, words):
    res = cli("page", "link", PAGE, *args)
    if code == 1:
        refused(res, *words)
    else:
        usage(res, *words)
    assert ok_json(cli("page", "link", PAGE, "--json"))["links"] == []


# -- edges -------------------------------------------------------------------------------------------------

def test_a_repository_that_cannot_be_read_writes_the_entry_with_its_citation_not_read_yet(tmp_path):
    not_a_checkout = tmp_path / "not-a-checkout"
    not_a_checkout.mkdir()
    _home, cli = make_home(tmp_path, not_a_checkout)
    entry = add(cli, "The cache holds entries for ten minutes.", "--cite", code_cite("a" * 40))
    assert entry["citations"][0]["result"] == "not_read_yet" and entry["tier"] == "UNGROUNDED"
    assert "— not read yet" in ok(cli("entries", PAGE))


def test_a_recheck_that_found_the_cited_lines_changed_asks_a_person(home_cli, repo):
    from core.bank.entries import EntryBank

    home, cli = home_cli
    g, sha = repo
    entry = add(cli, "The cache holds entries for ten minutes.", "--cite", code_cite(sha))
    with Node.open(home) as node, EntryBank(node) as bank:      # what the recheck duty records
        bank.record_check(entry["id"], 1, "changed", commit=sha, message="the cited lines were rewritten")
    out = ok(cli("entries", "--needs-person"))
    assert "why: citation 1: the cited lines changed" in out and entry["id"] in out
    assert "changed, checked just now" in ok(cli("entries", PAGE))


def test_what_an_entry_says_is_printed_as_text_never_as_markup(cli):
    entry = add(cli, "The [bold]cache[/] flag is read once.")
    out = ok(cli("entries", PAGE))
    assert "The [bold]cache[/] flag is read once." in out
    assert "[bold]cache[/]" in ok(cli("entry", "show", entry["id"]))


def test_as_a_separate_process_an_agents_accept_is_one_line_and_a_persons_json_parses(home_cli):
    """What a person runs: the `crewlet` entry point in its own process, stdout and stderr apart."""
    from mcp_client import crewlet

    home, cli = home_cli
    proposed = add(cli, "The cache is per process.", env={"CREWLET_AS": "eng-bot"})
    res = crewlet(home.root, "entry", "accept", proposed["id"], env={"CREWLET_AS": "eng-bot"})
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.strip() == ("crewlet: to accept an entry is a person's: eng-bot is an agent (acting as "
                                  "CREWLET_AS=eng-bot: unset CREWLET_AS, or name a person, to act as one)")
    res = crewlet(home.root, "entry", "accept", proposed["id"], "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["status"] == "STANDING"
    res = crewlet(home.root, "entries", PAGE)
    assert res.returncode == 0 and "1 entry in use" in res.stdout and res.stderr == ""


def test_on_a_company_whose_knowledge_lives_elsewhere_entries_are_refused_in_one_line(tmp_path):
    """No server is asked: the refusal comes from company.toml alone, before any page is looked up."""
    data = config_with(knowledge={"backend": "confluence", "confluence_spaces": ["ENG"]},
                       integrations={"confluence": {"url": "http://127.0.0.1:9", "token_env": "ENTRIES_CF_TOKEN"}})
    home = new_home(tmp_path / "home", data)
    runner = CliRunner()
    for args in (["entries", PAGE], ["entries", "--needs-person"], ["entry", "show", "e-1"],
                 ["entry", "add", PAGE, "A fact."], ["entry", "accept", "e-1"], ["page", "policy", PAGE],
                 ["page", "link", PAGE]):
        res = runner.invoke(app, ["--home", str(home.root), *args], env=CLEAN_ENV)
        refused(res, "lives in Confluence", "keeps no copy")
