"""Reciprocal rank fusion: several rankings of page ids into one.

A page's fused score is the sum over the rankings holding it of 1 / (k + rank), rank counted from 1.
Only ranks are used, so a BM25 score and a cosine need no common scale; a page both halves found rises
above one only one half found at the same rank.

k is 10, not the original paper's 60 (docs/relevance.md has the figures, from bench/relevance.py). k sets
how much mere presence in both rankings is worth against a high place in one: at 60, rank 1 weighs only
3.4 times rank 150, so a page each half ranks 40th outranks the page one half ranks 1st and the other
never found — in a 19k-page knowledge base the keyword half's best answer fell to 17th-25th that way on
3 of our questions. Tuned on SciFact's train split (nDCG@10 0.726 at 10 against 0.718 at 60); smaller
values still score higher there but lose more keyword answers on our question set.
"""
from __future__ import annotations

from collections.abc import Sequence

RRF_K = 10


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Page ids best first with their fused scores. Ties go to the page with the better best rank, then
    to the earlier ranking, so the order is deterministic."""
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        for rank, page_id in enumerate(ranking, start=1):
            scores[page_id] = scores.get(page_id, 0.0) + 1.0 / (k + rank)
            place = (rank, which)
            if page_id not in best or place < best[page_id]:
                best[page_id] = place
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], item[0]))
