"""An asyncio event loop on a thread of its own, for a synchronous engine that talks to NATS.

nats-py is asyncio; the engine (the applier, `Node.submit`, the CLI) is synchronous and runs in whatever
thread calls it (the app's workers among them). So the JetStream log owns one loop in one daemon thread
and hands it coroutines: `run(coro, timeout)` blocks the caller until the coroutine is done. A hand-off
costs about 50-100 µs (measured in bench/sync.py's JetStream rows), so the log hands over whole batches —
an append of many records is one call, a read streams messages back through a queue — never a record at
a time.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "crewlet-nats") -> None:
        self.loop = asyncio.new_event_loop()
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        # a forked child has the loop object but not the thread that runs it
        return self._pid == os.getpid() and self._thread.is_alive() and not self.loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run `coro` on the loop and wait for it; raises TimeoutError (the coroutine is cancelled) after
        `timeout` seconds, and whatever the coroutine raised."""
        if not self.alive:
            coro.close()
            raise RuntimeError("the NATS event loop is not running in this process (closed, or a forked child)")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopThread.run called from its own loop: it would wait for itself")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer from NATS in {timeout} s") from None

    def call_soon(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        if not self.alive:
            return
        try:   # bounded: a task that will not end is left to the loop's close, as before
            asyncio.run_coroutine_threadsafe(_settle(), self.loop).result(5)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


async def _settle() -> None:
    """Cancel every other task on the loop and wait for each to end. A connect given up on by its timeout is
    cancelled but still unwinding (a TLS handshake, say) when the caller closes; stopped then, the loop would
    destroy it pending, and asyncio says so on stderr past the one line a refused command prints."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
