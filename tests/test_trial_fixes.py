"""What a new user's trial of crewlet found (main at cdba6ff): refusals said alike over MCP and the CLI, no server
path nor file shown to a model, and CLI hints that point the right way. MCP through a real client session
(tests/mcp_client.py), the CLI through its process."""
from __future__ import annotations

import shlex
import subprocess

import pytest
from mcp_client import CREWLET, ENV, call, connect, crewlet, refused
from mcp_client import anyio_backend, example_home, home, server_side  # noqa: F401 - fixtures, by name

from core.paths import Home

pytestmark = pytest.mark.anyio


def rescued_files(home: Home) -> list[str]:
    return sorted(p.name for p in home.rescue_dir.glob("*.md")) if home.rescue_dir.exists() else []


async def test_answer_knowledge_refuses_an_unknown_space_as_search_knowledge_does(home):
    async with connect(home.root, "eng-bot") as client:
        searched, searched_data = await refused(client, "search_knowledge", query="rollback", container="NOPE")
    async with connect(home.root, "sam") as client:      # answer_knowledge is a person's tool
        answered, answered_data = await refused(client, "answer_knowledge", question="x", container="NOPE")
    assert answered == searched and answered_data == searched_data
    assert answered_data["error"] == "unknown_container" and answered_data["container"] == "NOPE"
    assert "call list_pages without a container" in answered
    server_side(home, answered)
    # the CLI says the same fact with its own advice
    res = crewlet(home.root, "ask", "--container", "NOPE", "x", actor="sam")
    assert res.returncode == 1
    assert res.stderr.strip() == ("crewlet: no space 'NOPE': it is not declared and holds no pages — "
                                  "`crewlet spaces` lists them"), res.stderr


async def test_a_stale_save_over_mcp_names_no_file_and_says_what_to_do_with_the_tools(home):
    async with connect(home.root, "eng-bot") as client:
        _, page = await call(client, "get_page", ref="ENG/Rollback")
        base = page["revision"]
        await call(client, "save_page", ref="ENG/Rollback", body="first edit", base_revision=base)
        text, data = await refused(client, "save_page", ref="ENG/Rollback", body="second edit", base_revision=base)
        missing, missing_data = await refused(client, "save_page", ref="ENG/missing", body="lost?", base_revision=1)
    assert data["error"] == "stale_revision" and data["current_revision"] == base + 1
    assert "your text was not saved" in text and "get_page" in text
    assert f"save_page with base_revision {base + 1}" in text
    server_side(home, text)
    assert missing_data["error"] == "not_found" and missing.startswith("no page 'ENG/missing' — ")
    server_side(home, missing)
    assert rescued_files(home) == []          # the model holds its own text: no file kept for it


def test_the_cli_keeps_a_stale_text_but_no_text_for_a_page_that_does_not_exist(home, tmp_path):
    body = tmp_path / "body.md"
    body.write_text("my text\n", encoding="utf-8")
    res = crewlet(home.root, "page", "save", "ENG/missing", "--body-file", str(body), "--base-rev", "1")
    assert res.returncode == 1 and "no page 'ENG/missing'" in res.stderr and "rescued" not in res.stderr, res.stderr
    assert rescued_files(home) == []
    assert crewlet(home.root, "page", "save", "ENG/Rollback", "--body-file", str(body), "--base-rev", "1").returncode == 0
    body.write_text("my later text\n", encoding="utf-8")
    res = crewlet(home.root, "page", "save", "ENG/Rollback", "--body-file", str(body), "--base-rev", "1")
    assert res.returncode == 1 and "your text is kept in" in res.stderr, res.stderr
    assert len(rescued_files(home)) == 1


async def test_an_empty_or_wordless_query_is_a_tool_error_with_a_code(home):
    async with connect(home.root, "eng-bot") as client:
        empty, data = await refused(client, "search_knowledge", query="  ")
        wordless, wordless_data = await refused(client, "search_knowledge", query="the ???", mode="keyword")
    assert data["error"] == "empty_query" and empty.startswith("the query is empty")
    assert "call search_knowledge with the words" in empty
    assert wordless_data["error"] == "no_words" and "has no word that can be searched" in wordless
    server_side(home, empty)
    server_side(home, wordless)


# -- crewlet settings knowledge: fits 80 columns, and says which settings nothing reads yet ----------------------

def test_settings_knowledge_fits_80_columns_with_every_variable_whole(example_home):
    import core.sections.bank as bank

    for env in ({}, {"COLUMNS": "80"}):          # piped (no width: plain output is never wrapped) and at 80
        res = crewlet(example_home.root, "settings", "knowledge", env=env)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, max(lines, key=len)
        assert all(line == line.rstrip() for line in lines)
        for variable in bank.VARIABLES:          # each on a line of its own, whole
            assert f"  {variable}" in lines, variable
        # every setting has its reader now (triage, runs, upkeep, consolidation, generated pages): none idle
        assert "not in effect yet" not in res.stdout


ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _readers(key: str) -> list:
    """The modules that read `key` off the bank's settings (the settings' own module and this listing aside)."""
    import re

    pattern = re.compile(rf"\.{key}\b")
    skip = {ROOT / "core" / "bank" / "settings.py", ROOT / "crewlet_tui" / "cli_settings.py"}
    return [p for d in ("core", "crewlet_tui") for p in (ROOT / d).rglob("*.py")
            if p not in skip and pattern.search(p.read_text(encoding="utf-8"))]


