"""Stage two through the compact copy and the space's vector file (core/search/vector_file.py, issue 38):
the final ranking is the exact one, scores are exact cosines, the file is vouched for by the database or
rebuilt, swept when no space needs it, a killed write leaves nothing trusted, and a node told to hold less
serves stage two by id and says so. Real homes: pages and vectors applied through the logs."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from core import config as config_mod
from core.node import Node, init_home
from core.paths import Home
from core.search import semantic, vector_file
from core.search.seam import Query
from core.settings import ConfigError
from core.vectors import records as vectors
from core.vectors.read import read_vectors
from test_ivf import DIMS, EVERYONE, SPACE, make_home, topical

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path / "h", topical(1200, seed=5))


def path_of(home: Home) -> Path:
    return vector_file.file_for(home.codes_dir, SPACE)


def exact_ranking(node: Node, q: np.ndarray) -> list[tuple[str, float]]:
    """Every live vector of the space scored exactly, best first (what stage two must reproduce)."""
    rows = node.conn.execute("SELECT id, source_id FROM vectors WHERE space = ?", (SPACE,)).fetchall()
    source = {r[0]: r[1] for r in rows}
    found, matrix = read_vectors(node.conn, list(source), DIMS)
    cos = (matrix @ q) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(q))
    return sorted(((source[v], float(c)) for v, c in zip(found.tolist(), cos.tolist())), key=lambda x: (-x[1], x[0]))


def rank(retriever: semantic.SemanticRetriever, q: np.ndarray) -> semantic.SemanticRanking:
    return retriever.rank(q, SPACE, EVERYONE)


def test_the_final_ranking_is_the_exact_one_with_exact_scores(home):
    queries = topical(20, seed=77)
    with Node.open(home) as node:
        retriever = semantic.SemanticRetriever(node)
        for q in queries:
            got = rank(retriever, q)
            assert got.stage_two == "compact" and got.stage_two_note == ""
            want = exact_ranking(node, q)[:semantic.STAGE_TWO]   # 1,200 sources: stage one keeps them all
            assert [s for s, _ in got.ranked[:10]] == [s for s, _ in want[:10]]          # recall@10 = 1.0
            assert [s for s, _ in got.ranked] == [s for s, _ in want]                    # and the whole depth
            assert np.allclose([c for _, c in got.ranked], [c for _, c in want], rtol=0, atol=1e-6)
        assert path_of(home).exists()


def test_a_new_process_reads_the_file_and_the_rows_filed_since(home):
    with Node.open(home) as node:
        rank(semantic.SemanticRetriever(node), topical(1, seed=3)[0])       # builds the file
        built = os.stat(path_of(home))
        # filed since the file: a new source near the query, and the newest source's vector replaced
        q = topical(1, seed=4)[0]
        newest = node.conn.execute("SELECT id, source_id, container FROM vectors ORDER BY id DESC LIMIT 1").fetchone()
        node.submit_vectors([vectors.put_record(newest["source_id"], SPACE, newest["container"], 2, "dchanged", 10, 0,
                                                q * 0.9 + topical(1, seed=40)[0] * 0.1)])
        reused = node.conn.execute("SELECT id FROM vectors WHERE source_id = ?", (newest["source_id"],)).fetchone()[0]
        assert reused == newest["id"]               # SQLite gave the replacement the id the file holds another vector for
        node.submit_vectors([vectors.put_record("s-new", SPACE, "OPS", 1, "dnew", 10, 0, q)])
        fresh = semantic.SemanticRetriever(node)                        # a new process's first search
        got = rank(fresh, q)
        again = os.stat(path_of(home))
        assert (again.st_ino, again.st_mtime_ns) == (built.st_ino, built.st_mtime_ns)   # read, not rebuilt
        assert got.stage_two == "compact"
        assert got.ranked[0][0] == "s-new" and got.ranked[0][1] == pytest.approx(1.0, abs=1e-6)
        # the replaced vector (its id possibly reused by SQLite) scores as the database's row, not the file's
        want = dict(exact_ranking(node, q))
        scored = dict(got.ranked)
        assert scored[newest["source_id"]] == pytest.approx(want[newest["source_id"]], abs=1e-6) and \
            got.ranked[1][0] == newest["source_id"]
        assert [s for s, _ in got.ranked[:10]] == [s for s, _ in exact_ranking(node, q)[:10]]


def test_a_file_the_database_does_not_vouch_for_is_rebuilt(home, tmp_path):
    other = make_home(tmp_path / "other", topical(1200, seed=6))        # same space, same ids, other vectors
    with Node.open(other) as node:
        rank(semantic.SemanticRetriever(node), topical(1, seed=3)[0])
    foreign = path_of(other).read_bytes()
    path_of(home).parent.mkdir(parents=True, exist_ok=True)
    path_of(home).write_bytes(foreign)
    q = topical(1, seed=8)[0]
    with Node.open(home) as node:
        vf = vector_file.load(path_of(home), SPACE, DIMS)
        assert vf is not None and not vector_file.vouched(node.conn, vf, vectors.position(node.conn)[0])
        vf.close()
        got = rank(semantic.SemanticRetriever(node), q)
        assert path_of(home).read_bytes() != foreign                      # written again from this database
        assert [s for s, _ in got.ranked[:10]] == [s for s, _ in exact_ranking(node, q)[:10]]
        mine = vector_file.load(path_of(home), SPACE, DIMS)
        assert mine is not None and vector_file.vouched(node.conn, mine, vectors.position(node.conn)[0])
        # a file ahead of the database (a restored copy) is not vouched for either
        assert not vector_file.vouched(node.conn, mine, mine.seq - 1)
        mine.close()


def test_a_torn_file_and_a_killed_write_are_never_trusted(home):
    q = topical(1, seed=9)[0]
    with Node.open(home) as node:
        rank(semantic.SemanticRetriever(node), q)
    whole = path_of(home).read_bytes()
    path_of(home).write_bytes(whole[:len(whole) // 2])                    # torn
    assert vector_file.load(path_of(home), SPACE, DIMS) is None
    os.unlink(path_of(home))
    # a process killed between writing the temporary file and renaming it over the real name
    script = f"""
