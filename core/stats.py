"""The small statistics triage and its reports stand on (spec 003, "Audits and agreement", "The holdout").

- `cohen_kappa`: how far two raters (triage and a person) agree over categorical labels, beyond what
  their own label frequencies would give by chance: kappa = (p_o - p_e) / (1 - p_e), p_o the share of
  items where they agree, p_e the sum over labels of the product of each rater's share of that label.
  When p_e = 1 (both raters gave every item one and the same label) the ratio is 0/0: kappa is undefined,
  and `cohen_kappa` returns None rather than a number a back-off rule would act on. No items: None too.
- `drawn`: whether an id falls in a sample of `rate` (audits, the holdout). It must be worked out again
  later, in another process, on another machine, by another language: so no `hash()` (salted per
  process) and no random state, but sha256 of `salt + id` (UTF-8), its first 8 bytes read big-endian as
  an unsigned integer, divided by 2^64, compared `< rate`. Rate 0 draws nothing and rate 1 everything.
- `wilson_interval`: the 95% Wilson score interval of a rate of `successes` out of `trials`, the one to
  show beside a percentage of a few runs (issue 37's "Does knowledge help?"): unlike the normal
  approximation it stays inside [0, 1] and is not zero-width at 0 or n successes.
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Hashable, Sequence

Z_95 = 1.959963984540054  # the 97.5th percentile of the standard normal


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels for the same items, in the same order; None when undefined
    (no items, or chance agreement is 1 because both raters used one label throughout)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: the raters labelled {len(a)} and {len(b)} items; "
                         "give both raters' labels for the same items")
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(a, b) if x == y) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def draw_value(id: str, salt: str) -> float:
    """The id's place in [0, 1): sha256(salt + id), first 8 bytes big-endian, over 2^64."""
    digest = hashlib.sha256((salt + id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def drawn(id: str, rate: float, salt: str) -> bool:
    """Whether `id` falls in the sample of share `rate` named by `salt` (stable everywhere)."""
    if not 0.0 <= rate <= 1.0 or math.isnan(rate):
        raise ValueError(f"drawn: rate {rate!r} is not a share; give a number from 0 to 1")
    return draw_value(id, salt) < rate


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval (low, high) of successes/trials; None with no trials."""
    if trials < 0 or successes < 0 or successes > trials:
        raise ValueError(f"wilson_interval: {successes} successes of {trials} trials; "
                         "give 0 <= successes <= trials")
    if trials == 0:
        return None
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)
