"""The first build's bulk writer writes what Whoosh's own writer writes, and builds in worker processes."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from core import config as config_mod
from core.node import Node, init_home
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search import lexical, rank_data, segments
from core.search.indexer import BUILD_FILE, Indexer, read_state
from core.search.native import NativeSearcher
from core.search.seam import Query

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("deploy rollback kernel driver IRP_MJ_READ IoCreateDevice power state device stack queue filter "
         "straße İstanbul déjà 3.5.1 e.g the of and a x 2 service runbook incident latency").split()


def _rows(n: int, seed: int = 7) -> list[tuple[str, str, str, str, None]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        body_words = [rng.choice(WORDS) for _ in range(rng.choice((0, 3, 40, 150)))]
        if i < 30:
            body_words += [f"triple{i // 3}"]     # a term of three documents
        if i % 50 == 0:
            body_words += [f"rare{i}"]            # a term of one document
        if i % 7 == 0:
            body_words += ["septimal"]            # a term of a few dozen documents: blocks of postings
        body = "# Heading\n\n" + " ".join(body_words) + ("\n\n```\ncode_only\n```" if i % 9 == 0 else "")
        title = ("[Auto-draft] " if i % 31 == 0 else "") + " ".join(rng.choice(WORDS) for _ in range(3)) + f" {i}"
        rows.append((f"p{i:05d}", ("ENG", "OPS", "HOME")[i % 3], title, body, None))
    return rows


def _everything(reader) -> dict:
    """Every stored field, length, term, term statistic and posting of a one-segment index."""
    out: dict = {"docs": reader.doc_count_all(), "stored": [], "lengths": {}, "terms": {}, "totals": {}}
    for d in range(reader.doc_count_all()):
        out["stored"].append(reader.stored_fields(d))
    for name in ("title", "body"):
        out["lengths"][name] = [reader.doc_field_length(d, name) for d in range(reader.doc_count_all())]
        out["totals"][name] = reader.field_length(name)
    for name in ("body", "container", "id", "title"):
        for term in reader.lexicon(name):
            ti = reader.term_info(name, term)
            m = reader.postings(name, term)
            posts = []
            while m.is_active():
                posts.append((m.id(), m.weight()))
                m.next()
            out["terms"][(name, term)] = (ti.weight(), ti.doc_frequency(), ti.min_length(), ti.max_length(),
                                          ti.max_weight(), ti.min_id(), ti.max_id(), posts)
    return out


def test_the_bulk_writer_writes_what_whooshs_writer_writes(tmp_path, monkeypatch):
    from whoosh.codec.whoosh3 import W3Codec

    rows = _rows(400)
    monkeypatch.setattr(segments, "BLOCK_POSTINGS", 16)     # many blocks, and lists longer than one
    by_whoosh = lexical.create_index(tmp_path / "whoosh")
    with by_whoosh.writer(codec=W3Codec(blocklimit=16)) as w:
        for page_id, container, title, body, _ in rows:
            w.add_document(**lexical.document(page_id, container, title, lexical_plain(body)))
    bulk = lexical.create_index(tmp_path / "bulk")
    result = segments.write_chunk(bulk, rows)
    segments.commit_segments(bulk, [result.segment])
    segments.clean_index_dir(bulk)
    assert result.indexed == 400 and result.rows == 400 and result.last_id == "p00399"

    with by_whoosh.reader() as a, bulk.reader() as b:
        ea, eb = _everything(a), _everything(b)
        assert ea["docs"] == eb["docs"] == 400
        assert ea["stored"] == eb["stored"] and ea["lengths"] == eb["lengths"] and ea["totals"] == eb["totals"]
        assert ea["terms"].keys() == eb["terms"].keys()
        assert ea["terms"] == eb["terms"]
        # the cases the writer packs itself, and the blocks it hands over whole, are all there
        dfs = [v[1] for v in eb["terms"].values()]
        assert 1 in dfs and any(2 <= d <= 8 for d in dfs) and any(d > 128 for d in dfs)
        # a search's own block reader finds every posting Whoosh's matchers find, in both indexes
        for (name, term), stats in eb["terms"].items():
            for reader in (a, b):
                ids, weights = lexical._read_postings(reader, name, term.decode() if isinstance(term, bytes) else term)
                assert list(zip(ids.tolist(), weights.tolist())) == stats[-1], (name, term)
    # each short list's term entry is byte for byte Whoosh's (statistics and inlined postings); a longer
    # one's blocks hold arrays (Whoosh pickles tuples), each block as long as Whoosh's
    ta = dict(_term_entries(tmp_path / "whoosh"))
    tb = dict(_term_entries(tmp_path / "bulk"))
    assert ta.keys() == tb.keys()
    inline = [k for k, v in ta.items() if v[0] != 0]
    assert len(inline) > 100 and all(ta[k] == tb[k] for k in inline)
    assert all(ta[k][:segments._TERMINFO.size] == tb[k][:segments._TERMINFO.size] for k in ta)   # every term's statistics
    blocks = _blocks_of(tmp_path / "bulk")
    assert blocks and max(len(ids) for ids, _ in blocks) == 16
    assert all(type(ids).__name__ == "array" for ids, _ in blocks)

    # the rank file holds what the reader would derive document by document
    with bulk.reader() as b:
        seg = b.segment()
        got = rank_data.read(tmp_path / "bulk", seg.segment_id(), b.doc_count_all())
        want = rank_data.derive(b)
    assert got is not None
    assert [i.decode() for i in got["ids"].tolist()] == want.ids and [got["containers"][c] for c in got["codes"]] == \
        [want.containers[c] for c in want.codes]
    assert list(got["auto_draft"]) == want.auto_draft and sum(want.auto_draft) == 13
    assert list(got["title"]) == want.title_lengths and list(got["body"]) == want.body_lengths


def lexical_plain(body: str) -> str:
    from core.text.markdown import plain_text

    return plain_text(body)


def _term_entries(path: Path):
    ix = lexical.open_index(path)
    with ix.reader() as r:
        tindex = r._terms._tindex
        for key in tindex.keys():
            yield key, tindex[key]


def _blocks_of(path: Path) -> list[tuple]:
    """Every block of every posting list in a one-segment index, as its pickle holds it (ids, weights)."""
    ix = lexical.open_index(path)
    out = []
    with ix.reader() as r:
        for name in ("body", "title"):
            for term in r.lexicon(name):
                m = r._terms.matcher(name, term, r.schema[name].format)
                if not hasattr(m, "_goto"):
                    continue
                while True:
                    m._read_data()
                    out.append(m._data[:2])
                    if m._lastblock:
                        break
                    m._goto(m._nextoffset)
    return out


def test_a_rank_file_that_does_not_fit_its_segment_is_derived_again(tmp_path):
    ix = lexical.create_index(tmp_path / "ix")
    result = segments.write_chunk(ix, _rows(20))
    segments.commit_segments(ix, [result.segment])
    segid = result.segment.segment_id()
    path = tmp_path / "ix" / rank_data.file_name(segid)
    assert rank_data.read(tmp_path / "ix", segid, 20) is not None
    assert rank_data.read(tmp_path / "ix", segid, 21) is None         # not this segment's document count
    path.write_bytes(path.read_bytes()[:-3])
    assert rank_data.read(tmp_path / "ix", segid, 20) is None         # cut short
    cache = lexical.SegmentCache()
    snap = lexical.Snapshot(ix, cache)
    try:
        assert snap.count == 20 and rank_data.read(tmp_path / "ix", segid, 20) is not None   # written again
    finally:
        snap.close()


def test_chunks_are_even_bounded_and_a_multiple_of_the_workers():
    ids = [f"{i:05d}" for i in range(10_001)]
    chunks = segments.plan_chunks(ids, "", 2, 3000)
    assert len(chunks) == 4 and chunks[0][0] == "" and chunks[-1][1] is None
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    assert segments.plan_chunks(ids[:5], "", 2, 3000) == [("", "00002"), ("00002", None)]
    assert segments.plan_chunks([], "x", 2) == [("x", None)]
    assert len(segments.plan_chunks(ids, "", 1, 3000)) == 4


def _home(tmp_path: Path, pages: int) -> Home:
    home = Home(tmp_path / "home")
    init_home(home, config_mod.example_config())
    rng = random.Random(3)
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for i in range(pages):
            words = " ".join(rng.choice(WORDS) for _ in range(30))
            kb.create_page("ENG", f"Page {i:03d} {rng.choice(WORDS)}", f"{words} marker{i % 10}")
    return home


def _search(home: Home, text: str) -> list[tuple[str, float]]:
    with Node.open(home) as node:
        res = NativeSearcher(node).search(Query(text, mode="keyword", limit=50))
        assert res.outcome.served_mode == "keyword", res.outcome.message
        return [(h.page_id, round(h.score, 9)) for h in res.hits]


def test_a_build_in_worker_processes_ranks_as_one_in_this_process(tmp_path):
    home = _home(tmp_path, 120)
    with Indexer(home, workers=1, chunk=1000) as ix:
        assert ix.run_pass().kind == "build"
    alone = {q: _search(home, q) for q in ("deploy rollback", "marker3", "IRP_MJ_READ straße", "kernel")}
    progress: list[tuple[int, int]] = []
    with Indexer(home, workers=2, chunk=25) as ix:
        report = ix.run_pass(force_rebuild=True, progress=lambda d, t: progress.append((d, t)))
    assert report.kind == "rebuild" and report.indexed == 120
    assert progress[-1][0] >= 120 and progress == sorted(progress)
    state = read_state(home.index_dir)
    segs = [p for p in (home.index_dir / state.dir).glob("*.seg")]
    assert len(segs) == 6                                   # 120 pages in chunks of at most 25, an even count
    assert not (home.index_dir / BUILD_FILE).exists()
    for q, hits in alone.items():
        assert _search(home, q) == hits and hits


def test_a_script_without_a_main_guard_builds_in_workers(tmp_path):
    """A worker is a process of its own: it never re-runs the caller's main module."""
    home = _home(tmp_path, 30)
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from pathlib import Path\nfrom core.paths import Home\nfrom core.search.indexer import Indexer\n"
              f"with Indexer(Home(Path({str(home.root)!r})), workers=2, chunk=10) as ix:\n"
              "    print(ix.run_pass().kind)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "build"
    assert len(_search(home, "marker1")) == 3


