"""Faults where the log and the database meet, N rounds, and a table of what held.

    python bench/faults.py [--rounds 200] [--kinds kill_import,flip_tail,...] [--seed 1] [--dir D]

Each round copies a small template home (vectors off: no model loads), injects one fault, and audits what
is left:

* kill_import / kill_save / kill_worker — `kill -9` at a random moment of an import (the real CLI),
  of two writers creating and saving pages, or of `crewlet worker` building the index while a
  writer writes;
* torn_tail — an interrupted append: the first part of a frame past everything applied;
* flip_tail / flip_mid — one bit flipped in the last frame (already applied) or in a middle one;
* dup_frame / drop_frame — a frame written twice, or one taken out of the middle;
* disk_full — the home on a small tmpfs filled up while a writer saves (root only; else skipped);
* read_only — the home behind a read-only bind mount: every read must work, every write refuse
  with nothing changed (root only; else skipped);
* full_read — the home on a tmpfs with 0–8 KiB left: reads, then a save too big for what is left (root only);
* slow_save — the app: a save waits for the log's lock (another process holds it) while help covers the
  editor, or after the editor was left; the lock is released;
* hostile_endpoint — an embedding endpoint whose errors carry terminal escapes, under `crewlet worker --once`
  with stderr a pipe;
* divergence — two nodes on one shared directory; one's rows changed behind the log's back; a snapshot
  changed after it was taken.
* kill_adopt — `crewlet sync adopt` (the real CLI) SIGKILLed before a random file operation of the database
  swap, on a home whose agents keep diaries and whose node holds other rows of its own (issue 34);
* kill_join — `crewlet sync join DIR` (the real CLI) SIGKILLed before a random file operation: the home
  becoming a shared directory's first node, or a fresh home with diaries joining a directory another node
  made (its database started over); the next command finishes the join or finds it never begun, and a
  second join goes through (issue 34);
* swap_frames — two adjacent frames swapped in the middle of the log (issue 34: the displaced record was
  tombstoned although its intact frame lay one frame on); flip_tail's copy of the log with no database is
  repaired too (a damaged whole last frame is damage, not an interrupted append: it costs that one record);
* forged_snapshot — a snapshot of a single home, a body edited and its stored digest recomputed, adopted over
  the database it was taken from;
* quorum_loss — a company on a three-server JetStream cluster (needs nats-server): two servers stop while two
  nodes write and read, then start again.

Columns ("–" where a fault does not exercise it):

* clean reopen — the home opens without an exception; where damage was injected, the damage is
  named (writes refused), `repair_home` repairs it — the damaged file kept whole beside the log — and
  a write works afterwards; for the kills, the next import / worker pass completes;
* lost acknowledged writes — writes reported done to their writer (a printed ack, an exit 0) that
  the home no longer holds (after a repair too: the home's own database gives damaged records back);
* half-applied — inconsistencies: SQLite's integrity check, a page without its revisions, a page
  whose revision is not its newest revision row, a position past the log, a write that said
  "nothing was written" and landed, a read-only home that changed;
* replay = live — a fresh database replayed from the (repaired) log holds exactly the live rows;
* repair lost/damaged — a node holding only a copy of the damaged log (no database that applied it) is
  repaired: the records it lost, against those the damage destroyed (0 for a duplicate, 1 for a flipped or
  dropped frame); every other record must be kept;
* given back — damaged records the home's own database gave back in its repair;
* digest kept — the home's content digest after its repair is the one before the damage (its database applied
  every record, so the repair must give each damaged one back whole: an op_id kept in applied_ops is not
  enough — a record refused after the repair keeps its op_id while its page is gone);
* damage said — read commands (pages, page show, search, index status, sync status, worker --once, two
  --json answers) that said "damaged past record N … crewlet log check" in one stderr line, never "current";
* lease free — after `kill -9` of a worker, the next runner ran every duty at once (no waiting out a lease);
* app alive — the app lived through the slow save, and Escape popped what it should;
* full-disk reads — reads that worked on the full disk and wrote not a byte;
* rescue whole — the refused save's text was whole in rescued/, or absent and returned in the answer;
* output inert — no raw control character reached stdout or stderr;
* divergence named — `sync status` named the changed node, and adopting the changed snapshot was refused;
* node-local kept — after a killed adoption, the next open held every diary note and every other node-local
  row the home held before (and adopting again went through keeping them);
* forged refused — adopting a forged snapshot was refused in one line, the database untouched;
* one line, no false damage — while the cluster had no quorum and after: every command answered in one stderr
  line or none, no traceback, nothing called damaged; reads answered from the database.

`tests/test_faults.py` runs a few rounds of every kind; this runs many. Prints; never asserts.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.log import FileLog, LogDamage  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages.kinds import KINDS as PAGE_KINDS  # noqa: E402
from core.pages.service import KnowledgeBase  # noqa: E402
from core.paths import Home  # noqa: E402
from core.repair import check_home, repair_home  # noqa: E402
from core.store.digest import content_digest  # noqa: E402

PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "200"}
ENV.pop("CREWLET_HOME", None)
ENV.pop("CREWLET_AS", None)
CREWLET = [PY, "-c", "import sys; from crewlet_tui.cli import main; sys.argv[0] = 'crewlet'; main()"]

# the tables every node fills from the pages log alone, as its kinds declare them
REPLAYED_TABLES = (*PAGE_KINDS.tables, "log_position")

KINDS = ("kill_import", "kill_save", "kill_worker", "torn_tail", "flip_tail", "flip_mid", "dup_frame",
         "drop_frame", "disk_full", "read_only", "full_read", "slow_save", "hostile_endpoint", "divergence",
         "kill_adopt", "kill_join", "swap_frames", "forged_snapshot", "quorum_loss")
DAMAGE_KINDS = ("flip_tail", "flip_mid", "dup_frame", "drop_frame", "swap_frames")


@dataclass
class Round:
    kind: str
    clean_reopen: bool = True
    lost_acked: int = 0
    half_applied: int = 0
    replay_equal: bool = True
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)   # what went wrong
    seen: str = ""                                    # what the fault did (shown with -v)
    repair_lost: int | None = None                    # records a repair of a bare copy of the log lost
    repair_expected: int | None = None                # … and the records the damage destroyed
    given_back: int = 0                               # damaged records the home's own database gave back
    digest_kept: bool | None = None                   # the home's content after its repair is the content before
    said: tuple[int, int] | None = None               # read commands that said the damage, of those run
    lease_free: bool | None = None                    # a killed worker's leases held nothing
    app_alive: bool | None = None                     # the app outlived a save answered while covered or gone
    full_reads: tuple[int, int] | None = None         # reads that worked on a full disk writing nothing, of those run
    rescue_whole: bool | None = None                  # a refused save's rescue was whole, or absent and printed
    inert: bool | None = None                         # an endpoint's hostile error reached no output raw
    divergence_named: bool | None = None              # a node holding other content was named; a forged snapshot refused
    node_local_kept: bool | None = None               # a killed adoption kept every diary and node-local row
    forged_refused: bool | None = None                # a forged snapshot of a single home was not adopted
    one_line: tuple[int, int] | None = None           # commands that answered in one line, no traceback, no false damage

    @property
    def perfect(self) -> bool:
        return (self.clean_reopen and not self.lost_acked and not self.half_applied and self.replay_equal
                and self.repair_lost == self.repair_expected
                and (self.said is None or self.said[0] == self.said[1])
                and (self.full_reads is None or self.full_reads[0] == self.full_reads[1])
                and (self.one_line is None or self.one_line[0] == self.one_line[1])
                and all(v is not False for v in (self.digest_kept, self.lease_free, self.app_alive, self.rescue_whole,
                                                 self.inert, self.divergence_named, self.node_local_kept,
                                                 self.forged_refused)))


# -- homes -------------------------------------------------------------------------------------------

def make_template(root: Path, pages: int = 24) -> Home:
    """A small home with history: pages (some nested), saves, a comment, a rename — and the later records that
    make a lost one hard to rebuild from the rows now (review finding 1): a page moved and labelled after its
    create, a comment edited, another edited and removed, a page trashed, restored and purged."""
    home = Home(root)
    data = config_mod.example_config()
    data["knowledge"]["vectors"] = False   # no model loads in a round (hostile_endpoint turns a provider on)
    init_home(home, data)
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        folder = kb.create_page("ENG", "Runbooks", "")
        for i in range(pages):
            p = kb.create_page("ENG", f"Runbook {i}", f"# Runbook {i}\n\nsteps for service {i}\n",
                               parent=folder.id if i % 2 else None)
            if i % 3 == 0:
                kb.save_page(p.id, f"# Runbook {i}\n\nbetter steps for service {i}\n", base_revision=1)
        kb.add_comment(folder.id, "keep these current")
        kb.rename_page(folder.id, "Runbooks (all)")
        moved = kb.create_page("ENG", "Oncall", "who is on call\n")
        kb.move_page(moved.id, folder.id)
        kb.set_labels(moved.id, ["ops"])
        note = kb.add_comment(moved.id, "first words")
        kb.edit_comment(note.id, "second words")
        gone = kb.add_comment(folder.id, "to be removed")
        kb.edit_comment(gone.id, "edited before removal")
        kb.remove_comment(gone.id)
        old = kb.create_page("ENG", "Old Plan", "the old plan\n")
        kb.save_page(old.id, "the old plan, revised\n", base_revision=1)
        kb.trash_page(old.id)
        kb.restore_page(old.id)
        kb.trash_page(old.id)
        kb.purge_page(old.id, reason="superseded")
    from core.search.indexer import Indexer

    with Indexer(home) as indexer:  # a read-only home is searched as its index stands
        indexer.run_pass(wait=True)
    return home


def copy_home(template: Home, dest: Path) -> Home:
    shutil.copytree(template.root, dest, copy_function=shutil.copy2)
    return Home(dest)


def make_docs(root: Path, n: int = 2000) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"doc-{i:04d}.md").write_text(f"# Imported {i}\n\n" + f"line {i} of the imported doc\n" * 8,
                                              encoding="utf-8")
    return root


# -- audits ----------------------------------------------------------------------------------------

def rows(conn: Any, table: str) -> list[tuple]:
    return sorted((tuple(r) for r in conn.execute(f"SELECT * FROM {table}")), key=repr)


def half_applied(home: Home) -> list[str]:
    """What is inconsistent in the live database, as sentences (empty: nothing)."""
    problems = []
    with Node.open(home, sync_containers=False) as node:
        conn = node.conn
        if conn.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        n = conn.execute("SELECT count(*) FROM pages p WHERE NOT EXISTS "
                         "(SELECT 1 FROM revisions r WHERE r.page_id = p.id AND r.revision = 1)").fetchone()[0]
        if n:
            problems.append(f"{n} page(s) without revision 1")
        n = conn.execute("SELECT count(*) FROM pages p WHERE p.revision != "
                         "(SELECT max(revision) FROM revisions r WHERE r.page_id = p.id)").fetchone()[0]
        if n:
            problems.append(f"{n} page(s) whose revision is not their newest revision row")
        seq, end = conn.execute("SELECT seq, byte_offset FROM log_position WHERE name = 'applier'").fetchone() or (0, 0)
        if end > home.log_file.stat().st_size:
            problems.append(f"position {end} past the log's end")
        if node.damage is None and seq != node.log.last_seq():
            problems.append(f"applied through {seq}, the log holds {node.log.last_seq()}")
    return problems


def replay_equal(home: Home, scratch: Path) -> bool:
    fresh = Home(scratch)
    fresh.log_file.parent.mkdir(parents=True)
    shutil.copy2(home.config_file, fresh.config_file)
    shutil.copy2(home.log_file, fresh.log_file)
    with Node.open(home, sync_containers=False) as live, Node.open(fresh, sync_containers=False) as replayed:
        if replayed.damage is not None:
            return False
        return all(rows(live.conn, t) == rows(replayed.conn, t) for t in REPLAYED_TABLES)


def digest_of(home: Home) -> str:
    with Node.open(home, sync_containers=False) as node:
        return content_digest(node.conn).content


def op_ids_in_db(home: Home) -> set[str]:
    with Node.open(home, sync_containers=False) as node:
        return {r[0] for r in node.conn.execute("SELECT op_id FROM applied_ops")}


def pages_in_db(home: Home) -> dict[str, tuple[int, str]]:
    with Node.open(home, sync_containers=False) as node:
        return {r["id"]: (r["revision"], r["body"]) for r in node.conn.execute("SELECT id, revision, body FROM pages")}


def frames(path: Path) -> list[tuple[int, int, str]]:
    """(start, end, op_id) of every frame of a sound log."""
    out, start = [], 0
    with FileLog(path, readonly=True) as flog:
        for rec, end in flog.read():
            out.append((start, end, rec.op_id))
            start = end
    return out


def write_works(home: Home) -> bool:
    with Node.open(home) as node:
        if node.damage is not None:
            return False
        KnowledgeBase(node).create_page("ENG", f"After {uuid.uuid4().hex[:8]}", "written after the fault\n")
    return True


def finish(r: Round, home: Home, scratch: Path) -> Round:
    """The audits every round ends with."""
    problems = half_applied(home)
    r.half_applied += len(problems)
    r.notes += problems
    r.replay_equal = replay_equal(home, scratch / "replay")
    if not r.replay_equal:
        r.notes.append("a replay differs from the live rows")
    return r


# -- the faults ------------------------------------------------------------------------------------

def _kill_after(proc: subprocess.Popen, delay: float) -> None:
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def kill_import(rng: random.Random, home: Home, scratch: Path, docs: Path) -> Round:
    r = Round("kill_import")
    size = home.log_file.stat().st_size
    with FileLog(home.log_file) as flog:
        seq_before = flog.last_seq()
    # aim at the writing: kill once the log has grown by a random share of what the import appends
    # (its records are about the docs' text plus some 300 bytes each), or a little after it is done
    growth = sum(f.stat().st_size + 300 for f in docs.glob("*.md"))
    target = size + int(growth * rng.uniform(0.0, 1.1))
    proc = subprocess.Popen([*CREWLET, "--home", str(home.root), "import", str(docs), "--into", "ENG", "--json"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while home.log_file.stat().st_size < target and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    _kill_after(proc, 0.0)
    if proc.stderr:
        proc.stderr.close()
    try:
        with Node.open(home) as node:
            if node.damage is not None:
                r.clean_reopen = False
                r.notes.append(f"damage after a kill: {node.damage}")
                return finish(r, home, scratch)
            from core.importer import import_directory

            had = node.conn.execute("SELECT count(*) FROM pages WHERE title LIKE 'Imported %'").fetchone()[0]
            on_log = node.log.last_seq() - seq_before
            r.seen = (f"{on_log} records of an import of {len(list(docs.glob('*.md')))} docs on the log when killed; "
                      f"{had} pages after reopening")
            import_directory(KnowledgeBase(node), docs, into="ENG")  # the rerun completes the import
            count = node.conn.execute("SELECT count(*) FROM pages WHERE title LIKE 'Imported %'").fetchone()[0]
            if count != len(list(docs.glob("*.md"))):
                r.clean_reopen = False
                r.notes.append(f"the rerun left {count} imported pages")
    except Exception as exc:  # noqa: BLE001 - a round reports, never stops the run
        r.clean_reopen = False
        r.notes.append(f"reopen failed: {exc!r}")
    return finish(r, home, scratch)


SAVER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from core.node import Node
    from core.paths import Home
    from core.pages.service import KnowledgeBase
    home, tag = Home(Path(sys.argv[1])), sys.argv[2]
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        print("ready", flush=True)
        i = 0
        while True:
            i += 1
            page = kb.create_page("ENG", f"Saved {tag} {i}", f"first {tag} {i}\\n")
            print(json.dumps([page.id, page.revision, page.body]), flush=True)
            page = kb.save_page(page.id, f"second {tag} {i}\\n", base_revision=1)
            print(json.dumps([page.id, page.revision, page.body]), flush=True)
""")


