"""Regression tests for the review's findings: each one fails on the behaviour before the fix.

Config values of the wrong type, rescuing the text of any refused save, company.toml re-read at each
write, comment-preserving declare_spaces, the knowledge app, inert CLI output, the body size limit,
CLI edge cases and label case at apply time.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tomli_w
from conftest import config_with
from typer.testing import CliRunner

from core import config as config_mod
from core.config import ConfigError
from core.errors import Invalid, Refused
from core.log import Record
from core.node import Node
from core.pages.model import MAX_BODY_BYTES
from core.pages.service import KnowledgeBase, new_id
from core.paths import Home
from crewlet_tui.cli import app

CLEAN_ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "120"}
ESC_PICTURE = "\u241b"  # ␛, how a body's ESC is shown


# -- helpers ------------------------------------------------------------------------------------------

@pytest.fixture
def cli(home: Home):
    runner = CliRunner()

    def run(*args: str, root: Path | None = None):
        return runner.invoke(app, ["--home", str(root or home.root), *args], env=CLEAN_ENV)
    return run


def one_line_refusal(res, *words: str) -> str:
    """Exit 1 with exactly one `crewlet:` line on stderr, and no exception escaped (no traceback)."""
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 1, (res.exit_code, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("crewlet: "), lines[0]
    assert "Traceback" not in res.stderr + res.stdout
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def later(path: Path) -> None:
    """Move a file's mtime forward (one second), so a change is seen even within the clock's resolution."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def kb_on(home: Home):
    class _Open:
        def __enter__(self) -> KnowledgeBase:
            self.node = Node.open(home)
            return KnowledgeBase(self.node)

        def __exit__(self, *exc: object) -> None:
            self.node.close()
    return _Open()


# -- 1. config values of the wrong type are ConfigErrors naming file and key ---------------------------

WRONG_TYPES = [
    pytest.param({"integrations": 5}, "integrations", id="integrations-not-a-table"),
    pytest.param({"spaces": {"X": {"name": "X", "lead": [1]}}}, "spaces.X.lead", id="lead-a-list"),
    pytest.param({"knowledge": {"root_space": "Co/Root"}}, "knowledge.root_space", id="root-space-not-a-key"),
    pytest.param({"knowledge": {"root_space": "HOME", "skills_container": "HOME"}}, "knowledge.skills_container",
                 id="root-space-is-skills"),
    pytest.param({"actors": {"x": {"kind": "person", "knowledge": "yes"}}}, "actors.x.knowledge",
                 id="knowledge-not-a-bool"),
]


@pytest.mark.parametrize("changes, key", WRONG_TYPES)
def test_a_wrong_config_value_is_a_config_error_via_parse(tmp_path, changes, key):
    f = tmp_path / "company.toml"
    with pytest.raises(ConfigError) as exc:  # never a TypeError, never accepted
        config_mod.parse(config_with(**changes), f)
    assert exc.value.file == str(f) and exc.value.key == key
    assert str(exc.value).startswith(f"{f}: {key}: ")