import os, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r}); sys.path.insert(0, {str(ROOT / 'tests')!r})
from core.node import Node, init_home
from core.paths import Home
from core.search import semantic, vector_file
from test_ivf import EVERYONE, SPACE, topical
vector_file.os.replace = lambda *a: os.kill(os.getpid(), 9)
with Node.open(Home(Path({str(home.root)!r}))) as node:
    semantic.SemanticRetriever(node).rank(topical(1, seed=9)[0], SPACE, EVERYONE)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-800:]
    left = [p for p in home.codes_dir.iterdir() if p.name.startswith("vectors-")]
    assert not path_of(home).exists() and len(left) == 1 and left[0].name.endswith(".tmp")
    with Node.open(home) as node:
        got = rank(semantic.SemanticRetriever(node), q)                 # builds a whole file of its own
        assert got.stage_two == "compact" and path_of(home).read_bytes() == whole
        assert [s for s, _ in got.ranked] == [s for s, _ in exact_ranking(node, q)[:semantic.STAGE_TWO]]
    # the killed write's temporary file goes when it is old enough to be no live write's
    os.utime(left[0], (time.time() - 7200, time.time() - 7200))
    gone = vector_file.sweep(home.codes_dir, {SPACE})
    assert gone == [left[0]] and path_of(home).exists()


def test_a_file_no_space_needs_is_swept(home):
    with Node.open(home) as node:
        rank(semantic.SemanticRetriever(node), topical(1, seed=1)[0])
    stray = vector_file.file_for(home.codes_dir, "test:gone:64")
    stray.write_bytes(b"old")
    young = home.codes_dir / (path_of(home).name + ".abc.tmp")
    young.write_bytes(b"a write in progress")
    gone = vector_file.sweep(home.codes_dir, {SPACE})
    assert gone == [stray] and young.exists() and path_of(home).exists()


def test_a_node_told_to_hold_less_reads_by_id_and_says_so(home):
    q = topical(1, seed=12)[0]
    with Node.open(home) as node:
        node.settings = config_mod.NodeSettings(node_id=node.settings.node_id, rerank_memory_mb=0)
        got = rank(semantic.SemanticRetriever(node), q)
        assert got.stage_two == "by-id"
        assert "rerank_memory_mb = 0" in got.stage_two_note and "from the database" in got.stage_two_note
        assert [s for s, _ in got.ranked] == [s for s, _ in exact_ranking(node, q)[:semantic.STAGE_TWO]]
        assert not path_of(home).exists()                               # nothing kept past the bound


