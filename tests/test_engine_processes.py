"""Real processes on one home: two writers saving one page from the same base revision, and a
writer killed with SIGKILL in the middle of appending."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT, count

from core.log import FileLog, Record
from core.log.framing import encode_frame
from core.node import Node
from core.pages.service import KnowledgeBase

PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
ENV.pop("CREWLET_HOME", None)
ENV.pop("CREWLET_AS", None)

# Runs the real `crewlet` entry point once a go-file appears, so several start their save together.
BARRIER_CLI = textwrap.dedent("""
    import os, sys, time
    ready, go, *argv = sys.argv[1:]
    from crewlet_tui.cli import main          # import before the barrier: only the save is raced
    open(ready, "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit("barrier never opened")
        time.sleep(0.0005)
    sys.argv = ["crewlet", *argv]
    main()
""")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("writers", [2, 4])
def test_writers_saving_one_page_from_one_base_exactly_one_applies_nothing_lost(home, tmp_path, writers):
    with Node.open(home) as node:
        page = KnowledgeBase(node).create_page("ENG", "Contended", "the original\n")
    actors = ["alex", "sam", "eng-bot", "alex"][:writers]
    bodies = [f"writer {i} ({a}) says something different\n" for i, a in enumerate(actors)]
    go = tmp_path / "go"
    procs = []
    for i, (who, body) in enumerate(zip(actors, bodies)):
        body_file = tmp_path / f"body{i}.md"
        body_file.write_text(body, encoding="utf-8")
        ready = tmp_path / f"ready{i}"
        argv = ["--home", str(home.root), "--as", who, "page", "save", "ENG/contended",
                "--body-file", str(body_file), "--base-rev", "1", "--json"]
        procs.append((ready, subprocess.Popen([PY, "-c", BARRIER_CLI, str(ready), str(go), *argv], env=ENV,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    deadline = time.monotonic() + 30
    while not all(r.exists() for r, _ in procs):
        assert time.monotonic() < deadline, "writers never got ready"
        assert all(p.poll() is None for _, p in procs), [p.communicate() for _, p in procs]
        time.sleep(0.005)
    go.touch()
    results = []
    for _, p in procs:
        out, err = p.communicate(timeout=30)
        results.append((p.returncode, out, err))

    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0] + [1] * (writers - 1), results
    winner = next(i for i, (rc, _, _) in enumerate(results) if rc == 0)
    won = json.loads(results[winner][1])
    assert (won["revision"], won["body"], won["saved_by"]) == (2, bodies[winner], actors[winner])
    for i, (rc, out, err) in enumerate(results):
        if i == winner:
            continue
        refusal = json.loads(out)
        assert refusal["error"] == "stale_revision"
        assert (refusal["base_revision"], refusal["current_revision"]) == (1, 2)
        assert refusal["your_body"] == bodies[i]                       # returned to its writer
        assert Path(refusal["rescued_to"]).read_text(encoding="utf-8") == bodies[i]  # and kept on disk
        assert len(err.strip().splitlines()) == 1 and "revision 2, not 1" in err
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        history = kb.history(page.id)
        assert [(r.revision, r.body) for r in history] == [(2, bodies[winner]), (1, "the original\n")]
        saves = node.conn.execute("SELECT status, code FROM applied_ops WHERE type = 'page.save'").fetchall()
        assert sorted(tuple(s) for s in saves) == [("applied", None)] + [("refused", "stale_revision")] * (writers - 1)
    assert len(list(home.rescue_dir.iterdir())) == writers - 1


# Appends page.create records through Node.submit (append + apply) until it is killed.
APPENDER = textwrap.dedent("""
    import sys, uuid
    from pathlib import Path
    from core.log import Record
    from core.node import Node
    from core.paths import Home
    node = Node.open(Home(Path(sys.argv[1])))
    first = True
    while True:
        batch = []
        for _ in range(20):
            pid = uuid.uuid4().hex[:16]
            batch.append(Record.new("page.create", "alex", {"page_id": pid, "container": "ENG",
                                    "title": "Killed " + pid, "body": "x" * 300, "parent_id": None}))
        node.submit(batch, sync=False)
        if first:  # one batch is in before the parent's clock starts, however busy the machine
            print("ready", flush=True)
            first = False
""")


def _run_and_kill(home_root: Path, delay: float) -> None:
    p = subprocess.Popen([PY, "-c", APPENDER, str(home_root)], env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read() if p.poll() is not None else ""
        time.sleep(delay)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        p.stdout.close()
        p.stderr.close()
    assert p.returncode == -signal.SIGKILL


@pytest.mark.timeout(60)
def test_a_writer_killed_mid_append_leaves_a_log_that_reads_and_no_half_applied_page(home):
    rng = random.Random(20250101)
    for _ in range(3):  # killed at three different moments (each run first applies what the last left)
        _run_and_kill(home.root, rng.uniform(0.15, 0.4))

    # complete records appended but never applied (as a writer killed between append and apply leaves)
    with FileLog(home.log_file) as flog:
        flog.append([Record.new("page.create", "alex", {"page_id": f"unapplied{i}", "container": "ENG",
                                                        "title": f"Unapplied {i}", "body": "z"}) for i in range(5)],
                    sync=False)
        last = flog.scan().last_seq
    # and a torn tail for certain: the first half of the next frame, as an interrupted write leaves it
    frame = encode_frame(last + 1, Record.new("page.create", "alex", {"page_id": "torn", "container": "ENG",
                                                                      "title": "Torn", "body": "y"}).body())
    partial = frame[: len(frame) // 2]
    with open(home.log_file, "ab") as fh:
        fh.write(partial)

    with FileLog(home.log_file) as flog:
        report = flog.scan()
        assert (report.last_seq, report.torn_tail, report.torn_bytes) == (last, True, len(partial))
        creates_in_log = sum(1 for r, _ in flog.read() if r.type == "page.create")
    assert creates_in_log > 20  # the writer did get going

    with Node.open(home) as node:  # opens: applies every complete record, stops at the torn tail
        conn = node.conn
        assert node.applied_seq() == last
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        pages = count(conn, "SELECT count(*) FROM pages")
        assert pages == creates_in_log
        assert pages == count(conn, "SELECT count(*) FROM revisions WHERE kind = 'create' AND revision = 1")
        assert pages == count(conn, "SELECT count(*) FROM applied_ops WHERE type = 'page.create' AND status = 'applied'")
        assert count(conn, "SELECT count(*) FROM pages p WHERE NOT EXISTS "
                           "(SELECT 1 FROM revisions r WHERE r.page_id = p.id AND r.revision = 1)") == 0
        assert count(conn, "SELECT count(*) FROM pages WHERE id = 'torn'") == 0
        assert count(conn, "SELECT count(*) FROM pages WHERE id LIKE 'unapplied%'") == 5

        # a subsequent write works, and its append cuts the torn tail off
        page = KnowledgeBase(node).create_page("ENG", "After The Crash", "fine")
        assert node.applied_seq() == last + 1
    with FileLog(home.log_file) as flog:
        after = flog.scan()
        assert (after.last_seq, after.torn_tail) == (last + 1, False)
    with Node.open(home) as node:
        assert KnowledgeBase(node).resolve("ENG/after the crash").id == page.id
