"""Search by meaning and hybrid search: two stages over sign codes and exact vectors, RRF fusion, and an
outcome that says what was served in every case.

Most tests use a deterministic in-process model (`FakeModel`: a vector per text, chosen by the test) so
rankings are exact; the paraphrase test uses the real embedded model on the bundled example.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from core import config as config_mod
from core.embed.provider import EmbeddingSpace, Limits, ProviderUnavailable
from core.importer import import_directory
from core.log import Record
from core.node import Node, init_home
from core.pages.service import KnowledgeBase, new_id
from core.paths import Home, examples_dir
from core.search.fusion import reciprocal_rank_fusion
from core.search.indexer import Indexer
from core.search.native import NativeSearcher
from core.search.seam import (NO_EMBEDDINGS, NO_TERMS, PARTIAL_COVERAGE, PROVIDER_FAILED, PROVIDER_SLOW, REFILLING,
                              Query)
from core.search.semantic import sign_code
from core.vectors import records as vectors

DIMS = 64


class FakeModel:
    """A provider whose vectors the test chooses: `vectors[text]`, else a seeded random unit vector."""

    def __init__(self, model: str = "fake", *, delay: float = 0.0, fail: bool = False,
                 gate: threading.Event | None = None) -> None:
        self.space = EmbeddingSpace("test", model, DIMS)
        self.limits = Limits(8192, 8192 * 64, 64)
        self.fingerprint = f"test:{model}"
        self.vectors: dict[str, np.ndarray] = {}
        self.delay, self.fail, self.calls, self.gate = delay, fail, 0, gate

    def embed(self, texts: list[str], *, timeout: float) -> list[np.ndarray]:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if self.gate is not None:   # a provider that answers only when the test lets it
            self.gate.wait(60)
        if self.fail:
            raise ProviderUnavailable("the test model is down")
        return [self.vectors.get(t, unit(t)) for t in texts]

    def close(self) -> None:
        pass


def unit(seed: str | int, dims: int = DIMS) -> np.ndarray:
    rng = np.random.default_rng(abs(hash(seed)) % (2**32) if isinstance(seed, str) else seed)
    v = rng.standard_normal(dims).astype(np.float32)
    return v / np.linalg.norm(v)


def near(base: np.ndarray, noise: float, seed: int) -> np.ndarray:
    v = base + noise * unit(seed)
    return (v / np.linalg.norm(v)).astype(np.float32)


def searcher_for(node: Node, model: FakeModel, **kw) -> NativeSearcher:
    return NativeSearcher(node, provider_factory=lambda company, threads=None: model, **kw)


def add_page(node: Node, container: str, title: str, body: str = "text", parent: str | None = None) -> str:
    pid = new_id()
    node.submit([Record.new("page.create", "alex", {"page_id": pid, "container": container, "title": title,
                                                     "body": body, "parent_id": parent})])
    return pid


def put(node: Node, pid: str, vector: np.ndarray, space: str = f"test:fake:{DIMS}") -> None:
    row = node.conn.execute("SELECT container, revision FROM pages WHERE id = ?", (pid,)).fetchone()
    node.submit_vectors([vectors.put_record(pid, space, row["container"], row["revision"], "d" + pid, 10, 0, vector)])


def build_index(node: Node) -> None:
    with Indexer(node.home) as ix:
        ix.run_pass(wait=True)


# -- the two stages ------------------------------------------------------------------------------------

def test_the_narrow_table_holds_sqlite_vec_bit_codes(node):
    pid = add_page(node, "ENG", "A")
    v = unit(7)
    put(node, pid, v)
    code = node.conn.execute("SELECT code FROM vector_codes").fetchone()[0]
    assert code == node.conn.execute("SELECT vec_quantize_binary(vec_f32(?))", (v.astype("<f4").tobytes(),)).fetchone()[0]
    assert code == sign_code(v).tobytes() and len(code) == DIMS // 8


def test_semantic_ranks_by_the_exact_cosine_and_shows_it(node):
    model = FakeModel()
    q = unit(1)
    model.vectors["the query"] = q
    ids = [add_page(node, "ENG", f"P{i}") for i in range(30)]
    vecs = {pid: near(q, 0.2 * i, 100 + i) for i, pid in enumerate(ids)}
    for pid, v in vecs.items():
        put(node, pid, v)
    build_index(node)
    res = searcher_for(node, model).search(Query("the query", mode="semantic", limit=10))
    exact = sorted(ids, key=lambda p: -float(vecs[p] @ q))[:10]
    assert [h.page_id for h in res.hits] == exact
    assert [h.score for h in res.hits] == [round(float(vecs[p] @ q), 6) for p in exact]
    assert res.outcome.served_mode == "semantic" and res.outcome.degraded is None


def test_a_filtered_search_returns_its_containers_nearest_even_far_from_the_global_nearest(node):
    model = FakeModel()
    q = unit(2)
    model.vectors["q"] = q
    # 1,500 pages in ENG all nearer the query than anything in PROD: stage one's 1,200 would be all ENG
    records, eng = [], []
    for i in range(1500):
        pid = new_id()
        eng.append(pid)
        records.append(Record.new("page.create", "alex", {"page_id": pid, "container": "ENG", "title": f"E{i}",
                                                           "body": "x", "parent_id": None}))
    node.submit(records)
    node.submit_vectors([vectors.put_record(pid, f"test:fake:{DIMS}", "ENG", 1, "d", 1, 0, near(q, 0.1, i))
                         for i, pid in enumerate(eng)])
    far = [add_page(node, "PROD", f"Far {i}") for i in range(5)]
    for i, pid in enumerate(far):
        put(node, pid, near(-q, 0.5, 9000 + i))
    build_index(node)
    s = searcher_for(node, model)
    res = s.search(Query("q", mode="semantic", containers=["PROD"], limit=8))
    assert sorted(h.page_id for h in res.hits) == sorted(far)
    glob = s.search(Query("q", mode="semantic", limit=8))
    assert all(h.container == "ENG" for h in glob.hits)


def test_exclusions_and_the_trash_cost_a_page_never_a_place(node):
    model = FakeModel()
    q = unit(3)
    model.vectors["q"] = q
    drafts = add_page(node, "ENG", "Auto-Drafted Skills", "")
    hidden = [add_page(node, "ENG", f"Draft {i}", parent=drafts) for i in range(5)]
    prefixed = add_page(node, "ENG", "[Auto-draft] sneaky")
    trashed = add_page(node, "ENG", "Old")
    skills = add_page(node, "SKILLS", "A tool skill")
    shown = [add_page(node, "ENG", f"Page {i}") for i in range(10)]
    for i, pid in enumerate(hidden + [prefixed, trashed, skills]):
        put(node, pid, near(q, 0.01, i))              # the nearest of all
    for i, pid in enumerate(shown):
        put(node, pid, near(q, 0.3 + 0.05 * i, 50 + i))
    KnowledgeBase(node).trash_page(trashed, actor="alex")
    build_index(node)
    res = searcher_for(node, model).search(Query("q", mode="semantic", limit=8))
    assert [h.page_id for h in res.hits] == shown[:8]


def test_two_embedding_spaces_are_never_mixed_in_one_ranking(node):
    old, new = FakeModel("old"), FakeModel("new")
    q = unit(4)
    old.vectors["q"] = new.vectors["q"] = q
    a = [add_page(node, "ENG", f"A{i}") for i in range(6)]
    b = [add_page(node, "ENG", f"B{i}") for i in range(4)]
    for i, pid in enumerate(a):
        put(node, pid, near(q, 0.05, i), space=f"test:old:{DIMS}")   # near, but in the old space
    for i, pid in enumerate(b):
        put(node, pid, near(q, 0.8, 20 + i), space=f"test:new:{DIMS}")
    build_index(node)
    res = searcher_for(node, new).search(Query("q", mode="semantic", limit=8))
    assert sorted(h.page_id for h in res.hits) == sorted(b)
    assert res.outcome.degraded == REFILLING and "6 pages are still on the previous model" in res.outcome.message
    assert (res.outcome.coverage.embedded, res.outcome.coverage.embeddable) == (4, 10)
    assert not res.outcome.coverage.complete


# -- fusion --------------------------------------------------------------------------------------------

def test_rrf_sums_reciprocal_ranks_and_breaks_ties_deterministically():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "d"]], k=60)
    scores = dict(fused)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert [p for p, _ in fused] == ["c", "a", "b", "d"]   # b and d tie on 1/62: b's ranking came first
    assert reciprocal_rank_fusion([[], []]) == []


def test_hybrid_fuses_both_halves_and_takes_snippets_from_the_keyword_half(node):
    model = FakeModel()
    q = unit(5)
    model.vectors["deploy rollback"] = q
    kw = add_page(node, "ENG", "Deploy Runbook", "Run the deploy script. To rollback, run it with --undo.")
    meaning = add_page(node, "ENG", "Reverting a release", "Put the previous version back in place.")
    other = add_page(node, "ENG", "Lunch", "Sandwiches on Fridays.")
    put(node, kw, near(q, 0.9, 1))
    put(node, meaning, near(q, 0.05, 2))
    put(node, other, near(-q, 0.1, 3))
    build_index(node)
    s = searcher_for(node, model)
    res = s.search(Query("deploy rollback", limit=3))
    assert res.outcome.served_mode == "hybrid" and res.outcome.degraded is None
    ids = [h.page_id for h in res.hits]
    assert ids[:2] == [kw, meaning] or ids[:2] == [meaning, kw]
    hit = next(h for h in res.hits if h.page_id == kw)
    assert "rollback" in hit.snippet.lower()
    assert s.search(Query("deploy rollback", mode="keyword")).hits[0].page_id == kw
    assert meaning not in [h.page_id for h in s.search(Query("deploy rollback", mode="keyword")).hits]


# -- every case says what it served ----------------------------------------------------------------------

def _one_page(node: Node, model: FakeModel, *, embed: bool = True) -> str:
    pid = add_page(node, "ENG", "Deploy Runbook", "how to deploy")
    model.vectors["deploy"] = unit(9)
    if embed:
        put(node, pid, near(unit(9), 0.1, 1))
    build_index(node)
    return pid


def test_vectors_off_serves_keyword_in_hybrid_and_nothing_in_semantic(tmp_path):
    home = Home(tmp_path / "off")
    data = config_mod.example_config()
    data["knowledge"]["vectors"] = False
    init_home(home, data)
    with Node.open(home) as node:
        model = FakeModel()
        _one_page(node, model, embed=False)
        s = searcher_for(node, model)
        hy = s.search(Query("deploy"))
        assert (hy.outcome.served_mode, hy.outcome.degraded, hy.outcome.modes) == ("keyword", NO_EMBEDDINGS, ["keyword"])
        assert "vectors are off" in hy.outcome.message and len(hy.hits) == 1
        se = s.search(Query("deploy", mode="semantic"))
        assert se.outcome.served_mode is None and se.outcome.degraded == NO_EMBEDDINGS and not se.hits
        assert model.calls == 0


def test_no_vector_yet_says_how_many_pages_wait(node):
    model = FakeModel()
    _one_page(node, model, embed=False)
    s = searcher_for(node, model)
    hy = s.search(Query("deploy"))
    assert (hy.outcome.served_mode, hy.outcome.degraded) == ("keyword", NO_EMBEDDINGS)
    assert "1 page waiting for the embedding duty" in hy.outcome.message
    se = s.search(Query("deploy", mode="semantic"))
    assert se.outcome.served_mode is None and "shares no word" in se.outcome.message


def test_a_slow_provider_serves_keyword_within_the_bound_then_the_cached_vector(node):
    model = FakeModel()
    _one_page(node, model)
    model.gate = threading.Event()                           # from now on the provider answers when let
    s = searcher_for(node, model, query_timeout_s=0.2)
    hy = s.search(Query("deploy"))                           # served while the provider still holds the query
    assert (hy.outcome.served_mode, hy.outcome.degraded) == ("keyword", PROVIDER_SLOW)
    assert "did not embed the query within" in hy.outcome.message
    se = s.search(Query("deploy", mode="semantic"))
    assert se.outcome.served_mode is None and se.outcome.degraded in (PROVIDER_SLOW, None)
    model.gate.set()
    deadline = time.monotonic() + 30                         # the embedding finishes in the background
    while (again := s.search(Query("deploy"))).outcome.degraded == PROVIDER_SLOW and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (again.outcome.served_mode, again.outcome.degraded) == ("hybrid", None)
    assert model.calls == 1                                  # embedded once, then cached


def test_a_failing_provider_serves_keyword_and_names_the_failure(node):
    model = FakeModel(fail=True)
    _one_page(node, model)
    hy = searcher_for(node, model).search(Query("deploy"))
    assert (hy.outcome.served_mode, hy.outcome.degraded) == ("keyword", PROVIDER_FAILED)
    assert "the test model is down" in hy.outcome.message


def test_partial_coverage_is_said_with_how_much_and_follows_the_vector_log(node):
    model = FakeModel()
    _one_page(node, model)
    faq = add_page(node, "ENG", "Deploy FAQ", "deploy questions")
    build_index(node)
    s = searcher_for(node, model)
    res = s.search(Query("deploy"))
    assert (res.outcome.served_mode, res.outcome.degraded) == ("hybrid", PARTIAL_COVERAGE)
    assert "over 1 of 2 pages (1 not embedded yet" in res.outcome.message and not res.outcome.coverage.complete
    put(node, faq, unit(11))                       # the vector log moves: the same searcher sees it
    res = s.search(Query("deploy"))
    assert (res.outcome.degraded, res.outcome.coverage.embedded) == (None, 2)


def test_hybrid_with_no_keyword_term_ranks_by_meaning_alone_and_says_so(node):
    model = FakeModel()
    pid = _one_page(node, model)
    model.vectors["the and of"] = unit(9)
    res = searcher_for(node, model).search(Query("the and of"))
    assert (res.outcome.served_mode, res.outcome.degraded) == ("semantic", NO_TERMS)
    assert [h.page_id for h in res.hits] == [pid]


def test_an_agents_semantic_search_is_one_knowledge_read(node):
    model = FakeModel()
    _one_page(node, model)
    searcher_for(node, model).search(Query("deploy", actor="eng-bot", mode="semantic"))
    reads = KnowledgeBase(node).reads()
    assert len(reads) == 1 and reads[0]["via"] == "search" and len(reads[0]["pages"]) == 1


def test_the_query_cache_is_emptied_when_the_model_changes(node):
    model = FakeModel()
    pid = _one_page(node, model)
    s = searcher_for(node, model)
    s.search(Query("deploy"))
    s.search(Query("deploy"))
    assert model.calls == 1
    text = node.home.config_file.read_text()
    node.home.config_file.write_text(text + '\n[providers.embeddings]\nprovider = "local"\nmax_batch_inputs = 8\n')
    node.refresh_config()
    s.search(Query("deploy"))
    assert model.calls == 1       # a change that leaves the model alone: the vector kept on disk still holds
    other = FakeModel("fake-2")   # another model (its own space): nothing kept for the first one is used
    put(node, pid, unit(5), space=other.space.key())
    s2 = searcher_for(node, other)
    s2.search(Query("deploy"))
    assert other.calls == 1
    assert s2.embedder.store.get(model.space.key(), "deploy", DIMS) is None     # emptied on disk too
    put(node, pid, unit(6), space=model.space.key())
    s3 = searcher_for(node, model)
    s3.search(Query("deploy"))
    assert model.calls == 2
    for searcher in (s, s2, s3):
        searcher.close()


# -- the real embedded model ----------------------------------------------------------------------------

def test_a_paraphrase_with_no_shared_word_is_found_by_meaning(tmp_path):
    """"rate limits" shares no word with "429 backoff in the GitLab client" (keyword cannot find it)."""
    home = Home(tmp_path / "example")
    init_home(home, config_mod.example_config())
    with Node.open(home) as node:
        import_directory(KnowledgeBase(node), examples_dir(), actor="alex")
        from core.duties.roster import default_duties
        from core.duties.runner import DutyRunner

        runner = DutyRunner(node, default_duties(node, embed_threads=1))
        runner.run_until_idle(stop=threading.Event())
        runner.close()
        s = NativeSearcher(node)
        target = "429 backoff in the GitLab client"
        assert target not in [h.title for h in s.search(Query("rate limits", mode="keyword")).hits]
        semantic = s.search(Query("rate limits", mode="semantic"))
        assert semantic.outcome.served_mode == "semantic" and semantic.hits[0].title == target
        hybrid = s.search(Query("rate limits"))
        assert hybrid.outcome.served_mode == "hybrid" and target in [h.title for h in hybrid.hits[:3]]
        s.close()