def test_a_stopped_parallel_build_commits_what_it_finished_and_resumes(tmp_path):
    import threading

    home = _home(tmp_path, 60)
    stop = threading.Event()

    def progress(done: int, total: int) -> None:
        journal = home.index_dir / BUILD_FILE   # stop once a chunk is committed, other chunks in flight
        if journal.exists() and json.loads(journal.read_text())["done"] > 0:
            stop.set()

    with Indexer(home, workers=2, chunk=10) as ix:
        first = ix.run_pass(progress=progress, stop=stop)
        assert first.kind == "stopped"
        journal = json.loads((home.index_dir / BUILD_FILE).read_text())
        assert 0 < journal["done"] < journal["total"]
        again = ix.run_pass()
        assert again.kind == "build"
    state = read_state(home.index_dir)
    assert state.pages == 60 + _example_pages(home)
    # nothing a killed worker left behind stays in the directory: every .seg is one the TOC names
    ix = lexical.open_index(home.index_dir / state.dir)
    with ix.reader() as r:
        live = {sub.segment().segment_id() for sub, _ in r.leaf_readers()}
    on_disk = {p.stem for p in (home.index_dir / state.dir).glob("*.seg")}
    assert on_disk == live and not list((home.index_dir / state.dir).glob("*.tmp"))
    assert len(_search(home, "marker4")) == 6


