"""Which container a key names, and whether a reader can ask about it: the one place every surface asks
(`crewlet pages KEY`, `crewlet page show KEY/Title`, `crewlet search --container KEY`, the MCP tools, the
searcher seam), so a typo is refused alike everywhere rather than answered "nothing matched" by one command
and "no space" by another — and a key typed in another case (`eng` for `ENG`) names the same container
everywhere, as an address's title does."""
from __future__ import annotations

from typing import Any

from ..config import Company
from ..errors import Invalid, UnknownContainer


def container_key(conn: Any, company: Company, key: str) -> str:
    """The container `key` names, as company.toml declares it (or as its pages hold it): the key itself when
    it names one exactly, else the one container whose key differs from it only in case. Two such containers
    (`ENG` and `Eng` both declared) make the key ambiguous, refused naming both; a key that matches nothing
    comes back as given, for `unknown_container` (or the rules) to refuse. The caller holds the node's lock."""
    if company.is_declared(key) or conn.execute("SELECT 1 FROM page_spaces WHERE container = ?", (key,)).fetchone():
        return key
    folded = key.casefold()
    found = {k for k in company.declared_containers() if k.casefold() == folded}
    # keys are ASCII (config.KEY_RE), so SQLite's NOCASE folds them as casefold() does
    found |= {row[0] for row in conn.execute("SELECT container FROM page_spaces WHERE container = ? COLLATE NOCASE",
                                             (key,))}
    if len(found) > 1:
        names = sorted(found)
        raise Invalid(f"'{key}' could name {', '.join(names[:-1])} or {names[-1]}: their keys differ only in case — "
                      "give the key exactly as it is declared", code="ambiguous_container", container=key,
                      candidates=names)
    return found.pop() if found else key


def unknown_container(conn: Any, company: Company, key: str) -> UnknownContainer | None:
    """The refusal of a `key` that names no container (None when it does): one neither declared in
    company.toml nor holding a live page. An undeclared container that holds pages (an import's, an old
    configuration's) is known: it is reachable by address and by search. The caller holds the node's lock."""
    if company.is_declared(key):
        return None
    if conn.execute("SELECT 1 FROM page_spaces WHERE container = ? AND live > 0", (key,)).fetchone():
        return None
    return UnknownContainer.of(key)
