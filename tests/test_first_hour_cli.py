"""What a new user trips on in the CLI (issue 21): wrong answers, words a newcomer reads at once, help
that reads well, and plain output that a pipe or a file gets whole. Each test failed before its fix."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from core import config as config_mod
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from crewlet_tui.cli import app

CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "120"}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def chome(tmp_path, runner) -> Home:
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


def refused(res, *words: str) -> str:
    """Exit 1 and exactly one line on stderr, holding every one of `words`."""
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("crewlet: ")
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def log_size(home: Home) -> int:
    return home.log_file.stat().st_size


def pages(home: Home, *specs: tuple[str, str, str]) -> dict[str, str]:
    """Create (container, title, body) pages; their ids by title."""
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        return {title: kb.create_page(container, title, body).id for container, title, body in specs}


# -- 1. a diff names the revision asked for -------------------------------------------------------------

def test_a_diff_of_a_revision_that_is_not_there_names_that_revision(cli, chome):
    pages(chome, ("ENG", "Onboarding", "# Welcome\n"))
    line = refused(cli("page", "diff", "ENG/Onboarding", "99"), "has no revision 99", "(it is at 1)")
    assert "98" not in line
    refused(cli("page", "diff", "ENG/Onboarding", "1", "7"), "has no revision 7")
    refused(cli("page", "diff", "ENG/Onboarding", "7", "1"), "has no revision 7")


# -- 2. restoring a page that is not in the trash ---------------------------------------------------------

def test_restoring_a_live_page_is_refused_and_appends_nothing(cli, chome):
    pages(chome, ("ENG", "Rollback", "Roll back first."))
    before = log_size(chome)
    refused(cli("page", "restore", "ENG/Rollback"), "ENG/Rollback is not in the trash")
    res = cli("page", "restore", "ENG/Rollback", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"] == "not_trashed"
    assert log_size(chome) == before            # nothing was appended to the log
    # and the purge of a live page (refused before) now appends nothing either
    refused(cli("page", "purge", "ENG/Rollback"), "is not in the trash")
    assert log_size(chome) == before


# -- 3. an unknown, undeclared container is refused alike everywhere -------------------------------------------

def test_an_unknown_container_is_refused_alike_by_search_and_pages(cli, chome):
    pages(chome, ("ENG", "Rollback", "Roll back first."))
    by_pages = refused(cli("pages", "NOPE"), "no space 'NOPE'")
    by_search = refused(cli("search", "rollback", "--mode", "keyword", "--container", "NOPE"), "no space 'NOPE'")
    assert by_pages == by_search
    res = cli("search", "rollback", "--mode", "keyword", "--container", "NOPE", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["outcome"]["degraded"] == "unknown_container"
    listed = cli("pages", "NOPE", "--json")          # the same code from both (MCP's list_pages and search too)
    assert listed.exit_code == 1 and json.loads(listed.stdout)["error"] == "unknown_container"
    # one unknown among known ones is refused too: a typo must not pass for "nothing matched"
    refused(cli("search", "rollback", "--mode", "keyword", "-c", "ENG", "-c", "NOPE"), "no space 'NOPE'")
    # a declared space that holds nothing is a fact, not a mistake: searched, and said
    empty = cli("search", "rollback", "--mode", "keyword", "--container", "PROD")
    assert empty.exit_code == 0 and "nothing matched" in empty.stdout.lower()


def test_an_undeclared_container_that_holds_pages_is_searched(cli, chome):
    """Undeclared but holding pages (reachable by address and search): not unknown."""
    with Node.open(chome) as node:
        from conftest import create_rec
        node.submit([create_rec("OLD", "Archive", "rollback notes from the old wiki")])
    assert cli("pages", "OLD").exit_code == 0
    found = cli("search", "rollback", "--mode", "keyword", "--container", "OLD")
    assert found.exit_code == 0 and "Archive" in found.stdout


# -- 4. a home that is a file ---------------------------------------------------------------------------

def test_a_home_that_is_a_regular_file_is_said_to_be_a_file(runner, tmp_path):
    f = tmp_path / "not-a-home"
    f.write_text("hello")
    env = {**CLEAN_ENV, "CREWLET_HOME": str(f)}
    for args in (["spaces"], ["init", "--example"], ["page", "show", "ENG/x"], ["log", "check"]):
        line = refused(runner.invoke(app, args, env=env), f"{f} is a file, not a crewlet home")
        assert "crewlet init" not in line and "File exists" not in line, line
    line = refused(runner.invoke(app, ["--home", str(f / "below"), "init"], env=CLEAN_ENV), "is a file")
    assert "Errno" not in line
    assert f.read_text() == "hello"


# -- 5. sync join FILE -----------------------------------------------------------------------------------

def test_sync_join_of_a_regular_file_says_it_is_a_file(cli, tmp_path):
    f = tmp_path / "shared.txt"
    f.write_text("x")
    line = refused(cli("sync", "join", str(f)), f"{f} is a file, not a directory")
    assert "holds files" not in line


# -- 6. a move that would make a cycle names both pages ---------------------------------------------------------

def test_a_move_beneath_itself_names_both_pages_by_address(cli, chome):
    ids = pages(chome, ("ENG", "Deploy Runbook", "How a change reaches production."))
    with Node.open(chome) as node:
        KnowledgeBase(node).create_page("ENG", "Rollback", "Roll back first.", parent=ids["Deploy Runbook"])
    line = refused(cli("page", "move", "ENG/Deploy Runbook", "--parent", "ENG/Rollback"),
                   "ENG/Rollback", "ENG/Deploy Runbook", "cycle")
    assert ids["Deploy Runbook"] not in line                  # named by address, not by id
    refused(cli("page", "move", "ENG/Rollback", "--parent", "ENG/Rollback"), "ENG/Rollback", "itself")


# -- 7. a title holding a line break ---------------------------------------------------------------------------

@pytest.mark.parametrize("brk, name", [("\n", "U+000A"), ("\r", "U+000D"), ("\u2028", "U+2028")])
def test_a_title_with_a_line_break_is_refused_naming_it(cli, chome, brk, name):
    before = log_size(chome)
    refused(cli("page", "create", "ENG", f"line1{brk}line2"), name, "remove it")
    pages(chome, ("ENG", "Rollback", "x"))
    after_create = log_size(chome)
    refused(cli("page", "rename", "ENG/Rollback", f"Roll{brk}back"), name)
    assert log_size(chome) == after_create > before


def test_a_title_with_a_trailing_newline_is_still_trimmed(cli):
    """A shell's `$(…)` or a pasted line end around a title is not inside it."""
    res = cli("page", "create", "ENG", "Rollback\n", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["title"] == "Rollback"


# -- 8. --body-file naming a directory --------------------------------------------------------------------------

def test_a_body_file_that_is_a_directory_says_a_file_is_needed(cli, tmp_path):
    line = refused(cli("page", "create", "ENG", "Foo", "--body-file", str(tmp_path)),
                   f"--body-file {tmp_path} is a directory", "a file")
    assert "Is a directory" not in line


# -- help ----------------------------------------------------------------------------------------------------

def _help_pages(runner: CliRunner, columns: int) -> list[tuple[str, str]]:
    """Every command's --help (the search eval dispatch included), at a terminal `columns` wide."""
    import typer

    def walk(cmd, path):
        yield path
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    paths = [*walk(typer.main.get_command(app), []), ["search", "eval"]]
    out = []
    for path in paths:
        res = runner.invoke(app, [*path, "--help"], env={**CLEAN_ENV, "COLUMNS": str(columns)})
        assert res.exit_code == 0, (path, res.output)
        out.append((" ".join(path) or "crewlet", res.stdout))
    return out


TYPE_HINT = re.compile(r"<(?:str|int|float|path|directory|file|text)(?: range)?>")


def test_help_placeholders_are_in_one_style(runner):
    """QUERY, DIR, REF, TEXT: an option's value and an argument are named in capitals, never `<str>` or
    `{directory}`."""
    for name, text in _help_pages(runner, 200):
        usage = next(line for line in text.splitlines() if "Usage:" in line)
        after = usage.split("[OPTIONS]", 1)[-1]
        assert not re.search(r"[{\[][a-z]", after), (name, usage)
        for line in text.splitlines():
            if re.match(r"\s*│\s*\*?\s*--[a-z]", line):           # an option's row
                assert not TYPE_HINT.search(line), (name, line.strip())


def test_help_paragraphs_are_not_hard_wrapped(runner):
    """At 1,000 columns every paragraph of a command's description fits one line: a line break inside one
    is a ragged edge at every other width."""
    for name, text in _help_pages(runner, 1000):
        description = text.split("╭", 1)[0]
        paragraphs = [p for p in re.split(r"\n\s*\n", description) if p.strip() and "Usage:" not in p]
        assert paragraphs, name
        for p in paragraphs:
            lines = [line.strip() for line in p.splitlines() if line.strip()]
            assert len(lines) == 1, (name, lines)


def test_index_help_says_it_covers_meaning_too(runner):
    root = runner.invoke(app, ["--help"], env={**CLEAN_ENV, "COLUMNS": "200"}).stdout
    listed = next(line for line in root.splitlines() if re.match(r"\s*│ index\s", line))
    assert "meaning" in listed, listed
    own = runner.invoke(app, ["index", "--help"], env={**CLEAN_ENV, "COLUMNS": "200"}).stdout
    assert "meaning" in own.split("╭", 1)[0], own


def test_mode_meaning_is_accepted_as_semantic_and_help_names_the_alias(runner, cli, chome):
    pages(chome, ("ENG", "Rollback", "Roll back first."))
    res = cli("search", "rollback", "--mode", "meaning", "--json")
    # served or not (no vectors here), it is the semantic mode, never a usage error
    assert res.exit_code in (0, 1), res.output
    assert res.exit_code != 2 and "not one of" not in res.stderr
    help_text = runner.invoke(app, ["search", "--help"], env={**CLEAN_ENV, "COLUMNS": "200"}).stdout
    assert re.search(r"semantic \(also: meaning\)", help_text), help_text
    bad = cli("search", "rollback", "--mode", "vibes")
    assert bad.exit_code == 2 and "hybrid, keyword or semantic (also: meaning)" in bad.output


# -- plain output through a pipe -------------------------------------------------------------------------------

def test_plain_output_through_a_pipe_is_not_wrapped_at_80_columns(chome):
    """A script or a file gets each line whole: piped output does not take Rich's 80-column default."""
    sentence = ("Roll back first, investigate second: the runbook says so because a rollback is always allowed, "
                "by anyone on call, without asking anybody first.")
    pages(chome, ("ENG", "A rather long title for the rollback page", sentence + "\n"))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "CREWLET_HOME", "CREWLET_AS")}
    out = subprocess.run([sys.executable, "-m", "crewlet_tui.cli", "--home", str(chome.root), "page", "show",
                          "ENG/A rather long title for the rollback page"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert sentence in lines, lines                                  # the body's line, whole
    meta = next(line for line in lines if line.startswith("id "))
    assert "last saved by alex" in meta, lines                       # the metadata line, whole


# -- search eval in a newcomer's words ---------------------------------------------------------------------------

def test_search_eval_on_a_small_corpus_says_what_to_do_next(runner, tmp_path):
    from test_ivf import make_home, topical

    home = make_home(tmp_path / "few", topical(10))
    res = runner.invoke(app, ["--home", str(home.root), "search", "eval"], env=CLEAN_ENV)
    line = refused(res, "10 embedded pages", "at least 175")
    assert "sources" not in line
    assert "thousands of pages" in line          # what it is a tool for
    assert "crewlet import" in line and "crewlet worker" in line   # and what to do next


def test_search_eval_counts_pages_as_pages():
    from core.evaluate import render
    from test_ivf import make_home, topical
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        home = make_home(Path(tmp) / "h", topical(300))
        from core.evaluate import evaluate

        lines = render(evaluate(home.db_file))
    assert lines[0].startswith("corpus       300 pages, "), lines[0]
    assert not any("sources" in line for line in lines), lines


# -- a search's answer in words ------------------------------------------------------------------------------------

def test_search_says_in_words_what_it_served_and_how_to_see_more(cli, chome):
    """No internal codes in plain output (`--json` keeps them), and an answer cut at --limit says so."""
    pages(chome, *[("ENG", f"Rollback step {i}", f"roll back the deploy, step {i}") for i in range(10)])
    res = cli("search", "rollback")            # no vectors yet: hybrid serves its keyword half, and says why
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert "8 results · ranked by words (by words and meaning was asked) · over 10 pages" in text, text
    assert "the first 8 — `--limit 20` shows more" in text
    assert "no page has a vector" in text
    for code in ("served ", "no_embeddings", "degraded", "hits ·"):
        assert code not in text, (code, text)
    data = json.loads(cli("search", "rollback", "--json").stdout)
    assert data["outcome"]["degraded"] == "no_embeddings" and data["outcome"]["served_mode"] == "keyword"
    few = cli("search", "rollback", "--limit", "20").stdout
    assert "10 results" in few and "the first" not in few
