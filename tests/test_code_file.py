"""A space's code table kept as one file (core/search/code_file.py): a new process reads it and the rows filed
since, and ends with exactly the table a whole read of the database gives; a file it cannot trust — ahead of
the database, of another index, damaged, of another space — is passed over for the database, never believed.
Real homes: pages and vectors applied through the logs, the index installed by its duty."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from core.node import Node
from core.paths import Home
from core.search import code_file, semantic
from core.vectors import records as vectors
from test_ivf import SPACE, duty_for, make_home, run, topical


def same(a: semantic.CodeTable, b: semantic.CodeTable) -> None:
    """Two tables hold the same live rows (the same codes, lists and containers by source), at one position."""
    assert a.seq == b.seq and a.live == b.live and a.width == b.width

    def rows(t: semantic.CodeTable) -> dict[str, tuple]:
        live = np.flatnonzero(t.alive[:t.n])
        return {t.sources[int(r)]: (int(t.ids[r]), t.codes[r].tobytes(), int(t.lists[r]),
                                    t.container_names[int(t.containers[r])]) for r in live}

    assert rows(a) == rows(b)
    assert (a.index is None) == (b.index is None)
    if a.index is not None:
        assert a.index.generation == b.index.generation and a.index.probes == b.index.probes
        assert a.index.centroids.tobytes() == b.index.centroids.tobytes()


def position(node: Node) -> int:
    return vectors.position(node.conn)[0]


def opened(node: Node) -> semantic.CodeTable:
    """What a new process's first semantic search loads."""
    retriever = semantic.SemanticRetriever(node)
    return retriever.table(SPACE)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return make_home(tmp_path / "h", topical(1200, seed=5))


def test_a_new_process_reads_the_file_then_the_rows_filed_since(home):
    with Node.open(home) as node:
        first = opened(node)                                   # no file yet: the database, kept in the file
        path = code_file.file_for(home.codes_dir, SPACE)
        assert path.exists() and first.live == 1200
        # filed since the file: a new source, a replaced vector, a restamp into another container
        rows = node.conn.execute("SELECT source_id, container, revision FROM vectors ORDER BY id LIMIT 2").fetchall()
        fresh = topical(3, seed=9)
        node.submit_vectors([
            vectors.put_record("s-new", SPACE, "OPS", 1, "dnew", 10, 0, fresh[0]),
            vectors.put_record(rows[0]["source_id"], SPACE, rows[0]["container"], 2, "dchanged", 10, 0, fresh[1]),
            vectors.restamp_record(rows[1]["source_id"], SPACE, "HOME", rows[1]["revision"] + 1,
                                   "d" + rows[1]["source_id"]),
        ])
        kept = code_file.load(path, SPACE)
        assert kept is not None and kept.seq < position(node)
        again = opened(node)
        whole = semantic.load_table(node.conn, SPACE, position(node))
        same(again, whole)
        assert again.live == 1201
        moved = again.row_of[rows[1]["source_id"]]
        assert again.container_names[int(again.containers[moved])] == "HOME"


def test_an_installed_index_and_its_lists_come_back_from_the_file(home):
    with Node.open(home) as node:
        opened(node)                                           # kept before there was an index: no lists
        duty = duty_for(node)
        first = run(duty)
        run(duty, first.cursor)                                # installed and re-filed: the file's lists are stale
        table = opened(node)
        same(table, semantic.load_table(node.conn, SPACE, position(node)))
        assert table.index is not None and (table.lists[:table.n] >= 0).all()
        table = opened(node)                                   # and kept with the index's lists
        same(table, semantic.load_table(node.conn, SPACE, position(node)))


