"""The node's SQLite store."""
from .db import Connection, connect, transaction
from .driver import sqlite3

__all__ = ["Connection", "connect", "transaction", "sqlite3"]