def _reached_from_a_surface() -> set:
    """The modules a command, a tool, the app or a duty imports, directly or through others (tests/test_import_graph's
    reading of imports: every import counts, a function's own too)."""
    from test_import_graph import imported, module_name

    modules = {module_name(p)[0]: p for d in ("core", "crewlet_tui") for p in (ROOT / d).rglob("*.py")}
    todo = [p for p in modules.values() if p.is_relative_to(ROOT / "crewlet_tui")
            or p.is_relative_to(ROOT / "core" / "mcp") or p.is_relative_to(ROOT / "core" / "duties")]
    seen = set(todo)
    while todo:
        for name, _ in imported(todo.pop()):
            parts = name.split(".")
            for n in range(len(parts), 0, -1):      # a module, its package's __init__, and theirs
                found = modules.get(".".join(parts[:n]))
                if found is not None and found not in seen:
                    seen.add(found)
                    todo.append(found)
    return seen


def test_settings_knowledge_says_honestly_which_settings_are_in_effect(example_home):
    import json

    res = crewlet(example_home.root, "settings", "knowledge", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["settings"]
    reached_modules = _reached_from_a_surface()
    for row in rows:
        # in effect: read by code a command, a tool, the app or a duty reaches; a reader nothing calls yet (the
        # bank's entries, being built) leaves it "not in effect yet"
        reached = any(m in reached_modules for m in _readers(row["key"]))
        assert row["in_effect"] is reached, (row["key"], _readers(row["key"]))
    idle = sum(not row["in_effect"] for row in rows)
    text = crewlet(example_home.root, "settings", "knowledge").stdout
    assert text.count("not in effect yet)") == idle
    if idle:
        assert f"{idle} of {len(rows)} settings are not in effect yet" in " ".join(text.split())


# -- CLI hints that point the right way ---------------------------------------------------------------------------

def test_no_home_advice_carries_the_home_that_was_named(tmp_path):
    missing = tmp_path / "no home"
    res = crewlet(missing, "spaces", env={"CREWLET_HOME": str(tmp_path / "walk")})   # --home wins over it
    assert res.returncode == 1
    assert res.stderr.strip() == f"crewlet: no crewlet home at {missing} — run `crewlet --home '{missing}' init --example`"
    # the advice, run as said (CREWLET_HOME still set), makes the home the command looked at
    said = shlex.split(res.stderr.split("run `", 1)[1].strip().rstrip("`"))
    assert said[0] == "crewlet"
    made = subprocess.run([*CREWLET, *said[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                          env={**ENV, "CREWLET_HOME": str(tmp_path / "walk")})
    assert made.returncode == 0, made.stderr
    assert crewlet(missing, "spaces").returncode == 0


def test_an_address_in_a_space_that_does_not_exist_points_at_the_spaces(example_home):
    for command in (("page", "show", "NOPE/x"), ("open", "NOPE/x")):
        res = crewlet(example_home.root, *command)
        assert res.returncode == 1
        assert res.stderr.strip() == ("crewlet: no page 'NOPE/x': there is no space 'NOPE' — `crewlet spaces` lists "
                                      "the spaces there are"), (command, res.stderr)
    # a space that exists, a title that does not: its pages are worth listing
    res = crewlet(example_home.root, "page", "show", "ENG/nothing")
    assert "`crewlet pages ENG` lists its pages" in res.stderr and "no space" not in res.stderr


async def test_get_page_in_a_space_that_does_not_exist_points_at_list_pages(example_home):
    async with connect(example_home.root, "eng-bot") as client:
        text, data = await refused(client, "get_page", ref="NOPE/x")
    assert data["error"] == "not_found" and data["space_unknown"] is True
    assert text == "no page 'NOPE/x': there is no space 'NOPE' — call list_pages without a container for the spaces there are"


def test_an_unknown_actor_is_said_as_the_value_given_with_the_actors_there_are(example_home):
    res = crewlet(example_home.root, "spaces", actor="nobody")
    assert res.returncode == 1
    line = res.stderr.strip()
    assert line.startswith("crewlet: --as nobody: no actor 'nobody' is configured — act as one of: alex, eng-bot, sam")
    assert not line.startswith(f"crewlet: {example_home.root}")       # not a fault of the file
    res = crewlet(example_home.root, "spaces", "--json", env={"CREWLET_AS": "nobody"})
    assert res.returncode == 1
    import json
    said = json.loads(res.stdout)
    assert said["error"] == "unknown_actor" and said["actors"] == ["alex", "eng-bot", "sam"]
    assert said["message"].startswith("CREWLET_AS=nobody: no actor 'nobody' is configured")


def test_page_create_says_a_folder_and_page_move_says_where_to(home, tmp_path):
    res = crewlet(home.root, "page", "create", "ENG", "Postmortems")
    assert res.returncode == 0 and res.stdout.startswith("created folder ENG/Postmortems (id "), res.stdout
    body = tmp_path / "body.md"
    body.write_text("# Incident review\n", encoding="utf-8")
    res = crewlet(home.root, "page", "create", "ENG", "Incident Reviews", "--body-file", str(body))
    assert res.stdout.startswith("created ENG/Incident Reviews (id "), res.stdout      # a page with text: no word added
    assert crewlet(home.root, "page", "create", "ENG", "Archive", "--parent", "ENG/Postmortems").returncode == 0
    res = crewlet(home.root, "page", "move", "ENG/Incident Reviews", "--parent", "ENG/Archive")
    assert res.returncode == 0 and res.stdout.startswith("moved ENG/Incident Reviews under ENG/Archive (id "), res.stdout
    res = crewlet(home.root, "page", "move", "ENG/Incident Reviews", "--top")
    assert res.returncode == 0 and res.stdout.startswith("moved ENG/Incident Reviews to the top of ENG (id "), res.stdout
