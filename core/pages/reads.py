"""The page tables as the rest of the engine reads them: a search's hits, its access policy and its stamp,
the importer's plan, a repair's report. Each function runs on the connection it is given, under the
caller's lock; what writes these tables is the applier (pages/handlers.py) and, for the backlinks a node
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


def live_pages(conn: Any, container: str | None = None) -> int:
    """Live pages (not in the trash), of one container or of all: read off the counts the rows keep
    (store/migrations.py m008), never a scan."""
    if container is not None:
        row = conn.execute("SELECT live FROM page_spaces WHERE container = ?", (container,)).fetchone()
        return row[0] if row else 0
    return conn.execute("SELECT coalesce(sum(live), 0) FROM page_spaces").fetchone()[0]


def live_by_container(conn: Any) -> dict[str, int]:
    """container -> its live pages, for every container holding one."""
    return {r[0]: r[1] for r in conn.execute("SELECT container, live FROM page_spaces WHERE live > 0")}


def live_children(conn: Any, container: str, parent_id: str | None) -> int:
    """Live pages directly under `parent_id` (None: the container's top), off the kept counts."""
    row = conn.execute("SELECT live FROM page_levels WHERE parent = ? AND container = ?",
                       (parent_id or "", container)).fetchone()
    return row[0] if row else 0


def _marks(n: int) -> str:
    return ",".join("?" * n)


def by_id(conn: Any, ids: Sequence[str], columns: str = HIT_COLUMNS) -> dict[str, Any]:
    """The rows of `ids` that exist (trashed ones too), by id."""
    return {r["id"]: r for r in conn.execute(f"SELECT {columns} FROM pages WHERE id IN ({_marks(len(ids))})", list(ids))}


# a folder is a page whose body is blank by pages.model.is_folder's rule (FOLDER_BLANK): the same trim in SQL
IS_FOLDER_SQL = "length(trim(body, char(9,10,13,32))) = 0"


def folder_titles(conn: Any, ids: Sequence[str]) -> dict[str, str]:
    """Which of these pages are folders: id -> title."""
    found: dict[str, str] = {}
    ids = list(ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        found.update((r[0], r[1]) for r in conn.execute(
            f"SELECT id, title FROM pages WHERE id IN ({_marks(len(chunk))}) AND {IS_FOLDER_SQL}", chunk))
    return found


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
    """Those of `containers` that hold a live page (off the kept counts)."""
    return {r[0] for r in conn.execute(
        f"SELECT container FROM page_spaces WHERE live > 0 AND container IN ({_marks(len(containers))})",
        list(containers))}


def beneath(conn: Any, addresses: Sequence[str]) -> frozenset[str]:
    """Every page beneath a page whose title's address is one of `addresses`, in any container."""
    # the container list lets SQLite find the ancestors through pages_address (container, address): by
    # address alone it read the whole pages table, bodies and all (~40 ms of a keyword search at 14,000 pages);
    # the containers come off the kept counts (DISTINCT over pages read a whole index: 0.5 s at 250,000). A
    # live page's ancestors are live, so the containers holding a live page are every container it needs.
    rows = conn.execute(
        "WITH RECURSIVE under(id) AS ("
        " SELECT c.id FROM pages c JOIN pages a ON c.parent_id = a.id"
        f" WHERE a.container IN (SELECT container FROM page_spaces WHERE live > 0)"
        f" AND a.address IN ({_marks(len(addresses))})"
        " UNION SELECT p.id FROM pages p JOIN under u ON p.parent_id = u.id)"
        " SELECT id FROM under", list(addresses)).fetchall()
    return frozenset(r[0] for r in rows)


def trashed_or_titled(conn: Any, title_prefix: str) -> frozenset[str]:
    """Pages in the trash, and pages whose title starts with `title_prefix` (as SQL LIKE: ASCII case aside).

    Through indexes, not a scan of every row (a semantic search's first question at every start: seconds at
    a million pages): the trashed ones by pages_trashed, the titled ones by their address — a title starting
    with an ASCII prefix has an address starting with that prefix lower-cased — in each container's range
    of pages_address, checked against the title itself."""
    found = {r[0] for r in conn.execute("SELECT id FROM pages WHERE trashed_at IS NOT NULL")}
    low = title_prefix.lower()
    if title_prefix.isascii() and title_prefix.strip() == title_prefix and " " not in title_prefix:
        for (container,) in conn.execute("SELECT container FROM page_spaces").fetchall():
            for page_id, title in conn.execute(
                    "SELECT id, title FROM pages WHERE container = ? AND address >= ? AND address < ?",
                    (container, low, low + "\U0010ffff")):
                if title[:len(low)].lower() == low:
                    found.add(page_id)
    else:
        found |= {r[0] for r in conn.execute("SELECT id FROM pages WHERE title LIKE ?", (title_prefix + "%",))}
    return frozenset(found)


def where_is(conn: Any, page_id: str) -> str:
    """CONTAINER/Title of a page, `page <id>` for one no row has."""
    row = conn.execute("SELECT container, title FROM pages WHERE id = ?", (page_id,)).fetchone()
    return f"{row['container']}/{row['title']}" if row else f"page {page_id}"


def held_back(conn: Any) -> int:
    """Live pages whose present revision the embedding provider refused (held back, then offered again)."""
    return int(conn.execute("SELECT count(*) FROM embed_holds h JOIN pages p ON p.id = h.source_id "
                            "WHERE p.trashed_at IS NULL AND h.revision = p.revision").fetchone()[0])