def test_the_bound_is_read_from_node_toml_and_a_bad_one_refused(tmp_path):
    file = tmp_path / "node.toml"
    file.write_text('node_id = "n0123456789a"\nrerank_memory_mb = 512\n')
    assert config_mod.load_node(file).rerank_memory_mb == 512
    assert config_mod.load_node(file).to_toml()["rerank_memory_mb"] == 512
    file.write_text('node_id = "n0123456789a"\nrerank_memory_mb = -1\n')
    with pytest.raises(ConfigError, match="rerank_memory_mb"):
        config_mod.load_node(file)
    file.write_text('node_id = "n0123456789a"\nrerank_memory_mb = true\n')
    with pytest.raises(ConfigError, match="whole number"):
        config_mod.load_node(file)


def test_the_answer_says_stage_two_read_by_id(tmp_path):
    from test_semantic import FakeModel, add_page, put, searcher_for, unit

    home = Home(tmp_path / "s")
    init_home(home, config_mod.example_config())
    with Node.open(home) as node:
        model = FakeModel()
        q = unit(1)
        model.vectors["the query"] = q
        for i in range(5):
            put(node, add_page(node, "ENG", f"P{i}"), unit(10 + i))
        node.settings = config_mod.NodeSettings(node_id=node.settings.node_id, rerank_memory_mb=0)
        res = searcher_for(node, model).search(Query("the query", mode="semantic", limit=5))
        assert res.outcome.served_mode == "semantic" and res.outcome.degraded is None
        assert "rerank_memory_mb = 0" in res.outcome.message
        node.settings = config_mod.NodeSettings(node_id=node.settings.node_id)
        res = searcher_for(node, model).search(Query("the query", mode="semantic", limit=5))
        assert "rerank_memory_mb" not in res.outcome.message and len(res.hits) == 5


def test_much_filed_since_the_file_writes_it_again(home):
    q = topical(1, seed=21)[0]
    with Node.open(home) as node:
        retriever = semantic.SemanticRetriever(node)
        rank(retriever, q)
        built = os.stat(path_of(home)).st_ino
        rows = node.conn.execute("SELECT source_id, container FROM vectors ORDER BY id LIMIT 1100").fetchall()
        fresh = topical(1100, seed=22)
        node.submit_vectors([vectors.put_record(r["source_id"], SPACE, r["container"], 2, "d2" + r["source_id"], 10, 0,
                                                fresh[i]) for i, r in enumerate(rows)])
        first = rank(retriever, q)                      # the 1,100 new rows read by id, held beside the file
        assert retriever._vectors is not None and len(retriever._vectors.extra) == 1100
        assert os.stat(path_of(home)).st_ino == built
        second = rank(retriever, q)                     # past a quarter of the file: written again
        assert os.stat(path_of(home)).st_ino != built
        assert retriever._vectors is not None and not retriever._vectors.extra and retriever._vectors.n == 1200
        want = [s for s, _ in exact_ranking(node, q)[:semantic.STAGE_TWO]]
        assert [s for s, _ in first.ranked] == want and [s for s, _ in second.ranked] == want


def test_joining_a_shared_directory_keeps_the_bound(tmp_path):
    import dataclasses
    import json

    from conftest import new_home
    from test_sync import cli, ok

    a = new_home(tmp_path / "A")
    settings = config_mod.load_node(a.node_file)
    config_mod.write_node(a.node_file, dataclasses.replace(settings, rerank_memory_mb=512))
    out = json.loads(ok(cli(a.root, "sync", "join", str(tmp_path / "shared"), "--json")))
    assert out["joined"] == "first"
    kept = config_mod.load_node(a.node_file)
    assert kept.rerank_memory_mb == 512 and kept.shared and kept.node_id == settings.node_id


def test_a_large_space_writes_its_file_behind_the_searches(home):
    q = topical(1, seed=31)[0]
    with Node.open(home) as node:
        retriever = semantic.SemanticRetriever(node)
        retriever.BUILD_INLINE = 100                     # this home's 1,200 sources count as large
        first = rank(retriever, q)
        assert first.stage_two == "by-id" and "being written" in first.stage_two_note
        writer = retriever._writer
        assert writer is not None
        writer.join(timeout=300)                         # the event: the writing thread ended
        assert not writer.is_alive() and path_of(home).exists()
        second = rank(retriever, q)
        assert second.stage_two == "compact" and second.stage_two_note == ""
        want = [s for s, _ in exact_ranking(node, q)[:semantic.STAGE_TWO]]
        assert [s for s, _ in first.ranked] == want and [s for s, _ in second.ranked] == want
