"""The one-claim check of an entry's body, measured on the labelled set (tests/data/entry_bodies.jsonl).

    .venv/bin/python bench/claims.py [--repeat 20]

Prints, for the whole set and for each part of it (`tuning`: the bodies the rules were shaped on;
`heldout`, `heldout2`: bodies written later, before the rules were measured on them): the
confusion matrix (label × verdict), the precision and recall of "refused", the false-refusal rate
(acceptable bodies refused), then the bodies it gets wrong. Then the time of one check a body:
`check_entry_body` against the diary's `check_note` as the peer (the same bodies, interleaved A/B, so load
that comes and goes falls on both), with the load average before and after. Nothing is asserted.
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

from core.agents.notes import check_note  # noqa: E402
from core.errors import Invalid  # noqa: E402
from core.text.claims import check_entry_body  # noqa: E402

SET = ROOT / "tests" / "data" / "entry_bodies.jsonl"
LABELS = ("one", "several", "credential")


def verdict(body: str, kind: str) -> str:
    refusal = check_entry_body(body, kind)
    if refusal is None:
        return "one"
    return {"entry_credential": "credential", "entry_several_claims": "several"}.get(refusal.code, refusal.code)


def report(name: str, rows: list[dict]) -> None:
    got = [verdict(r["body"], r["kind"]) for r in rows]
    matrix = Counter((r["label"], g) for r, g in zip(rows, got))
    others = sorted(set(got) - set(LABELS))          # a code other than the two labels (entry_too_long…)
    verdicts = [*LABELS, *others]
    print(f"\n{name}: {len(rows)} bodies ({sum(r['label'] == 'one' for r in rows)} acceptable)")
    print("  label \\ verdict " + "".join(f"{v:>12}" for v in verdicts))
    for label in LABELS:
        print(f"  {label:<16}" + "".join(f"{matrix[(label, v)]:>12}" for v in verdicts))
    refused = [g != "one" for g in got]
    bad = [r["label"] != "one" for r in rows]
    tp = sum(a and b for a, b in zip(refused, bad))
    fp = sum(a and not b for a, b in zip(refused, bad))
    print(f"  precision of refused {tp / max(1, sum(refused)):.3f}   recall {tp / max(1, sum(bad)):.3f}   "
          f"false refusals {fp}/{sum(not b for b in bad)} = {fp / max(1, sum(not b for b in bad)):.1%}")
    for r, g in zip(rows, got):
        if g != r["label"]:
            print(f"    [{r['label']} → {g}] {r['body'][:110]!r}")


def timing(rows: list[dict], repeat: int) -> None:
    bodies = [(r["body"], r["kind"]) for r in rows]
    notes = [b for b, _ in bodies]
    entry_s = note_s = 0.0
    for _ in range(repeat):
        t = time.perf_counter()
        for body, kind in bodies:
            check_entry_body(body, kind)
        entry_s += time.perf_counter() - t
        t = time.perf_counter()
        for note in notes:
            try:
                check_note(note)
            except Invalid:
                pass
        note_s += time.perf_counter() - t
    n = repeat * len(bodies)
    print(f"\nper body ({n} checks each): check_entry_body {entry_s / n * 1e6:.1f} µs, "
          f"diary check_note {note_s / n * 1e6:.1f} µs, ratio {entry_s / note_s:.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over the set for the timing")
    args = parser.parse_args()
    rows = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    report("all", rows)
    for name in sorted({r["set"] for r in rows}):
        report(f"set '{name}'", [r for r in rows if r["set"] == name])
    timing(rows, args.repeat)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