def _start_savers(home: Home, n: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([PY, "-c", SAVER, str(home.root), f"w{i}"], env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(n)]
    for p in procs:
        line = p.stdout.readline() if p.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(f"a writer did not start: {p.stderr.read() if p.stderr else ''}")
    return procs


def _acks(procs: list[subprocess.Popen]) -> list[tuple[str, int, str]]:
    acked = []
    for p in procs:
        out = p.stdout.read() if p.stdout else ""
        for line in out.splitlines():
            try:
                page_id, rev, body = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill: not an acknowledgement
            acked.append((page_id, rev, body))
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    return acked


def _lost(home: Home, acked: list[tuple[str, int, str]]) -> int:
    with Node.open(home, sync_containers=False) as node:
        lost = 0
        for page_id, rev, body in acked:
            row = node.conn.execute("SELECT r.revision, COALESCE(r.body, p.body) AS body FROM revisions r JOIN pages p "
                                    "ON p.id = r.page_id WHERE r.page_id = ? AND r.revision = ?",
                                    (page_id, rev)).fetchone()
            if row is None or row["body"] != body:
                lost += 1
        return lost


def kill_save(rng: random.Random, home: Home, scratch: Path) -> Round:
    r = Round("kill_save")
    procs = _start_savers(home, 2)
    time.sleep(rng.uniform(0.05, 0.6))
    for p in procs:
        p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait(timeout=30)
    acked = _acks(procs)
    r.seen = f"{len(acked)} writes acknowledged before the kill"
    try:
        r.lost_acked = _lost(home, acked)
        r.clean_reopen = write_works(home)
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"reopen failed: {exc!r}")
    if not acked:
        r.notes.append("no write was acknowledged before the kill")
    return finish(r, home, scratch)


