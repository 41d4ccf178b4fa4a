"""The `crewlet` CLI over a real home: exit codes (0 done, 1 refused with one line on stderr,
2 usage), --json shapes, --as / CREWLET_AS, windowed listings, and help that reads well."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from conftest import ROOT
from typer.testing import CliRunner

from core import config as config_mod
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from crewlet_tui.cli import app

PAGE_KEYS = {"id", "container", "title", "address", "revision", "parent_id", "is_folder", "body", "created_by",
             "saved_by", "saved_at", "trashed_at"}
CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "120"}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def chome(tmp_path, runner) -> Home:
    """A home made by plain `crewlet init`, then company.toml edited to the example company."""
    root = tmp_path / "home"
    res = runner.invoke(app, ["--home", str(root), "init", "--operator", "alex"], env=CLEAN_ENV)
    assert res.exit_code == 0, res.output
    home = Home(root)
    config_mod.write(home.config_file, config_mod.example_config())
    return home


@pytest.fixture
def cli(runner, chome):
    def run(*args: str, env: dict | None = None, input: str | None = None):
        return runner.invoke(app, ["--home", str(chome.root), *args], env={**CLEAN_ENV, **(env or {})}, input=input)
    return run


def ok_json(res):
    assert res.exit_code == 0, (res.exit_code, res.stdout, res.stderr)
    return json.loads(res.stdout)


def refused(res, *words: str):
    """Exit 1 and exactly one line on stderr."""
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("crewlet: ")
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def body_file(tmp_path: Path, text: str, name: str = "body.md") -> str:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return str(f)


# -- init -------------------------------------------------------------------------------------------


def test_init_makes_a_home_and_refuses_to_make_it_twice(runner, tmp_path):
    root = tmp_path / "fresh"
    res = runner.invoke(app, ["--home", str(root), "init", "--json"], env=CLEAN_ENV)
    data = ok_json(res)
    assert data == {"home": str(root.resolve()), "config": str(root.resolve() / "company.toml"), "example": False,
                    "pages_created": 0}
    home = Home(root.resolve())
    assert home.config_file.is_file() and home.db_file.is_file() and home.log_file.is_file()
    assert config_mod.load(home.config_file).operator == "admin"
    refused(runner.invoke(app, ["--home", str(root), "init"], env=CLEAN_ENV), "already exists")


def test_init_with_the_home_from_the_environment(runner, tmp_path):
    root = tmp_path / "from-env"
    res = runner.invoke(app, ["init"], env={**CLEAN_ENV, "CREWLET_HOME": str(root)})
    assert res.exit_code == 0 and "Created a crewlet home" in res.stdout
    assert (root / "company.toml").is_file()


def test_init_example_loads_the_example_knowledge_base(runner, tmp_path):
    pytest.importorskip("core.importer")
    root = tmp_path / "example"
    data = ok_json(runner.invoke(app, ["--home", str(root), "init", "--example", "--json"], env=CLEAN_ENV))
    assert data["example"] is True and data["pages_created"] >= 9
    spaces = {s["key"]: s for s in ok_json(runner.invoke(app, ["--home", str(root), "spaces", "--json"], env=CLEAN_ENV))}
    assert all(spaces[k]["pages"] > 0 for k in ("HOME", "ENG", "LEAD", "PROD"))
    page = ok_json(runner.invoke(app, ["--home", str(root), "page", "show", "ENG/deploy  RUNBOOK", "--json"], env=CLEAN_ENV))
    assert page["title"] == "Deploy Runbook" and page["body"].strip()


def test_a_command_without_a_home_says_how_to_make_one(runner, tmp_path):
    # the init it advises is for the home --home named, not the default one
    refused(runner.invoke(app, ["--home", str(tmp_path / "none"), "spaces"], env=CLEAN_ENV),
            f"crewlet --home {tmp_path / 'none'} init --example")


# -- a walk through the page commands -------------------------------------------------------------------


def test_a_walk_through_the_page_commands(cli, tmp_path, chome):
    spaces = ok_json(cli("spaces", "--json"))
    assert {s["key"] for s in spaces} == {"HOME", "SKILLS", "ENG", "LEAD", "PROD"}
    assert {s["key"] for s in spaces if s["reserved"]} == {"HOME", "SKILLS"}

    f = body_file(tmp_path, "# Incident review\n")
    created = ok_json(cli("page", "create", "ENG", "Incident  Review", "--body-file", f, "--json"))
    assert PAGE_KEYS <= set(created)
    assert (created["title"], created["address"], created["revision"], created["is_folder"]) == (
        "Incident Review", "ENG/incident review", 1, False)
    assert (created["created_by"], created["saved_by"], created["trashed_at"], created["parent_id"]) == (
        "alex", "alex", None, None)
    pid = created["id"]

    shown = ok_json(cli("page", "show", "ENG/incident review", "--json"))
    assert PAGE_KEYS <= set(shown) and shown["body"] == "# Incident review\n"
    assert {"comments", "linked_from", "children"} <= set(shown)
    text = cli("page", "show", pid)
    assert text.exit_code == 0 and "Incident Review" in text.stdout and "revision 1" in text.stdout

    f2 = body_file(tmp_path, "# Incident review\n\nBlameless, within a week.\n", "b2.md")
    saved = ok_json(cli("page", "save", "ENG/Incident Review", "--body-file", f2, "--base-rev", "1", "-m",
                        "when we hold them", "--json"))
    assert saved["revision"] == 2
    stale = cli("page", "save", "ENG/Incident Review", "--body-file", f, "--base-rev", "1", "--json")
    refused(stale, "revision 2, not 1")
    refusal = json.loads(stale.stdout)
    assert refusal["error"] == "stale_revision" and refusal["your_body"] == "# Incident review\n"
    assert Path(refusal["rescued_to"]).read_text(encoding="utf-8") == "# Incident review\n"

    history = ok_json(cli("page", "history", pid, "--json"))
    assert [(h["revision"], h["kind"], h["message"]) for h in history] == [(2, "save", "when we hold them"),
                                                                           (1, "create", None)]
    assert "body" not in history[0]
    diff = ok_json(cli("page", "diff", pid, "2", "--json"))
    assert diff["from"] == 1 and diff["to"] == 2 and "+Blameless, within a week." in diff["diff"]
    assert cli("page", "diff", pid, "1", "2").exit_code == 0

    old = ok_json(cli("page", "show", pid, "--revision", "1", "--json"))
    assert old["revision"] == 2 and old["shown_revision"]["body"] == "# Incident review\n"
    assert "Blameless" not in cli("page", "show", pid, "-r", "1").stdout
    refused(cli("page", "show", pid, "-r", "9"), "no revision 9")

    renamed = ok_json(cli("page", "rename", pid, "Incident Reviews", "--json"))
    assert (renamed["address"], renamed["revision"]) == ("ENG/incident reviews", 3)
    folder = ok_json(cli("page", "create", "ENG", "Postmortems", "--json"))
    assert folder["is_folder"] is True and folder["body"] == ""
    moved = ok_json(cli("page", "move", "ENG/incident reviews", "--parent", "ENG/Postmortems", "--json"))
    assert moved["parent_id"] == folder["id"] and moved["warnings"] == []

    comment = ok_json(cli("page", "comment", pid, "Add the template?", "--json"))
    assert comment["author"] == "alex" and comment["body"] == "Add the template?"
    edited = ok_json(cli("page", "comment", comment["id"], "Add the template!", "--edit", "--json"))
    assert edited["body"] == "Add the template!"

    refused(cli("--as", "sam", "page", "trash", pid), "sam may not trash", "creator (alex)")
    trashed = ok_json(cli("page", "trash", pid, "--json"))
    assert trashed["trashed_by"] == "alex" and trashed["trashed_at"]
    assert [p["id"] for p in ok_json(cli("trash", "--json"))] == [pid]
    assert "Incident Reviews" in cli("trash").stdout
    assert ok_json(cli("page", "restore", pid, "--json"))["trashed_at"] is None

    refused(cli("page", "purge", pid), "not in the trash")
    cli("page", "trash", pid)
    refused(cli("--as", "sam", "page", "purge", pid), "admin")
    purged = ok_json(cli("page", "purge", pid, "--json"))
    assert purged == {"page_id": pid, "container": "ENG", "title": "Incident Reviews", "purged": True}
    gone = cli("page", "show", pid, "--json")
    refused(gone, "was purged by alex")
    assert json.loads(gone.stdout)["error"] == "purged"


def test_backlinks_and_comment_removal(cli, chome):
    with Node.open(chome) as node:
        kb = KnowledgeBase(node)
        target = kb.create_page("ENG", "Target", "x")
        kb.create_page("ENG", "Linker", f"see [it](#/knowledge/pages/{target.id})")
        node.conn.execute("INSERT INTO page_links (src, dst) SELECT id, ? FROM pages WHERE title = 'Linker'",
                          (target.id,))  # the indexer's job; filled here by hand
        c = kb.add_comment(target.id, "hm", actor="sam")
    assert [p["title"] for p in ok_json(cli("page", "backlinks", "ENG/target", "--json"))] == ["Linker"]
    assert "Linker" in cli("page", "show", "ENG/target").stdout
    refused(cli("--as", "eng-bot", "page", "comment", c.id, "--remove"), "only its author or an admin")
    assert ok_json(cli("page", "comment", c.id, "--remove", "--json")) == {"comment_id": c.id, "removed": True}


# -- exit codes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["page", "create", "ENG"],                  # a missing argument
    ["pages", "ENG", "--limit", "501"],         # out of range
    ["pages", "ENG", "--limit", "0"],
    ["page", "move", "ENG/x"],                  # neither --parent nor --top
    ["page", "move", "ENG/x", "--parent", "ENG/y", "--top"],
    ["page", "comment", "ENG/x"],               # no text
    ["page", "save", "ENG/x", "--body-file", "f"],  # no --base-rev
    ["page", "save", "ENG/x", "--body-file", "f", "--base-rev", "one"],
    ["no-such-command"],
])
def test_a_usage_error_exits_2(cli, args):
    res = cli(*args)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert "Usage" in res.stderr or "Error" in res.stderr


@pytest.mark.parametrize("args, words", [
    (["page", "create", "NOPE", "A page"], ["not a declared space", "[spaces.NOPE]"]),
    (["page", "show", "ENG/nothing"], ["no page 'ENG/nothing'", "`crewlet pages ENG` lists its pages"]),
    (["page", "show", "nothing"], ["CONTAINER/Title"]),
    (["--as", "ghost", "page", "create", "ENG", "x"], ["actors.ghost", "alex"]),
    (["--as", "ghost", "worker", "--once"], ["actors.ghost", "alex"]),   # acting on nobody's behalf, refused alike
    (["--as", "ghost", "index", "status"], ["actors.ghost", "alex"]),
    (["--as", "eng-bot", "page", "create", "SKILLS", "x"], ["skills container"]),
    (["page", "create", "ENG", "   "], ["needs a title"]),
    (["page", "create", "ENG", "x", "--body-file", "/nonexistent/file.md"], ["/nonexistent/file.md"]),
    (["pages", "ENG", "--after", "not-a-cursor"], ["cursor"]),
])
def test_a_refusal_exits_1_with_one_line(cli, args, words):
    res = cli(*args)
    refused(res, *words)
    assert res.stdout == ""


def test_a_refusal_with_json_prints_the_error_object(cli):
    res = cli("page", "create", "NOPE", "A page", "--json")
    refused(res)
    err = json.loads(res.stdout)
    assert err["error"] == "not_declared" and "NOPE" in err["message"]


def test_a_body_that_is_not_text_is_refused(cli, tmp_path):
    f = tmp_path / "bin.md"
    f.write_bytes(b"\x89PNG\x00\x00")
    refused(cli("page", "create", "ENG", "Binary", "--body-file", str(f)), "NUL")
    f.write_bytes(b"caf\xe9")
    refused(cli("page", "create", "ENG", "Latin1", "--body-file", str(f)), "not UTF-8")


def test_a_body_from_standard_input(cli):
    page = ok_json(cli("page", "create", "ENG", "Piped", "--body-file", "-", "--json", input="from stdin\n"))
    assert page["body"] == "from stdin\n"


def test_a_bad_config_is_one_line_naming_file_and_key(cli, chome):
    chome.config_file.write_text(chome.config_file.read_text() + "\n[spaces.X]\nlead = \"ghost\"\n")
    line = refused(cli("spaces"), "spaces.X.lead", "'ghost' is not a configured actor")
    assert "company.toml" in line
    chome.config_file.write_text("operator = \n")
    refused(cli("spaces"), "(syntax)", "company.toml")


# -- acting as -----------------------------------------------------------------------------------------------


def test_as_handle_and_crewlet_as(cli):
    by_flag = ok_json(cli("--as", "sam", "page", "create", "PROD", "By Flag", "--json"))
    by_env = ok_json(cli("page", "create", "PROD", "By Env", "--json", env={"CREWLET_AS": "sam"}))
    by_operator = ok_json(cli("page", "create", "PROD", "By Operator", "--json"))
    assert (by_flag["created_by"], by_env["created_by"], by_operator["created_by"]) == ("sam", "sam", "alex")
    both = ok_json(cli("--as", "alex", "page", "create", "PROD", "Flag Wins", "--json", env={"CREWLET_AS": "sam"}))
    assert both["created_by"] == "alex"


def test_an_agent_reading_a_page_is_recorded_and_a_person_is_not(cli, chome):
    page = ok_json(cli("page", "create", "ENG", "Read Me", "--json"))
    ok_json(cli("page", "show", page["id"], "--json"))
    ok_json(cli("--as", "eng-bot", "page", "show", "ENG/read me", "--json"))
    with Node.open(chome) as node:
        reads = KnowledgeBase(node).reads()
    assert [(r["actor"], r["via"], [p["id"] for p in r["pages"]]) for r in reads] == [("eng-bot", "get_page", [page["id"]])]


# -- windowed listings ------------------------------------------------------------------------------------------


def test_pages_are_listed_in_windows_with_totals_and_child_counts(cli, chome):
    with Node.open(chome) as node:
        kb = KnowledgeBase(node)
        for i in range(7):
            kb.create_page("ENG", f"Page {i}", "x")
        parent = kb.resolve("ENG/page 3")
        live = kb.create_page("ENG", "Live Child", "x", parent=parent.id)
        binned = kb.create_page("ENG", "Binned Child", "x", parent=parent.id)
        kb.trash_page(binned.id)
        only_trashed = kb.resolve("ENG/page 5")
        gone = kb.create_page("ENG", "Gone Child", "x", parent=only_trashed.id)
        kb.trash_page(gone.id)
    titles, cursor, windows = [], None, []
    while True:
        args = ["pages", "ENG", "--limit", "3", "--json"] + (["--after", cursor] if cursor else [])
        w = ok_json(cli(*args))
        windows.append(w)
        assert w["total"] == 7 and w["container"] == "ENG" and w["parent_id"] is None
        assert len(w["pages"]) <= 3 and all("body" not in p for p in w["pages"])
        titles += [p["title"] for p in w["pages"]]
        cursor = w["next_cursor"]
        if not cursor:
            break
    assert titles == [f"Page {i}" for i in range(7)] and len(windows) == 3
    counts = {p["title"]: p["child_count"] for w in windows for p in w["pages"]}
    assert counts["Page 3"] == 1 and counts["Page 5"] == 0 and counts["Page 0"] == 0
    children = ok_json(cli("pages", "ENG", "--parent", "ENG/Page 3", "--json"))
    assert [p["id"] for p in children["pages"]] == [live.id] and children["total"] == 1
    table = cli("pages", "ENG", "--limit", "3")
    assert table.exit_code == 0 and "7 pages at this level" in table.stdout and "--after" in table.stdout


# -- help that reads well -----------------------------------------------------------------------------------------


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, (*path, name))


ALL_COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path, cmd", ALL_COMMANDS, ids=[" ".join(p) or "crewlet" for p, _ in ALL_COMMANDS])
def test_every_command_has_help_that_reads_well(runner, path, cmd):
    res = runner.invoke(app, [*path, "--help"], env=CLEAN_ENV)
    assert res.exit_code == 0, res.output
    assert "Usage:" in res.stdout
    description = (cmd.help or cmd.short_help or "").strip()
    assert description, f"`crewlet {' '.join(path)}` has no description"
    assert description[0].isupper() and description.split("\n")[0].rstrip().endswith((".", ")")), description
    assert description.split("\n")[0].split(".")[0] in " ".join(res.stdout.split())
    for param in cmd.params:
        if getattr(param, "hidden", False) or param.name == "help":
            continue
        assert (getattr(param, "help", None) or "").strip(), f"`crewlet {' '.join(path)}`: {param.name} has no help"
    for name, sub in getattr(cmd, "commands", {}).items():
        assert name in res.stdout  # a group lists its commands


def test_h_is_help_too(runner):
    res = runner.invoke(app, ["page", "-h"], env=CLEAN_ENV)
    assert res.exit_code == 0 and "Usage:" in res.stdout


def test_the_readme_mentions_every_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.strip(), "README.md is empty"
    top = typer.main.get_command(app)
    missing = []
    for name in sorted(top.commands):
        if not re.search(rf"crewlet(?:\s+--?[\w-]+(?:[ =](?!-)\S+)?)*\s+{re.escape(name)}\b", readme):
            missing.append(name)
    for name in sorted(top.commands["page"].commands):
        if not re.search(rf"crewlet(?:\s+--?[\w-]+(?:[ =](?!-)\S+)?)*\s+page\s+{re.escape(name)}\b", readme):
            missing.append(f"page {name}")
    assert not missing, f"README.md never shows: {', '.join('crewlet ' + m for m in missing)}"


def test_reads_as_a_person_without_the_knowledge_app_are_refused_by_core_in_one_line(cli, chome):
    data = config_mod.example_config()
    data["actors"]["kim"] = {"kind": "person", "knowledge": False}
    config_mod.write(chome.config_file, data)
    with Node.open(chome) as node:
        page = KnowledgeBase(node).create_page("ENG", "Runbook", "v1\n", actor="alex")
    for args in (["spaces"], ["pages", "ENG"], ["trash"], ["page", "show", page.id], ["page", "history", page.id],
                 ["page", "diff", page.id, "1"], ["page", "backlinks", page.id]):
        refused(cli("--as", "kim", *args), "kim does not hold the knowledge app")
        assert cli(*args).exit_code == 0, args   # the operator (alex) holds it
