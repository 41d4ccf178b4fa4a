"""A home's company.toml that cannot be read, or is gone beside the database and logs it made: each said as
what it is, with the fix — and `crewlet init` never adopts a database under a configuration that did not
make it."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_client import ROOT, crewlet

from core import config as config_mod
from core.config import ConfigError
from core.paths import Home

NOBODY = 65534


@pytest.fixture
def world_home() -> Iterator[Path]:
    """A home under a directory every user may enter (pytest's own tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="crewlet-unreadable-"))
    base.chmod(0o755)
    try:
        yield base / "h"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_nobody(home: Path, *args: str):
    import subprocess
    import sys

    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            sys.executable, "-c", "from crewlet_tui.cli import main; main()", "--home", str(home), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CREWLET_")} | {"HOME": str(home.parent)}
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to run the check as another user (root reads a mode-000 file)")
def test_an_unreadable_company_toml_is_a_read_failure_not_a_write_one(world_home):
    """Mode 000, read by a user who is not root: was "cannot be written (Permission denied) — make it
    writable"."""
    assert crewlet(world_home, "init", "--example").returncode == 0
    for path in [world_home, *world_home.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    (world_home / "company.toml").chmod(0o000)
    res = _as_nobody(world_home, "spaces")
    line = res.stderr.strip()
    assert res.returncode == 1, (res.stdout, line)
    assert "\n" not in line and "Traceback" not in line, line
    assert f"{world_home / 'company.toml'}: (file): cannot be read (Permission denied) — " in line, line
    assert "chmod u+r" in line and "written" not in line and "writable" not in line, line


def test_a_company_toml_that_cannot_be_read_is_named_as_a_read(tmp_path):
    """The loader itself: an OSError reading the file is a read failure with its cause."""
    f = tmp_path / "company.toml"
    f.mkdir()
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    assert exc.value.key == "(file)"
    assert exc.value.problem.startswith("cannot be read (") and "directory" in exc.value.problem
    assert "must be a file" in exc.value.fix


def test_a_node_toml_that_cannot_be_read_is_named_as_a_read(tmp_path):
    f = tmp_path / "node.toml"
    f.mkdir()
    with pytest.raises(ConfigError) as exc:
        config_mod.load_node(f)
    assert exc.value.problem.startswith("cannot be read (")


def _pages(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM pages").fetchone()[0]


def test_a_missing_company_toml_is_named_and_init_does_not_adopt_the_database(tmp_path):
    """Was "no crewlet home — run crewlet init --example", and following it reused the old database under
    a new configuration ("Loaded the example: 0 pages")."""
    home = tmp_path / "h"
    assert crewlet(home, "init", "--example").returncode == 0
    pages = _pages(home / "crewlet.db")
    assert pages > 0
    (home / "company.toml").unlink()

    res = crewlet(home, "spaces")
    line = res.stderr.strip()
    assert res.returncode == 1 and "\n" not in line, (res.stdout, line)
    assert "company.toml is missing beside crewlet.db and log/" in line, line
    assert "restore it" in line and "move crewlet.db and log/ aside" in line, line
    assert "crewlet init" not in line

    res = crewlet(home, "init", "--example")
    line = res.stderr.strip()
    assert res.returncode == 1 and "\n" not in line, (res.stdout, line)
    assert "company.toml is missing beside crewlet.db and log/" in line, line
    assert not (home / "company.toml").exists()          # nothing written over the old home
    assert _pages(home / "crewlet.db") == pages


def test_init_after_moving_the_old_home_aside_makes_a_new_one(tmp_path):
    """The fix the refusal names works: the database and logs moved aside, init makes a fresh home."""
    home = tmp_path / "h"
    assert crewlet(home, "init").returncode == 0
    (home / "company.toml").unlink()
    aside = tmp_path / "aside"
    aside.mkdir()
    for name in ("crewlet.db", "log"):
        (home / name).rename(aside / name)
    for leftover in home.glob("crewlet.db-*"):
        leftover.rename(aside / leftover.name)
    res = crewlet(home, "init", "--example", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["pages_created"] == 10


def test_the_home_says_which_part_is_missing(tmp_path):
    home = Home(tmp_path / "h")
    assert home.config_problem() is None and not home.exists()      # nothing of a home: offer to make one
    home.root.mkdir()
    (home.root / "log").mkdir()
    assert home.config_problem() is None and not home.exists()      # a log/ of someone else's: not a home
    (home.root / "log" / "pages.log").write_bytes(b"")
    assert home.exists()
    assert home.config_problem().startswith("company.toml is missing beside log/ in ")
    (home.root / "company.toml").symlink_to(tmp_path / "gone.toml")
    assert "is a dangling link" in home.config_problem()


async def test_the_app_names_the_missing_company_toml_and_offers_no_new_home(tmp_path):
    """The app at 80x24 on such a home: the same line, and no welcome screen offering `init` over it."""
    from test_app_support import app_for, new_home, screen_name, wait_until

    home = new_home(tmp_path)
    home.config_file.unlink()
    app = app_for(home)
    said: list[str] = []
    exit_ = app.exit
    app.exit = lambda *a, **k: (said.append(str(k.get("message"))), exit_(*a, **k))[1]  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: not app.is_running or screen_name(app) != "Screen", what="the app to settle")
        assert screen_name(app) != "WelcomeScreen"
        await wait_until(pilot, lambda: not app.is_running, what="the app to exit")
    told = " ".join(said)
    assert "company.toml is missing beside crewlet.db and log/" in told, told
    assert not home.config_file.exists()
