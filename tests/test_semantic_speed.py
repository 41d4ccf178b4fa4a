"""The semantic first stage's speed mechanisms give the same answers as the plain ones: the C popcount
and numpy's agree, the histogram cut keeps exactly the nearest with the lower id on ties, a table kept
current incrementally holds what a whole reload reads, and stage two's one-statement read scores
exactly. Real homes, vectors applied through the vector log."""
from __future__ import annotations


import numpy as np
import pytest

from core.log import Record
from core.node import Node
from core.search import semantic
from core.vectors import records as vectors
from core.search.access import Access

DIMS = 96
SPACE = f"test:fake:{DIMS}"


def unit(rng: np.random.Generator, dims: int = DIMS) -> np.ndarray:
    v = rng.standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def pages(node: Node, count: int, container: str = "ENG") -> list[str]:
    ids = [f"p{i:05d}{container}" for i in range(count)]
    node.submit([Record.new("page.create", "alex", {"page_id": pid, "container": container, "title": pid,
                                                     "body": "x", "parent_id": None}) for pid in ids])
    return ids


def put(node: Node, pid: str, vec: np.ndarray, space: str = SPACE, container: str = "ENG") -> None:
    node.submit_vectors([vectors.put_record(pid, space, container, 1, "d" + pid, 10, 0, vec)])


def live(table: semantic.CodeTable) -> dict[str, tuple[bytes, str, int]]:
    return {table.sources[r]: (table.codes[r].tobytes(), table.container_names[table.containers[r]], int(table.ids[r]))
            for r in range(table.n) if table.alive[r]}


def test_the_c_popcount_and_numpys_give_the_same_distances():
    rng = np.random.default_rng(1)
    for width in (48, 384, 13):
        codes = rng.integers(0, 256, (500, width), dtype=np.uint8)
        q = rng.integers(0, 256, width, dtype=np.uint8)
        expected = np.bitwise_count(codes ^ q).sum(axis=1)
        assert np.array_equal(semantic.hamming(codes, q, use_numkong=False), expected)
        assert np.array_equal(semantic.hamming(codes, q), expected)


def test_the_cut_keeps_the_nearest_and_breaks_ties_by_the_lower_id():
    dist = np.array([5, 1, 3, 3, 3, 0, 9, 3], dtype=np.uint32)
    rows = np.arange(8)
    ids = np.array([10, 11, 17, 12, 16, 13, 14, 15])
    kept = semantic.nearest(dist, rows, ids, 4)
    # 0 and 1 are below the cut (3); of the four rows at 3 the lower ids are rows 3 (id 12) and 7 (id 15)
    assert sorted(kept.tolist()) == [1, 3, 5, 7]
    assert sorted(semantic.nearest(dist, rows, ids, 8).tolist()) == list(range(8))
    # a layout that permutes the rows keeps the same documents
    perm = np.array([7, 6, 5, 4, 3, 2, 1, 0])
    again = semantic.nearest(dist[perm], perm, ids, 4)
    assert sorted(ids[again].tolist()) == sorted(ids[kept].tolist())


def test_an_incremental_refresh_holds_what_a_whole_reload_reads(node):
    rng = np.random.default_rng(2)
    ids = pages(node, 60) + pages(node, 5, "OPS")
    for pid in ids[:40]:
        put(node, pid, unit(rng))
    retriever = semantic.SemanticRetriever(node)
    before = retriever.table(SPACE)
    assert before.live == 40
    for pid in ids[40:60]:                                   # new sources
        put(node, pid, unit(rng))
    for pid in ids[:5]:                                      # replaced vectors (new rows)
        put(node, pid, unit(rng))
    put(node, ids[5], unit(rng), space="other:model:96")     # moved to another space: out of this one
    node.submit_vectors([vectors.restamp_record(ids[6], SPACE, "OPS", 2, "d" + ids[6])])  # a move
    after = retriever.table(SPACE)
    assert after is before                                   # updated in place, not read again
    whole = semantic.load_table(node.conn, SPACE, vectors.position(node.conn)[0])
    assert live(after) == live(whole) and after.live == 59
    assert live(after)[ids[6]][1] == "OPS"


def test_a_drop_with_no_successor_is_caught_by_the_count(node):
    rng = np.random.default_rng(3)
    ids = pages(node, 10)
    for pid in ids:
        put(node, pid, unit(rng))
    retriever = semantic.SemanticRetriever(node)
    retriever.table(SPACE)
    node.submit_vectors([vectors.drop_record(ids[3])])
    table = retriever.table(SPACE)
    assert ids[3] not in table.row_of and table.live == 9
    assert live(table) == live(semantic.load_table(node.conn, SPACE, 0))


def test_masked_rows_never_pass_stage_one_on_either_path(node):
    rng = np.random.default_rng(4)
    eng, ops = pages(node, 30), pages(node, 30, "OPS")
    for pid in eng:
        put(node, pid, unit(rng))
    for pid in ops:
        put(node, pid, unit(rng), container="OPS")
    retriever = semantic.SemanticRetriever(node)
    table = retriever.table(SPACE)
    q = semantic.sign_code(unit(rng))
    everyone = Access(actor=None, mode="semantic", allowed=None, skills="SKILLS", exclusions=(), draft_backstop=True)
    only_ops = Access(actor=None, mode="semantic", allowed={"OPS"}, skills="SKILLS", exclusions=(),
                      draft_backstop=True, excluded_ids=frozenset({ops[0]}))
    wide = retriever.candidates(table, q, retriever.mask(table, everyone), 10)    # the whole-scan path
    narrow = retriever.candidates(table, q, retriever.mask(table, only_ops), 10)  # the gather path
    assert len(wide) == 10 and len(narrow) == 10
    got = {table.sources[r] for r in narrow}
    assert got <= set(ops[1:])
    dist = np.bitwise_count(table.codes[:table.n] ^ q).sum(axis=1)
    admitted = [r for r in range(table.n) if table.sources[r] in set(ops[1:])]
    best = sorted(admitted, key=lambda r: (dist[r], table.ids[r]))[:10]
    assert sorted(narrow.tolist()) == sorted(best)
    # the wide path with a mask that hides most rows still returns only admitted ones
    few = Access(actor=None, mode="semantic", allowed={"ENG"}, skills="SKILLS", exclusions=(), draft_backstop=True,
                 excluded_ids=frozenset(eng[:25]))
    mask = retriever.mask(table, few)
    kept = retriever.candidates(table, q, mask, 10)
    assert {table.sources[r] for r in kept} == set(eng[25:])


def test_stage_two_reads_once_and_scores_exactly(node):
    rng = np.random.default_rng(5)
    ids = pages(node, 20)
    vecs = {pid: unit(rng) for pid in ids}
    for pid, v in vecs.items():
        put(node, pid, v)
    q = unit(rng)
    rows = {r[1]: r[0] for r in node.conn.execute("SELECT id, source_id FROM vectors")}
    found, cosines = semantic.exact_scores(node.conn, list(rows.values())[::-1], q)
    by_id = {v: s for s, v in rows.items()}
    assert sorted(found.tolist()) == sorted(rows.values())
    for vid, c in zip(found.tolist(), cosines.tolist()):
        assert c == pytest.approx(float(vecs[by_id[vid]] @ q), abs=1e-6)
    # a query of another width scores nothing rather than garbage
    assert len(semantic.exact_scores(node.conn, list(rows.values()), unit(rng, 32))[0]) == 0