def _example_pages(home: Home) -> int:
    with Node.open(home) as node:
        return node.conn.execute("SELECT count(*) FROM pages WHERE trashed_at IS NULL").fetchone()[0] - 60


@pytest.mark.parametrize("n", [0, 1])
def test_an_empty_or_tiny_home_builds(tmp_path, n):
    home = Home(tmp_path / "home")
    init_home(home, config_mod.empty_config("alex"))
    if n:
        with Node.open(home) as node:
            KnowledgeBase(node).create_page("HOME", "Only", "lonely words")
    with Indexer(home) as ix:
        assert ix.run_pass().kind == "build"
        assert read_state(home.index_dir).pages == n


@pytest.mark.parametrize("short_sort", [lexical.SHORT_SORT, 0])   # the head sorted in Python, or by numpy
def test_equal_scores_rank_by_page_id_however_the_index_was_built(tmp_path, monkeypatch, short_sort):
    """A bulk build numbers documents in page-id order, a pass page by page in write order: pages with
    equal scores come back in page-id order either way (two nodes answer a query alike)."""
    monkeypatch.setattr(lexical, "SHORT_SORT", short_sort)
    home = Home(tmp_path / "home")
    init_home(home, config_mod.empty_config("alex"))
    with Node.open(home) as node:
        KnowledgeBase(node).create_page("HOME", "Seed", "nothing to see")
    with Indexer(home, workers=1) as ix:
        assert ix.run_pass().kind == "build"
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        for i in range(12):   # random ids, written in another order than theirs
            kb.create_page("HOME", f"Note {i}", "tied words in every body")
    with Indexer(home, workers=1) as ix:
        assert ix.run_pass().kind == "incremental"

    def order() -> list[str]:
        with Node.open(home) as node:
            res = NativeSearcher(node).search(Query("tied", mode="keyword", limit=20))
            assert res.outcome.served_mode == "keyword"
            assert len({round(h.score, 9) for h in res.hits}) == 1   # every score equal
            return [h.page_id for h in res.hits]

    incremental = order()
    assert incremental == sorted(incremental) and len(incremental) == 12
    with Indexer(home, workers=1) as ix:
        assert ix.run_pass(force_rebuild=True).kind == "rebuild"
    assert order() == incremental