def kill_worker(rng: random.Random, home: Home, scratch: Path, docs: Path) -> Round:
    r = Round("kill_worker")
    with Node.open(home) as node:  # enough pages that a first build takes a moment
        from core.importer import import_directory

        import_directory(KnowledgeBase(node), docs, into="ENG")
    worker = subprocess.Popen([*CREWLET, "--home", str(home.root), "worker", "--interval", "0.1", "--json"],
                              env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    savers = _start_savers(home, 1)
    time.sleep(rng.uniform(0.1, 1.2))
    for p in (worker, *savers):
        p.send_signal(signal.SIGKILL)
    for p in (worker, *savers):
        p.wait(timeout=30)
    acked = _acks(savers)
    try:
        # the killed worker's leases (unexpired: 90 s, 3 h) hold nothing: the next runner runs every duty at once
        from core.duties.roster import default_duties
        from core.duties.runner import DutyRunner

        with Node.open(home) as node:
            runner = DutyRunner(node, default_duties(node), label="bench worker")
            reports = runner.tick(stop=__import__("threading").Event(), force=True)
            runner.close()
        skipped = [f"{rep.duty}: {rep.skipped}" for rep in reports if not rep.ran]
        r.lease_free = not skipped
        if skipped:
            r.notes.append(f"a killed worker still held: {skipped}")
    except Exception as exc:  # noqa: BLE001
        r.lease_free = False
        r.notes.append(f"lease check failed: {exc!r}")
    try:
        from core.search.indexer import Indexer

        with Indexer(home) as ix:
            st = ix.status()
        r.seen = (f"{len(acked)} writes acknowledged; index {'built' if st.first_build_done else 'not built'}, "
                  f"{st.pages_indexed} pages indexed when killed")
        r.lost_acked = _lost(home, acked)
        from core.search.native import NativeSearcher
        from core.search.seam import Query

        with Node.open(home) as node, Indexer(home) as indexer:
            for _ in range(20):
                report = indexer.run_pass(wait=True)
                if not report.more:
                    break
            searcher = NativeSearcher(node)
            try:
                result = searcher.search(Query("imported doc", limit=5))
            finally:
                searcher.close()
            if result.outcome.served_mode is None or not result.hits:
                r.clean_reopen = False
                r.notes.append(f"search after the kill: {result.outcome.message}")
        r.clean_reopen = r.clean_reopen and write_works(home)
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"reopen failed: {exc!r}")
    return finish(r, home, scratch)


def torn_tail(rng: random.Random, home: Home, scratch: Path) -> Round:
    """An interrupted append: part of a frame that was never applied (nor acknowledged)."""
    from core.log import Record
    from core.log.framing import encode_frame

    r = Round("torn_tail")
    sound = home.log_file.read_bytes()
    before = pages_in_db(home)
    rec = Record.new("page.create", "alex", {"page_id": uuid.uuid4().hex[:16], "container": "ENG",
                                             "title": "Never Finished", "body": "x" * rng.randint(10, 400)})
    frame = encode_frame(len(frames(home.log_file)) + 1, rec.body())
    with open(home.log_file, "ab") as fh:
        fh.write(frame[: rng.randint(1, len(frame) - 1)])
    try:
        with Node.open(home) as node:
            if node.damage is not None:
                r.clean_reopen = False
                r.notes.append(f"an interrupted append was taken for damage: {node.damage}")
        r.clean_reopen = r.clean_reopen and write_works(home)
        after = pages_in_db(home)
        r.lost_acked = sum(1 for k, v in before.items() if after.get(k) != v)
        if not home.log_file.read_bytes().startswith(sound):
            r.notes.append("the cut went into applied records")
            r.half_applied += 1
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"reopen failed: {exc!r}")
    return finish(r, home, scratch)


def _damage(kind: str, rng: random.Random, path: Path) -> int:
    """Damage a sound log; returns the first byte offset the damage makes unusable."""
    fs = frames(path)
    data = bytearray(path.read_bytes())
    if kind == "flip_tail":
        start, end, _ = fs[-1]
        pos = rng.randrange(start, end)
        data[pos] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        return start
    if kind == "flip_mid":
        start, end, _ = fs[rng.randrange(1, len(fs) - 1)]
        pos = rng.randrange(start, end)
        data[pos] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        return start
    if kind == "dup_frame":
        i = rng.randrange(len(fs))
        start, end, _ = fs[i]
        path.write_bytes(bytes(data[:end] + data[start:end] + data[end:]))
        return end
    if kind == "drop_frame":
        start, end, _ = fs[rng.randrange(1, len(fs) - 1)]
        path.write_bytes(bytes(data[:start] + data[end:]))
        return start
    if kind == "swap_frames":
        i = rng.randrange(1, len(fs) - 2)
        (a, _, _), (b, c, _) = fs[i], fs[i + 1]
        path.write_bytes(bytes(data[:a] + data[b:c] + data[a:b] + data[c:]))
        return a
    raise ValueError(kind)


# records a repair must lose for each damage where no database can give them back (a node with only a copy of
# the log): a duplicate or two swapped frames cost nothing, a flipped or dropped frame the one record it held (a
# flipped last frame too: a whole frame whose checksum fails is damage, never an interrupted append cut quietly)
EXPECTED_LOST = {"flip_tail": 1, "flip_mid": 1, "dup_frame": 0, "drop_frame": 1, "swap_frames": 0}


def replica(home: Home, root: Path) -> Home:
    """A node with a copy of the damaged log and no database that applied anything of it."""
    dst = Home(root)
    dst.log_file.parent.mkdir(parents=True)
    shutil.copy2(home.config_file, dst.config_file)
    shutil.copy2(home.log_file, dst.log_file)
    return dst


