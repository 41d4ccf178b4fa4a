"""Every command that reads a home says its log is damaged (issue 19, part 2).

Reproductions: with one bit flipped in the middle of `pages.log` — behind everything the database applied —
`crewlet worker --once` exited 0 after a 13–15-line traceback, `search`, `index status` and `sync status`
answered "current" / "up to date", and `pages` said nothing at all (only the next write found the damage).
Now each says, in one line on stderr, that the log is damaged past record N and to run `crewlet log check`;
the worker exits 1; `--json` answers carry it; the app's status line shows it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_app_support import SIZE, app_for, wait_rendered, wait_screen
from typer.testing import CliRunner

from core.log.framing import HEADER_SIZE
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from crewlet_tui.cli import app

ROOT = Path(__file__).resolve().parent.parent
ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}


def cli(home: Home, *args: str):
    return CliRunner().invoke(app, ["--home", str(home.root), *args], env=ENV)


@pytest.fixture
def damaged(home) -> tuple[Home, int]:
    """A home of 30 pages, every record applied, then one bit flipped in the 16th frame."""
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for i in range(30):
            kb.create_page("ENG", f"Page {i}", f"text of page {i}\n")
    from core.log import FileLog

    with FileLog(home.log_file, readonly=True) as flog:
        ends = [end for _, end in flog.read()]
    data = bytearray(home.log_file.read_bytes())
    data[ends[14] + HEADER_SIZE + 30] ^= 0x10      # frame 16
    home.log_file.write_bytes(bytes(data))
    return home, 15


def said_once(stderr: str, good: int) -> None:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert f"damaged past record {good}" in lines[0] and "crewlet log check" in lines[0], lines[0]


def test_worker_once_on_a_damaged_log_exits_1_with_one_line_and_no_traceback(damaged):
    home, good = damaged
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "250", "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", "from crewlet_tui.cli import main; main()", "--home", str(home.root),
                          "worker", "--once"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    said_once(res.stderr, good)
    out = json.loads(cli(home, "worker", "--once", "--json").stdout)
    assert out["log_damage"]["good_through"] == good


@pytest.mark.parametrize("args", [["pages", "ENG"], ["page", "show", "ENG/Page 3"], ["search", "page"],
                                  ["index", "status"], ["sync", "status"], ["spaces"]])
def test_every_read_command_says_the_log_is_damaged_and_never_current(damaged, args):
    home, good = damaged
    res = cli(home, *args)
    assert res.exit_code == 0, (res.stdout, res.stderr)
    said_once(res.stderr, good)
    assert "current" not in res.stdout.replace("currently", "") and "up to date" not in res.stdout


@pytest.mark.parametrize("args", [["search", "page"], ["index", "status"], ["sync", "status"]])
def test_json_answers_carry_the_damage(damaged, args):
    home, good = damaged
    out = json.loads(cli(home, *args, "--json").stdout)
    assert out["log_damage"]["good_through"] == good and "crewlet log check" in out["log_damage"]["message"]


def test_a_sound_home_says_nothing_of_damage(home):
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", "Fine", "fine")
    res = cli(home, "sync", "status", "--json")
    assert res.exit_code == 0 and not res.stderr and json.loads(res.stdout)["log_damage"] is None
    assert "current" in cli(home, "sync", "status").stdout


async def test_the_app_s_status_line_says_the_log_is_damaged(damaged):
    home, good = damaged
    the_app = app_for(home, "alex")
    async with the_app.run_test(size=(140, 32)) as pilot:
        await wait_screen(pilot, "SpacesScreen")
        await wait_rendered(pilot, f"log damaged past record {good}")
