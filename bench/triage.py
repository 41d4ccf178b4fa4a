"""Triage's rules that relate two entries, measured on the labelled pairs (tests/data/entry_pairs.jsonl),
and the model calls a triage costs.

    .venv/bin/python bench/triage.py [--neighbours "0:0.35,1:0.25,2:0.15,3:0.1,5:0.1,10:0.05"] [--wrong]

For each part of the set (`tuning`: the pairs the rules were shaped on; `heldout`: pairs written after the
rules were frozen, in rounds — round 1 after the first rules, round 2 after the guards probing added) and for
the whole: how often the rules alone decide (coverage), how often they are right
when they decide (accuracy), per relation (of the pairs the rules called X, how many are X; of the pairs
labelled X, how many the rules called X), per rule, and the confusion matrix (label × verdict, `ask` where the
rules cannot tell). Then the load on the model: each neighbour the rules cannot decide costs two separate
judgments (spec 003, "Triage and escalation"), so calls per pair = 2 × (1 − coverage), and per entry, over
an assumed distribution of how many neighbours an entry has above the similarity threshold, the expected
neighbour calls; plus the two judgments of the acceptance condition ("two separate model judgments accept
it"), counted apart since triage may ask them in the same call. The load average is printed beside the time
of one rule verdict. Nothing is asserted (tests/test_entry_relate.py holds the floors).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.stats import wilson_interval  # noqa: E402
from core.text.relate import RELATIONS, Citation, EntryText, relate_by_rules  # noqa: E402

SET = ROOT / "tests" / "data" / "entry_pairs.jsonl"
ASK = "ask"
DEFAULT_NEIGHBOURS = "0:0.35,1:0.25,2:0.15,3:0.1,5:0.1,10:0.05"


def entry(d: dict) -> EntryText:
    return EntryText(body=d["body"], kind=d.get("kind", "FACT"), scope=tuple(d.get("scope", ())),
                     citations=tuple(Citation(**c) for c in d.get("citations", ())))


def load(path: Path = SET) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def judge(rows: list[dict]) -> list[tuple[dict, str, str]]:
    """Each row with the rules' verdict (`ask` when they cannot tell) and the rule's name."""
    out = []
    for row in rows:
        v = relate_by_rules(entry(row["new"]), entry(row["old"]))
        out.append((row, v.relation or ASK, v.rule))
    return out


def figures(judged: list[tuple[dict, str, str]]) -> dict:
    """Coverage, accuracy when decided, per relation and per rule, and the confusion matrix."""
    n = len(judged)
    decided = [(r, v, rule) for r, v, rule in judged if v != ASK]
    right = sum(1 for r, v, _ in decided if v == r["label"])
    per_relation = {}
    for rel in RELATIONS:
        called = [r for r, v, _ in decided if v == rel]
        labelled = [v for r, v, _ in judged if r["label"] == rel]
        per_relation[rel] = {
            "called": len(called), "called_right": sum(1 for r in called if r["label"] == rel),
            "labelled": len(labelled), "labelled_decided_right": sum(1 for v in labelled if v == rel)}
    per_rule: dict[str, list[int]] = {}
    for r, v, rule in decided:
        fired = per_rule.setdefault(rule, [0, 0])
        fired[0] += 1
        fired[1] += v == r["label"]
    confusion = Counter((r["label"], v) for r, v, _ in judged)
    return {"pairs": n, "decided": len(decided), "right": right,
            "coverage": len(decided) / n if n else 0.0,
            "accuracy": right / len(decided) if decided else None,
            "per_relation": per_relation, "per_rule": per_rule, "confusion": confusion}


def print_figures(name: str, f: dict) -> None:
    acc = "n/a"
    if f["accuracy"] is not None:
        low, high = wilson_interval(f["right"], f["decided"]) or (0.0, 1.0)
        acc = f"{f['accuracy']:.3f}, 95% interval {low:.3f}–{high:.3f}"
    print(f"\n== {name}: {f['pairs']} pairs; the rules decide {f['decided']} (coverage {f['coverage']:.3f}),"
          f" right {f['right']} (accuracy when decided {acc})")
    print(f"  {'relation':14} {'called':>6} {'right':>6}   {'labelled':>8} {'decided right':>13}")
    for rel, p in f["per_relation"].items():
        print(f"  {rel:14} {p['called']:6d} {p['called_right']:6d}   {p['labelled']:8d}"
              f" {p['labelled_decided_right']:13d}")
    print("  per rule (fired / right): " + ", ".join(f"{k} {a}/{b}" for k, (a, b) in sorted(f["per_rule"].items())))
    cols = [*RELATIONS, ASK]
    print("  confusion (rows: label, columns: verdict)")
    print("  " + " " * 14 + "".join(f"{c[:8]:>9}" for c in cols))
    for rel in RELATIONS:
        print(f"  {rel:14}" + "".join(f"{f['confusion'].get((rel, c), 0):9d}" for c in cols))


def neighbour_distribution(text: str) -> dict[int, float]:
    dist = {}
    for part in text.split(","):
        k, _, p = part.partition(":")
        dist[int(k)] = float(p)
    total = sum(dist.values())
    if abs(total - 1.0) > 1e-6:
        raise SystemExit(f"--neighbours: the shares add up to {total:g}; give shares that add up to 1")
    return dist


def print_load(coverage: float, dist: dict[int, float], over: str) -> None:
    per_pair = 2 * (1 - coverage)
    mean_k = sum(k * p for k, p in dist.items())
    per_entry = per_pair * mean_k
    print(f"\n== model calls (coverage {coverage:.3f} over {over})")
    print(f"  per neighbour pair: 2 judgments × {1 - coverage:.3f} undecided = {per_pair:.3f} calls")
    print(f"  assumed neighbours above the threshold per new entry: "
          + ", ".join(f"{k}: {p:.0%}" for k, p in sorted(dist.items())) + f" (mean {mean_k:.2f})")
    print(f"  per entry, neighbours: {per_entry:.3f} calls expected (without rules: {2 * mean_k:.3f})")
    for k in sorted(dist):
        print(f"    an entry with {k:2d} neighbours: {2 * k * (1 - coverage):6.2f} expected, {2 * k} at most")
    print(f"  plus the acceptance's two judgments on an entry that reaches step 5: {per_entry + 2:.3f} per entry")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", type=Path, default=SET)
    ap.add_argument("--neighbours", default=DEFAULT_NEIGHBOURS,
                    help="k:share,… — how many neighbours a new entry has above the similarity threshold")
    ap.add_argument("--wrong", action="store_true", help="list the pairs the rules decide wrongly")
    args = ap.parse_args()
    dist = neighbour_distribution(args.neighbours)
    rows = load(args.set)
    judged = judge(rows)
    for part in ("tuning", "heldout"):
        some = [j for j in judged if j[0]["set"] == part]
        if some:
            print_figures(part, figures(some))
        rounds = sorted({j[0]["round"] for j in some if "round" in j[0]})
        for r in rounds if len(rounds) > 1 else ():
            print_figures(f"{part}, round {r}", figures([j for j in some if j[0].get("round") == r]))
    whole = figures(judged)
    print_figures("all", whole)
    wrong = [(r, v, rule) for r, v, rule in judged if v not in (ASK, r["label"])]
    print(f"\n  wrong verdicts: {len(wrong)}")
    if args.wrong:
        for r, v, rule in wrong:
            print(f"    [{r['set']}] label {r['label']}, rules {v} ({rule}): "
                  f"{r['new']['body']!r} / {r['old']['body']!r}")
    print_load(whole["coverage"], dist, "the whole set")
    heldout = [j for j in judged if j[0]["set"] == "heldout"]
    if heldout:
        # the held-out coverage is the honest one: the tuning pairs were written beside the rules
        print_load(figures(heldout)["coverage"], dist, "the held-out pairs")
    load_before = os.getloadavg()
    started = time.perf_counter()
    repeat = 20
    for _ in range(repeat):
        judge(rows)
    per_pair_us = (time.perf_counter() - started) / (repeat * len(rows)) * 1e6
    print(f"\n== time: {per_pair_us:.0f} µs per rule verdict ({repeat} passes over {len(rows)} pairs); "
          f"load {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
