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

    .venv/bin/python bench/triage.py --engine [--by-meaning] [--limit N]

`--engine` runs the real triage (core/bank/triage.py `Triage.decide`) over the same pairs instead: one home with a
real git repository (each cited file committed at the pair's `committed_at`, so the rules' "a later commit of the
file" reads real commit times), each pair's old entry written by a person (in use) and its new one by an agent
under an OPEN page (so an exact repeat reaches triage instead of being folded at write), both in a scope of the
pair's own (so no pair is another's neighbour), the new one cited (its own citations, else one line of a file) so
that it reaches the acceptance step. The two judgments are a counting stand-in of the chat endpoint, in process,
that answers the labelled relation for each neighbour it is asked about (an oracle: what it measures is how often
the rules decide, and what the model is asked, not the model). Neighbours are found by words (vectors off), or
`--by-meaning` with the configured embedding model. Printed: how often the old entry is found as a neighbour, how
often code (the exact-repeat step or a rule) decides the pair and how often rightly, the model calls per triage,
and each label's decisions.
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
    print("  assumed neighbours above the threshold per new entry: "
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
    ap.add_argument("--engine", action="store_true", help="run the real triage over the pairs (see above)")
    ap.add_argument("--by-meaning", action="store_true", help="--engine: find neighbours with the embedding model")
    ap.add_argument("--limit", type=int, default=None, help="--engine: the first N pairs only")
    args = ap.parse_args()
    dist = neighbour_distribution(args.neighbours)
    rows = load(args.set)
    if args.engine:
        run_engine(rows[:args.limit] if args.limit else rows, by_meaning=args.by_meaning, wrong=args.wrong)
        return
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


# -- the real triage over the pairs (--engine) ------------------------------------------------------------------

EXPECTED = {"duplicate": "corroborate", "refinement": "accept", "different": "accept",
            "replacement": "escalate", "contradiction": "escalate"}
BASE_TIME = 1_600_000_000


class Oracle:
    """The chat endpoint's stand-in (core/bank/triage_judge.py `Chat`): answers each asked neighbour's labelled
    relation, one claim, and accepts unless a neighbour (asked, or shown with what the rules found) is a duplicate, a
    replacement or a contradiction. Counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.labels: dict[str, str] = {}

    def complete(self, messages: list[dict[str, str]]):  # noqa: ANN201  (core.chat's ChatReply)
        import re

        from core.chat.openai_http import ChatReply

        self.calls += 1
        text = messages[-1]["content"]
        asked_part = text.split("The entries in use near it (give a relation for each id):", 1)
        asked = re.findall(r"^- id (\S+) \(", asked_part[1], re.M) if len(asked_part) == 2 else []
        relations = {i: self.labels.get(i, "different") for i in asked}
        known = re.findall(r"the rules found: (\w+)\)", text)
        accept = not {"duplicate", "replacement", "contradiction"} & {*relations.values(), *known}
        answer = {"one_claim": True, "accept": accept, "relations": relations, "reason": "the label"}
        return ChatReply(json.dumps(answer), None, "stop", None, "oracle")

    def close(self) -> None:
        pass


def _git(repo: Path, *args: str, when: int | None = None) -> str:
    import subprocess

    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.com",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.com")
    if when is not None:
        env |= {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _cited_repository(repo: Path, rows: list[dict]) -> dict[tuple[str, int], str]:
    """A repository whose every cited file is committed at each `committed_at` its citations name (the first
    commit, at BASE_TIME, holds every file and notes.txt): (path, time) -> commit."""
    times: dict[str, set[int]] = {}
    length: dict[str, int] = {}
    for row in rows:
        for side in ("new", "old"):
            for c in row[side].get("citations", ()):
                times.setdefault(c["path"], set()).add(int(c.get("committed_at") or BASE_TIME))
                length[c["path"]] = max(length.get(c["path"], 1), int(c.get("end") or c.get("start") or 1))
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    at: dict[tuple[str, int], str] = {}
    for when in sorted({BASE_TIME} | {t for ts in times.values() for t in ts}):
        paths = sorted(times) if when == BASE_TIME else sorted(p for p, ts in times.items() if when in ts)
        for path in paths:
            target = repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("".join(f"line {i}\n" for i in range(1, length[path] + 6)) + f"# as of {when}\n")
        if when == BASE_TIME:
            (repo / "notes.txt").write_text("a line to cite\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"as of {when}", when=when)
        head = _git(repo, "rev-parse", "HEAD")
        for path in paths + (["notes.txt"] if when == BASE_TIME else []):
            at[(path, when)] = head
    return at


def run_engine(rows: list[dict], *, by_meaning: bool, wrong: bool) -> None:
    import tempfile

    from core import config as config_mod
    from core.bank.entries import EntryBank
    from core.bank.triage import Triage
    from core.bank.triage_judge import TriageJudge
    from core.chat import LlmSettings
    from core.errors import CrewletError
    from core.node import Node, init_home
    from core.pages.service import KnowledgeBase
    from core.paths import Home

    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="triage-bench-") as tmp:
        repo = Path(tmp) / "repo"
        commits = _cited_repository(repo, rows)
        config = config_mod.example_config()
        config["repositories"] = {"bench": {"path": str(repo)}}
        if not by_meaning:
            config["knowledge"] = {**config["knowledge"], "vectors": False}
        home = Home(Path(tmp) / "home")
        init_home(home, config)
        oracle = Oracle()
        judge = TriageJudge(LlmSettings(base_url="http://in-process", model="oracle"), chat=oracle)
        results = []
        skipped: list[str] = []
        with Node.open(home) as node, EntryBank(node) as bank, Triage(bank, judge=judge) as triage:
            page = KnowledgeBase(node).create_page("ENG", "Pairs", "", actor="alex").id
            bank.set_policy(page, "open", actor="alex")

            def cites(side: dict, fallback: bool) -> list[dict]:
                out = [{"repository": "bench", "path": c["path"],
                        "lines": [int(c.get("start") or 1), int(c.get("end") or c.get("start") or 1)],
                        "commit": commits[(c["path"], int(c.get("committed_at") or BASE_TIME))]}
                       for c in side.get("citations", ())]
                if not out and fallback:
                    out = [{"repository": "bench", "path": "notes.txt", "lines": [1, 1],
                            "commit": commits[("notes.txt", BASE_TIME)]}]
                return out

            for i, row in enumerate(rows):
                scope = f"pair{i:03d}"

                def where(side: dict, scope: str = scope) -> str:
                    named = side.get("scope") or ()
                    return f"{scope}/{named[0]}" if named else scope

                try:
                    old = bank.add(page, row["old"]["body"], kind=row["old"].get("kind", "FACT"),
                                   scope=where(row["old"]), citations=cites(row["old"], False), actor="alex")
                    new = bank.add(page, row["new"]["body"], kind=row["new"].get("kind", "FACT"),
                                   scope=where(row["new"]), citations=cites(row["new"], True), actor="eng-bot")
                except CrewletError as exc:
                    skipped.append(f"pair {i}: {exc}")
                    continue
                oracle.labels = {old.id: row["label"]}
                before = oracle.calls
                outcome = triage.decide(new.id)
                assert outcome.calls == oracle.calls - before
                said = {n["id"]: n for n in outcome.inputs["neighbours"]}.get(old.id)
                if outcome.inputs.get("repeat") == old.id:
                    how, relation = "repeat", "duplicate"
                elif said is None:
                    how, relation = "not found", None
                elif said["by"].startswith("rule ") or said["by"] == "supersedes":
                    how, relation = "rule", said["relation"]
                else:
                    how, relation = "model", said["relation"]
                results.append({"row": row, "how": how, "relation": relation, "decision": outcome.decision,
                                "reasons": outcome.reasons, "calls": outcome.calls})
        seconds = time.perf_counter() - started
    print_engine(results, skipped, seconds, load_before, wrong)


def print_engine(results: list[dict], skipped: list[str], seconds: float, load_before: tuple[float, ...],
                 wrong: bool) -> None:
    n = len(results)
    found = [r for r in results if r["how"] != "not found"]
    by_code = [r for r in results if r["how"] in ("repeat", "rule")]
    right = [r for r in by_code if r["relation"] == r["row"]["label"]]
    print(f"\n== the real triage over {n} pairs ({len(skipped)} skipped: their bodies were refused at write)")
    print(f"  the old entry found as a neighbour (or an exact repeat): {len(found)} ({len(found) / n:.3f})")
    low, high = wilson_interval(len(right), len(by_code)) or (0.0, 1.0)
    print(f"  decided by code: {len(by_code)} ({len(by_code) / n:.3f} of the pairs, {len(by_code) / max(1, len(found)):.3f}"
          f" of those found) — exact repeat {sum(r['how'] == 'repeat' for r in by_code)}, rules "
          f"{sum(r['how'] == 'rule' for r in by_code)}; right {len(right)} ({len(right) / max(1, len(by_code)):.3f}, "
          f"95% interval {low:.3f}–{high:.3f})")
    asked = [r for r in results if r["how"] == "model"]
    print(f"  left to the two judgments: {len(asked)}; not found as a neighbour: {n - len(found)}")
    calls = Counter(r["calls"] for r in results)
    total = sum(r["calls"] for r in results)
    print(f"  model calls: {total} over {n} triages = {total / n:.3f} a triage "
          f"(0 calls: {calls.get(0, 0)}, 1: {calls.get(1, 0)}, 2: {calls.get(2, 0)}); without rules every triage "
          "that is not a policy break asks 2")
    print(f"  {'label':14} {'pairs':>5} {'found':>5} {'by code':>7} {'right':>5} {'calls':>5}   decisions "
          "(expected first)")
    for label in RELATIONS:
        mine = [r for r in results if r["row"]["label"] == label]
        code = [r for r in mine if r["how"] in ("repeat", "rule")]
        decisions = Counter(r["decision"] for r in mine)
        expected = EXPECTED[label]
        said = ", ".join([f"{expected} {decisions.pop(expected, 0)}"] + [f"{d} {c}" for d, c in decisions.most_common()])
        print(f"  {label:14} {len(mine):5d} {sum(r['how'] != 'not found' for r in mine):5d} {len(code):7d} "
              f"{sum(r['relation'] == label for r in code):5d} "
              f"{sum(r['calls'] for r in mine):5d}   {said}")
    reasons = Counter(reason for r in results for reason in r["reasons"])
    print("  reasons: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common()))
    print(f"  {seconds:.1f} s ({seconds / max(1, n) * 1000:.0f} ms a pair, writes included); load "
          f"{load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores")
    if wrong:
        for r in by_code:
            if r["relation"] != r["row"]["label"]:
                print(f"    label {r['row']['label']}, code {r['relation']} ({r['how']}): {r['row']['new']['body']!r}")
    for line in skipped[:10]:
        print(f"  skipped {line}")


if __name__ == "__main__":
    main()
