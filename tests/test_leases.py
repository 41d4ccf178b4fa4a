"""A dead process holds nothing (issue 19, part 3).

Reproductions: after `kill -9` of a `crewlet worker` (or the app) the next `worker --once` skipped apply and
the keyword index for 90 s, embedding for 180 s and the trash reaper for 3 hours, exiting 0 with "run by
crewlet worker (pid N)" for a pid that no longer existed. A lease now records its holder's host, pid and
process start time: a holder on this machine that is not running — its pid gone, or given to another
program — is taken over at once; a live one is named with its pid and how long it has held the lease.

A write waiting for the log's lock says so once after a second, naming the holder, and gives up with one
line after the documented bound (`core/log/filelog.py` LOCK_WAIT_S).

No test here sleeps to wait for a lease: each kills a real process and asks at once, or plays a clock."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.errors import CrewletError
from core.log import FileLog, LogBusy, Record
from core.log import filelog as filelog_mod
from core.node import Node
from core.pages.service import KnowledgeBase
from core.process import HOST, NAMESPACE, START, Holder, _read_start
from core.leases import Lease

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="250")
ENV.pop("CREWLET_AS", None)


def crewlet(home: Path, *args: str, background: bool = False):
    cmd = [sys.executable, "-m", "crewlet_tui.cli", "--home", str(home), *args]
    if background:
        return subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)


def poll(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def sleeper():
    """A real process that is not crewlet: its pid can stand for a holder's, or for a reused pid."""
    proc = subprocess.Popen(["sleep", "600"])
    poll(lambda: _read_start(proc.pid) is not None, "the sleeper to start")
    yield proc
    proc.kill()
    proc.wait(10)


def lease_file(directory: Path, name: str, *, pid: int, start: int, label: str = "crewlet worker",
               expires_in_ms: int = 3 * 3600 * 1000, host: str = HOST) -> None:
    now = time.time_ns() // 1_000_000
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.lease").write_text(json.dumps({
        "owner": f"{host}:{pid}:x", "label": f"{label} (pid {pid})", "pid": pid,
        "process": {"host": host, "pid": pid, "start": start, "label": label},
        "since": now - 240_000, "renewed_at": now - 2_000, "expires_at": now + expires_in_ms}))


def test_a_killed_worker_holds_no_lease_the_next_worker_runs_every_duty_at_once(home):
    loop = crewlet(home.root, "worker", "--interval", "0.2", background=True)
    try:
        poll(lambda: all((d / f"{n}.lease").exists() for d, n in ((home.node_lease_dir, "keyword-index"),
                                                                   (home.fleet_lease_dir, "trash-reaper"))),
             "the worker to take its leases")
    finally:
        loop.send_signal(signal.SIGKILL)
        loop.wait(30)
        if loop.stderr:
            loop.stderr.close()
    # the leases are still unexpired (90 s, 3 h): their holder is dead, so they hold nothing
    data = json.loads((home.fleet_lease_dir / "trash-reaper.lease").read_text())
    assert data["expires_at"] > time.time_ns() // 1_000_000 and data["process"]["pid"] == loop.pid
    once = crewlet(home.root, "worker", "--once", "--json")
    assert once.returncode == 0, once.stderr
    duties = {d["duty"]: d for d in json.loads(once.stdout)["duties"]}
    assert all(d["ran"] for d in duties.values()), duties


def test_a_lease_whose_pid_now_names_another_program_is_taken_over(tmp_path, sleeper):
    """The pid runs, but not the process that took the lease (it started at another tick)."""
    lease_file(tmp_path, "duty", pid=sleeper.pid, start=_read_start(sleeper.pid) + 1)
    assert Lease(tmp_path, "duty", "me", "a new worker").acquire() is None


def test_a_live_holder_keeps_its_lease_and_is_named_with_its_pid_and_age(tmp_path, sleeper):
    lease_file(tmp_path, "duty", pid=sleeper.pid, start=_read_start(sleeper.pid))
    held = Lease(tmp_path, "duty", "me", "a new worker").acquire()
    assert held is not None
    said = held.describe()
    assert f"pid {sleeper.pid}" in said and "holding it for 4 min" in said and "renewed 2 s ago" in said


def test_worker_once_names_a_live_holder_and_exits_0(home, sleeper):
    for name in ("apply", "keyword-index"):
        lease_file(home.node_lease_dir, name, pid=sleeper.pid, start=_read_start(sleeper.pid))
    once = crewlet(home.root, "worker", "--once", "--json")
    assert once.returncode == 0, once.stderr
    duties = {d["duty"]: d for d in json.loads(once.stdout)["duties"]}
    assert not duties["keyword-index"]["ran"] and f"pid {sleeper.pid}" in duties["keyword-index"]["skipped"]
    assert "renewed" in duties["keyword-index"]["skipped"]
    assert duties["trash-reaper"]["ran"]


