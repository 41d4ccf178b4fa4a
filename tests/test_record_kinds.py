"""A record kind is one declaration (core/replica/kinds.py): these hold every log's declarations against the
database a fresh home migrates to, the content digest and the snapshot, so that a new kind (an entry, issue 35)
that forgets a part — its table's line in the digest, how a repair gives it back, what a purge does to its rows —
fails here instead of two nodes differing unseen or a lost record becoming a tombstone."""
from __future__ import annotations

import pytest

from conftest import new_home

from core.log import Record
from core.node import Node, home_streams
from core.pages import applier
from core.pages.kinds import BY_FOREIGN_KEY, PURGED_WITH_PAGE
from core.pages.kinds import KINDS as PAGE_KINDS
from core.recover import kinds_of
from core.replica.kinds import LOST, LogKinds, RecordKind, Related, every_table, house_problems
from core.replica.shapes import TEXT, need
from core.store import connect
from core.store.digest import NODE_LOCAL, REPLICATED, TABLES, content_digest
from core.sync import snapshot
from core.vectors import applier as vector_applier
from core.vectors.kinds import KINDS as VECTOR_KINDS

LOGS = (PAGE_KINDS, VECTOR_KINDS)


def _schema_tables(tmp_path) -> dict[str, str]:
    """Every table a freshly migrated database holds (name -> its CREATE statement), SQLite's own left out."""
    conn = connect(tmp_path / "fresh.db")
    try:
        return {r[0]: r[1] for r in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    finally:
        conn.close()


# -- a declaration that lacks a part does not import ---------------------------------------------------------

def _handle(conn, rec):
    return {}


def _give_back(conn, seq, op, related):
    return [], ""


def _whole(**change):
    parts = {"type": "entry.add", "build": lambda: Record.new("entry.add", "a", {}), "shape": {"entry_id": need(TEXT)},
             "writes": ("entries",), "give_back": _give_back, "handle": _handle, "related": ("entry_id",)}
    return {**parts, **change}


def test_a_whole_declaration_is_accepted():
    kind = RecordKind(**_whole())
    assert kind.problems() == []
    log = LogKinds("test", [kind], own_tables=("applied_ops",))
    assert log.handlers == {"entry.add": _handle} and log.tables == ("applied_ops", "entries")
    assert log.related_keys == ("entry_id",) and log.give_back("entry.add") is _give_back


@pytest.mark.parametrize("missing", ["build", "shape", "writes", "give_back"])
def test_a_declaration_without_a_required_part_does_not_import(missing):
    parts = _whole()
    del parts[missing]
    with pytest.raises(TypeError, match=missing):
        RecordKind(**parts)


@pytest.mark.parametrize("change, said", [
    ({"handle": None}, "exactly one of a handler"),
    ({"verdict": lambda rec: None}, "exactly one of a handler"),
    ({"give_back": ""}, "give_back"),
    ({"give_back": None}, "give_back"),
    ({"writes": ["entries"]}, "writes"),
    ({"build": None}, "builder"),
    ({"type": "entry"}, "family.verb"),
    ({"related": ("page",)}, "does not hold"),
])
def test_a_declaration_with_a_part_wrong_names_it(change, said):
    with pytest.raises(TypeError, match=said):
        RecordKind(**_whole(**change))


def test_a_kind_declared_twice_on_a_log_is_refused():
    with pytest.raises(TypeError, match="declared twice"):
        LogKinds("test", [RecordKind(**_whole()), RecordKind(**_whole())])


def test_a_table_two_logs_write_is_refused():
    one = LogKinds("one", [RecordKind(**_whole())])
    two = LogKinds("two", [RecordKind(**_whole(type="entry.other"))])
    with pytest.raises(TypeError, match="entries"):
        every_table([one, two])


# -- the real declarations -----------------------------------------------------------------------------------

@pytest.mark.parametrize("log", LOGS, ids=lambda log: log.log)
def test_every_declared_kind_is_whole(log):
    assert [(k.type, k.problems()) for k in log if k.problems()] == []
    assert LOST in log, f"the {log.log} log does not declare the tombstone a repair writes on it"


def test_every_log_a_home_streams_registers_its_declarations(tmp_path):
    """The appliers the engine runs are read off the declarations: no kind is handled that is not declared, and
    none declared goes unhandled."""
    home = new_home(tmp_path / "home")
    with_appliers = {name: stream_applier for name, _path, stream_applier in home_streams(home)}
    assert set(with_appliers) == {log.log for log in LOGS}
    pages = with_appliers["pages"]
    assert pages is applier.PAGES
    assert set(pages.handlers) | set(pages.verdicts) == set(PAGE_KINDS.types)
    assert dict(pages.shapes) == PAGE_KINDS.shapes
    assert set(vector_applier.handlers()) == set(VECTOR_KINDS.types)
    assert vector_applier.shapes() == VECTOR_KINDS.shapes
    for log in LOGS:
        assert kinds_of(log.log) is log


def test_every_table_a_kind_writes_is_replicated_and_written_by_one_log():
    """A kind that writes a table the content digest does not cover: two nodes could differ there unseen."""
    written = every_table(LOGS)
    not_in_digest = {t: log for t, log in written.items() if t not in REPLICATED}
    assert not_in_digest == {}, "add these tables to core/store/digest.py TABLES with their replicated rows"


def test_every_replicated_table_is_written_by_some_kind():
    """A replicated table no kind writes would be compared, carried and digested, and filled by no log."""
    written = every_table(LOGS)
    assert [t for t in REPLICATED if t not in written] == []


def test_every_table_the_migrations_create_is_declared_once(tmp_path):
    """Open a real fresh database: each of its tables is replicated, a node's own, or carried with the rows —
    exactly one of them (Table refuses two) — and the declarations name no table the migrations do not make."""
    made = set(_schema_tables(tmp_path))
    declared = [t.name for t in TABLES]
    assert sorted(t for t in set(declared) if declared.count(t) > 1) == []
    assert sorted(made - set(declared)) == [], (
        "declare these tables in core/store/digest.py TABLES: replicated (rows), local or carried")
    assert sorted(set(declared) - made) == []
    assert set(REPLICATED).isdisjoint(NODE_LOCAL)
    assert snapshot.NODE_LOCAL_TABLES == NODE_LOCAL


def test_the_house_is_whole(tmp_path):
    conn = connect(tmp_path / "fresh.db")
    try:
        assert house_problems(LOGS, conn) == []
    finally:
        conn.close()


def test_a_new_kind_that_forgets_its_tables_line_in_the_digest_is_named(tmp_path):
    """The recipe's failure: a kind declared (issue 37's knowledge gaps, say), its migration run, its table left out
    of the digest's TABLES — two nodes would differ there unseen. The house says so, naming the table and the fix."""
    conn = connect(tmp_path / "fresh.db")
    try:
        conn.execute("CREATE TABLE knowledge_gaps (id TEXT PRIMARY KEY, question TEXT NOT NULL)")  # its migration's
        gap = RecordKind(**_whole(type="gap.ask", writes=("knowledge_gaps",), related=()))
        pages = LogKinds("pages", [*PAGE_KINDS, gap], own_tables=PAGE_KINDS.own_tables)
        problems = house_problems([pages, VECTOR_KINDS], conn)
    finally:
        conn.close()
    assert problems == [
        "record kind 'gap.ask' writes table 'knowledge_gaps', which the content digest does not cover: add its "
        "replicated rows to core/store/digest.py TABLES",
        "table 'knowledge_gaps' (made by a migration) is not declared: add it to core/store/digest.py TABLES — "
        "replicated (its rows), a node's own (local) or carried"]


def test_a_replicated_table_no_kind_writes_is_named(tmp_path):
    conn = connect(tmp_path / "fresh.db")
    try:
        pages = LogKinds("pages", [k for k in PAGE_KINDS if k.type != "knowledge.read"],
                         own_tables=PAGE_KINDS.own_tables)
        problems = house_problems([pages, VECTOR_KINDS], conn)
    finally:
        conn.close()
    assert problems == ["replicated table 'knowledge_reads' is written by no record kind: name it in the `writes` "
                        "of the kinds that fill it"]


def test_a_table_declared_two_ways_is_refused():
    from core.store.digest import Table

    with pytest.raises(TypeError, match="exactly one"):
        Table("entries", rows="SELECT 1", local="mine")
    with pytest.raises(TypeError, match="exactly one"):
        Table("entries")


def test_every_table_whose_rows_name_a_page_says_what_a_purge_does_to_them(tmp_path):
    """A row left naming a purged page is one no walk reaches (and a replay of the purge would keep it on one node
    and not another): every table with a page_id column or a foreign key to pages declares its fate."""
    conn = connect(tmp_path / "fresh.db")
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                            "AND name NOT LIKE 'sqlite_%' AND name != 'pages'")]
        under: dict[str, list] = {}
        for name in names:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({name})")]
            keys = [r for r in conn.execute(f"PRAGMA foreign_key_list({name})") if r[2] == "pages"]
            if "page_id" in columns or keys:
                under[name] = keys
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1     # what BY_FOREIGN_KEY stands on
    finally:
        conn.close()
    assert sorted(set(under) - set(PURGED_WITH_PAGE)) == [], "say what a purge does to these in pages/kinds.py"
    for table, fate in PURGED_WITH_PAGE.items():
        if fate == BY_FOREIGN_KEY:
            assert [k[6] for k in under.get(table, [])] == ["CASCADE"], f"{table} has no ON DELETE CASCADE to pages"
        else:
            assert fate.startswith(("DELETE FROM ", "KEPT: ")), f"{table}: {fate!r}"