@pytest.mark.parametrize("changes, key", WRONG_TYPES)
def test_a_wrong_config_value_is_a_config_error_via_load(tmp_path, changes, key):
    f = tmp_path / "company.toml"
    f.write_text(tomli_w.dumps(config_with(**changes)), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    assert exc.value.file == str(f) and exc.value.key == key


def test_a_wrong_config_value_via_the_cli_is_one_line(home, cli):
    home.config_file.write_text(tomli_w.dumps(config_with(integrations=5)), encoding="utf-8")
    one_line_refusal(cli("spaces"), "company.toml", "integrations")


# -- 2. a refused save that is not stale still keeps the writer's text ------------------------------

def _assert_rescued(exc: Exception, home: Home, text: str) -> None:
    rescued = Path(exc.details["rescued_to"])
    assert rescued.parent == home.rescue_dir
    assert rescued.read_text(encoding="utf-8") == text
    assert str(rescued) in str(exc)


def test_a_save_on_a_trashed_page_keeps_the_text(kb, home):
    page = kb.create_page("ENG", "Runbook", "v1\n", actor="alex")
    kb.trash_page(page.id, actor="alex")
    with pytest.raises(Refused) as exc:
        kb.save_page(page.id, "my careful edit\n", base_revision=1, actor="alex")
    assert exc.value.code == "trashed"
    _assert_rescued(exc.value, home, "my careful edit\n")


def test_an_agent_saving_in_the_skills_container_keeps_the_text(kb, home):
    page = kb.create_page("SKILLS", "Tool skill", "do things\n", actor="alex")
    with pytest.raises(Refused) as exc:
        kb.save_page(page.id, "agent text\n", base_revision=1, actor="eng-bot")
    assert exc.value.code == "reserved"
    _assert_rescued(exc.value, home, "agent text\n")
    assert kb.resolve(page.id).body == "do things\n"


def test_a_refused_cli_save_reports_where_the_text_is_kept(home, cli, tmp_path):
    with kb_on(home) as kb:
        kb.create_page("SKILLS", "Tool skill", "do things\n", actor="alex")
    f = tmp_path / "body.md"
    f.write_text("agent text\n", encoding="utf-8")
    res = cli("--as", "eng-bot", "page", "save", "SKILLS/Tool skill", "--body-file", str(f), "--base-rev", "1", "--json")
    assert res.exit_code == 1, (res.stdout, res.stderr)
    data = json.loads(res.stdout)
    assert data["error"] == "reserved"
    rescued = Path(data["rescued_to"])
    assert rescued.parent == home.rescue_dir and rescued.read_text(encoding="utf-8") == "agent text\n"


# -- 3. company.toml edited while a node is open is picked up at the next write -----------------------

def test_an_edited_config_is_read_at_the_next_write_and_a_broken_edit_keeps_the_last_good(kb, home):
    page = kb.create_page("ENG", "Old notes", "x\n", actor="alex")
    kb.trash_page(page.id, actor="alex")

    data = config_mod.example_config()
    data["actors"]["alex"]["admin"] = False
    config_mod.write(home.config_file, data)
    later(home.config_file)
    with pytest.raises(Refused) as exc:
        kb.purge_page(page.id, actor="alex")
    assert exc.value.code == "forbidden"

    # a broken edit: the last good configuration (alex not admin) stays, and writes still work
    home.config_file.write_text('operator = "alex"\n[spaces.ENG\n', encoding="utf-8")
    later(home.config_file)
    made = kb.create_page("ENG", "After a broken edit", "still writable\n", actor="alex")
    assert made.revision == 1
    with pytest.raises(Refused) as exc:
        kb.purge_page(page.id, actor="alex")
    assert exc.value.code == "forbidden"
    assert kb.company.actors["alex"].admin is False


# -- 4. declare_spaces keeps the operator's comments -------------------------------------------------

COMMENTED = """\
# company.toml, kept by hand
operator = "alex"  # who acts by default

[knowledge]
backend = "native"  # the only knowledge home
root_space = "HOME"
skills_container = "SKILLS"

# the teams
[spaces.ENG]
name = "Engineering"
lead = "alex"  # the lead tidies

[actors.alex]
kind = "person"
admin = true  # may purge
"""


def test_declare_spaces_keeps_comments(tmp_path):
    f = tmp_path / "company.toml"
    f.write_text(COMMENTED, encoding="utf-8")
    assert config_mod.declare_spaces(f, ["NEWSPACE", "ENG"]) == ["NEWSPACE"]
    text = f.read_text(encoding="utf-8")
    for comment in ("# company.toml, kept by hand", "# who acts by default", "# the only knowledge home",
                    "# the teams", "# the lead tidies", "# may purge"):
        assert comment in text, comment
    assert text.startswith(COMMENTED)
    company = config_mod.load(f)
    assert company.spaces["NEWSPACE"].name == "NEWSPACE" and company.is_declared("NEWSPACE")
    assert company.spaces["ENG"].lead == "alex"
    assert config_mod.declare_spaces(f, ["NEWSPACE"]) == []  # declared once


def test_declare_spaces_with_spaces_as_an_inline_table_still_declares(tmp_path):
    f = tmp_path / "company.toml"
    f.write_text('operator = "alex"\nspaces = { ENG = { name = "Engineering" } }\n\n'
                 '[actors.alex]\nkind = "person"\nadmin = true\n', encoding="utf-8")
    assert config_mod.declare_spaces(f, ["NEWSPACE"]) == ["NEWSPACE"]
    company = config_mod.load(f)
    assert set(company.spaces) == {"ENG", "NEWSPACE"}
    assert company.spaces["ENG"].name == "Engineering"


# -- 5. the knowledge app --------------------------------------------------------------------------

def test_a_person_without_the_knowledge_app_is_refused_and_an_admin_is_not(make_home):
    cfg = config_with(actors={"kim": {"kind": "person", "knowledge": False},
                              "boss": {"kind": "person", "admin": True, "knowledge": False}})
    home = make_home(cfg)
    with kb_on(home) as kb:
        page = kb.create_page("ENG", "Runbook", "v1\n", actor="alex")

        with pytest.raises(Refused) as exc:
            kb.create_page("ENG", "Kim's page", "x", actor="kim")
        assert exc.value.code == "forbidden"
        with pytest.raises(Refused) as exc:
            kb.save_page(page.id, "kim's text\n", base_revision=1, actor="kim")
        assert exc.value.code == "forbidden"
        with pytest.raises(Refused) as exc:
            kb.add_comment(page.id, "a comment", actor="kim")
        assert exc.value.code == "forbidden"
        with pytest.raises(Refused) as exc:
            kb.get_page(page.id, actor="kim")
        assert exc.value.code == "forbidden"
        assert kb.resolve(page.id).revision == 1 and kb.comments(page.id) == []

        # admin includes the knowledge app
        made = kb.create_page("ENG", "Boss's page", "x", actor="boss")
        saved = kb.save_page(page.id, "v2\n", base_revision=1, actor="boss")
        assert saved.revision == 2
        assert kb.add_comment(page.id, "fine", actor="boss").author == "boss"
        assert kb.get_page(made.id, actor="boss").title == "Boss's page"


# -- 6. CLI output is inert ------------------------------------------------------------------------

HOSTILE = "title bar \x1b]0;PWNED\x07 and \x1b[2J cleared\n"


def _assert_inert(out: str) -> None:
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out and "\x1b[31m" not in out
    assert ESC_PICTURE in out


def test_page_show_prints_escapes_inert(home, cli):
    with kb_on(home) as kb:
        page = kb.create_page("ENG", "Hostile", HOSTILE, actor="alex")
        kb.add_comment(page.id, "red \x1b[31m text", actor="sam")
    res = cli("page", "show", "ENG/Hostile")
    assert res.exit_code == 0, res.stderr
    _assert_inert(res.stdout)
    assert f"{ESC_PICTURE}]0;PWNED" in res.stdout and f"{ESC_PICTURE}[2J" in res.stdout
    assert f"{ESC_PICTURE}[31m" in res.stdout  # the comment's too


def test_page_diff_prints_escapes_inert(home, cli):
    with kb_on(home) as kb:
        page = kb.create_page("ENG", "Hostile", "clean\n", actor="alex")
        kb.save_page(page.id, "clean\n" + HOSTILE, base_revision=1, actor="alex")
    res = cli("page", "diff", "ENG/Hostile", "2")
    assert res.exit_code == 0, res.stderr
    _assert_inert(res.stdout)
    assert f"{ESC_PICTURE}]0;PWNED" in res.stdout


# -- 7. an oversize body is refused before anything is appended --------------------------------------

def test_an_oversize_body_is_refused_on_create_and_save_before_the_log(kb, node):
    page = kb.create_page("ENG", "Small", "small\n", actor="alex")
    big = "a" * (MAX_BODY_BYTES + 1)
    before = node.log.last_seq()

    with pytest.raises(Invalid) as exc:
        kb.create_page("ENG", "Big", big, actor="alex")
    assert exc.value.code == "body_too_large"
    with pytest.raises(Invalid) as exc:
        kb.save_page(page.id, big, base_revision=1, actor="alex")
    assert exc.value.code == "body_too_large"

    assert node.log.last_seq() == before
    assert kb.resolve(page.id).revision == 1
    del big


# -- 8. CLI edge cases -----------------------------------------------------------------------------

def test_an_unknown_as_is_refused_naming_the_actor(cli):
    one_line_refusal(cli("--as", "nobody", "pages", "ENG"), "nobody")


def test_a_blank_comment_edit_is_refused(home, cli):
    with kb_on(home) as kb:
        page = kb.create_page("ENG", "Commented", "x\n", actor="alex")
        comment = kb.add_comment(page.id, "first words", actor="alex")
    one_line_refusal(cli("page", "comment", comment.id, "   ", "--edit"), "needs some text")
    with kb_on(home) as kb:
        assert [c.body for c in kb.comments(page.id)] == ["first words"]


def test_listing_under_a_parent_in_another_container_is_refused(home, cli):
    with kb_on(home) as kb:
        kb.create_page("HOME", "Onboarding", "welcome\n", actor="alex")
        kb.create_page("ENG", "Runbook", "x\n", actor="alex")
    one_line_refusal(cli("pages", "ENG", "--parent", "HOME/Onboarding"), "HOME")


def test_showing_revision_zero_is_refused_not_the_current_body(home, cli):
    with kb_on(home) as kb:
        kb.create_page("ENG", "Runbook", "the current body\n", actor="alex")
    res = cli("page", "show", "ENG/Runbook", "-r", "0")
    one_line_refusal(res, "no revision 0")
    assert "the current body" not in res.stdout


def test_init_with_a_bad_operator_is_a_usage_error_and_makes_no_home(tmp_path):
    root = tmp_path / "fresh"
    res = CliRunner().invoke(app, ["--home", str(root), "init", "--operator", "Bad Name"], env=CLEAN_ENV)
    assert res.exit_code == 2, (res.stdout, res.stderr)
    assert "Bad Name" in res.stderr
    assert not root.exists()


def test_a_database_that_is_not_one_is_one_line(home, cli):
    for extra in ("-wal", "-shm"):
        Path(str(home.db_file) + extra).unlink(missing_ok=True)
    home.db_file.write_bytes(b"this is not a SQLite database, just garbage\n" * 200)
    one_line_refusal(cli("spaces"), "crewlet.db")


def test_a_missing_body_file_says_no_such_file(cli, tmp_path):
    missing = tmp_path / "nowhere" / "body.md"
    one_line_refusal(cli("page", "create", "ENG", "New page", "--body-file", str(missing)),
                     str(missing), "no such file — check the path")


# -- 10. labels in a raw page.create record are lower-cased at apply time ----------------------------

def test_labels_in_a_raw_create_record_are_lower_cased_at_apply(node, kb):
    page_id = new_id()
    rec = Record.new("page.create", "alex", {"page_id": page_id, "container": "ENG", "title": "Labelled",
                                             "body": "x\n", "parent_id": None, "labels": ["Ops", "ops", "DEPLOY"]})
    (out,) = node.submit([rec])
    assert out.status == "applied"
    assert kb.resolve(page_id).labels == ["deploy", "ops"]


def test_two_refusals_in_one_millisecond_keep_both_texts(kb, monkeypatch):
    """The process race found it: two writers refused in the same millisecond shared one rescue file."""
    import core.pages.service as service

    monkeypatch.setattr(service, "now_ms", lambda: 1_700_000_000_000)  # the same instant for both
    first = kb._rescue("page1", 1, "first writer's text")
    second = kb._rescue("page1", 1, "second writer's text")
    assert first != second
    assert first.read_text(encoding="utf-8") == "first writer's text"
    assert second.read_text(encoding="utf-8") == "second writer's text"


def test_the_same_text_refused_twice_in_one_millisecond_is_kept_twice(kb, monkeypatch):
    import core.pages.service as service

    monkeypatch.setattr(service, "now_ms", lambda: 1_700_000_000_000)
    first = kb._rescue("page1", 1, "same text")
    second = kb._rescue("page1", 1, "same text")
    assert first != second and first.read_text(encoding="utf-8") == second.read_text(encoding="utf-8") == "same text"