def test_a_holder_on_another_machine_is_taken_to_run_until_its_lease_expires(tmp_path):
    lease_file(tmp_path, "duty", pid=1, start=1, host="another-machine", expires_in_ms=60_000)
    now = [time.time_ns() // 1_000_000]
    lease = Lease(tmp_path, "duty", "me", "a new worker", clock=lambda: now[0])
    held = lease.acquire()
    assert held is not None and "on another-machine" in held.describe()
    now[0] += 61_000       # its expiry, on a played clock
    assert lease.acquire() is None


def test_an_expired_lease_is_taken_over_on_a_played_clock(tmp_path):
    now = [1_000_000]
    dead = Lease(tmp_path, "duty", "dead-owner", "a stopped worker", ttl_s=0.05, clock=lambda: now[0])
    assert dead.acquire() is None
    alive = Lease(tmp_path, "duty", "new-owner", "a new worker", ttl_s=30, clock=lambda: now[0])
    assert alive.acquire() is not None       # not yet expired (and its holder, this process, runs)
    now[0] += 100
    assert alive.acquire() is None           # expired: taken over
    assert dead.acquire() is not None        # and the old owner does not get it back


def test_join_refusal_ignores_a_dead_holder(home, sleeper):
    from core.sync.join import running_here

    lease_file(home.node_lease_dir, "keyword-index", pid=sleeper.pid, start=_read_start(sleeper.pid) + 7)
    assert running_here(home) is None
    lease_file(home.node_lease_dir, "keyword-index", pid=sleeper.pid, start=_read_start(sleeper.pid))
    assert running_here(home) is not None


# -- waiting for the log's lock --------------------------------------------------------------------------------

HOLDER = """
import sys
from core.log import FileLog
from core import process
process.set_label("a test holding the lock")
with FileLog(sys.argv[1]) as flog, flog.locked():
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture
def lock_held(home):
    """Another process holding the pages log's writers' lock until the test lets it go."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(home.log_file)], env=ENV, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    if proc.poll() is None:
        proc.stdin.write("\n")
        proc.stdin.flush()
    proc.wait(30)


def test_a_write_waiting_for_the_lock_says_once_who_holds_it_then_gives_up_with_nothing_written(home, lock_held,
                                                                                                 monkeypatch):
    monkeypatch.setattr(filelog_mod, "LOCK_NOTICE_S", 0.05)
    heard: list[str] = []
    before = home.log_file.read_bytes()
    with Node.open(home) as node:
        node.on_lock_wait(heard.append)
        node.log.lock_wait_s = 0.3
        with pytest.raises(CrewletError) as refused:
            KnowledgeBase(node).create_page("ENG", "Waited", "x")
    assert refused.value.code == "busy" and "nothing was written" in str(refused.value)
    assert f"pid {lock_held.pid}" in str(refused.value) and "a test holding the lock" in str(refused.value)
    assert len(heard) == 1 and f"pid {lock_held.pid}" in heard[0] and "waiting for the lock" in heard[0]
    assert home.log_file.read_bytes() == before


def test_a_cli_write_says_it_waits_for_the_lock_and_lands_once_it_is_released(home, lock_held):
    writer = subprocess.Popen([sys.executable, "-m", "crewlet_tui.cli", "--home", str(home.root), "page", "create",
                               "ENG", "Patient"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = writer.stderr.readline()          # the gate: the writer says it waits, after a second
    assert "waiting for the lock" in line and f"pid {lock_held.pid}" in line, line
    lock_held.stdin.write("\n")
    lock_held.stdin.flush()
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    assert "waiting for the lock" not in err    # said once
    with Node.open(home) as node:
        assert KnowledgeBase(node).resolve("ENG/Patient").title == "Patient"


def test_the_holder_is_recorded_beside_the_lock(tmp_path):
    with FileLog(tmp_path / "p.log") as flog:
        flog.append([Record.new("page.create", "alex", {})])
        data = json.loads((tmp_path / "p.log.lock-holder").read_text())
    me = Holder.me()
    assert (data["pid"], data["host"], data["start"]) == (os.getpid(), HOST, me.start)


def test_a_dead_holder_with_this_process_s_pid_holds_nothing(tmp_path):
    """Review finding 5: a worker restarted in the same container gets its predecessor's pid (pid 1 again);
    the lease its killed predecessor left names this pid with another start time — it is not this process."""
    (tmp_path / "reaper.lease").write_text(json.dumps({
        "owner": "killed-worker", "label": "crewlet worker", "expires_at": 2**62,
        "process": {"host": HOST, "pid": os.getpid(), "start": START - 1, "label": "crewlet worker"}}))
    assert Lease(tmp_path, "reaper", "new-worker", "crewlet worker").acquire() is None


def test_this_process_s_own_lease_under_another_owner_is_still_held(tmp_path):
    """The same pid *and* start: this very process holds it (another duty runner in it), so it runs."""
    lease_file(tmp_path, "duty", pid=os.getpid(), start=START)
    assert Lease(tmp_path, "duty", "me", "a new worker").acquire() is not None


def test_a_holder_in_another_pid_namespace_on_this_host_is_taken_to_run(tmp_path):
    """Two containers sharing a hostname (and a shared directory) cannot see each other's processes: a pid
    recorded in another pid namespace says nothing here, so its lease stands until it expires."""
    assert NAMESPACE, "this system names its pid namespace (/proc/self/ns/pid)"
    now = time.time_ns() // 1_000_000
    (tmp_path / "duty.lease").write_text(json.dumps({
        "owner": "worker-in-another-container", "label": "crewlet worker", "expires_at": now + 60_000,
        "process": {"host": HOST, "pid": 999_999_999, "start": 5, "label": "crewlet worker",
                    "ns": "pid:[1]"}}))
    held = Lease(tmp_path, "duty", "me", "a new worker").acquire()
    assert held is not None and not held.dead()
    # and a lease this namespace wrote records it, so the other container can tell the same
    assert Lease(tmp_path / "mine", "duty", "me", "w").acquire() is None
    written = json.loads((tmp_path / "mine" / "duty.lease").read_text())
    assert written["process"]["ns"] == NAMESPACE