def test_the_word_caches_keep_no_long_word(monkeypatch):
    """A long-running worker or app analyses hashes and dumps too: words past CACHED_WORD_MAX are
    analysed every time and never kept, so the caches stay within their documented bound."""
    from core.search import analysis

    monkeypatch.setattr(analysis, "_STEMS", {})
    long_word = "deadbeef" * 20
    assert analysis.english_stem("running") == "run" and "running" in analysis._STEMS
    assert analysis.english_stem(long_word) == long_word and long_word not in analysis._STEMS
    count = analysis.term_counter(analysis.make_analyzer())
    assert count(f"running {long_word} running") == {"run": 2, long_word: 1}


def test_page_ids_read_across_segments_without_joining_them_until_the_whole_order_is_asked():
    import numpy as np

    parts = [np.array([b"p1", b"p2"]), np.zeros(0, "S1"), np.array([b"q-long-id", b"q2"]), np.array([b"\xc3\xa9t\xc3\xa9"])]
    ids = lexical.PageIds(parts)
    assert len(ids) == 5
    assert [ids[d] for d in range(5)] == ["p1", "p2", "q-long-id", "q2", "été"]
    assert ids[np.int64(3)] == "q2"
    assert ids._data is None                      # nothing joined for a few ids
    assert ids.data.tolist() == [b"p1", b"p2", b"q-long-id", b"q2", "été".encode()]
    with pytest.raises(IndexError):
        ids[5]
    with pytest.raises(IndexError):
        ids[-1]
    assert len(lexical.PageIds([])) == 0 and lexical.PageIds([]).data.size == 0
