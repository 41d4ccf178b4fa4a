"""The operation log: an append-only file of framed, checksummed Records."""
from __future__ import annotations

from .filelog import (REPAIR_HINT, FileLog, LogBusy, LogCorrupt, LogDamage, LogFailed, LogGap, LogMismatch, LogMoved,
                      ReadReport, RecordTooLarge)
from .record import Record

__all__ = ["Record", "FileLog", "LogBusy", "LogDamage", "LogCorrupt", "LogGap", "LogMismatch", "LogFailed", "LogMoved", "ReadReport",
           "RecordTooLarge", "REPAIR_HINT"]
