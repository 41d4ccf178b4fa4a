"""The one place that picks a SQLite driver able to load extensions.

This machine's CPython is built without `enable_load_extension`; pysqlite3-binary ships a SQLite
that has it (and FTS5). An ordinary CPython's own sqlite3 works too. Everything else imports
`sqlite3` from here, so the choice is made once.
"""
from __future__ import annotations

import sqlite3 as _stdlib_sqlite3
from types import ModuleType
from typing import TYPE_CHECKING


def _pick() -> ModuleType:
    probe = _stdlib_sqlite3.connect(":memory:")
    try:
        if hasattr(probe, "enable_load_extension"):
            return _stdlib_sqlite3
    finally:
        probe.close()
    try:
        import pysqlite3.dbapi2 as pysqlite3
    except ImportError as exc:  # pragma: no cover - depends on the platform
        raise RuntimeError(
            "this Python's sqlite3 cannot load extensions and pysqlite3-binary is not installed: "
            "`pip install pysqlite3-binary` (Linux x86_64) or use a Python built with extension loading"
        ) from exc
    return pysqlite3


if TYPE_CHECKING:
    import sqlite3   # pysqlite3.dbapi2 is the stdlib module's API over another SQLite: checked as that
else:
    sqlite3 = _pick()
