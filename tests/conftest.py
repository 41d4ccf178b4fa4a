"""Shared fixtures for the engine and CLI tests: real homes on disk (company.toml, SQLite, log).

`home`  — a fresh initialised home with `example_config()` and no pages (not opened).
`node`  — a Node open on `home` (closed at teardown).
`kb`    — a KnowledgeBase over `node`.
`make_home(config, name=...)` — another initialised home, for tests that need a different config.

Record helpers build records the way a writer would, for tests that append straight to the log
(to race two records in one batch, or to control `at`).
"""
from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the project is not necessarily installed into the interpreter
    sys.path.insert(0, str(ROOT))

from core import config as config_mod  # noqa: E402
from core.log import Record  # noqa: E402
from core.node import Node, init_home  # noqa: E402
from core.pages import applier  # noqa: E402
from core.pages.service import KnowledgeBase  # noqa: E402
from core.paths import Home  # noqa: E402
from core.replica import engine  # noqa: E402

# What crewlet derives for itself (the local model as onnxruntime optimised it: core/embed/prepared.py)
# goes to a directory of this test session, not the user's cache: set before anything loads the model,
# and inherited by the CLI processes tests start. A cache named from outside (CREWLET_CACHE) is kept.
if not os.environ.get("CREWLET_CACHE"):
    import atexit
    import shutil
    import tempfile

    _TEST_CACHE = tempfile.mkdtemp(prefix="crewlet-test-cache-")
    os.environ["CREWLET_CACHE"] = _TEST_CACHE
    atexit.register(shutil.rmtree, _TEST_CACHE, True)

DAY_MS = 24 * 3600 * 1000
# a fixed instant for records whose `at` a test controls (2025-01-01T00:00:00Z)
T0 = 1_735_689_600_000

# tables every node fills from the pages log alone, as its kinds declare them (compared by the replay test)
from core.pages.kinds import KINDS as _PAGE_KINDS  # noqa: E402

REPLAYED_TABLES = (*_PAGE_KINDS.tables, "log_position")


# -- homes -----------------------------------------------------------------------------------------

def new_home(root: Path, config: dict[str, Any] | None = None) -> Home:
    home = Home(root)
    init_home(home, config if config is not None else config_mod.example_config())
    return home


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return new_home(tmp_path / "home")


@pytest.fixture
def make_home(tmp_path: Path) -> Callable[..., Home]:
    counter = iter(range(1_000_000))

    def _make(config: dict[str, Any] | None = None, name: str | None = None) -> Home:
        return new_home(tmp_path / (name or f"home{next(counter)}"), config)

    return _make


@pytest.fixture
def node(home: Home) -> Iterator[Node]:
    n = Node.open(home)
    try:
        yield n
    finally:
        n.close()


@pytest.fixture
def kb(node: Node) -> KnowledgeBase:
    return KnowledgeBase(node)


def config_with(**changes: Any) -> dict[str, Any]:
    """example_config() with top-level tables merged (one level deep)."""
    data = config_mod.example_config()
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


def bump_mtime(path: Path, delta_ms: int) -> int:
    """Move a file's mtime by delta_ms (the config's activation instant is its mtime); returns it in ms."""
    st = path.stat()
    new_ns = st.st_mtime_ns + delta_ms * 1_000_000
    os.utime(path, ns=(st.st_atime_ns, new_ns))
    return new_ns // 1_000_000


# -- records ---------------------------------------------------------------------------------------

def pid() -> str:
    return uuid.uuid4().hex[:16]


def rec(type_: str, actor: str = "alex", *, at: int | None = None, op_id: str | None = None, **payload: Any) -> Record:
    return Record.new(type_, actor, payload, at=at, op_id=op_id)


def create_rec(container: str, title: str, body: str = "", *, actor: str = "alex", parent_id: str | None = None,
               page_id: str | None = None, at: int | None = None, op_id: str | None = None, **extra: Any) -> Record:
    return rec("page.create", actor, at=at, op_id=op_id, page_id=page_id or pid(), container=container,
               title=title, body=body, parent_id=parent_id, **extra)


def save_rec(page_id: str, body: str, base: int, *, actor: str = "alex", at: int | None = None, **extra: Any) -> Record:
    return rec("page.save", actor, at=at, page_id=page_id, base_revision=base, body=body, **extra)


def move_rec(page_id: str, parent_id: str | None, *, actor: str = "alex", at: int | None = None) -> Record:
    return rec("page.move", actor, at=at, page_id=page_id, parent_id=parent_id)


def trash_rec(page_id: str, *, actor: str = "alex", at: int | None = None) -> Record:
    return rec("page.trash", actor, at=at, page_id=page_id)


def restore_rec(page_id: str, *, actor: str = "alex", at: int | None = None) -> Record:
    return rec("page.restore", actor, at=at, page_id=page_id)


def purge_rec(page_id: str, *, actor: str = "alex", at: int | None = None, **extra: Any) -> Record:
    return rec("page.purge", actor, at=at, page_id=page_id, **extra)


# -- reading rows ----------------------------------------------------------------------------------

def rows(conn: Any, sql: str, args: tuple = ()) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sql, args).fetchall()]


def count(conn: Any, sql: str, args: tuple = ()) -> int:
    return conn.execute(sql, args).fetchone()[0]


def table_rows(conn: Any, table: str) -> list[tuple]:
    return sorted(rows(conn, f"SELECT * FROM {table}"), key=repr)


def record_types(node: Node) -> list[str]:
    return [r.type for r, _ in node.log.read()]


class OneAtATime:
    """The pages log applied one record at a time (`applier.apply_record`: a savepoint, an op_id lookup and
    an outcome INSERT each), as the applier did before it applied a chunk at a time: what the chunked
    path is held against."""

    position = applier.APPLIER
    batch = engine.TXN_RECORDS

    def apply(self, conn: Any, records: Any, *, careful: bool = False) -> list:
        return [o for o in (applier.apply_record(conn, r) for r in records) if o is not None]

# -- NATS JetStream servers (tests/nats_server.py) ---------------------------------------------------

@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[Any]:
    """A JetStream-enabled nats-server on a free port with its own storage, stopped at teardown."""
    from nats_server import NatsServer

    with NatsServer(tmp_path / "nats") as server:
        yield server


@pytest.fixture
def nats_cluster(tmp_path: Path) -> Iterator[Any]:
    """Three nats-servers in one JetStream cluster, each with its own storage, stopped at teardown."""
    from nats_server import NatsCluster

    with NatsCluster(tmp_path / "nats-cluster", size=3) as cluster:
        yield cluster
