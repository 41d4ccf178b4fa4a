"""A full disk still reads, and a refused save's rescue is whole or absent (issue 19, part 5).

Reproductions, on a real filesystem that is full — a small tmpfs mounted for the test, filled until at most
8 KiB are left (root only; skipped with the reason otherwise: a full disk cannot be faked honestly, since
SQLite's refusal comes from the kernel): `pages`, `page show`, `search` and `log check` were refused (SQLite
could not make its WAL files for a connection opened to write). With 64 KiB free a refused save left a 0-byte
rescue file, with 512 KiB a 491,520-byte copy of a 1,000,233-byte text. Now reads open the database
read-only and write nothing (no temporary file either); a rescue is written under a hidden name and given
its own only once whole — or, when it cannot be, the message says the text was kept nowhere and the text is
printed (in `--json`: in the answer)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search.indexer import Indexer
from crewlet_tui.cli import app

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}


def cli(home: Home, *args: str):
    return CliRunner().invoke(app, ["--home", str(home.root), *args], env=ENV)


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs: a full disk is the kernel's refusal and cannot be faked")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(disk: Path, leave: int) -> Path:
    """Write zeros until the disk refuses, then give back `leave` bytes (whole 4 KiB blocks)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                os.write(fd, chunk)
            except OSError:
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, filler.stat().st_size - leave)
    return filler


def free_bytes(disk: Path) -> int:
    st = os.statvfs(disk)
    return st.f_bavail * st.f_frsize


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def full_home(small_disk) -> tuple[Home, Path]:
    home = new_home(small_disk / "home")
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        folder = kb.create_page("ENG", "Runbooks", "# Runbooks\n\nhow we deploy\n")
        for i in range(8):
            kb.create_page("ENG", f"Runbook {i}", f"# Runbook {i}\n\ndeploy steps for service {i}\n",
                           parent=folder.id)
    with Indexer(home) as indexer:
        indexer.run_pass(wait=True)
    fill(small_disk, leave=4096)
    assert free_bytes(small_disk) <= 8 * 1024
    return home, small_disk


READS = [["pages", "ENG"], ["page", "show", "ENG/Runbook 3"], ["page", "history", "ENG/Runbook 3"],
         ["search", "deploy", "steps", "--mode", "keyword"], ["log", "check"], ["spaces"], ["index", "status"],
         ["sync", "status"], ["worker", "--status"], ["pages", "ENG", "--json"]]


@pytest.mark.parametrize("args", READS, ids=[" ".join(a) for a in READS])
def test_every_read_works_on_a_full_disk_and_writes_nothing(full_home, args):
    home, disk = full_home
    before = files_of(home.root)
    res = cli(home, *args)
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert files_of(home.root) == before              # not a byte, not a temporary file
    if args[0] in ("pages", "page", "search", "spaces"):
        assert "is full" in res.stderr and "writes are refused" in res.stderr


def test_a_write_on_a_full_disk_is_refused_with_the_cause(full_home):
    home, disk = full_home
    res = cli(home, "page", "create", "ENG", "No Room")
    assert res.exit_code == 1 and "is full" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_refused_save_whose_rescue_cannot_be_written_prints_the_text_and_leaves_no_file(full_home, tmp_path):
    home, disk = full_home
    fill(disk, leave=0)                                  # not a block left: the rescue cannot be written
    body_file = tmp_path / "body.md"
    body = "# Runbook 3\n\nwhat I typed, all of it\n" * 50
    body_file.write_text(body, encoding="utf-8")
    res = cli(home, "page", "save", "ENG/Runbook 3", "--body-file", str(body_file), "--base-rev", "1")
    assert res.exit_code == 1
    assert "kept nowhere" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert res.stdout == body
    assert not [p for p in home.rescue_dir.rglob("*") if p.is_file()] if home.rescue_dir.exists() else True
    out = json.loads(cli(home, "page", "save", "ENG/Runbook 3", "--body-file", str(body_file), "--base-rev", "1",
                         "--json").stdout)
    assert out["kept_nowhere"] is True and out["your_body"] == body