def damage_round(kind: str, rng: random.Random, home: Home, scratch: Path) -> Round:
    r = Round(kind)
    fs = frames(home.log_file)
    acked = {op for _, _, op in fs}
    before = digest_of(home)
    first_bad = _damage(kind, rng, home.log_file)
    r.seen = f"damage at byte {first_bad}: {sum(1 for _, end, _ in fs if end > first_bad)} of {len(acked)} records past it"
    damaged_bytes = home.log_file.read_bytes()
    try:
        if kind in EXPECTED_LOST:
            # a node that applied none of it: the repair loses exactly the damaged records, keeps every other
            copy = replica(home, scratch / "replica")
            reports = [rep for rep in check_home(copy) if not rep.ok]
            result = repair_home(copy, reports)
            r.repair_lost, r.repair_expected = result.records_lost, EXPECTED_LOST[kind]
            kept = op_ids_in_db(copy)
            missing = acked - kept
            if len(missing) != r.repair_expected or r.repair_lost != r.repair_expected:
                r.notes.append(f"a copy of the log lost {r.repair_lost} record(s) in the repair ({len(missing)} "
                               f"acknowledged ones missing), expected {r.repair_expected}")
            if not write_works(copy):
                r.clean_reopen = False
                r.notes.append("the repaired copy refuses writes")
        r.said = damage_said(home, r)
        with Node.open(home) as node:
            kb = KnowledgeBase(node)
            try:
                kb.create_page("ENG", "Should Be Refused", "x")
                r.clean_reopen = False
                r.notes.append("a write went through on a damaged log")
            except LogDamage:
                pass
        if home.log_file.read_bytes() != damaged_bytes:
            r.half_applied += 1
            r.notes.append("a refused write changed the log")
        reports = check_home(home)
        if all(rep.ok for rep in reports):
            r.clean_reopen = False
            r.notes.append("check found nothing")
        result = repair_home(home, [rep for rep in reports if not rep.ok])
        r.given_back = sum(1 for rw in result.rewrites if rw.how != "lost")
        for _name, (aside, _n) in result.moved.items():
            if Path(aside).read_bytes() != damaged_bytes:
                r.clean_reopen = False
                r.notes.append("the damaged file was not kept whole")
        if not all(rep.ok for rep in check_home(home)):
            r.clean_reopen = False
            r.notes.append("still damaged after the repair")
        held = op_ids_in_db(home)
        # the home's own database applied every record: the repair gives each damaged one back, whole
        r.lost_acked = len(acked - held)
        r.digest_kept = digest_of(home) == before
        if not r.digest_kept:
            r.notes.append("the content after the repair differs from the content before: "
                           + "; ".join(rw.line() for rw in result.rewrites))
        r.clean_reopen = r.clean_reopen and write_works(home)
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"reopen failed: {exc!r}")
    return finish(r, home, scratch)


# what a person reads a home with; each must say the damage (one stderr line) and never "current"
SAID_READS = [["pages", "ENG"], ["page", "show", "ENG/Runbook 3"], ["search", "steps", "--mode", "keyword"],
              ["index", "status"], ["sync", "status"]]


def cli(home: Home, *args: str) -> Any:
    from typer.testing import CliRunner

    from crewlet_tui.cli import app

    return CliRunner().invoke(app, ["--home", str(home.root), *args], env={"CREWLET_HOME": None, "CREWLET_AS": None,
                                                                         "COLUMNS": "250"})


def damage_said(home: Home, r: Round) -> tuple[int, int]:
    """Every read command says the log is damaged past record N in one stderr line, never "current"; the worker
    exits 1 saying it; the --json answers carry it."""
    good = 0
    runs = [*SAID_READS, ["worker", "--once"], ["sync", "status", "--json"], ["index", "status", "--json"]]
    for args in runs:
        res = cli(home, *args)
        lines = [line for line in res.stderr.strip().splitlines() if line.strip()]
        fine = (res.exit_code == (1 if args[0] == "worker" else 0) and len(lines) == 1
                and "damaged" in lines[0] and "crewlet log check" in lines[0]
                and "up to date" not in res.stdout and " current" not in res.stdout)
        if fine and "--json" in args:
            fine = bool(json.loads(res.stdout).get("log_damage"))
        good += fine
        if not fine:
            r.notes.append(f"`crewlet {' '.join(args)}` over damage: exit {res.exit_code}, stderr {res.stderr.strip()[:200]!r}")
    return good, len(runs)


