"""Nothing a page (or company.toml, or an argument) holds reaches the terminal raw; big bodies print
fast; titles are one address however their letters were typed.

Reproductions of issue 9, items 6, 8 and 9: `crewlet search` printed raw escape sequences and `--json`
raw C1 characters, stderr echoed escapes from `--as` and company.toml; `page show` of a 10 MB line
took minutes; "Café" typed NFC and NFD made two pages, and zero-width and bidi characters passed."""
from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from core import config as config_mod
from core.log import Record
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from crewlet_tui.cli import app
from crewlet_tui.sanitize import clean_line, json_text

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "120"}

# what a hostile text carries: erase the screen, colours, OSC 52 (clipboard), an OSC 8 link, BEL,
# a C1 CSI, DEL, and a bidi override
HOSTILE = ("deploy \x1b[2J\x1b[31mred\x1b[0m \x1b]52;c;aGVsbG8=\x07 \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\ "
           "\x9b31mcsi\x7f \u202eevil\u202c end")
# nothing of this may be printed raw: C0 but newline and tab, DEL, C1 (a body keeps its bidi controls —
# right-to-left writing needs them — but every one-line text shows them, see test_one_line_texts_…)
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def cli(home: Home, *args: str, env: dict | None = None):
    return CliRunner().invoke(app, ["--home", str(home.root), *args], env={**ENV, **(env or {})})


def inert(text: str) -> None:
    found = RAW.findall(text)
    assert not found, f"raw control characters reached the output: {[hex(ord(c)) for c in found]}"


@pytest.fixture
def hostile(home: Home) -> tuple[Home, str]:
    """A page whose title, body, labels and comment carry escapes — written as another writer (or an
    older crewlet) could have, straight to the log: the writer's title check is not the only door."""
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        folder = kb.create_page("ENG", "Hostile Folder", "")
        out = node.submit_one(Record.new("page.create", "alex", {
            "page_id": "badbadbadbadbad1", "container": "ENG", "title": "Runbook \x1b[2J\x9b31m\u202eevil",
            "body": HOSTILE + "\n", "parent_id": folder.id, "labels": ["ops\x1b[5m", "x\x9by"]}))
        assert out.status == "applied", out
        kb.save_page("badbadbadbadbad1", HOSTILE + "\nsecond\n", base_revision=1, message="msg \x1b]52;c;eA==\x07")
        kb.add_comment("badbadbadbadbad1", "comment \x1b[2J\x9b0m here")
        kb.trash_page(kb.create_page("ENG", "Gone", "x").id)
    assert cli(home, "index", "build").exit_code == 0
    return home, "badbadbadbadbad1"


# -- item 6: every output path ------------------------------------------------------------------------------

def test_search_prints_page_text_inert_in_plain_output(hostile):
    home, _ = hostile
    res = cli(home, "search", "deploy")
    assert res.exit_code == 0, res.stderr
    assert "Runbook" in res.stdout and "click" in res.stdout and "csi" in res.stdout
    inert(res.stdout)
    inert(res.stderr)
    assert "\u241b[2J" in res.stdout and "<U+009B>" in res.stdout  # shown, not executed


def test_one_line_texts_show_bidi_controls_and_json_escapes_them(hostile):
    home, pid = hostile
    for args in (["search", "deploy"], ["pages", "ENG", "--parent", "ENG/Hostile Folder"], ["page", "history", pid]):
        res = cli(home, *args)
        assert res.exit_code == 0 and "<U+202E>" in res.stdout, res.stdout
        assert not BIDI.search(res.stdout.replace(HOSTILE, ""))
    for args in (["search", "deploy"], ["page", "show", pid], ["pages", "ENG"]):
        assert not BIDI.search(cli(home, *args, "--json").stdout)


def test_json_output_escapes_what_a_terminal_would_act_on_and_keeps_the_data(hostile):
    home, pid = hostile
    res = cli(home, "search", "deploy", "--json")
    assert res.exit_code == 0
    inert(res.stdout)
    hit = json.loads(res.stdout)["hits"][0]
    assert "\x9b" in hit["snippet"] and "\x1b[2J" in hit["snippet"]  # the data itself is unchanged
    assert hit["title"] == "Runbook \x1b[2J\x9b31m\u202eevil"
    res = cli(home, "page", "show", pid, "--json")
    inert(res.stdout)
    page = json.loads(res.stdout)
    assert page["body"] == HOSTILE + "\nsecond\n" and page["labels"] == ["ops\x1b[5m", "x\x9by"]


