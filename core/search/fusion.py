"""Fusion: a hybrid search's two rankings into one, each weighted by what it knows of itself.

A page's fused score is the sum over the rankings holding it of weight / (k + rank), rank counted from 1
(weighted reciprocal rank fusion). Only ranks enter the sum, so a BM25 score and a cosine need no common
scale; a page both halves found rises above one only one half found at the same rank.

k is 10, not the original paper's 60 (docs/relevance.md has the figures, from bench/relevance.py). k sets
how much mere presence in both rankings is worth against a high place in one: at 60, rank 1 weighs only
3.4 times rank 150, so a page each half ranks 40th outranks the page one half ranks 1st and the other
never found — in a 19k-page knowledge base the keyword half's best answer fell to 17th-25th that way on
3 of our questions.

**The keyword half's weight is what its ranking knows of itself** (`keyword_weight`), two numbers read
off the index the search already opened, with no constant to set (the form was chosen among a few on
SciFact, our questions and the paraphrases, and checked on vaswani: docs/relevance.md):

- *specificity*: the idf of the rarest word of the question some page holds, over the idf of a word a
  single page holds. Words most pages hold make an order that says little about the question;
- *coverage*: the idf-weighted share of the question's held words that the ranking's best page holds. A
  ranking resting on one rare word of a longer question says little more.

The weight is their geometric mean: both must hold for the keyword order to count fully, and neither
alone silences it. Plain RRF weighed both halves alike whatever either said about itself, and a keyword
ranking of common words pushed down what meaning found: asked "time how long a script block takes to
run", meaning ranks PowerShell's `Measure-Command` 8th, and the keyword half — every word of it on
hundreds of pages (specificity 0.24) — pushed it to 17th; asked "turn every colour of a photo into its
opposite, like a negative", meaning ranks Hugo's `images.Invert` 8th, and a keyword ranking resting on
"negative" alone (its best page holds 28% of the question) pushed it to 15th. SciFact's claims, whose
words are rare and whose best keyword page holds most of them, keep most of the weight (hybrid there
stays within 0.015 of plain RRF and above both halves).

**The semantic half keeps weight 1.** Weakening it where its nearest cosine lies near the relevance
floor was measured (docs/relevance.md) and cost the paraphrase questions, where meaning is the better
half even at cosines 0.3-0.4; what lies under the floor is already out of the ranking (floor.py).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

RRF_K = 10


def keyword_weight(specificity: float | None, coverage: float | None = 1.0) -> float:
    """The keyword ranking's weight: the geometric mean of its specificity and its best page's coverage of
    the question (keyword.KeywordRanking: each 0 to 1). Either None (nothing to read it from): 1."""
    if specificity is None or coverage is None or not (math.isfinite(specificity) and math.isfinite(coverage)):
        return 1.0
    return math.sqrt(min(1.0, max(0.0, specificity)) * min(1.0, max(0.0, coverage)))


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K,
                           weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Page ids best first with their fused scores (`weights`: one per ranking; None: each 1). Ties go to
    the page with the better best rank, then to the earlier ranking, so the order is deterministic."""
    scores: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        w = 1.0 if weights is None else float(weights[which])
        for rank, page_id in enumerate(ranking, start=1):
            scores[page_id] = scores.get(page_id, 0.0) + w / (k + rank)
            place = (rank, which)
            if page_id not in best or place < best[page_id]:
                best[page_id] = place
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], item[0]))