def fill(path: Path) -> None:
    """Write zeros until the disk refuses (unbuffered: a buffered file would raise again at close)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        chunk = b"\0" * 65536
        while True:
            try:
                if os.write(fd, chunk) <= 0:
                    break
            except OSError:
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]  # fill the last blocks too
    finally:
        os.close(fd)


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


def disk_full(rng: random.Random, template: Home, scratch: Path) -> Round:
    r = Round("disk_full")
    if not _can_mount():
        r.skipped = "needs root to mount a small tmpfs"
        return r
    mnt = scratch / "tmpfs"
    mnt.mkdir()
    used = sum(f.stat().st_size for f in template.root.rglob("*") if f.is_file())
    # room for the home to grow by its own size once the filler is gone: the disk is full because of the
    # filler, and freeing it must be enough for the pending records to apply
    size_kb = 2 * used // 1024 + 1024 + rng.randint(0, 1024)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        r.skipped = "mount -t tmpfs failed here"
        return r
    try:
        home = copy_home(template, mnt / "home")
        said_nothing_written: list[str] = []
        acked: list[tuple[str, int, str]] = []
        pending = 0
        with Node.open(home) as node:
            kb = KnowledgeBase(node)
            filler = mnt / "filler"
            fill(filler)  # then leave a random sliver
            os.truncate(filler, max(0, filler.stat().st_size - rng.choice((0, 4096, 16384, 65536, 262144))))
            for i in range(rng.randint(3, 12)):
                body = f"saved while the disk was full {i}\n" * rng.randint(1, 200)
                try:
                    page = kb.create_page("ENG", f"Full {i}", body)
                    acked.append((page.id, page.revision, page.body))
                except Exception as exc:  # noqa: BLE001
                    code = getattr(exc, "code", "")
                    if code == "not_applied":
                        pending += 1
                        continue  # on the log: must apply at the next open
                    if "nothing was written" in str(exc):
                        said_nothing_written.append(f"Full {i}")
                    elif code not in ("disk_full", "io", "read_only"):
                        r.notes.append(f"unexpected failure: {exc!r}")
        filler.unlink()
        r.seen = (f"{len(acked)} saved, {pending} on the log but not applied, {len(said_nothing_written)} refused "
                  "with nothing written")
        with Node.open(home) as node:
            titles = {row[0] for row in node.conn.execute("SELECT title FROM pages")}
            if node.apply_error or node.damage:
                r.clean_reopen = False
                r.notes.append(f"after space was freed: {node.apply_error or node.damage}")
        landed = [t for t in said_nothing_written if t in titles]
        if landed:
            r.half_applied += len(landed)
            r.notes.append(f"said nothing was written, then landed: {landed}")
        r.lost_acked = _lost(home, acked)
        r.clean_reopen = r.clean_reopen and write_works(home)
        finish(r, home, scratch)
        return r
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"failed: {exc!r}")
        return r
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def read_only(rng: random.Random, home: Home, scratch: Path) -> Round:
    r = Round("read_only")
    if not _can_mount():
        r.skipped = "needs root for a read-only bind mount"
        return r
    mnt = scratch / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "--bind", str(home.root), str(mnt)], capture_output=True).returncode != 0:
        r.skipped = "mount --bind failed here"
        return r
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(mnt)], capture_output=True).returncode != 0:
            r.skipped = "a read-only remount failed here"
            return r
        before = {p.relative_to(home.root): p.read_bytes() for p in home.root.rglob("*") if p.is_file()}
        reads = [["spaces", "--json"], ["pages", "ENG", "--json"], ["page", "show", "ENG/Runbook 3", "--json"],
                 ["page", "history", "ENG/Runbook 3", "--json"], ["search", "steps service", "--json"],
                 ["index", "status", "--json"], ["log", "check", "--json"]]
        for args in rng.sample(reads, 4):
            res = subprocess.run([*CREWLET, "--home", str(mnt), *args], env=ENV, capture_output=True, text=True)
            if res.returncode != 0:
                r.clean_reopen = False
                r.notes.append(f"`crewlet {' '.join(args)}` failed on a read-only home: {res.stderr.strip()}")
        res = subprocess.run([*CREWLET, "--home", str(mnt), "page", "create", "ENG", "Nope"], env=ENV,
                             capture_output=True, text=True)
        if res.returncode != 1 or "read-only" not in res.stderr:
            r.clean_reopen = False
            r.notes.append(f"a write on a read-only home: exit {res.returncode}: {res.stderr.strip()}")
        after = {p.relative_to(home.root): p.read_bytes() for p in home.root.rglob("*") if p.is_file()}
        if before != after:
            r.half_applied += 1
            r.notes.append("a read-only home changed")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    return finish(r, home, scratch)


FULL_READS = [["pages", "ENG"], ["page", "show", "ENG/Runbook 3"], ["page", "history", "ENG/Runbook 3"],
              ["search", "steps", "service", "--mode", "keyword"], ["log", "check"], ["spaces"], ["index", "status"],
              ["sync", "status"], ["worker", "--status"]]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def full_read(rng: random.Random, template: Home, scratch: Path) -> Round:
    """The home on a tmpfs with at most 8 KiB left: every read works and writes nothing; a save too big for what
    is left is refused, and its rescue is whole in rescued/ or absent with the text printed."""
    r = Round("full_read")
    if not _can_mount():
        r.skipped = "needs root to mount a small tmpfs"
        return r
    mnt = scratch / "tmpfs"
    mnt.mkdir()
    used = sum(f.stat().st_size for f in template.root.rglob("*") if f.is_file())
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={2 * used // 1024 + 2048}k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        r.skipped = "mount -t tmpfs failed here"
        return r
    try:
        home = copy_home(template, mnt / "home")
        filler = mnt / "filler"
        fill(filler)
        left = rng.choice((0, 4096, 8192))
        if left:
            os.truncate(filler, filler.stat().st_size - left)
        reads = rng.sample(FULL_READS, 5)
        before = _files(home.root)
        good = 0
        for args in reads:
            res = cli(home, *args)
            ok = res.exit_code == 0 and _files(home.root) == before
            good += ok
            if not ok:
                r.notes.append(f"`crewlet {' '.join(args)}` on a full disk: exit {res.exit_code} {res.stderr.strip()[:160]!r}")
        r.full_reads = (good, len(reads))
        # a save: refused (no room for its record); its text whole in rescued/, or nowhere and printed
        os.truncate(filler, filler.stat().st_size - rng.choice((0, 65536, 524288)))
        # at most ~1 MB: under the default [limits] page_body_bytes (1 MiB), so the disk refuses it, not the bound
        body = "".join(f"line {i} of what was typed\n" for i in range(rng.randint(2_000, 36_000)))
        text = scratch / "body.md"
        text.write_text(body, encoding="utf-8")
        res = cli(home, "page", "save", "ENG/Runbook 3", "--body-file", str(text), "--base-rev", "1", "--json")
        kept = [p for p in home.rescue_dir.rglob("*") if p.is_file()] if home.rescue_dir.exists() else []
        answer = json.loads(res.stdout.splitlines()[0]) if res.stdout.strip() else {}
        if res.exit_code == 0:
            r.rescue_whole = not kept        # it fitted after all: saved, nothing to rescue
        elif kept:
            r.rescue_whole = len(kept) == 1 and kept[0].read_text(encoding="utf-8") == body and str(kept[0]) in res.stderr
        else:
            r.rescue_whole = bool(answer.get("kept_nowhere")) and answer.get("your_body") == body
        r.seen = f"{left} bytes left for reads; the save {'landed' if res.exit_code == 0 else 'was refused'}, " \
                 f"{len(kept)} rescue file(s)"
        if not r.rescue_whole:
            r.notes.append(f"a refused save's rescue: {len(kept)} file(s), answer {str(answer)[:160]}")
        filler.unlink()
        return finish(r, home, scratch)
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"failed: {exc!r}")
        return r
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


HOLDER = """
import sys
from core.log import FileLog
with FileLog(sys.argv[1]) as flog, flog.locked():
    print("held", flush=True)
    sys.stdin.readline()
