"""Is a container one a reader can ask about? The one place every surface asks it (`crewlet pages KEY`,
`crewlet search --container KEY`, the searcher seam), so a typo is refused alike everywhere rather than
answered "nothing matched" by one command and "no space" by another."""
from __future__ import annotations

from typing import Any

from ..config import Company


def unknown_container(conn: Any, company: Company, key: str) -> str | None:
    """Why `key` names no container (None when it does): one neither declared in company.toml nor holding
    a live page. An undeclared container that holds pages (an import's, an old configuration's) is known:
    it is reachable by address and by search. The caller holds the node's lock."""
    if company.is_declared(key):
        return None
    if conn.execute("SELECT 1 FROM pages WHERE container = ? AND trashed_at IS NULL LIMIT 1", (key,)).fetchone():
        return None
    return f"no space '{key}': it is not declared and holds no pages — `crewlet spaces` lists them"
