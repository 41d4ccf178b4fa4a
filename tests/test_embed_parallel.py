"""The local model on more than one thread: sessions side by side, or threads in one session, give the
same vector bytes as one thread, in input order; a failure in one lane is the call's failure."""
from __future__ import annotations

import hashlib

import pytest

from core.embed import local
from core.embed.provider import ProviderUnavailable

# short and long inputs, so a request makes several runs of each shape (8 short, or 4 long)
TEXTS = ([f"how do I {verb} the {thing}" for verb in ("roll back", "deploy", "page", "restart")
          for thing in ("service", "driver", "queue")]
         + [" ".join(f"the miniport driver reports interrupt {i} to the port driver" for i in range(n))
            for n in (4, 9, 15, 22, 30, 41)] * 3)


def digest(vectors) -> str:
    return hashlib.sha256(b"".join(v.tobytes() for v in vectors)).hexdigest()


@pytest.fixture(scope="module")
def one_thread() -> list:
    return local.LocalProvider(threads=1).embed(TEXTS, timeout=300)


def test_the_lanes_spend_threads_as_sessions_up_to_four():
    assert local.lanes_for(1) == (1, 1)
    assert local.lanes_for(2) == (2, 1)
    assert local.lanes_for(4) == (4, 1)
    assert local.lanes_for(16) == (4, 4)
    p = local.LocalProvider(threads=2)
    assert (p.sessions, p.session_threads) == (2, 1)
    assert len(p._runs([e.ids for e in local._load(1).tokenizer.encode_batch(TEXTS)])) > 2


@pytest.mark.parametrize("threads,sessions", [(2, None), (2, 1), (3, 3)])
def test_more_threads_give_the_same_bytes_as_one(one_thread, threads, sessions):
    provider = local.LocalProvider(threads=threads, sessions=sessions)
    try:
        vectors = provider.embed(TEXTS, timeout=300)
    finally:
        provider.close()
    assert len(vectors) == len(TEXTS)
    assert digest(vectors) == digest(one_thread)


def test_a_lane_past_the_deadline_fails_the_whole_call(one_thread):
    provider = local.LocalProvider(threads=2)
    try:
        with pytest.raises(ProviderUnavailable, match="timed out"):
            provider.embed([" ".join(["deployment"] * 300)] * 16, timeout=0.001)
        assert digest(provider.embed(TEXTS, timeout=300)) == digest(one_thread)    # and works afterwards
    finally:
        provider.close()