"""


def slow_save(rng: random.Random, home: Home, scratch: Path) -> Round:
    """A save waiting for the log's lock (another process holds it) while help covers the editor — or after the
    editor was left: the answer lands, the app lives, and Escape pops what it should."""
    r = Round("slow_save")
    covered = rng.random() < 0.5
    try:
        r.app_alive = asyncio_run(_slow_save_in_app(home, covered, r))
        r.seen = "help covered the editor" if covered else "the editor was left while the save waited"
    except Exception as exc:  # noqa: BLE001
        r.app_alive = False
        r.notes.append(f"the app: {exc!r}")
    return finish(r, home, scratch)


def asyncio_run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


async def _slow_save_in_app(home: Home, covered: bool, r: Round) -> bool:
    sys.path.insert(0, str(ROOT / "tests"))
    from test_app_support import SIZE, app_for, open_editor, open_kb, wait_screen, wait_until

    with open_kb(home) as kb:
        page = kb.resolve("ENG/Runbook 3")
    app = app_for(home, "alex")
    holder = subprocess.Popen([PY, "-c", HOLDER, str(home.log_file)], env=ENV, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        async with app.run_test(size=SIZE) as pilot:
            editing = await open_editor(pilot, app, page.id)
            editing.editor.text = "saved while another process held the lock\n"
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: app.screen.id == "save-note", what="the note prompt")
            await pilot.press("enter")
            await wait_until(pilot, lambda: editing.saving, what="the save to start")
            if covered:
                await pilot.press("f1")
                await wait_screen(pilot, "HelpScreen")
            else:
                await pilot.press("escape")
                await wait_until(pilot, lambda: app.screen.id == "leave-unsaved", what="the confirm")
                await pilot.press("y")
                await wait_screen(pilot, "PageScreen")
            holder.stdin.write("\n")   # type: ignore[union-attr]
            holder.stdin.flush()        # type: ignore[union-attr]
            await wait_until(pilot, lambda: _revision(home, page.id) == page.revision + 1, timeout=60,
                             what="the save to land")
            if covered:
                await wait_until(pilot, lambda: not editing.saving, what="the answer")
                await pilot.press("escape")            # help closes; the saved editor gives way to the page
                await wait_screen(pilot, "PageScreen")
            else:
                await wait_until(pilot, lambda: any("saved revision" in n.message for n in app._notifications),
                                 what="the late answer to be said")
            await pilot.press("escape")
            await wait_screen(pilot, "SpacesScreen")
        return app.return_code in (None, 0)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(30)


def _revision(home: Home, page_id: str) -> int:
    with Node.open(home, sync_containers=False, catch_up=False) as node:
        row = node.conn.execute("SELECT revision FROM pages WHERE id = ?", (page_id,)).fetchone()
        return int(row[0]) if row else 0


RAW = __import__("re").compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_endpoint(rng: random.Random, home: Home, scratch: Path) -> Round:
    """An embedding endpoint answering errors full of terminal escapes: `crewlet worker --once` (stderr a pipe,
    not a terminal) prints nothing raw."""
    r = Round("hostile_endpoint")
    sys.path.insert(0, str(ROOT / "tests"))
    from embed_server import EmbedServer

    import tomllib

    with EmbedServer(dimensions=16) as server:
        data = tomllib.loads(home.config_file.read_text(encoding="utf-8"))
        data.setdefault("knowledge", {})["vectors"] = True
        data["providers"] = {"embeddings": {"provider": "openai", "base_url": server.url, "model": "test-embed",
                                            "dimensions": 16}}
        config_mod.write(home.config_file, data)
        server.mode = rng.choice(["hostile_error", "hostile_error", "status:500"])
        res = subprocess.run([*CREWLET, "--home", str(home.root), "worker", "--once"], env=ENV, capture_output=True,
                             text=True, timeout=300)
    raw = RAW.findall(res.stdout + res.stderr)
    r.inert = not raw
    r.seen = f"endpoint {server.mode}: worker exit {res.returncode}"
    if raw:
        r.notes.append(f"raw control characters reached the output: {[hex(ord(c)) for c in raw][:8]}")
    return finish(r, home, scratch)


def divergence(rng: random.Random, home: Home, scratch: Path) -> Round:
    """Two nodes sharing the log; one's rows changed behind the log's back: `sync status` names it; a snapshot
    changed after it was taken is refused on adopt."""
    r = Round("divergence")
    shared = scratch / "shared"
    try:
        a, b = home, Home(scratch / "B")
        for args, root in ((["sync", "join", str(shared)], a), (["sync", "join", str(shared), "--operator", "sam"], b)):
            res = cli(root, *args)
            if res.exit_code != 0:
                raise RuntimeError(f"sync join: {res.stderr.strip()}")
        a = Home(a.root)
        with Node.open(a) as node:
            KnowledgeBase(node).create_page("ENG", "Both Nodes", "the same text everywhere\n")
        cli(b, "spaces")
        cli(a, "sync", "status")
        import sqlite3 as plain

        conn = plain.connect(b.db_file)
        table = rng.choice(["pages", "revisions", "comments"])
        column = {"pages": "body", "revisions": "title", "comments": "body"}[table]
        conn.execute(f"UPDATE {table} SET {column} = {column} || ' (changed by hand)' "
                     f"WHERE rowid = (SELECT rowid FROM {table} ORDER BY random() LIMIT 1)")
        conn.commit()
        conn.close()
        cli(b, "sync", "status")
        out = json.loads(cli(a, "sync", "status", "--json").stdout)
        named = {node_id for d in out.get("digests_disagree", []) for node_id in d["digests"]}
        b_id = config_mod.load_node(b.node_file).node_id
        snap = scratch / "snap.db"
        cli(a, "sync", "snapshot", str(snap))
        conn = plain.connect(snap)
        conn.execute("UPDATE pages SET body = body || ' (forged)' WHERE rowid = (SELECT min(rowid) FROM pages)")
        conn.commit()
        conn.close()
        adopt = cli(b, "sync", "adopt", str(snap), "--yes")
        r.divergence_named = b_id in named and adopt.exit_code == 1
        r.seen = f"{table} changed on B: named {sorted(named)}; forged snapshot adopt exit {adopt.exit_code}"
        if not r.divergence_named:
            r.notes.append(f"divergence: named {sorted(named)} (B is {b_id}); adopt {adopt.exit_code} {adopt.stderr.strip()[:120]!r}")
        return finish(r, a, scratch)
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.divergence_named = False
        r.notes.append(f"failed: {exc!r}")
        return r




def _node_local(home: Home) -> dict[str, list[tuple]]:
    from core.store import connect
    from core.sync.snapshot import carried_tables

    conn = connect(home.db_file, readonly=True)
    try:
        out = {t: rows(conn, t) for t in carried_tables()}
        out["diary counts"] = rows(conn, "agent_diary_versions")
        out["diary counts"] = [(agent, notes) for agent, _version, notes in out["diary counts"] if notes]
        return out
    finally:
        conn.close()


def kill_adopt(rng: random.Random, home: Home, scratch: Path) -> Round:
    """A node whose agents keep diaries (and which holds an embedding hold and a cached answer: rows on no log)
    adopts a snapshot of itself; the adoption is killed before a random step of the swap."""
    from core.agents.diary import Diary
    from core.store.replace import note_path

    r = Round("kill_adopt")
    try:
        with Node.open(home) as node:
            for i in range(rng.randint(1, 5)):
                Diary(node).remember(f"eng-bot keeps fact {i} of round {uuid.uuid4().hex[:6]}", actor="eng-bot")
            node.conn.execute("INSERT INTO embed_holds VALUES ('p1', 1, 'fp', 1, 2, 10, 'refused by the provider')")
            node.conn.execute("INSERT INTO answer_cache VALUES ('k1', 1, 0, '{}', 1, 1)")
        snap = scratch / "snap.db"
        if cli(home, "sync", "snapshot", str(snap)).exit_code != 0:
            raise RuntimeError("no snapshot")
        with Node.open(home) as node:   # the database moves past the snapshot: the adoption replays the rest
            KnowledgeBase(node).create_page("ENG", "After The Snapshot", "written after it\n")
        before, pages = _node_local(home), pages_in_db(home)
        kill_at = rng.randint(1, 19)
        p = subprocess.run([PY, "-c", KILLING_IN, str(kill_at), "core.sync.snapshot:install", "--home", str(home.root),
                            "sync", "adopt", str(snap), "--yes"], env=ENV, capture_output=True, text=True, timeout=120)
        killed = p.returncode == -signal.SIGKILL
        r.seen = f"killed at step {kill_at}" if killed else f"not killed ({p.stderr.strip().splitlines()[-1:]})"
        if not killed and p.returncode != 0:
            r.notes.append(f"adopt failed: {p.stderr.strip()[-200:]!r}")
        shown = cli(home, "pages", "ENG")      # the next command finishes the swap, or finds it never began
        if shown.exit_code != 0:
            r.clean_reopen = False
            r.notes.append(f"the next command after the kill: {shown.stderr.strip()[:200]!r}")
        after = _node_local(home)
        r.node_local_kept = after == before and not note_path(home.db_file).exists()
        if not r.node_local_kept:
            r.notes.append(f"node-local rows after the kill: {[t for t in before if before[t] != after.get(t)]} differ")
        again = cli(home, "sync", "adopt", str(snap), "--yes")
        if again.exit_code != 0 or _node_local(home) != before:
            r.node_local_kept = False
            r.notes.append(f"adopting again: exit {again.exit_code} {again.stderr.strip()[:160]!r}")
        now = pages_in_db(home)
        r.lost_acked = sum(1 for k, v in pages.items() if now.get(k) != v)
        r.clean_reopen = r.clean_reopen and write_works(home)
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.node_local_kept = False
        r.notes.append(f"failed: {exc!r}")
    return finish(r, home, scratch)


# `crewlet ARGV` SIGKILLed before the Nth file operation (rename, unlink, fsync, copy, tree removal) made inside
# TARGET (module:function), or just after it returns (N past the last: never killed; "steps N" on stderr then):
# `sync adopt` killed while the snapshot is installed (core.sync.snapshot:install), `sync join` inside its steps
KILLING_IN = textwrap.dedent("""
    import importlib, os, shutil, signal, sys
    kill_at, target, *argv = sys.argv[1:]
    kill_at = int(kill_at)
    from crewlet_tui.cli import main
    module_name, attr = target.split(":")
    module = importlib.import_module(module_name)
    seen, inside = [0], [False]

    def step():
        if inside[0]:
            seen[0] += 1
            if seen[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

    def counted(fn):
        def run(*args, **kwargs):
            step()
            return fn(*args, **kwargs)
        return run

    for name in ("replace", "rename", "unlink", "fsync", "link"):
        setattr(os, name, counted(getattr(os, name)))
    shutil.rmtree, shutil.copyfile = counted(shutil.rmtree), counted(shutil.copyfile)
    inner = getattr(module, attr)

    def counting(*args, **kwargs):
        inside[0] = True
        try:
            return inner(*args, **kwargs)
        finally:
            step()
            inside[0] = False

    setattr(module, attr, counting)
    sys.argv = ["crewlet", *argv]
    try:
        main()
    finally:
        print("steps", seen[0], file=sys.stderr)
""")


def kill_join(rng: random.Random, home: Home, scratch: Path) -> Round:
    """`sync join DIR` killed before a random step: the template home (its agents keeping diaries, a hold and a
    cached answer of its own) becoming the first node of an empty directory, or a fresh home with diaries joining
    the directory that home made. The next command must find every page and node-local row (diaries, for the
    home whose database the join starts over), and a second join must go through."""
    from core.agents.diary import Diary

    r = Round("kill_join")
    shared = scratch / "shared"
    try:
        if rng.random() < 0.5:
            case, target, joiner = "first", "core.sync.join:_first", home
        else:
            case, target = "joined", "core.sync.join:_join_existing"
            if cli(home, "sync", "join", str(shared)).exit_code != 0:
                raise RuntimeError("the template home did not join")
            data = config_mod.example_config()
            data["knowledge"]["vectors"] = False
            joiner = Home(scratch / "fresh")
            init_home(joiner, data)
        with Node.open(joiner) as node:
            for i in range(rng.randint(1, 5)):
                Diary(node).remember(f"eng-bot keeps fact {i} of round {uuid.uuid4().hex[:6]}", actor="eng-bot")
            node.conn.execute("INSERT INTO embed_holds VALUES ('p1', 1, 'fp', 1, 2, 10, 'refused by the provider')")
            node.conn.execute("INSERT INTO answer_cache VALUES ('k1', 1, 0, '{}', 1, 1)")
        before = _node_local(joiner)
        pages = pages_in_db(home)       # every page the company holds: the first node's, or the directory's
        # the rows a join keeps: all of them as the first node; the diaries when the database starts over
        kept = list(before) if case == "first" else ["agent_diary", "diary counts"]
        kill_at = rng.randint(1, 30)
        p = subprocess.run([PY, "-c", KILLING_IN, str(kill_at), target, "--home", str(joiner.root), "sync", "join",
                            str(shared)], env=ENV, capture_output=True, text=True, timeout=180)
        killed = p.returncode == -signal.SIGKILL
        r.seen = f"{case}: killed at step {kill_at}" if killed else f"{case}: not killed"
        if not killed and p.returncode != 0:
            r.notes.append(f"join failed: {p.stderr.strip()[-200:]!r}")
        shown = cli(joiner, "pages", "ENG")   # the next command finishes the join, or finds it never begun
        if shown.exit_code != 0:
            r.clean_reopen = False
            r.notes.append(f"the next command after the kill: {shown.stderr.strip()[:200]!r}")
        after = _node_local(joiner)
        unfinished = Home(joiner.root).join_note.exists()
        r.node_local_kept = all(after.get(t) == before[t] for t in (before if Home(joiner.root).shared is None else kept))
        if not r.node_local_kept or unfinished:
            r.node_local_kept = False
            r.notes.append(f"after the kill: node-local rows {[t for t in before if before[t] != after.get(t)]} differ"
                           + ("; the join is still written down" if unfinished else ""))
        again = cli(joiner, "sync", "join", str(shared))
        if again.exit_code != 0:
            r.clean_reopen = False
            r.notes.append(f"joining again: exit {again.exit_code} {again.stderr.strip()[:160]!r}")
        joiner = Home(joiner.root)
        after = _node_local(joiner)
        if any(after.get(t) != before[t] for t in kept):
            r.node_local_kept = False
            r.notes.append(f"after joining again: {[t for t in kept if before[t] != after.get(t)]} differ")
        now = pages_in_db(joiner)
        r.lost_acked = sum(1 for k, v in pages.items() if now.get(k) != v)
        r.clean_reopen = r.clean_reopen and write_works(joiner)
        home = joiner
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.node_local_kept = False
        r.notes.append(f"failed: {exc!r}")
    return finish(r, home, scratch)


def forged_snapshot(rng: random.Random, home: Home, scratch: Path) -> Round:
    """A snapshot of a home with no peers: one body edited by hand and the digest it says it was taken as
    recomputed. Adopted over the database it was taken from (at the same position, holding the true content),
    it must be refused."""
    import sqlite3 as plain

    from core.store import connect

    r = Round("forged_snapshot")
    snap = scratch / "snap.db"
    try:
        if cli(home, "sync", "snapshot", str(snap)).exit_code != 0:
            raise RuntimeError("no snapshot")
        conn = plain.connect(snap)
        table = rng.choice(["pages", "revisions", "comments"])
        column = {"pages": "body", "revisions": "title", "comments": "body"}[table]
        conn.execute(f"UPDATE {table} SET {column} = {column} || ' (forged)' "
                     f"WHERE rowid = (SELECT rowid FROM {table} ORDER BY random() LIMIT 1)")
        conn.commit()
        conn.close()
        c = connect(snap, migrate_schema=False)
        try:
            c.execute("UPDATE crewlet_snapshot SET value = ? WHERE key = 'content_digest'", (content_digest(c).content,))
        finally:
            c.close()
        before = home.db_file.read_bytes()
        res = cli(home, "sync", "adopt", str(snap), "--yes")
        lines = res.stderr.strip().splitlines()
        r.forged_refused = res.exit_code == 1 and len(lines) == 1 and home.db_file.read_bytes() == before
        r.seen = f"{table} forged: adopt exit {res.exit_code}"
        if not r.forged_refused:
            r.notes.append(f"forged snapshot: adopt exit {res.exit_code} {res.stderr.strip()[:160]!r}")
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.forged_refused = False
        r.notes.append(f"failed: {exc!r}")
    return finish(r, home, scratch)


def _crewlet(root: Path, *args: str) -> tuple[int, str, str]:
    p = subprocess.run([*CREWLET, "--home", str(root), *args], env=ENV, capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout, p.stderr


def quorum_loss(rng: random.Random, home: Home, scratch: Path) -> Round:
    """A company on a three-server JetStream cluster; two servers stop while two nodes create, save and show
    pages, then start again. Every answer is one line or none (no traceback, nothing called damaged), a read
    answers from the database, and every create that exited 0 is on both nodes after."""
    sys.path.insert(0, str(ROOT / "tests"))
    from nats_server import NatsCluster, binary

    r = Round("quorum_loss")
    if binary() is None:
        r.skipped = "no nats-server binary (the test extra installs one)"
        return r
    r.replay_equal = True   # a stream is not replayed into a file here
    runs: list[tuple[str, int, str, str]] = []
    acked: list[str] = []
    b = scratch / "B"
    body = scratch / "body.md"
    body.write_text("edited while the cluster had no quorum\n", encoding="utf-8")

    def step(root: Path, phase: str, *args: str) -> int:
        rc, out, err = _crewlet(root, *args)
        runs.append((f"{root.name} {phase} {' '.join(args[:2])}", rc, out, err))
        if args[:2] == ("page", "create") and rc == 0:
            acked.append(args[3])
        return rc

    try:
        with NatsCluster(scratch / "nats", size=3) as cluster:
            for root, args in ((home.root, ("sync", "join", cluster.url, "--replicas", "3")),
                               (b, ("sync", "join", cluster.url, "--operator", "sam"))):
                rc, _, err = _crewlet(root, *args)
                if rc != 0:
                    raise RuntimeError(f"sync join: {err.strip()[:200]}")
            down = rng.sample([0, 1, 2], 2)
            for i in down:
                cluster.servers[i].stop()
            for k in range(rng.randint(1, 3)):
                for root in (home.root, b):
                    step(root, "down", "page", "create", "ENG", f"{root.name} down {k}")
                    step(root, "down", "page", "save", "ENG/Runbook 3", "--body-file", str(body), "--base-rev", "1")
                    if step(root, "down", "page", "show", "ENG/Runbook 3") != 0 and root == home.root:
                        r.notes.append("a read during the outage failed")
            for i in down:
                cluster.servers[i].start(wait=False)
            deadline = time.monotonic() + 120
            for root in (home.root, b):
                k = 0
                while step(root, "back", "page", "create", "ENG", f"{root.name} back {k}") != 0:
                    k += 1
                    if time.monotonic() > deadline:
                        raise RuntimeError("no write went through after the servers came back")
            quiet = 0
            for what, rc, out, err in runs:
                lines = err.strip().splitlines()
                fine = ("Traceback" not in err and "damaged" not in err + out and rc in (0, 1)
                        and (len(lines) <= 1 if rc == 0 else len(lines) == 1))
                quiet += fine
                if not fine:
                    r.notes.append(f"{what}: exit {rc} {err.strip()[-200:]!r}")
            r.one_line = (quiet, len(runs))
            for root in (home.root, b):
                missing = [t for t in acked if _crewlet(root, "page", "show", f"ENG/{t}")[0] != 0]
                r.lost_acked += len(missing)
                if missing:
                    r.notes.append(f"{root.name} lacks acknowledged {missing}")
            r.seen = f"servers {down} stopped; {len(runs)} commands, {len(acked)} creates acknowledged"
    except Exception as exc:  # noqa: BLE001
        r.clean_reopen = False
        r.notes.append(f"failed: {exc!r}")
    return r


def run_round(kind: str, rng: random.Random, template: Home, work: Path, docs: Path) -> Round:
    scratch = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=work))
    try:
        if kind == "disk_full":
            return disk_full(rng, template, scratch)
        home = copy_home(template, scratch / "home")
        if kind == "kill_import":
            return kill_import(rng, home, scratch, docs)
        if kind == "kill_save":
            return kill_save(rng, home, scratch)
        if kind == "kill_worker":
            return kill_worker(rng, home, scratch, docs)
        if kind == "torn_tail":
            return torn_tail(rng, home, scratch)
        if kind in DAMAGE_KINDS:
            return damage_round(kind, rng, home, scratch)
        if kind == "read_only":
            return read_only(rng, home, scratch)
        if kind == "full_read":
            shutil.rmtree(home.root)
            return full_read(rng, template, scratch)
        if kind == "slow_save":
            return slow_save(rng, home, scratch)
        if kind == "hostile_endpoint":
            return hostile_endpoint(rng, home, scratch)
        if kind == "divergence":
            return divergence(rng, home, scratch)
        if kind == "kill_adopt":
            return kill_adopt(rng, home, scratch)
        if kind == "kill_join":
            return kill_join(rng, home, scratch)
        if kind == "forged_snapshot":
            return forged_snapshot(rng, home, scratch)
        if kind == "quorum_loss":
            return quorum_loss(rng, home, scratch)
        raise ValueError(f"no fault '{kind}': one of {', '.join(KINDS)}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(rounds: int, kinds: list[str], seed: int, work: Path,
        on_round: Callable[[int, Round], None] | None = None, docs_n: int = 2000) -> list[Round]:
    rng = random.Random(seed)
    template = make_template(work / "template")
    docs = make_docs(work / "docs", docs_n)
    results = []
    for i in range(rounds):
        r = run_round(kinds[i % len(kinds)], rng, template, work, docs)
        results.append(r)
        if on_round:
            on_round(i, r)
    return results


COLUMNS = [  # (heading, what a round holds of it): "–" where a fault does not exercise it
    ("clean reopen", lambda rs: f"{sum(r.clean_reopen for r in rs)}/{len(rs)}"),
    ("lost acked", lambda rs: f"{sum(r.lost_acked for r in rs)}"),
    ("half-applied", lambda rs: f"{sum(r.half_applied for r in rs)}"),
    ("replay = live", lambda rs: f"{sum(r.replay_equal for r in rs)}/{len(rs)}"),
    ("repair lost/damaged", lambda rs: _pair([(r.repair_lost, r.repair_expected) for r in rs
                                              if r.repair_expected is not None])),
    ("given back", lambda rs: f"{sum(r.given_back for r in rs)}" if any(r.given_back for r in rs) else "–"),
    ("digest kept", lambda rs: _flags([r.digest_kept for r in rs])),
    ("damage said", lambda rs: _pair([r.said for r in rs if r.said is not None])),
    ("lease free", lambda rs: _flags([r.lease_free for r in rs])),
    ("app alive", lambda rs: _flags([r.app_alive for r in rs])),
    ("full-disk reads", lambda rs: _pair([r.full_reads for r in rs if r.full_reads is not None])),
    ("rescue whole", lambda rs: _flags([r.rescue_whole for r in rs])),
    ("output inert", lambda rs: _flags([r.inert for r in rs])),
    ("divergence named", lambda rs: _flags([r.divergence_named for r in rs])),
    ("node-local kept", lambda rs: _flags([r.node_local_kept for r in rs])),
    ("forged refused", lambda rs: _flags([r.forged_refused for r in rs])),
    ("one line, no false damage", lambda rs: _pair([r.one_line for r in rs if r.one_line is not None])),
]


def _pair(pairs: list[Any]) -> str:
    """"lost/expected" (or "good/run") summed over the rounds that measured it."""
    if not pairs:
        return "–"
    return f"{sum(a or 0 for a, _ in pairs)}/{sum(b or 0 for _, b in pairs)}"


def _flags(values: list[bool | None]) -> str:
    seen = [v for v in values if v is not None]
    return f"{sum(seen)}/{len(seen)}" if seen else "–"


def table(results: list[Round]) -> str:
    by: dict[str, list[Round]] = {}
    for r in results:
        by.setdefault(r.kind, []).append(r)
    width = [max(len(h), 7) for h, _ in COLUMNS]
    lines = [f"{'fault':<16} {'rounds':>6} {'perfect':>8} " + " ".join(f"{h:>{w}}" for (h, _), w in zip(COLUMNS, width))]
    total = [r for r in results if not r.skipped]
    for kind, rs in [*by.items(), ("all", total)]:
        run_ = [r for r in rs if not r.skipped]
        if not run_:
            lines.append(f"{kind:<16} {'skipped: ' + (rs[0].skipped or '')}")
            continue
        cells = " ".join(f"{fn(run_):>{w}}" for (_, fn), w in zip(COLUMNS, width))
        lines.append(f"{kind:<16} {len(run_):>6} {sum(r.perfect for r in run_):>4}/{len(run_):<3} {cells}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated fault kinds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("-v", "--verbose", action="store_true", help="say what each fault did")
    args = ap.parse_args()
    logging.getLogger("core.log.filelog").setLevel(logging.ERROR)  # the torn tails it cuts are the point
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="crewlet-faults-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    def show(i: int, r: Round) -> None:
        mark = "skip" if r.skipped else ("ok" if r.perfect else "FAIL")
        said = "; ".join(r.notes + ([r.seen] if args.verbose and r.seen else []) + ([r.skipped] if r.skipped else []))
        print(f"[{i + 1:>4}/{args.rounds}] {r.kind:<16} {mark}" + (f"  {said}" if said else ""),
              file=sys.stderr, flush=True)

    try:
        results = run(args.rounds, kinds, args.seed, work, on_round=show)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"crewlet fault rounds: {args.rounds}, seed {args.seed}, {time.perf_counter() - started:.0f}s, "
          f"load {os.getloadavg()[0]:.2f}")
    print(table(results))


if __name__ == "__main__":
    main()
