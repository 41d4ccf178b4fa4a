"""Reciprocal rank fusion: several rankings of page ids into one.

A page's fused score is the sum over the rankings holding it of 1 / (k + rank), rank counted from 1.
Only ranks are used, so a BM25 score and a cosine need no common scale; a page both halves found rises
above one only one half found at the same rank, and k (60, the value of the original paper) damps the
difference between the first few places.
"""
from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60


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
