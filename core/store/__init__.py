"""The node's SQLite store."""
from .db import Connection, bulk_writes, connect, transaction
from .driver import sqlite3

__all__ = ["Connection", "bulk_writes", "connect", "transaction", "sqlite3"]
