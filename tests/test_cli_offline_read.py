"""A read a node cannot answer while it is offline says, in its one line, that the node may only be behind:
"no page …" from a node that lost its log's servers is not the same news as from a node in contact (issue 34)."""
from __future__ import annotations

import pytest

from core.errors import CrewletError, NotFound
from core.node import Offline
from crewlet_tui import cli_common


def _open_offline(home_root, raise_exc: CrewletError) -> CrewletError:
    cli_common.STATE.home_arg = str(home_root)
    try:
        with pytest.raises(CrewletError) as caught:
            with cli_common.open_node() as node:
                node.offline = Offline("nats://127.0.0.1:4222", "no quorum", node.applied_seq(), None, quorum=True)
                raise raise_exc
        return caught.value
    finally:
        cli_common.STATE.home_arg = None


def test_a_read_refused_while_offline_says_the_node_may_be_behind(home):
    said = _open_offline(home.root, NotFound("no page ENG/Shared Later", code="not_found"))
    assert str(said).startswith("no page ENG/Shared Later (this node may be behind: offline: ")
    assert "have no quorum" in str(said) and "\n" not in str(said)
    assert said.code == "not_found"      # the same refusal, for scripts reading --json


def test_a_write_refused_as_offline_is_not_said_twice(home):
    said = _open_offline(home.root, CrewletError("offline: … — nothing was written", code="offline"))
    assert str(said).count("offline") == 1
