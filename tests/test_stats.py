"""core/stats.py: Cohen's kappa against tables worked by hand, the hash draw recomputed here without the
module, and the Wilson interval against published values."""
from __future__ import annotations

import hashlib
import math
import struct

import pytest

from core.stats import cohen_kappa, draw_value, drawn, wilson_interval


def _from_table(labels: list[str], table: list[list[int]]) -> tuple[list[str], list[str]]:
    """Two raters' label lists from a contingency table (rows: rater A, columns: rater B)."""
    a: list[str] = []
    b: list[str] = []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += [labels[i]] * count
            b += [labels[j]] * count
    return a, b


def test_kappa_two_by_two_worked_by_hand() -> None:
    """50 items, two labels:

                     B yes   B no   | A's total
            A yes      20      5    |   25
            A no       10     15    |   25
            B's total  30     20    |   50

    p_o = (20 + 15) / 50 = 0.70
    p_e = (25/50)(30/50) + (25/50)(20/50) = 0.30 + 0.20 = 0.50
    kappa = (0.70 - 0.50) / (1 - 0.50) = 0.40
    """
    a, b = _from_table(["yes", "no"], [[20, 5], [10, 15]])
    assert cohen_kappa(a, b) == pytest.approx(0.40, abs=1e-12)


def test_kappa_four_categories_worked_by_hand() -> None:
    """30 decisions, triage (rows) against a person (columns):

                     accept  corrob  refuse  escalate | triage's total
            accept      10      1       0       1     |  12
            corrob       1      6       1       0     |   8
            refuse       0      1       5       0     |   6
            escalate     2      0       0       2     |   4
            person's    13      8       6       3     |  30

    p_o = (10 + 6 + 5 + 2) / 30 = 23/30
    p_e = (12·13 + 8·8 + 6·6 + 4·3) / 30² = (156 + 64 + 36 + 12) / 900 = 268/900
    kappa = (23/30 - 268/900) / (1 - 268/900) = (690 - 268) / (900 - 268) = 422/632 = 0.667721…
    """
    labels = ["accept", "corroborate", "refuse", "escalate"]
    a, b = _from_table(labels, [[10, 1, 0, 1], [1, 6, 1, 0], [0, 1, 5, 0], [2, 0, 0, 2]])
    assert cohen_kappa(a, b) == pytest.approx(422 / 632, abs=1e-12)
    # the order of the items does not matter, only the pairs
    assert cohen_kappa(list(reversed(a)), list(reversed(b))) == pytest.approx(422 / 632, abs=1e-12)


def test_kappa_perfect_chance_and_worse_than_chance() -> None:
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == pytest.approx(1.0)
    # p_o = 0.5, p_e = 0.5: agreement no better than chance
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == pytest.approx(0.0)
    # always disagreeing on two balanced labels: p_o = 0, p_e = 0.5 → -1
    assert cohen_kappa(["a", "b", "a", "b"], ["b", "a", "b", "a"]) == pytest.approx(-1.0)


def test_kappa_undefined_cases_return_none() -> None:
    # both raters gave every item the same one label: p_e = 1, kappa is 0/0
    assert cohen_kappa(["accept"] * 7, ["accept"] * 7) is None
    assert cohen_kappa([], []) is None
    # one rater constant, the other not: p_e < 1, defined (and 0: no agreement beyond chance)
    assert cohen_kappa(["a", "a", "a", "a"], ["a", "a", "b", "b"]) == pytest.approx(0.0)


def test_kappa_refuses_lists_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa(["a"], ["a", "b"])


def _draw_by_hand(id: str, rate: float, salt: str) -> bool:
    """The draw as the spec's reader would write it from the words alone, without core.stats."""
    first8 = hashlib.sha256(salt.encode() + id.encode()).digest()[:8]
    (as_int,) = struct.unpack(">Q", first8)
    return as_int < rate * 2 ** 64


def test_draw_recomputed_independently() -> None:
    ids = [f"entry-{i:04d}" for i in range(2000)] + ["ü-ñ-✓", ""]
    for rate in (0.0, 0.05, 0.1, 0.5, 0.9, 1.0):
        for id in ids:
            assert drawn(id, rate, "audit:") == _draw_by_hand(id, rate, "audit:"), (id, rate)


def test_draw_known_value_pins_the_byte_order() -> None:
    """sha256("audit:" + "x") starts with bytes the test spells out, so a change of byte order, salt
    placement or encoding fails here even if the two computations above changed together."""
    digest = hashlib.sha256(b"audit:x").hexdigest()
    assert draw_value("x", "audit:") == int(digest[:16], 16) / 2 ** 64


def test_draw_rate_is_the_share_drawn_and_salt_matters() -> None:
    ids = [f"run-{i}" for i in range(10000)]
    share = sum(drawn(i, 0.1, "holdout:") for i in ids) / len(ids)
    assert 0.09 < share < 0.11
    assert not any(drawn(i, 0.0, "s") for i in ids[:200])
    assert all(drawn(i, 1.0, "s") for i in ids[:200])
    a = {i for i in ids if drawn(i, 0.1, "audit:")}
    b = {i for i in ids if drawn(i, 0.1, "holdout:")}
    assert a != b  # two samples with different salts are not the same runs


@pytest.mark.parametrize("rate", [-0.1, 1.5, math.nan])
def test_draw_refuses_a_rate_that_is_not_a_share(rate: float) -> None:
    with pytest.raises(ValueError, match="from 0 to 1"):
        drawn("x", rate, "s")


def test_wilson_known_values() -> None:
    # 5 of 10: the textbook 0.2366 .. 0.7634
    low, high = wilson_interval(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    # 0 of 10: low is 0 and high is z²/(n + z²) = 3.8415/13.8415 = 0.2775
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    # 10 of 10 mirrors it
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == pytest.approx(1.0)
    # 81 of 263 (a worked example in Newcombe 1998): 0.2553 .. 0.3662
    low, high = wilson_interval(81, 263)
    assert (low, high) == (pytest.approx(0.2553, abs=1e-4), pytest.approx(0.3662, abs=1e-4))


def test_wilson_edge_and_bad_input() -> None:
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError, match="successes <= trials"):
        wilson_interval(3, 2)
