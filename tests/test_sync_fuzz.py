"""The convergence fuzz at a size that fits CI (bench/sync_fuzz.py runs it bigger), on both log backends: three
nodes sharing one company's logs — a shared directory, or NATS JetStream — a writer process on each issuing
random creates, saves (some stale), renames onto taken titles, moves (some into cycles), trashes, restores and
comments, one writer killed with SIGKILL at a random moment; on JetStream also the server killed and restarted
mid-run, or a 3-server cluster with one server stopped. Every node ends with the same content digest, no
acknowledged write is lost or decided otherwise, every losing save's text is rescued, and no page is in a cycle."""
from __future__ import annotations

import pytest

from bench.sync_fuzz import run


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend,fault,seed", [("file", "none", 1), ("file", "none", 2),
                                                ("jetstream", "restart", 1), ("jetstream", "cluster", 2)])
def test_three_nodes_converge_with_a_writer_killed(tmp_path, backend, fault, seed):
    result = run(tmp_path, ops=120, seed=seed, backend=backend, fault=fault)
    assert result.killed, "the victim finished before it was killed: the round proved nothing about a kill"
    if fault != "none":
        assert result.faulted, "the writers finished before the servers' fault: the round proved nothing about it"
    assert result.converged and len(result.digests) == 3, (result.problems, result.digests)
    assert result.acked >= 2 * 120   # the two writers left alive acknowledged all of theirs
    # the races the fuzz is for did happen, and were decided
    for code in ("title_taken", "stale_revision"):
        assert any(code in key for key in result.outcomes), result.outcomes
    assert result.rescued >= 1       # losing saves' texts were found where their nodes kept them
