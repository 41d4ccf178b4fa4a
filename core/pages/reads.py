"""The page tables as the rest of the engine reads them: a search's hits, its access policy and its stamp,
the importer's plan, a repair's report. Each function runs on the connection it is given, under the
caller's lock; what writes these tables is the applier (pages/applier.py) and, for the backlinks a node
derives, pages/links.py.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# what the hit assembly re-checks of a candidate against the current rows
HIT_COLUMNS = "id, container, title, parent_id, trashed_at, version"
# what the importer matches a tree against (the body: an unchanged file writes nothing)
PLAN_COLUMNS = "id, container, address, title, body, revision, parent_id, labels, trashed_at, created_by"


def version(conn: Any) -> int:
    """The pages' version: the log position of the last record that changed any page row (0 for none).
    Anything derived from the rows is current while this has not moved."""
    return conn.execute("SELECT max(version) FROM pages").fetchone()[0] or 0


def _marks(n: int) -> str:
    return ",".join("?" * n)


def by_id(conn: Any, ids: Sequence[str], columns: str = HIT_COLUMNS) -> dict[str, Any]:
    """The rows of `ids` that exist (trashed ones too), by id."""
    return {r["id"]: r for r in conn.execute(f"SELECT {columns} FROM pages WHERE id IN ({_marks(len(ids))})", list(ids))}


def bodies(conn: Any, ids: Sequence[str]) -> list[Any]:
    """(id, version, body) of the rows of `ids` that exist."""
    return conn.execute(f"SELECT id, version, body FROM pages WHERE id IN ({_marks(len(ids))})", list(ids)).fetchall()


def ancestors(conn: Any, parent_id: str | None) -> list[dict[str, str]]:
    """The chain of pages above a page whose parent is `parent_id`, outermost first ({"id", "title"})."""
    chain: list[dict[str, str]] = []
    seen: set[str] = set()
    while parent_id and parent_id not in seen:
        seen.add(parent_id)
        row = conn.execute("SELECT id, title, parent_id FROM pages WHERE id = ?", (parent_id,)).fetchone()
        if row is None:
            break
        chain.append({"id": row["id"], "title": row["title"]})
        parent_id = row["parent_id"]
    return list(reversed(chain))


def in_container(conn: Any, container: str, columns: str = PLAN_COLUMNS) -> list[Any]:
    """Every row of `container`, trashed ones too."""
    return conn.execute(f"SELECT {columns} FROM pages WHERE container = ?", (container,)).fetchall()


def containers_holding(conn: Any, containers: Sequence[str]) -> set[str]:
    """Those of `containers` that hold a live page."""
    return {r[0] for r in conn.execute(
        f"SELECT DISTINCT container FROM pages WHERE trashed_at IS NULL AND container IN ({_marks(len(containers))})",
        list(containers))}


def beneath(conn: Any, addresses: Sequence[str]) -> frozenset[str]:
    """Every page beneath a page whose title's address is one of `addresses`, in any container."""
    # the container list lets SQLite find the ancestors through pages_address (container, address): by
    # address alone it read the whole pages table, bodies and all (~40 ms of a keyword search at 14,000 pages)
    rows = conn.execute(
        "WITH RECURSIVE under(id) AS ("
        " SELECT c.id FROM pages c JOIN pages a ON c.parent_id = a.id"
        f" WHERE a.container IN (SELECT DISTINCT container FROM pages) AND a.address IN ({_marks(len(addresses))})"
        " UNION SELECT p.id FROM pages p JOIN under u ON p.parent_id = u.id)"
        " SELECT id FROM under", list(addresses)).fetchall()
    return frozenset(r[0] for r in rows)


def trashed_or_titled(conn: Any, title_prefix: str) -> frozenset[str]:
    """Pages in the trash, and pages whose title starts with `title_prefix` (SQL LIKE: case-insensitive)."""
    return frozenset(r[0] for r in conn.execute(
        "SELECT id FROM pages WHERE trashed_at IS NOT NULL OR title LIKE ?", (title_prefix + "%",)))


def where_is(conn: Any, page_id: str) -> str:
    """CONTAINER/Title of a page, `page <id>` for one no row has."""
    row = conn.execute("SELECT container, title FROM pages WHERE id = ?", (page_id,)).fetchone()
    return f"{row['container']}/{row['title']}" if row else f"page {page_id}"


def held_back(conn: Any) -> int:
    """Live pages whose present revision the embedding provider refused (held back, then offered again)."""
    return int(conn.execute("SELECT count(*) FROM embed_holds h JOIN pages p ON p.id = h.source_id "
                            "WHERE p.trashed_at IS NULL AND h.revision = p.revision").fetchone()[0])