def test_a_purge_runs_what_the_declarations_say(tmp_path):
    from core.pages.service import KnowledgeBase

    home = new_home(tmp_path / "home")
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Gone", "links to [[Kept]]", actor="alex")
        kb.create_page("ENG", "Kept", "", actor="alex")
        kb.add_comment(page.id, "a comment", actor="alex")
        node.conn.execute("INSERT OR IGNORE INTO page_links (src, dst) VALUES (?, 'x')", (page.id,))
        kb.trash_page(page.id, actor="alex")
        kb.purge_page(page.id, actor="alex")
        left = {t: node.conn.execute(f"SELECT count(*) FROM {t} WHERE {col} = ?", (page.id,)).fetchone()[0]
                for t, col in (("page_links", "src"), ("revisions", "page_id"), ("comments", "page_id"),
                               ("deleted_pages", "page_id"))}
    assert left == {"page_links": 0, "revisions": 0, "comments": 0, "deleted_pages": 1}


# -- the derived lists are what the house reads --------------------------------------------------------------

def test_the_repairs_replay_compares_each_logs_declared_tables():
    from core import repair

    for log in LOGS:
        assert set(repair.TABLES[log.log]) == set(log.tables)
    assert set(repair.TABLES["pages"]) | set(repair.TABLES["vectors"]) == set(REPLICATED)


def test_the_digest_covers_exactly_the_replicated_tables(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node:
        digest = content_digest(node.conn)
    assert list(digest.tables) == list(REPLICATED)


def test_every_page_kind_a_database_can_give_back_is_asked_by_its_declaration():
    """core/recover.py has no branch per kind: each kind's give-back is its declaration's."""
    import inspect

    from core import recover

    source = inspect.getsource(recover)
    for kind in PAGE_KINDS.types:
        if kind != LOST:
            assert f'"{kind}"' not in source, f"core/recover.py names {kind}: dispatch on its declaration"


def test_the_related_keys_are_read_off_the_declarations():
    keys = PAGE_KINDS.related_keys
    assert set(keys) == {"page_id", "comment_id", "key", "entry_id", "run_id", "proposal_id"}
    assert PAGE_KINDS.related_all == {"page.purge", "onboarding.mark"}
    assert Related().purges == [] and VECTOR_KINDS.related_keys == ()
