"""The counts a home keeps as its rows change (issue 27: `crewlet spaces`, `pages`, `index status` and the
app's first window read them instead of scanning): right after every kind of change — create, save, rename,
move, trash, restore, purge, labels, vectors put, restamped and dropped — against a recount of the rows;
the same after the logs are replayed into a fresh database; and counted from the rows when a database
that had none is migrated."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from conftest import create_rec, move_rec, purge_rec, restore_rec, rec, save_rec, trash_rec

from core.log import FileLog
from core.node import Node
from core.pages import applier, reads
from core.pages.service import KnowledgeBase
from core.store import connect
from core.store.migrations import migrate
from core.vectors import records as vectors
from core.vectors import applier as vectors_applier

SPACE = "local:test-model:8:x"


def recount(conn: Any) -> dict[str, Any]:
    """What the counts must say, computed from the rows the slow way."""
    return {
        "levels": sorted((r[0], r[1], r[2]) for r in conn.execute(
            "SELECT coalesce(parent_id, ''), container, count(*) FROM pages WHERE trashed_at IS NULL GROUP BY 1, 2")),
        "spaces": sorted((r[0], r[1]) for r in conn.execute(
            "SELECT container, count(*) FROM pages WHERE trashed_at IS NULL GROUP BY 1")),
        "vectors": sorted((r[0], r[1], r[2]) for r in conn.execute(
            "SELECT v.space, count(*), count(p.id) FROM vectors v LEFT JOIN pages p ON p.id = v.source_id "
            "AND p.trashed_at IS NULL AND p.revision = v.revision AND p.container = v.container GROUP BY v.space")),
    }


def kept(conn: Any) -> dict[str, Any]:
    """What the counts say (rows a level or space emptied down to zero say nothing)."""
    return {
        "levels": sorted(tuple(r) for r in conn.execute("SELECT parent, container, live FROM page_levels WHERE live")),
        "spaces": sorted(tuple(r) for r in conn.execute("SELECT container, live FROM page_spaces WHERE live")),
        "vectors": sorted(tuple(r) for r in conn.execute("SELECT space, sources, current FROM vector_counts "
                                                         "WHERE sources")),
    }


def vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def put(page_id: str, container: str, revision: int, seed: int) -> Any:
    return vectors.put_record(page_id, SPACE, container, revision, f"d{seed}", 10, 0, vec(seed))


def test_counts_follow_every_change_and_a_replay(node: Node, tmp_path: Path) -> None:
    conn = node.conn
    steps: list[str] = []

    def check(step: str) -> None:
        steps.append(step)
        assert kept(conn) == recount(conn), f"after {step}"

    top, mid, leaf, other, lone = (f"p{i:015d}" for i in range(5))
    node.submit([create_rec("ENG", "Top", "t", page_id=top), create_rec("ENG", "Mid", "", page_id=mid, parent_id=top),
                 create_rec("ENG", "Leaf", "l", page_id=leaf, parent_id=mid), create_rec("PROD", "Other", "o", page_id=other),
                 create_rec("ENG", "Lone", "x", page_id=lone)])
    check("creates")
    assert reads.live_children(conn, "ENG", None) == 2 and reads.live_children(conn, "ENG", mid) == 1
    node.submit_vectors([put(top, "ENG", 1, 1), put(leaf, "ENG", 1, 2), put(other, "PROD", 1, 3),
                         put(lone, "ENG", 7, 4)])                       # lone's vector: a revision it never had
    check("vectors put")
    assert vectors.coverage(conn, SPACE) == (3, 5) and vectors.sources(conn, SPACE) == 4
    node.submit([save_rec(top, "t2", 1)])
    check("a save (top's vector no longer current)")
    assert vectors.coverage(conn, SPACE) == (2, 5)
    node.submit_vectors([vectors.restamp_record(top, SPACE, "ENG", 2, "d1")])
    check("a restamp")
    node.submit([rec("page.rename", page_id=leaf, title="Leaf Renamed")])
    check("a rename (a new revision)")
    node.submit([move_rec(leaf, top)])
    check("a move")
    assert reads.live_children(conn, "ENG", mid) == 0 and reads.live_children(conn, "ENG", top) == 2
    node.submit([trash_rec(leaf), trash_rec(mid)])
    check("trash")
    node.submit([restore_rec(mid)])
    check("a restore")
    node.submit([trash_rec(mid), purge_rec(mid)])
    check("a purge")
    node.submit([rec("page.labels", page_id=top, labels=["x"]), create_rec("ENG", "Child", "c", parent_id=top)])
    check("labels and a create under a parent")
    node.submit_vectors([vectors.drop_record(other)])
    check("a vector dropped")
    node.submit([trash_rec(lone)])
    check("a page with a stale vector trashed")
    assert len(steps) == 12

    replayed = connect(tmp_path / "replay.db")
    with FileLog(node.home.log_file, readonly=True) as flog, FileLog(node.home.vectors_log_file, readonly=True) as vlog:
        applier.catch_up(replayed, flog)
        vectors_applier.catch_up(replayed, vlog)
    assert kept(replayed) == recount(replayed) == recount(conn)
    replayed.close()


def test_counts_are_counted_when_a_database_without_them_is_migrated(kb: KnowledgeBase) -> None:
    for i in range(30):
        kb.create_page("ENG" if i % 3 else "PROD", f"Page {i}", "x", actor="alex")
    kb.trash_page("ENG/Page 1", actor="alex")
    conn = kb.conn
    before = recount(conn)
    # the database as a crewlet before the counts left it
    for trigger in [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]:
        conn.execute(f"DROP TRIGGER {trigger}")
    for table in ("page_levels", "page_spaces", "vector_counts"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM _migrations WHERE name = 'm008_counts'")
    assert migrate(conn) == ["m008_counts"]
    assert kept(conn) == recount(conn) == before
    spaces = {s["key"]: s["pages"] for s in kb.spaces(actor="alex")}
    assert spaces["ENG"] == 19 and spaces["PROD"] == 10


def test_listings_read_the_counts(kb: KnowledgeBase) -> None:
    """`spaces` and a level's total and child counts come off the kept counts: made to disagree with the
    rows (as no write ever leaves them), the listing says what the counts say."""
    top = kb.create_page("ENG", "Top", "", actor="alex")
    for i in range(3):
        kb.create_page("ENG", f"Child {i}", "x", actor="alex", parent=top.id)
    window = kb.list_pages("ENG")
    assert window.total == 1 and window.pages[0].child_count == 3
    kb.conn.execute("UPDATE page_levels SET live = 42 WHERE parent = ?", (top.id,))
    kb.conn.execute("UPDATE page_spaces SET live = 99 WHERE container = 'ENG'")
    assert kb.list_pages("ENG").pages[0].child_count == 42
    assert kb.list_pages("ENG", parent=top.id).total == 42
    assert {s["key"]: s["pages"] for s in kb.spaces(actor="alex")}["ENG"] == 99


def test_the_reads_a_search_starts_with_say_what_the_scans_said(kb: KnowledgeBase) -> None:
    """The trashed and auto-draft pages a semantic search passes over, and the pages beneath an excluded
    ancestor, read through indexes and the kept counts: the same pages the scans over every row found."""
    draft = kb.create_page("ENG", "[Auto-draft] Deploy notes", "x", actor="alex")
    kb.create_page("PROD", "[AUTO-DRAFT]   shouting", "x", actor="alex")
    kb.create_page("ENG", "Auto-draft without brackets", "x", actor="alex")
    gone = kb.create_page("PROD", "Gone", "x", actor="alex")
    kb.trash_page(gone.id, actor="alex")
    parent = kb.create_page("ENG", "Secret", "", actor="alex")
    child = kb.create_page("ENG", "Inside", "x", actor="alex", parent=parent.id)
    kb.create_page("ENG", "Deeper", "x", actor="alex", parent=child.id)
    conn = kb.conn
    scanned = frozenset(r[0] for r in conn.execute(
        "SELECT id FROM pages WHERE trashed_at IS NOT NULL OR title LIKE ?", ("[Auto-draft]%",)))
    assert reads.trashed_or_titled(conn, "[Auto-draft]") == scanned and draft.id in scanned and len(scanned) == 3
    assert len(reads.beneath(conn, ["secret"])) == 2
    assert reads.containers_holding(conn, ["ENG", "PROD", "NOPE"]) == {"ENG", "PROD"}


def test_sync_status_on_a_big_home_says_the_published_digest_instead_of_reading_every_row(tmp_path: Path,
                                                                                         monkeypatch: Any) -> None:
    """Past DIGEST_NOW_MAX live pages `sync status` does not read every row for the content digest: it says
    the digest published at these positions, or that none was; `--digest` computes it."""
    import json as json_mod

    from typer.testing import CliRunner

    from conftest import new_home
    from core.store import digest as digest_mod
    from core.sync import status as status_mod
    from crewlet_tui.cli import app

    env = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "250"}

    def cli(*args: str) -> Any:
        res = CliRunner().invoke(app, ["--home", str(tmp_path / "A"), *args], env=env)
        assert res.exit_code == 0, (res.stdout, res.stderr)
        return res

    new_home(tmp_path / "A")
    cli("sync", "join", str(tmp_path / "shared"))
    cli("page", "create", "ENG", "One")
    monkeypatch.setattr(status_mod, "DIGEST_NOW_MAX", 0)
    computed: list[int] = []
    real = digest_mod.content_digest
    import core.node as node_mod

    def counting(source: Any) -> Any:
        computed.append(1)
        return real(source)

    monkeypatch.setattr(digest_mod, "content_digest", counting)
    monkeypatch.setattr(node_mod, "content_digest", counting)       # the node publishes through its own name
    out = json_mod.loads(cli("sync", "status", "--json").stdout)
    assert out["digest"] is None and "--digest" in out["digest_note"] and not computed
    assert "not computed at this position" in cli("sync", "status").stdout
    out = json_mod.loads(cli("sync", "status", "--json", "--digest").stdout)
    assert out["digest"]["content"] and computed                        # asked for: computed, and published
    computed.clear()
    out = json_mod.loads(cli("sync", "status", "--json").stdout)        # the one published at this position
    assert out["digest"]["content"] and out["digest_note"] is None and not computed


def test_counts_follow_an_import_and_a_second_one_over_it(kb: KnowledgeBase, tmp_path: Path) -> None:
    """The importer writes in bulk (its own batches, a rollback journal while alone): the triggers count
    those rows as they count any other; a second import over the first (pages saved, new folders made)
    and changes made by hand between them keep the counts right."""
    from core.importer import import_directory

    root = tmp_path / "docs"
    for i in range(60):
        path = root / f"part-{i % 3}" / f"dir-{i % 4}" / f"page-{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Page {i}\n\nbody {i}\n", encoding="utf-8")
    first = import_directory(kb, root, actor="alex", into="DOCS", declare_spaces=True)
    first.close()
    assert first.created == 60 + 3 + 12 and not first.failures
    assert kept(kb.conn) == recount(kb.conn), "after the first import"
    assert kb.list_pages("DOCS").total == 3

    kb.trash_page("DOCS/Page 7", actor="alex")
    kb.move_page("DOCS/Page 8", None, actor="alex")
    assert kept(kb.conn) == recount(kb.conn), "after a trash and a move by hand"
    (root / "part-0" / "dir-0" / "page-000.md").write_text("# Page 0\n\nedited\n", encoding="utf-8")
    for i in range(60, 70):
        path = root / "part-9" / f"page-{i:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Page {i}\n\nbody {i}\n", encoding="utf-8")
    kb.restore_page("DOCS/Page 7", actor="alex")       # an import refuses a file whose page is in the trash
    assert kept(kb.conn) == recount(kb.conn), "after a restore by hand"
    second = import_directory(kb, root, actor="alex", into="DOCS")
    second.close()
    assert second.created >= 11 and not second.failures
    assert kept(kb.conn) == recount(kb.conn), "after the second import"
    assert kb.list_pages("DOCS").total == count_top(kb.conn, "DOCS")


def count_top(conn: Any, container: str) -> int:
    return conn.execute("SELECT count(*) FROM pages WHERE container = ? AND parent_id IS NULL "
                        "AND trashed_at IS NULL", (container,)).fetchone()[0]


def test_counts_follow_records_replicated_from_another_node(tmp_path: Path) -> None:
    """Two nodes sharing one directory of logs, each writing, each applying what the other wrote — creates,
    moves, trashes, restores and purges, one page moved by both: every node's counts agree with its rows,
    and the two nodes' rows agree."""
    from typer.testing import CliRunner

    from conftest import new_home
    from crewlet_tui.cli import app

    env = {"CREWLET_HOME": None, "CREWLET_AS": None, "COLUMNS": "200"}
    a_home = new_home(tmp_path / "A")
    shared = tmp_path / "shared"
    for root in (a_home.root, tmp_path / "B"):
        res = CliRunner().invoke(app, ["--home", str(root), "sync", "join", str(shared)], env=env)
        assert res.exit_code == 0, (res.stdout, res.stderr)
    from core.paths import Home

    with Node.open(Home(a_home.root)) as na, Node.open(Home(tmp_path / "B")) as nb:
        a, b = KnowledgeBase(na), KnowledgeBase(nb)

        def both(step: str) -> None:
            na.catch_up()
            nb.catch_up()
            assert kept(na.conn) == recount(na.conn), f"A after {step}"
            assert kept(nb.conn) == recount(nb.conn), f"B after {step}"
            assert recount(na.conn) == recount(nb.conn), f"A and B after {step}"

        top = a.create_page("ENG", "Counted Top", "t", actor="alex")
        kids = [a.create_page("ENG", f"Counted Kid {i}", "k", actor="alex", parent=top.id) for i in range(4)]
        other = b.create_page("ENG", "Counted Other", "o", actor="alex")
        b.create_page("PROD", "Counted Elsewhere", "e", actor="alex")
        both("creates on both")
        b.move_page(kids[0].id, other.id, actor="alex")
        a.trash_page(kids[1].id, actor="alex")
        both("a move on B, a trash on A")
        b.restore_page(kids[1].id, actor="alex")
        both("a restore on B of A's trash")
        a.trash_page(kids[2].id, actor="alex")
        a.purge_page(kids[2].id, actor="alex")
        both("a purge")
        a.move_page(kids[3].id, other.id, actor="alex")
        b.move_page(kids[3].id, None, actor="alex")       # B applies A's move as it appends its own
        b.create_page("ENG", "Counted Late", "l", actor="alex", parent=top.id)
        both("one page moved on both nodes")
