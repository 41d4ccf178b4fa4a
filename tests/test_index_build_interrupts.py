"""The keyword index's first build in bulk, interrupted: by a stop, a crash between a chunk's commit and
its journal, a full disk, a worker that dies. Each test failed on the bulk writer as first merged, for the
reason its docstring names.
"""
from __future__ import annotations

import errno
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core import config as config_mod
from core.node import Node, init_home
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search import lexical, rank_data, segments
from core.search.indexer import Indexer, read_state
from core.search.native import NativeSearcher
from core.search.seam import Query

ENV = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}


def _home(tmp_path: Path, pages: int) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, config_mod.empty_config("alex"))
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for i in range(pages):
            kb.create_page("HOME", f"Page {i}", f"common words marker{i % 10} unique{i}")
    return home


def _live_pages(home: Home) -> int:
    with Node.open(home) as node:
        return node.conn.execute("SELECT count(*) FROM pages WHERE trashed_at IS NULL").fetchone()[0]


def _hits(home: Home, text: str) -> list[str]:
    with Node.open(home) as node:
        res = NativeSearcher(node).search(Query(text, mode="keyword", limit=100))
        assert res.outcome.served_mode == "keyword", res.outcome.message
        return [h.page_id for h in res.hits]


def test_an_interrupt_between_a_chunks_commit_and_its_journal_does_not_index_it_twice(tmp_path, monkeypatch):
    """indexer.py _build: a chunk's segment is committed to the TOC (commit_segments) before the build
    journal's cursor moves past it (_store_links, then _write_json). A Ctrl-C / SIGKILL / power loss in
    between leaves the segment in the index and the cursor before it, so the resumed build writes the
    same pages again as a new segment: two live documents per page, duplicate hits, wrong idf and
    average lengths, for good (only an edit of the page deletes both)."""
    home = _home(tmp_path, 100)
    real = Indexer._store_links
    calls = {"n": 0}

    def interrupted(self, *args):
        calls["n"] += 1
        if calls["n"] == 2:           # chunk 2's segment is in the TOC; the journal still names chunk 1
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(Indexer, "_store_links", interrupted)
    with Indexer(home, workers=1, chunk=25) as ix, pytest.raises(KeyboardInterrupt):
        ix.run_pass()
    monkeypatch.setattr(Indexer, "_store_links", real)
    with Indexer(home, workers=1, chunk=25) as ix:
        assert ix.run_pass().kind == "build"

    assert read_state(home.index_dir).pages == _live_pages(home) == 100
    hits = _hits(home, "marker3")
    assert len(hits) == len(set(hits)) == 10


def test_a_crash_after_a_chunks_commit_before_its_journal_moves_resumes_past_it(tmp_path, monkeypatch):
    """The journal names the chunk's segment (pending) before the TOC does: a build killed after the
    TOC took the segment, before the cursor moved past it, resumes after that chunk instead of writing
    its pages again."""
    home = _home(tmp_path, 100)
    real = segments.commit_segments
    calls = {"n": 0}

    def crash_after_commit(ix, segs, **kwargs):
        generation = real(ix, segs, **kwargs)
        if segs:
            calls["n"] += 1
            if calls["n"] == 2:       # chunk 2 is in the index; the journal's cursor is still after chunk 1
                raise KeyboardInterrupt
        return generation

    monkeypatch.setattr(segments, "commit_segments", crash_after_commit)
    with Indexer(home, workers=1, chunk=25) as ix, pytest.raises(KeyboardInterrupt):
        ix.run_pass()
    journal = Indexer(home).build_progress()
    assert journal is not None and journal.pending is not None and journal.done == 25
    monkeypatch.setattr(segments, "commit_segments", real)
    with Indexer(home, workers=1, chunk=25) as ix:
        assert ix.run_pass().kind == "build"

    assert read_state(home.index_dir).pages == _live_pages(home) == 100
    hits = _hits(home, "marker3")
    assert len(hits) == len(set(hits)) == 10


def test_a_stop_during_an_in_process_chunk_stops_the_build(tmp_path):
    """segments.write_chunk never looks at the pass's stop event: a build in this process (a home under
    PARALLEL_MIN pages, or any home when build_workers() finds one idle core) reads a whole chunk of up to
    IN_FLIGHT = 64,000 pages after the stop is set. Quitting the app during such a first build leaves
    the process running until the chunk (here: the whole build) is done; measured 3.5 s after Ctrl-Q at
    8,000 pages, against 0.4 s with worker processes (which poll the stop every 0.25 s)."""
    home = _home(tmp_path, 600)
    stop = threading.Event()
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done >= segments.PROGRESS_EVERY:   # a quarter of the pages read: the app quits
            stop.set()

    with Indexer(home, workers=1) as ix:
        report = ix.run_pass(progress=progress, stop=stop)
    assert stop.is_set()
    assert report.kind == "stopped", report.describe()


def test_a_build_that_fails_on_a_full_disk_leaves_no_half_written_segment(tmp_path, monkeypatch):
    """SegmentBuilder.finish / write_chunk: when writing a segment fails (ENOSPC), the writers are closed
    but the segment's files stay in the build directory, named by no TOC. A retry resumes into the same
    directory and they are removed only when a whole build has finished, so on a nearly full disk the
    retry fails again where a clean directory would have had room, and each failure adds more (shown on a
    tmpfs: failed at 10 MB, then failed again at 30 MB, which a clean build of this home fits in)."""
    home = _home(tmp_path, 60)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rank_data, "write", full)
    with Indexer(home, workers=1) as ix, pytest.raises(OSError):
        ix.run_pass()
    journal = Indexer(home).build_progress()
    assert journal is not None
    ix = lexical.open_index(home.index_dir / journal.dir)
    with ix.reader() as r:
        named = {sub.segment().segment_id() for sub, _ in r.leaf_readers()} if r.doc_count_all() else set()
    left = sorted(p.name for p in (home.index_dir / journal.dir).iterdir()
                  if p.name.startswith(f"{lexical.INDEX_NAME}_") and p.name.split(".")[0][len("MAIN_"):] not in named
                  and not p.name.endswith("WRITELOCK"))
    assert left == [], f"half-written segment files left behind: {left}"


def test_index_build_says_one_line_when_a_build_worker_dies(tmp_path, monkeypatch):
    """segments.BuildWorkerFailed is a RuntimeError that cli_common.handle_errors does not know: a
    worker killed by the OOM killer (or failing on a full disk: its OSError arrives as the message of a
    BuildWorkerFailed) makes `crewlet index build` print a whole traceback instead of one line."""
    from crewlet_tui.cli import app

    home = _home(tmp_path, 40)
    real_popen = segments.subprocess.Popen

    def dying_worker(args, **kwargs):   # a worker killed before it could answer
        return real_popen([sys.executable, "-c", "import sys; sys.stderr.write('Killed\\n'); sys.exit(137)"],
                          **kwargs)

    monkeypatch.setattr(segments, "PARALLEL_MIN", 1)
    monkeypatch.setattr(segments, "build_workers", lambda *a, **k: 2)
    monkeypatch.setattr(segments.subprocess, "Popen", dying_worker)
    result = CliRunner().invoke(app, ["--home", str(home.root), "index", "build"], env=ENV)
    assert result.exit_code == 1
    assert not isinstance(result.exception, segments.BuildWorkerFailed), "a traceback, not one line"
    assert "crewlet:" in result.output and "worker" in result.output
