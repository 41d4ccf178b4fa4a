"""The import at scale (issue 27): a plan kept on disk, so memory does not grow with the tree; every
problem still named before a byte is written; the database written once, not through its WAL, while the
importer has it to itself (and safely when it does not); bulk ids in ascending runs; `--json` streamed."""
from __future__ import annotations

import io
import itertools
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from conftest import count

from core.importer import ImportProblems, import_directory
from core.importer.model import ImportNote
from core.importer.plan import Planner
from core.importer.store import SPILL_KEEP, PlanStore, Spill
from core.node import Node
from core.pages.records import new_ids
from core.pages.service import KnowledgeBase
from core.store import bulk_writes, connect


def synthetic_tree(root: Path, n: int, *, note_every: int = 0) -> Path:
    """n small files in directories of 100, three levels deep; every `note_every`-th one's frontmatter
    title differs from its H1 (a note)."""
    for i in range(n):
        path = root / f"part-{i // 10_000}" / f"dir-{(i // 100) % 100:02d}" / f"page-{i:06d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        if note_every and i % note_every == 0:
            path.write_text(f"---\ntitle: Page {i}\n---\n# Heading {i}\n\nbody {i}\n", encoding="utf-8")
        else:
            path.write_text(f"# Page {i}\n\nbody of page {i} " + "words " * 20 + "\n", encoding="utf-8")
    return root


def plan_peak(kb: KnowledgeBase, root: Path) -> tuple[int, Any]:
    """The Python heap's peak while a whole plan is made (tracemalloc), and the report."""
    who = kb.reader("alex")
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        planner = Planner(kb, root, who, into="DOCS", declare_spaces=True)
        report = planner.plan()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, report


