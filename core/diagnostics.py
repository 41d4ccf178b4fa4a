"""This node's diagnostic events: a plain file of JSON lines beside the database, never on a log.

The spec's named events (search_embed_input_refused, search_embed_vector_refused,
search_embed_every_request_refused, search_index_behind, …) go here; `crewlet index status` and the app
show the latest of each. The file is kept small: past MAX_BYTES its older half is dropped.
"""
from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from .clock import now_ms
from .durable import write_atomic

MAX_BYTES = 2 * 1024 * 1024
log = logging.getLogger("crewlet.diagnostics")
_lock = threading.Lock()


class Diagnostics:
    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, event: str, message: str, **fields: Any) -> dict[str, Any]:
        """Append one event (and log it as a warning: these are things an operator acts on)."""
        entry = {"at": now_ms(), "event": event, "message": message, **fields}
        log.warning("%s: %s", event, message)
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        with _lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(line)
                if self.path.stat().st_size > MAX_BYTES:
                    self._trim()
            except OSError as exc:  # a read-only home still runs; the log line above stands
                log.warning("could not write %s: %s", self.path, exc)
        return entry

    def _trim(self) -> None:
        data = self.path.read_bytes()
        keep = data[len(data) // 2:]
        keep = keep[keep.find(b"\n") + 1:]
        write_atomic(self.path, keep, durable=False)

    def events(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by a crash mid-write
            if isinstance(entry, dict) and "event" in entry:
                out.append(entry)
        return out

    def latest(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """The latest event of each name (starting with `prefix`)."""
        out: dict[str, dict[str, Any]] = {}
        for entry in self.events():
            if str(entry["event"]).startswith(prefix):
                out[entry["event"]] = entry
        return out
