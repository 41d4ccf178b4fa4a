"""Fusion weighs each half by what it knows of itself (core/search/fusion.py, issue 38): the keyword ranking
by how specific its words are, so one built on words most pages hold cannot push down what meaning found,
while one built on a word few pages hold keeps its place. Real homes: pages through the log, the keyword
index built by the indexer, vectors applied through the vector log; the model is a test provider whose
vectors the test chooses (test_semantic.FakeModel)."""
from __future__ import annotations

import numpy as np
import pytest
from test_floor import cosine_to
from test_semantic import FakeModel, add_page, build_index, put, searcher_for, unit

from core.search import fusion, lexical
from core.search.seam import Query


# -- the arithmetic ----------------------------------------------------------------------------------------

def test_weighted_rrf_scales_each_rankings_share_and_keeps_ties_deterministic():
    fused = dict(fusion.reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=10, weights=[0.5, 1.0]))
    assert fused["a"] == pytest.approx(0.5 / 11)
    assert fused["b"] == pytest.approx(0.5 / 12 + 1 / 11)
    assert fused["c"] == pytest.approx(1 / 12)
    plain = fusion.reciprocal_rank_fusion([["a", "b"], ["b", "c"]])
    assert plain == fusion.reciprocal_rank_fusion([["a", "b"], ["b", "c"]], weights=[1.0, 1.0])
    # a weight of 0 keeps the ranking's pages, after every page the other ranking holds, in their order
    assert [p for p, _ in fusion.reciprocal_rank_fusion([["x", "y"], ["z"]], weights=[0.0, 1.0])] == ["z", "x", "y"]


def test_the_keyword_weight_is_the_geometric_mean_of_specificity_and_coverage():
    assert fusion.keyword_weight(0.25, 1.0) == pytest.approx(0.5)
    assert fusion.keyword_weight(1.0, 0.36) == pytest.approx(0.6)
    assert fusion.keyword_weight(1.7, 2.0) == 1.0 and fusion.keyword_weight(-0.2, 0.5) == 0.0
    assert fusion.keyword_weight(None, 0.5) == 1.0 and fusion.keyword_weight(float("nan"), 1.0) == 1.0


# -- on a real small index ----------------------------------------------------------------------------------

@pytest.fixture
def paraphrase_home(node):
    """Fourteen pages. Twelve say "list" and "order" (common words: twelve of fourteen pages hold them) and
    lie near the question "list order" by meaning (cosines 0.70 down to 0.59); one, "Shuffle", holds neither
    word and is the nearest by meaning (0.80); one says "xylograph", a word no other page holds, and lies far
    from every question (0.05)."""
    model = FakeModel()
    q = unit(7)
    model.vectors["list order"] = q
    model.vectors["xylograph list"] = q
    common = [add_page(node, "DOCS", f"Page {i}", f"a list in order, item {i}, " + "list " * (i % 3))
              for i in range(12)]
    target = add_page(node, "DOCS", "Shuffle", "put the items of a collection in random sequence")
    rare = add_page(node, "DOCS", "Engraving", "a xylograph is a print from a wood block")
    put(node, target, cosine_to(q, 0.80, 40))
    for i, pid in enumerate(common):
        put(node, pid, cosine_to(q, 0.70 - 0.01 * i, 41 + i))
    put(node, rare, cosine_to(q, 0.05, 60))
    build_index(node)
    return model, target, rare, common