def test_a_plans_memory_does_not_grow_with_the_tree(kb: KnowledgeBase, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Four times the files, every one a note: the heap's peak stays where it was (the old plan held every
    file's title, path, body and page: ~1 KB a file and its body). What the plan holds is bounded: caches
    (titles' addresses: 65,536; folders and lookups: 4,096 each), the rows a pass reads at once (2,000) or
    holds back to write (1,000), the notes kept in memory (1,000); made small here, so that a tree of
    thousands is past every bound and anything else that grew would show."""
    from functools import lru_cache

    from core.importer import docs, plan, store
    from core.pages.model import normalise_title

    small_cache = lru_cache(maxsize=64)(normalise_title)
    monkeypatch.setattr(docs, "_address", small_cache)
    monkeypatch.setattr(plan, "_address", small_cache)
    for module, name in ((plan, "_CACHE"), (store, "FETCH_ROWS"), (store, "LATER_ROWS"), (store, "SPILL_KEEP")):
        monkeypatch.setattr(module, name, 64)
    small = synthetic_tree(tmp_path / "small", 1500, note_every=1)
    large = synthetic_tree(tmp_path / "large", 6000, note_every=1)
    peak_small, report_small = plan_peak(kb, small)
    peak_large, report_large = plan_peak(kb, large)
    try:
        assert report_small.count("create") > 1500 and report_large.count("create") > 6000
        assert len(report_large.notes) == 6000 and report_large.notes.spilled == 6000 - 64
        growth = peak_large - peak_small
        # 4,500 more files: a plan that kept twenty bytes a file would grow by 90 KB
        assert growth < 60_000, f"the plan's heap grew {growth:,} bytes for 4,500 more files"
    finally:
        report_small.close()
        report_large.close()


def test_the_plan_lives_in_the_homes_tmp_and_is_removed(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = synthetic_tree(tmp_path / "docs", 50)
    report = import_directory(kb, root, actor="alex", into="DOCS", declare_spaces=True, dry_run=True)
    plan_file = report.plan.path
    assert plan_file.parent == kb.node.home.root / "tmp" and plan_file.exists()
    assert len(report.pages) == report.created == 50 + 2           # the files, and the folders part-0/, dir-00/
    report.close()
    assert not plan_file.exists()


def test_a_plan_left_by_a_killed_import_is_removed_by_the_next(kb: KnowledgeBase, tmp_path: Path) -> None:
    tmp = kb.node.home.root / "tmp"
    tmp.mkdir(exist_ok=True)
    dead = 2 ** 22 + 12345                      # above pid_max's default: no such process
    left = tmp / f"import-plan-{dead}-abc123.db"
    left.write_bytes(b"x" * 100)
    ours = PlanStore(kb.node.home.root)
    try:
        assert not left.exists()
    finally:
        ours.close()


def test_problems_past_the_first_thousand_are_all_listed(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    for i in range(SPILL_KEEP + 300):
        (root / "ENG").mkdir(parents=True, exist_ok=True)
        (root / "ENG" / f"p{i:05d}.md").write_text("no title here\n", encoding="utf-8")
    before = kb.node.log.last_seq()
    with pytest.raises(ImportProblems) as exc:
        import_directory(kb, root, actor="alex")
    problems = list(exc.value.problems)
    assert len(problems) == SPILL_KEEP + 300 and {p.code for p in problems} == {"no_title"}
    assert sorted(p.files[0] for p in problems) == sorted(f"ENG/p{i:05d}.md" for i in range(SPILL_KEEP + 300))
    assert kb.node.log.last_seq() == before
    exc.value.report.close()
    assert len(list(exc.value.problems)) == SPILL_KEEP + 300      # read before the file went


def test_spill_reads_as_the_list_it_stands_for(kb: KnowledgeBase) -> None:
    store = PlanStore(kb.node.home.root)
    try:
        notes: Spill[ImportNote] = Spill("notes", lambda d: ImportNote(**d), lambda n: n.to_json(), keep=3)
        notes.store = store
        made = [ImportNote("c", f"m{i}", [f"f{i}"]) for i in range(7)]
        notes.extend(made)
        assert len(notes) == 7 and notes.spilled == 4 and list(notes) == made and notes == made
        assert notes[5] == made[5] and bool(notes) and Spill("x", dict, dict) == []
    finally:
        store.close()


def test_a_file_changed_after_the_plan_is_a_failure_not_a_page_nobody_planned(kb: KnowledgeBase,
                                                                             tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "ENG").mkdir(parents=True)
    (root / "ENG" / "a.md").write_text("# A\n\nplanned\n", encoding="utf-8")
    (root / "ENG" / "b.md").write_text("# B\n\nplanned\n", encoding="utf-8")

    def edit(done: int, total: int) -> None:
        if done == 0:                              # after the plan, before the first batch
            (root / "ENG" / "b.md").write_text("# B\n\nedited behind its back\n", encoding="utf-8")

    report = import_directory(kb, root, actor="alex", progress=edit)
    assert report.created == 1 and [(f.file, f.code) for f in report.failures] == [("ENG/b.md", "changed")]
    assert kb.resolve("ENG/A").body == "planned\n" and kb.list_pages("ENG").total == 1
    again = import_directory(kb, root, actor="alex")                 # run again: it is published as it is now
    assert again.created == 1 and kb.resolve("ENG/B").body == "edited behind its back\n"


def test_json_is_streamed_and_reads_as_to_json(kb: KnowledgeBase, tmp_path: Path) -> None:
    root = synthetic_tree(tmp_path / "docs", 30, note_every=7)
    report = import_directory(kb, root, actor="alex", into="DOCS", declare_spaces=True)
    out = io.StringIO()
    report.write_json(out)
    assert json.loads(out.getvalue()) == report.to_json()
    assert len(report.to_json()["creates"]) == report.created and report.to_json()["notes"]
    report.close()


def test_bulk_ids_come_in_ascending_runs() -> None:
    ids = list(itertools.islice(new_ids(), 5000))
    assert ids == sorted(ids) and len(set(ids)) == 5000
    assert all(len(i) == 16 and i[12] == "4" for i in ids)


# -- the database written once ------------------------------------------------------------------------

def test_bulk_writes_leave_the_wal_only_while_alone(node: Node) -> None:
    conn = node.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with bulk_writes(conn) as switched:
        assert switched and conn.execute("PRAGMA journal_mode").fetchone()[0] == "truncate"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other = connect(node.home.db_file)                              # another process's connection
    try:
        with bulk_writes(conn) as switched:
            assert not switched and conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_a_reader_that_opens_during_a_bulk_puts_the_wal_back_and_sees_every_commit(kb: KnowledgeBase,
                                                                                    tmp_path: Path) -> None:
    root = synthetic_tree(tmp_path / "docs", 120)
    seen: list[int] = []
    opened: list[Any] = []

    def reader(done: int, total: int) -> None:
        if done and not opened:                    # after the first batch, in the middle of the bulk
            opened.append(connect(kb.node.home.db_file))
        if opened:
            seen.append(count(opened[0], "SELECT count(*) FROM pages WHERE container = 'DOCS'"))

    try:
        report = import_directory(kb, root, actor="alex", into="DOCS", declare_spaces=True, batch=40,
                                  progress=reader)
        assert report.created == 120 + 3 and not report.failures
        assert seen == sorted(seen) and seen[-1] == 123
        assert kb.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert opened[0].execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        for c in opened:
            c.close()


def _written() -> int:
    """Bytes this process handed to write()/pwrite() (`wchar`). Not `write_bytes`: the kernel counts a page
    there each time it is dirtied again after a writeback, so the flusher's timing moved the same import
    between 1.45× and 1.8× of what it kept (the test failed one run in four or five), where `wchar` was the
    same bytes every run. A WAL's second copy of each page is a pwrite too, so this sees it."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["wchar"])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/<pid>/io")
def test_an_import_writes_about_what_it_keeps(kb: KnowledgeBase, tmp_path: Path) -> None:
    """Bytes written (the log, the database, the plan) against the home's size after: at most 1.5×. Each
    batch of a thousand records was a transaction, and every page reached the disk twice (WAL, then the
    database): 1.7× at 30,000 pages, 3.5× at a million."""
    root = synthetic_tree(tmp_path / "docs", 4000)
    kb.node.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.sync()
    home = kb.node.home.root
    before = _written()
    sizes_before = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    report = import_directory(kb, root, actor="alex", into="DOCS", declare_spaces=True)
    report.close()
    kb.node.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.sync()
    written = _written() - before
    grown = sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) - sizes_before
    assert report.created > 4000
    assert written <= 1.5 * grown, f"{written:,} bytes written for {grown:,} kept ({written / grown:.2f}×)"
