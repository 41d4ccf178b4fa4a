"""What a killed command left behind is removed by the next command of its kind once the killed process is
gone, and what a running process is still writing is never touched: an import's plan in tmp/ (mkstemp
names, which the old hex-only pattern never matched), a snapshot's `.partial` file, a repair's
`.pages.log.repairing-<pid>`. Each command runs as a real process; the leftovers are named with the pid of
a real process that has exited, and of one that still runs."""
from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_client import crewlet

from core.leftovers import owner_gone, sweep


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc.pid
    proc.stdin.close()
    proc.wait()


@pytest.fixture
def example(tmp_path) -> Path:
    root = tmp_path / "home"
    assert crewlet(root, "init", "--example").returncode == 0
    return root


def _plan_name(pid: int) -> str:
    """A plan's name as the importer's tempfile.mkstemp makes it: eight of [a-z0-9_], here not hex."""
    return f"import-plan-{pid}-k_z9qw1m.db"


def test_an_import_removes_the_plans_of_killed_imports_only(example, tmp_path, dead_pid, live_pid):
    tmp = example / "tmp"
    tmp.mkdir(exist_ok=True)
    dead, live = tmp / _plan_name(dead_pid), tmp / _plan_name(live_pid)
    for f in (dead, dead.with_name(dead.name + "-journal"), live):
        f.write_bytes(b"x" * 4096)
    docs = tmp_path / "docs" / "ENG"
    docs.mkdir(parents=True)
    (docs / "Swept.md").write_text("# Swept\n\nleftovers go\n")
    res = crewlet(example, "import", str(tmp_path / "docs"))
    assert res.returncode == 0, res.stderr
    assert not dead.exists() and not dead.with_name(dead.name + "-journal").exists()
    assert live.exists()


def test_a_snapshot_removes_the_partial_snapshots_of_killed_snapshots_only(example, tmp_path, dead_pid, live_pid):
    out = tmp_path / "snaps"
    out.mkdir()
    dead = out / f".monday.db.{dead_pid}.partial"
    live = out / f".tuesday.db.{live_pid}.partial"
    dead.write_bytes(b"x" * (1 << 20))
    live.write_bytes(b"x" * 4096)
    res = crewlet(example, "sync", "snapshot", str(out / "wednesday.db"))
    assert res.returncode == 0, res.stderr
    assert (out / "wednesday.db").is_file()
    assert not dead.exists() and live.exists()
    assert sorted(p.name for p in out.iterdir()) == sorted([live.name, "wednesday.db"])   # its own partial is gone


def test_a_log_check_removes_the_logs_killed_repairs_were_writing_only(example, dead_pid, live_pid):
    log_dir = example / "log"
    dead = log_dir / f".pages.log.repairing-{dead_pid}"
    live = log_dir / f".pages.log.repairing-{live_pid}"
    dead.write_bytes(b"x" * (1 << 20))
    live.write_bytes(b"x" * 4096)
    res = crewlet(example, "log", "check")
    assert res.returncode == 0, res.stdout + res.stderr
    assert not dead.exists() and live.exists()


def test_sweep_keeps_this_processs_own_files_and_what_does_not_match(tmp_path, dead_pid):
    import os

    pattern = re.compile(r"thing-(?P<pid>\d+)\.tmp")
    mine, gone, other = tmp_path / f"thing-{os.getpid()}.tmp", tmp_path / f"thing-{dead_pid}.tmp", tmp_path / "thing.tmp"
    (tmp_path / f"thing-{dead_pid}.tmp.d").mkdir()
    for f in (mine, gone, other):
        f.write_text("x")
    assert owner_gone(dead_pid) and not owner_gone(os.getpid())
    assert sweep(tmp_path, pattern) == [gone]
    assert mine.exists() and other.exists() and (tmp_path / f"thing-{dead_pid}.tmp.d").exists()