def test_a_file_the_database_cannot_vouch_for_is_passed_over(home, tmp_path):
    with Node.open(home) as node:
        opened(node)
    path = code_file.file_for(home.codes_dir, SPACE)
    # a copy of the home taken before more vectors were filed: its file is now ahead of its own database
    older = Home(tmp_path / "older")
    shutil.copytree(home.root, older.root)
    with Node.open(home) as node:
        # a source's vector replaced: as many live rows as before, so only the position can tell the file is ahead
        late = node.conn.execute("SELECT source_id, container FROM vectors ORDER BY id LIMIT 1").fetchone()
        node.submit_vectors([vectors.put_record(late["source_id"], SPACE, late["container"], 2, "dlate", 10, 0,
                                                -topical(1, seed=3)[0])])
        assert code_file.save(opened(node), path)              # the home's own file moves on
        assert code_file.load(path, SPACE).seq == position(node)
    newer_file = path.read_bytes()
    older_file = code_file.file_for(older.codes_dir, SPACE)
    older_file.write_bytes(newer_file)                         # the newer file beside the older database
    with Node.open(older) as node:
        table = opened(node)
        same(table, semantic.load_table(node.conn, SPACE, position(node)))
    # a damaged file, and a file of another space, are read as no file
    path.write_bytes(newer_file[:len(newer_file) // 2])
    assert code_file.load(path, SPACE) is None
    path.write_bytes(newer_file)
    assert code_file.load(path, "test:other:128") is None
    with Node.open(home) as node:
        path.write_bytes(b"not a zip file at all")
        table = opened(node)
        same(table, semantic.load_table(node.conn, SPACE, position(node)))
        assert code_file.load(path, SPACE) is not None       # the whole read was kept again


def test_a_file_made_from_another_database_is_passed_over(home, tmp_path):
    """The same page ids, as many vectors at the same positions, other vectors: only the rows can tell."""
    other = make_home(tmp_path / "other", topical(1200, seed=6))
    with Node.open(other) as node:
        opened(node)
    home.codes_dir.mkdir()
    shutil.copy(code_file.file_for(other.codes_dir, SPACE), code_file.file_for(home.codes_dir, SPACE))
    with Node.open(home) as node:
        table = opened(node)
        same(table, semantic.load_table(node.conn, SPACE, position(node)))


def test_a_purge_since_the_file_is_caught_by_the_live_count(home):
    with Node.open(home) as node:
        opened(node)
        gone = node.conn.execute("SELECT source_id FROM vectors ORDER BY id LIMIT 1").fetchone()[0]
        node.submit_vectors([vectors.drop_record(gone)])
        table = opened(node)
        assert gone not in set(table.sources[:table.n])
        same(table, semantic.load_table(node.conn, SPACE, position(node)))


def test_no_file_is_written_where_the_home_cannot_keep_one(home):
    with Node.open(home) as node:
        home.codes_dir.parent.joinpath("codes").write_text("a file where the directory would go")
        table = opened(node)                                   # served from the database all the same
        same(table, semantic.load_table(node.conn, SPACE, position(node)))
        assert not code_file.save(table, code_file.file_for(home.codes_dir, SPACE))


def test_the_index_trained_from_the_file_is_the_one_trained_from_the_database(tmp_path, monkeypatch):
    from core.search.ivf import training
    from test_ivf import digest

    home = make_home(tmp_path / "h", topical(1600))
    with Node.open(home) as node:
        from_db = training.train(node.conn, node.lock, SPACE, threads=2)
        path = code_file.file_for(home.codes_dir, SPACE)
        opened(node)                                           # the file, kept

        def no_whole_read(*args, **kwargs):
            raise AssertionError("the database was read whole: the file was not used")

        monkeypatch.setattr(semantic, "load_table", no_whole_read)
        from_file = training.train(node.conn, node.lock, SPACE, threads=2, codes_file=path)
    assert digest(from_file) == digest(from_db) and from_file.probes == from_db.probes
    assert from_file.measurement.shapes["unfiltered"].recall == from_db.measurement.shapes["unfiltered"].recall


def test_a_whole_read_drops_the_files_no_space_needs_and_a_killed_saves_leftovers(home):
    import os
    import time

    home.codes_dir.mkdir(parents=True, exist_ok=True)
    old_model = code_file.file_for(home.codes_dir, "local:some-old-model:384")       # no vectors of it are left
    old_model.write_bytes(b"a table of a space nobody searches")
    killed = home.codes_dir / (old_model.name + ".abc123.tmp")                      # a save killed long ago
    killed.write_bytes(b"half")
    os.utime(killed, (time.time() - 7200, time.time() - 7200))
    in_flight = home.codes_dir / (code_file.file_for(home.codes_dir, SPACE).name + ".def456.tmp")
    in_flight.write_bytes(b"another process's save")                                # young: left alone
    stranger = home.codes_dir / "notes.txt"
    stranger.write_text("not ours")
    with Node.open(home) as node:
        first = opened(node)                                   # no file of SPACE yet: a whole read, then the sweep
        assert first.live == 1200
    assert code_file.file_for(home.codes_dir, SPACE).exists()
    assert not old_model.exists() and not killed.exists()
    assert in_flight.exists() and stranger.exists()
    # a space the database still holds vectors of keeps its file, configured or not
    with Node.open(home) as node:
        assert code_file.sweep(home.codes_dir, set(vectors.spaces(node.conn))) == []
    assert code_file.sweep(home.codes_dir, set()) == [code_file.file_for(home.codes_dir, SPACE)]