def test_a_rescue_too_big_for_what_is_left_is_absent_not_cut_off(full_home, tmp_path):
    """512 KiB free, a 1,000,233-byte text: the save is refused, and the rescue is not a cut-off copy."""
    home, disk = full_home
    filler = disk / "filler"
    os.truncate(filler, filler.stat().st_size - 512 * 1024)
    body = ("x" * 99 + "\n") * 10_002 + "tail\n" + "y" * 8 + "\n" * 20   # 1,000,233 bytes
    assert len(body.encode()) == 1_000_233
    body_file = tmp_path / "big.md"
    body_file.write_text(body, encoding="utf-8")
    res = cli(home, "page", "save", "ENG/Runbook 3", "--body-file", str(body_file), "--base-rev", "1", "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    rescued = [p for p in home.rescue_dir.rglob("*") if p.is_file()] if home.rescue_dir.exists() else []
    if out.get("kept_nowhere"):
        assert rescued == [] and out["your_body"] == body
    else:   # kept: then whole, and named
        [kept] = rescued
        assert kept.read_bytes() == body.encode() and str(kept) in out["message"]


def test_with_room_again_the_home_takes_writes(full_home):
    home, disk = full_home
    (disk / "filler").unlink()
    res = cli(home, "page", "create", "ENG", "Room Again")
    assert res.exit_code == 0, res.stderr


# -- a long-lived process opened on a full disk (review finding 4) ----------------------------------------------
# `crewlet mcp` (or the app) opened while the disk was full got a read-only connection for its whole life: it never
# saw what others wrote once room came back (the connection was opened immutable, which also ignores other
# writers), and every write it was asked for was refused "free some space there and retry" until a restart.


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_opened_on_a_full_disk_recovers_once_there_is_room(small_disk):
    from mcp_client import call, connect, crewlet

    home = new_home(small_disk / "home")
    assert crewlet(home.root, "page", "create", "ENG", "Before").returncode == 0
    filler = fill(small_disk, leave=4096)
    async with connect(home.root, "eng-bot") as client:
        await call(client, "list_pages", container="ENG")      # served, read-only: fine
        refused = await client.call_tool("write_page", {"container": "ENG", "title": "While full"})
        filler.unlink()                                          # room again
        res = crewlet(home.root, "page", "create", "ENG", "Written by the CLI")
        assert res.returncode == 0, res.stderr
        got = await client.call_tool("get_page", {"ref": "ENG/Written by the CLI"})
        wrote = await client.call_tool("write_page", {"container": "ENG", "title": "By the agent"})
    said = lambda r: "".join(getattr(c, "text", "") for c in r.content)  # noqa: E731
    assert refused.is_error and "is full" in said(refused)
    assert (got.is_error, wrote.is_error) == (False, False), (said(got), said(wrote))


def test_a_node_opened_on_a_full_disk_follows_its_storage_once_there_is_room(small_disk):
    """The same in one process, through the node alone: reads see another writer's page, and a write that
    was refused for the full disk lands when retried with room again — without reopening anything."""
    home = new_home(small_disk / "home")
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("ENG", "Before", "x")
    filler = fill(small_disk, leave=4096)
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        assert node.readonly
        with pytest.raises(Exception, match="is full"):
            kb.create_page("ENG", "While full", "x")
        filler.unlink()
        with Node.open(home) as other:
            KnowledgeBase(other).create_page("ENG", "From another process", "y")
        node.follow_storage()                     # what a long-lived session asks before each call
        assert not node.readonly
        assert kb.get_page("ENG/From another process").body == "y"
        assert kb.create_page("ENG", "While full", "x").title == "While full"


def test_a_snapshot_opened_on_a_full_disk_is_opened_again_when_another_writer_changes_the_files(small_disk):
    """While the disk stays full, a process that opened the database before it filled can still write (its WAL
    has room it already holds). A reader opened on the full disk holds an immutable snapshot, which never sees
    that writer: it is opened again once the files change, so its reads are current."""
    home = new_home(small_disk / "home")
    with Node.open(home) as writer:
        kb_w = KnowledgeBase(writer)
        kb_w.create_page("ENG", "Before", "x")
        writer.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")      # an empty WAL: the reader gets a snapshot
        fill(small_disk, leave=60 * 1024)                           # "full" for SQLite's purposes (< 64 KiB)
        with Node.open(home) as reader:
            assert reader.readonly and reader.conn.opened_on is not None
            assert not reader.follow_storage()                       # nothing changed: the same connection
            kb_w.create_page("ENG", "Written while full", "y")
            assert reader.follow_storage() and reader.readonly       # still full: read-only, but current
            assert KnowledgeBase(reader).get_page("ENG/Written while full").body == "y"
