"""The real local model behind a gate: its load waits until a test opens the gate, so a model that is
still loading is made deterministically, without sleeping or counting on a busy machine's timing.

In this process: `with gated() as gate:` replaces the "local" provider (core/embed/registry.py: a later
`register` replaces the earlier) until the block ends; `gate.set()` lets the load go on.

In a child process (a real `crewlet mcp`): start it with `python -c "import gated_model; ..."` (the tests
directory on PYTHONPATH) and CREWLET_TEST_MODEL_GATE naming a FIFO: the first load opens the FIFO for
reading, which blocks until the test opens it for writing (`open_fifo_gate`). Without the variable the
module changes nothing.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from core.embed import local, registry

GATE_ENV = "CREWLET_TEST_MODEL_GATE"


class GatedProvider:
    """LocalProvider whose first load, and every embed before it, waits for `opened`."""

    def __init__(self, inner: local.LocalProvider, opened: threading.Event, waiting: threading.Event) -> None:
        self.inner, self.opened, self.waiting = inner, opened, waiting
        self.space, self.limits, self.fingerprint = inner.space, inner.limits, inner.fingerprint

    def _gate(self) -> None:
        self.waiting.set()
        self.opened.wait()

    def load(self) -> float:
        self._gate()
        return self.inner.load()

    def embed(self, texts: list[str], *, timeout: float) -> list[Any]:
        self._gate()
        return self.inner.embed(texts, timeout=timeout)

    def close(self) -> None:
        self.inner.close()


def _register(opened: threading.Event, waiting: threading.Event) -> None:
    def factory(settings: Any, threads: int | None) -> GatedProvider:
        inner = local.LocalProvider(threads=threads or 1, batch_inputs=settings.max_batch_inputs)
        return GatedProvider(inner, opened, waiting)

    registry.register("local", factory)


@contextmanager
def gated() -> Iterator[tuple[threading.Event, threading.Event]]:
    """(opened, waiting): set `opened` to let the load go on; `waiting` is set once a load waits at the gate."""
    opened, waiting = threading.Event(), threading.Event()
    _register(opened, waiting)
    try:
        yield opened, waiting
    finally:
        opened.set()
        registry.register("local", lambda settings, threads: local.LocalProvider(
            threads=threads or local.default_threads(), batch_inputs=settings.max_batch_inputs))


def _fifo_gate(path: str) -> threading.Event:
    opened = threading.Event()

    def wait_for_writer() -> None:
        with open(path, "rb") as fifo:   # blocks until the test opens the FIFO for writing
            fifo.read()
        opened.set()

    threading.Thread(target=wait_for_writer, name="gated-model-fifo", daemon=True).start()
    return opened


if os.environ.get(GATE_ENV):
    _register(_fifo_gate(os.environ[GATE_ENV]), threading.Event())