@pytest.mark.parametrize("args", [
    ["page", "show", "{pid}"], ["page", "show", "{pid}", "--revision", "1"], ["pages", "ENG"],
    ["pages", "ENG", "--parent", "ENG/Hostile Folder"], ["page", "history", "{pid}"], ["page", "diff", "{pid}", "2"],
    ["page", "backlinks", "{pid}"], ["trash"], ["spaces"], ["page", "rename", "{pid}", "Runbook Safe"],
    ["ask", "deploy"], ["ask", "--spend"],
])
def test_every_plain_and_json_output_is_inert(hostile, args):
    home, pid = hostile
    argv = [a.format(pid=pid) for a in args]
    for extra in ([], ["--json"]):
        res = cli(home, *argv, *extra)
        assert res.exit_code == 0, (argv, res.stderr)
        inert(res.stdout)
        inert(res.stderr)


def test_errors_on_stderr_never_echo_raw_escapes(home, tmp_path):
    res = cli(home, "--as", "\x1b[2J\x9bmallory", "spaces")
    assert res.exit_code == 1 and "mallory" in res.stderr
    inert(res.stderr)
    res = cli(home, "page", "show", "ENG/\x1b]52;c;eA==\x07nothing", "--json")
    assert res.exit_code == 1
    inert(res.stderr)
    inert(res.stdout)
    # a company.toml value that carries escapes, named in the error
    data = config_mod.example_config()
    data["spaces"]["ENG"]["lead"] = "\x1b[31mnobody\x9b"
    config_mod.write(home.config_file, data)
    res = cli(home, "spaces")
    assert res.exit_code == 1 and "nobody" in res.stderr
    inert(res.stderr)


def test_the_one_sanitiser_json_is_valid_and_lossless():
    data = {"t": "a\x1b[2Jb\x9bc\x7fd\u202ee\u2028f", "n": [1, None]}
    text = json_text(data)
    inert(text)
    assert json.loads(text) == data
    assert clean_line("a\u202eb\x9bc\x1bd") == "a<U+202E>b<U+009B>c\u241bd"


# -- item 8: a big body prints as the text it is ------------------------------------------------------------

def test_page_show_prints_a_huge_single_line_body_plain_and_whole(home):
    line = ("word " * 40_000).strip() + " \x1b[2J tail"     # a 200 KB line, one escape in it
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", "Huge", line)
    res = cli(home, "page", "show", "ENG/Huge")
    assert res.exit_code == 0
    inert(res.stdout)
    # printed whole, on one line: not highlighted and re-wrapped by Rich, whose cost grows faster
    # than the text (a 10 MB line took minutes)
    assert line.replace("\x1b", "\u241b") in res.stdout.splitlines()


# -- item 9: titles --------------------------------------------------------------------------------------------

def test_a_title_is_one_address_however_its_letters_were_typed(home):
    res = cli(home, "page", "create", "ENG", "Caf\u00e9", "--json")            # NFC
    assert res.exit_code == 0
    pid = json.loads(res.stdout)["id"]
    res = cli(home, "page", "create", "ENG", "Cafe\u0301")                      # NFD: the same title
    assert res.exit_code == 1 and "already exists" in res.stderr
    assert json.loads(cli(home, "page", "show", "ENG/cafe\u0301", "--json").stdout)["id"] == pid
    res = cli(home, "page", "create", "ENG", "Ｄｅｐｌｏｙ ﬁle")                 # full-width letters, a ligature
    assert res.exit_code == 0
    assert cli(home, "page", "create", "ENG", "deploy file").exit_code == 1
    # a title typed NFD is stored NFC
    res = cli(home, "page", "create", "ENG", "Re\u0301sume\u0301", "--json")
    assert json.loads(res.stdout)["title"] == "R\u00e9sum\u00e9"


@pytest.mark.parametrize("title, named, where", [
    ("abc\u202egpj.exe", "U+202E RIGHT-TO-LEFT OVERRIDE", "character 4"),
    ("zero\u200bwidth", "U+200B ZERO WIDTH SPACE", "character 5"),
    ("pay\u200cpal", "U+200C ZERO WIDTH NON-JOINER", "character 4"),
    ("\ufeffBOM first", "U+FEFF ZERO WIDTH NO-BREAK SPACE", "character 1"),
    ("isolate \u2066x\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE", "character 9"),
    ("filler \u3164", "U+3164 HANGUL FILLER", "character 8"),
])
def test_invisible_and_bidi_characters_are_refused_in_titles_saying_which_and_where(home, title, named, where):
    res = cli(home, "page", "create", "ENG", title)
    assert res.exit_code == 1
    line = res.stderr.strip()
    assert named in line and where in line, line
    inert(res.stderr)
    with Node.open(home) as node:
        pid = KnowledgeBase(node).create_page("ENG", "Plain", "").id
    res = cli(home, "page", "rename", pid, title)
    assert res.exit_code == 1 and named in res.stderr


@pytest.mark.parametrize("title", ["Family 👨\u200d👩\u200d👧", "می\u200cخواهم", "עברית ו-English", "Straße"])
def test_joiners_a_script_or_an_emoji_needs_and_right_to_left_titles_are_kept(home, title):
    res = cli(home, "page", "create", "ENG", title, "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["title"] == title
