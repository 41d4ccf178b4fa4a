"""The one duty runner (core/duties/runner.py): passes, cursors kept in SQLite, leases across processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core.duties.roster import default_duties
from core.node import Node
from core.duties.runner import Duty, DutyPass, DutyRunner, Lease, PassContext, read_duty_records

ROOT = Path(__file__).resolve().parent.parent


class Countdown(Duty):
    """A duty with `left` units of work, doing `per_pass` a pass."""

    name = "countdown"

    def __init__(self, left: int, per_pass: int = 1, fail_at: int | None = None) -> None:
        self.left, self.per_pass, self.fail_at, self.passes = left, per_pass, fail_at, 0
        self.interval_s = 60.0

    def run_pass(self, ctx: PassContext) -> DutyPass:
        self.passes += 1
        if self.fail_at is not None and self.passes == self.fail_at:
            raise RuntimeError("the disk said no")
        done = min(self.per_pass, self.left)
        self.left -= done
        ctx.progress(done, done + self.left, "counting")
        return DutyPass(summary=f"{self.left} left", more=self.left > 0, worked=done > 0, cursor=str(self.left),
                        status={"left": self.left})


def test_run_until_idle_passes_until_nothing_is_left_and_keeps_the_cursor(node):
    duty = Countdown(5, per_pass=2)
    seen = []
    runner = DutyRunner(node, [duty])
    reports = runner.run_until_idle(progress=lambda *a: seen.append(a))
    runner.close()
    assert [r.result.summary for r in reports] == ["3 left", "1 left", "0 left"]
    assert duty.left == 0 and seen[0][0] == "countdown"
    record = read_duty_records(node.conn)["countdown"]
    assert record.cursor == "0" and record.status == {"left": 0} and record.last_summary == "0 left"


class Consumer(Duty):
    """Works through what `Producer` made; has nothing to do until it made something."""

    name = "consumer"

    def __init__(self, shelf: list[int]) -> None:
        self.shelf, self.taken, self.interval_s = shelf, 0, 60.0

    def run_pass(self, ctx: PassContext) -> DutyPass:
        took = len(self.shelf)
        self.taken += took
        self.shelf.clear()
        return DutyPass(summary=f"took {took}", worked=took > 0)


class Producer(Duty):
    name = "producer"

    def __init__(self, shelf: list[int], batches: int, *, forever: bool = False) -> None:
        self.shelf, self.batches, self.forever, self.interval_s = shelf, batches, forever, 60.0

    def run_pass(self, ctx: PassContext) -> DutyPass:
        if not self.batches and not self.forever:
            return DutyPass(summary="nothing to make")
        self.batches -= 1
        self.shelf.append(1)
        return DutyPass(summary="made one", worked=True, more=self.batches > 0)


def test_run_until_idle_asks_a_duty_again_after_another_made_it_work(node):
    """The consumer runs before the producer in a tick and says it has nothing to do; idle is a whole tick
    in which nothing worked, so it is asked again and takes what the producer made after it."""
    shelf: list[int] = []
    consumer, producer = Consumer(shelf), Producer(shelf, batches=3)
    runner = DutyRunner(node, [consumer, producer])
    reports = runner.run_until_idle()
    runner.close()
    assert consumer.taken == 3 and not shelf
    assert [r.result.summary for r in reports if r.duty == "consumer"] == ["took 0", "took 3"]
    # the closing tick found nothing to do: it is not reported, and the records still say what the working
    # passes did
    assert read_duty_records(node.conn)["consumer"].last_summary == "took 3"
    forever = DutyRunner(node, [Consumer(shelf), Producer(shelf, batches=0, forever=True)])
    ran = forever.run_until_idle()            # a duty that works on every pass: bounded, not for ever
    forever.close()
    from core.duties.runner import SETTLE_TICKS
    assert sum(1 for r in ran if r.duty == "producer") == SETTLE_TICKS


def test_a_failed_pass_is_recorded_and_the_next_pass_runs(node):
    duty = Countdown(3, per_pass=1, fail_at=2)
    runner = DutyRunner(node, [duty])
    reports = runner.run_until_idle()
    assert [bool(r.error) for r in reports] == [False, True]
    assert "the disk said no" in read_duty_records(node.conn)["countdown"].last_error
    # the loop goes on: the next tick runs it again and clears the error
    again = runner.tick(stop=threading.Event(), force=True)
    runner.close()
    assert again[0].error == "" and read_duty_records(node.conn)["countdown"].last_error == ""


def test_a_lease_held_by_another_runner_is_not_taken_until_it_is_released(node):
    a = DutyRunner(node, [Countdown(10)], label="first")
    b = DutyRunner(node, [Countdown(10)], label="second")
    assert a.tick(stop=threading.Event(), force=True)[0].ran
    skipped = b.tick(stop=threading.Event(), force=True)[0]
    assert not skipped.ran and "run by first" in skipped.skipped
    a.close()
    assert b.tick(stop=threading.Event(), force=True)[0].ran
    b.close()


def test_node_and_fleet_duties_keep_their_leases_apart(home):
    with Node.open(home) as node:
        runner = DutyRunner(node, default_duties(node))
        runner.run_until_idle()
        dirs = {d.name: runner.leases[d.name].dir for d in runner.duties}
        runner.close()
    assert dirs["keyword-index"] == home.node_lease_dir and dirs["apply"] == home.node_lease_dir
    assert dirs["trash-reaper"] == home.fleet_lease_dir and home.fleet_lease_dir.parent == home.log_file.parent


def _crewlet(home: Path, *args: str, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    env = dict(os.environ, CREWLET_HOME=str(home), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "crewlet_tui.cli", *args]
    if kw.pop("background", False):
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_a_second_worker_process_leaves_the_duties_to_the_first_then_takes_them_when_it_dies(home):
    loop = _crewlet(home.root, "worker", "--interval", "0.2", background=True)
    try:
        deadline = time.monotonic() + 60
        while not (home.node_lease_dir / "keyword-index.lease").exists():
            assert time.monotonic() < deadline, "the first worker never took its lease"
            assert loop.poll() is None, loop.stderr.read() if loop.stderr else ""
            time.sleep(0.1)
        once = _crewlet(home.root, "worker", "--once", "--json")
        assert once.returncode == 0, once.stderr
        duties = {d["duty"]: d for d in json.loads(once.stdout)["duties"]}
        assert not duties["keyword-index"]["ran"]
        assert f"pid {loop.pid}" in duties["keyword-index"]["skipped"]
        assert not duties["trash-reaper"]["ran"]
    finally:
        loop.send_signal(signal.SIGKILL)
        loop.wait(10)
    # killed: its leases stay until they expire; age them, as time would
    for lease in [*home.node_lease_dir.glob("*.lease"), *home.fleet_lease_dir.glob("*.lease")]:
        data = json.loads(lease.read_text())
        lease.write_text(json.dumps(data | {"expires_at": 0}))
    once = _crewlet(home.root, "worker", "--once", "--json")
    assert once.returncode == 0, once.stderr
    assert all(d["ran"] for d in json.loads(once.stdout)["duties"])


def test_worker_status_reads_what_the_last_passes_left(home):
    assert _crewlet(home.root, "worker", "--once").returncode == 0
    out = _crewlet(home.root, "worker", "--status", "--json")
    assert out.returncode == 0, out.stderr
    names = {d["name"]: d for d in json.loads(out.stdout)["duties"]}
    assert set(names) == {"apply", "keyword-index", "trash-reaper", "embedding", "semantic-index", "diary-fill",
                          "entry-decay", "entry-recheck", "triage", "upkeep", "page-refresh"}
    assert names["keyword-index"]["status"]["first_build_done"] is True
    human = _crewlet(home.root, "worker", "--status")
    assert "keyword-index" in human.stdout and "first build" in human.stdout


@pytest.mark.parametrize("flag", ["--once", "--status"])
def test_worker_help_names_its_flags(flag):
    out = _crewlet(Path("/nonexistent"), "worker", "--help")
    assert flag in out.stdout


async def test_the_app_and_a_cli_worker_on_one_home_never_both_run_a_duty(tmp_path):
    from test_app_support import SIZE, app_for, new_home, wait_until

    home = new_home(tmp_path)
    app = app_for(home, start_indexer=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.index_state.phase == "current", timeout=30)
        once = _crewlet(home.root, "worker", "--once", "--json")
        assert once.returncode == 0, once.stderr
        duties = {d["duty"]: d for d in json.loads(once.stdout)["duties"]}
        assert not duties["keyword-index"]["ran"] and "crewlet app" in duties["keyword-index"]["skipped"]
    # the app released its leases when it closed: the CLI runs them now
    once = _crewlet(home.root, "worker", "--once", "--json")
    assert all(d["ran"] for d in json.loads(once.stdout)["duties"])
