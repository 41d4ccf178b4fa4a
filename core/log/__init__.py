"""The operation log: an append-only file of framed, checksummed Records."""
from __future__ import annotations

from .filelog import FileLog, LogCorrupt, LogFailed, LogGap, ReadReport
from .record import Record

__all__ = ["Record", "FileLog", "LogCorrupt", "LogGap", "LogFailed", "ReadReport"]