def test_a_keyword_ranking_of_common_words_no_longer_pushes_down_what_meaning_found(node, paraphrase_home,
                                                                                   monkeypatch):
    model, target, rare, common = paraphrase_home
    s = searcher_for(node, model, relevance_floor=(0.2, 0.45))
    meaning = [h.page_id for h in s.search(Query("list order", mode="semantic", limit=5)).hits]
    assert meaning[0] == target
    words = s.keyword.rank(s.keyword.snapshot(), "list order", s.policy.decide(Query("list order"), "native",
                                                                               _stamp(node)))
    assert words is not None and words.specificity() < 0.2     # twelve of fourteen pages hold its rarest word
    hybrid = [h.page_id for h in s.search(Query("list order", limit=14)).hits]
    # plain RRF (both weights 1), on the same rankings: the pages both halves hold come first
    from core.search import native

    monkeypatch.setattr(native, "keyword_weight", lambda _specificity, _coverage: 1.0)
    plain = [h.page_id for h in s.search(Query("list order", limit=14)).hits]
    # weighted: 4th, behind the three pages both halves rank high; plain: 13th of 14, under every page that
    # says "list order"
    assert hybrid.index(target) <= 3 and plain.index(target) >= 10, (hybrid.index(target), plain.index(target))
    s.close()


def test_a_keyword_ranking_with_a_rare_word_keeps_its_place(node, paraphrase_home, monkeypatch):
    """The page only the keyword half finds (by a word one page holds) stands where plain RRF puts it: its
    ranking keeps nearly the whole weight."""
    model, target, rare, common = paraphrase_home
    s = searcher_for(node, model, relevance_floor=False)       # the rare page's cosine (0.05) is under any floor
    stamp = _stamp(node)
    words = s.keyword.rank(s.keyword.snapshot(), "xylograph list", s.policy.decide(Query("xylograph list"), "native",
                                                                                   stamp))
    assert words is not None and words.specificity() == pytest.approx(1.0)   # one page holds "xylograph"
    assert fusion.keyword_weight(words.specificity(), words.coverage()) > 0.95
    ids = [h.page_id for h in s.search(Query("xylograph list", limit=14)).hits]
    assert rare in ids[:5], ids
    from core.search import native

    monkeypatch.setattr(native, "keyword_weight", lambda _specificity, _coverage: 1.0)
    plain = [h.page_id for h in s.search(Query("xylograph list", limit=14)).hits]
    # within one place of plain RRF's (the pages around it tie on their words, in page-id order)
    assert abs(ids.index(rare) - plain.index(rare)) <= 1, (ids.index(rare), plain.index(rare))
    s.close()


def test_specificity_is_the_rarest_held_words_idf_over_a_unique_words(node, paraphrase_home):
    model, target, rare, common = paraphrase_home
    s = searcher_for(node, model)
    snap = s.keyword.snapshot()
    weights = snap.term_weights(snap.query_terms("list zzzunheard").terms)
    assert {t: df for t, df, _w in weights} == {"list": 12, "zzzunheard": 0}
    from core.search.keyword import specificity

    assert specificity(weights, snap.count) == pytest.approx(lexical.idf(14, 12) / lexical.idf(14, 1))
    assert specificity([("zzz", 0, 1.0)], 14) == 0.0
    s.close()


def test_coverage_is_the_share_of_the_question_the_best_keyword_page_holds(node, paraphrase_home):
    """"xylograph list": the best keyword page (the engraving) holds "xylograph", the rarer and heavier word,
    not "list"; a page holding both would cover all of it."""
    model, target, rare, common = paraphrase_home
    s = searcher_for(node, model)
    snap = s.keyword.snapshot()
    access = s.policy.decide(Query("xylograph list"), "native", _stamp(node))
    words = s.keyword.rank(snap, "xylograph list", access)
    assert words.take(1)[0][0] == rare
    idf_rare, idf_list = lexical.idf(14, 1), lexical.idf(14, 12)
    assert words.coverage() == pytest.approx(idf_rare / (idf_rare + idf_list))
    both = s.keyword.rank(snap, "list order", access)
    assert both.coverage() == pytest.approx(1.0)           # its best page holds both words
    s.close()


def _stamp(node):
    from core.search.stamp import read_stamp

    return read_stamp(node)


def test_unit_vectors_of_the_fixture_are_unit():
    v = cosine_to(unit(7), 0.8, 40)
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
