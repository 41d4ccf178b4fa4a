"""The NATS event loop's thread (core/log/nats_loop.py): closed right after a call it gave up on, it leaves no
task to be destroyed pending — asyncio would say so on stderr, past the one line a refused command prints
(a `sync join` to a TLS server it cannot verify, under load, printed two)."""
from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from core.log.nats_loop import LoopThread


async def slow_to_stop() -> None:
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        await asyncio.sleep(0.3)          # still unwinding when the caller closes, as a TLS handshake can be
        raise


def test_a_call_given_up_on_is_ended_before_the_loop_closes(caplog: pytest.LogCaptureFixture) -> None:
    loop = LoopThread()
    with pytest.raises(TimeoutError):
        loop.run(slow_to_stop(), 0.1)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.close()
        del loop
        gc.collect()
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
