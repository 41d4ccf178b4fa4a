"""Rechecking code citations across a long jump of the default branch (issue 35's aim: 10,000 citations of
2,000 files across a 500-commit jump in at most 30 s on one core).

    python bench/recheck.py [--files 2000] [--citations 10000] [--commits 500] [--per-commit 12]
                            [--cited-at 1] [--keep DIR] [--duty]

Makes a synthetic repository with git fast-import (`--files` files of ~120 unique lines; then `--commits`
commits, each editing `--per-commit` random files — lines inserted, deleted, rewritten, a block moved —,
and now and then renaming, deleting or adding a file), cites `--citations` random ranges of 1-5 lines (half
with a quote) at the first commit, and times `core.repos.recheck` carrying all of them to the head, this
process and its git children pinned to one core. Prints the time, the outcomes, the files the jump touched
and the load; checks that every citation said to hold passes the write check at the head. Never asserts a
time.

`--duty` times the whole duty path instead: a home whose company.toml declares the repository, one entry per
citation (standing, its citation read at write at the first commit, written straight to the log in bulk — that is
the set-up, not timed), then one pass of the recheck duty through the runner (`EntryRecheckDuty`, as
`crewlet entry recheck` runs it): the entries and their last checks read from SQLite, the blobs compared at the
head, the jump carried through git, and every check that changed written to the log and applied. Prints the pass's
time, its counts, the records written and the load; checks that every citation the duty said holds passes the
write check where it now stands.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import machine_load  # noqa: E402
from core.paths import Home  # noqa: E402
from core.repos import HOLDS, CodeCitation, Repository, check_code, recheck  # noqa: E402


class Synthetic:
    """The files' lines kept in memory, written to a fast-import stream one commit at a time."""

    def __init__(self, files: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.fresh = 0
        self.files: dict[str, list[str]] = {}
        for i in range(files):
            self.files[f"src/pkg{i % 50}/mod{i}.py"] = [self.line() for _ in range(120)]
        self.stream: list[bytes] = []
        self.mark = 0

    def line(self) -> str:
        self.fresh += 1
        return f"    value_{self.fresh} = compute({self.rng.randrange(10**6)}, 'k{self.fresh % 97}')"

    def commit(self, changed: dict[str, list[str] | None]) -> None:
        self.mark += 1
        head = (f"commit refs/heads/main\nmark :{self.mark}\n"
                f"committer Bench <b@example.com> {1700000000 + self.mark} +0000\ndata 6\nbench\n")
        if self.mark > 1:
            head += f"from :{self.mark - 1}\n"
        parts = [head.encode()]
        for path, lines in changed.items():
            if lines is None:
                parts.append(f"D {path}\n".encode())
            else:
                body = ("\n".join(lines) + "\n").encode()
                parts.append(f"M 100644 inline {path}\ndata {len(body)}\n".encode() + body + b"\n")
        self.stream.append(b"".join(parts))

    def edit(self, lines: list[str]) -> None:
        rng = self.rng
        for _ in range(rng.randint(1, 3)):
            op, k = rng.random(), rng.randrange(len(lines) + 1)
            if op < 0.45:
                lines[k:k] = [self.line() for _ in range(rng.randint(1, 5))]
            elif op < 0.65 and len(lines) > 20:
                del lines[k:k + rng.randint(1, 3)]
            elif op < 0.9 and k < len(lines):
                lines[k] = self.line()
            elif len(lines) > 20:
                block, dest = lines[k:k + 3], rng.randrange(len(lines) - 3)
                del lines[k:k + 3]
                lines[dest:dest] = block

    def jump(self, commits: int, per_commit: int, keep: set[int]) -> dict[int, dict[str, list[str]]]:
        """The commits; the files as they stood after each commit numbered in `keep` (0: the first)."""
        rng = self.rng
        kept: dict[int, dict[str, list[str]]] = {}
        for n in range(commits):
            if n in keep:
                kept[n] = {p: list(lines) for p, lines in self.files.items()}
            changed: dict[str, list[str] | None] = {}
            for path in rng.sample(sorted(self.files), per_commit):
                self.edit(self.files[path])
                changed[path] = self.files[path]
            if n % 10 == 3:  # a rename: the old path deleted, the new one written (git pairs them)
                old = rng.choice(sorted(set(self.files) - set(changed)))
                new = old.replace(".py", f"_r{n}.py")
                self.files[new] = self.files.pop(old)
                changed[old], changed[new] = None, self.files[new]
            if n % 25 == 7:
                gone = rng.choice(sorted(set(self.files) - set(changed)))
                del self.files[gone]
                changed[gone] = None
            if n % 25 == 13:
                added = f"src/new/file{n}.py"
                self.files[added] = [self.line() for _ in range(60)]
                changed[added] = self.files[added]
            self.commit(changed)
        return kept


def build(path: Path, args: argparse.Namespace) -> tuple[list[str], dict[int, dict[str, list[str]]]]:
    """The repository made; its commits oldest first, and the files at each commit citations cite (the
    first, or `--cited-at` commits spread over the first half of the jump)."""
    syn = Synthetic(args.files, seed=11)
    syn.commit(dict(syn.files))
    step = max(1, args.commits // 2 // args.cited_at)
    kept = syn.jump(args.commits, args.per_commit, {k * step for k in range(args.cited_at)})
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=b"".join(syn.stream), check=True)
    revs = subprocess.run(["git", "-C", str(path), "rev-list", "--reverse", "main"], capture_output=True,
                          check=True).stdout.decode().split()
    return revs, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--citations", type=int, default=10_000)
    ap.add_argument("--commits", type=int, default=500)
    ap.add_argument("--per-commit", type=int, default=12)
    ap.add_argument("--cited-at", type=int, default=1,
                    help="citations spread over this many commits (each a jump of its own); 1: all at the first")
    ap.add_argument("--keep", type=Path, help="make the repository here and keep it")
    ap.add_argument("--duty", action="store_true",
                    help="time the whole recheck duty (entries in a home, records written) instead of core.repos alone")
    args = ap.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, inherited by the git children
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "repo"
        t = time.perf_counter()
        revs, kept = build(path, args)
        first, head = revs[0], revs[-1]
        made = time.perf_counter() - t
        rng = random.Random(5)
        cited = sorted(kept)
        cits = []
        for i in range(args.citations):
            n = cited[i % len(cited)]  # commit n of the jump is revs[n]: the files as they stood before it
            files = kept[n]
            paths = sorted(files)
            p = paths[(i // len(cited)) % len(paths)]
            start = rng.randint(1, len(files[p]) - 5)
            end = start + rng.randint(0, 4)
            quote = files[p][rng.randint(start, end) - 1].strip() if i % 2 else None
            cits.append(CodeCitation("bench", p, start, end, revs[n], quote))
        if args.duty:
            duty_pass(path, Path(tmp) / "home", revs, cits, made)
            return
        with Repository("bench", path) as repo:
            touched = len(repo.changed_files(first, head))
            calls, asked = repo.git_calls, repo.reader.requests
            t = time.perf_counter()
            anchors = recheck(repo, cits)
            took = time.perf_counter() - t
            calls, asked = repo.git_calls - calls, repo.reader.requests - asked
            wrong = [a for a in anchors if a.holds and check_code(1, a.moved_citation(), repo).outcome != HOLDS]
        counts = collections.Counter(a.outcome for a in anchors)
        print(f"repository: {args.files} files, {args.commits} commits × {args.per_commit} files edited "
              f"(made in {made:.1f} s); the jump changed {touched} files")
        print(f"recheck of {len(cits)} citations at {len(cited)} commit(s) on one core: {took:.2f} s "
              f"({took / len(cits) * 1e6:.0f} µs a citation); aim ≤ 30 s")
        followed = sum(1 for a in anchors if a.followed_from)
        print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
              + f"; {followed} followed a rename")
        print(f"git processes run: {calls}; objects asked of cat-file: {asked}")
        print(f"held citations failing the write check at the head: {len(wrong)}")
        print(machine_load())


def duty_pass(repo_path: Path, home_root: Path, revs: list[str], cits: list[CodeCitation], made: float) -> None:
    """One pass of the recheck duty over one entry per citation (see the module's docstring)."""
    import threading

    from core import config as config_mod
    from core.duties.entry_recheck import EntryRecheckDuty
    from core.duties.runner import DutyRunner
    from core.node import Node, init_home
    from core.pages import records
    from core.pages.service import KnowledgeBase

    config = config_mod.example_config()
    config["repositories"] = {"bench": {"path": str(repo_path)}}
    home = Home(home_root)
    init_home(home, config)
    t = time.perf_counter()
    with Node.open(home) as node:
        page = KnowledgeBase(node).create_page("ENG", "Bench", "", actor="alex").id
        with Repository("bench", repo_path) as repo:
            at = sorted({(c.commit, c.path) for c in cits})
            blobs = dict(zip(at, repo.blob_ids(at)))
        recs = []
        for i, c in enumerate(cits):
            recs.append(records.entry_add(
                "alex", entry_id=records.new_id(), page_id=page, kind="FACT", body=f"Fact {i} about {c.path}.",
                by="person", citations=[c.to_json()],
                checks=[{"index": 1, "result": "held", "commit": c.commit, "blob": blobs[(c.commit, c.path)]}]))
        for i in range(0, len(recs), 2_000):
            node.submit(recs[i:i + 2_000], bulk=True)
        written = time.perf_counter() - t
        first_seq = node.applied_seq()
        duty = EntryRecheckDuty(node, force=True)
        runner = DutyRunner(node, [duty], label="bench")
        t = time.perf_counter()
        report = runner.run_one(duty, stop=threading.Event())
        took = time.perf_counter() - t
        t = time.perf_counter()
        idle = runner.run_one(duty, stop=threading.Event())      # the next poll, nothing new: what a poll costs
        idle_took = time.perf_counter() - t
        runner.close()
        assert report.result is not None and idle.result is not None, report.line()
        counts = report.result.counts
        records_written = node.applied_seq() - first_seq
        with Repository("bench", repo_path) as repo:
            from core.bank.entries import EntryBank

            bank = EntryBank(node, repositories={"bench": repo})
            wrong = 0
            rows = node.conn.execute("SELECT id FROM entries").fetchall()
            for (entry_id,) in rows[:: max(1, len(rows) // 500)]:      # a sample of 500: each a read of its own
                [c] = bank.show(entry_id).citations
                if c.holds:
                    where = c.anchor or {"path": c.citation["path"], "lines": c.citation["lines"]}
                    moved = CodeCitation("bench", where["path"], *where["lines"], c.commit or revs[-1],
                                         c.citation.get("quote"))
                    wrong += check_code(1, moved, repo).outcome != HOLDS
    print(f"repository: made in {made:.1f} s; {len(cits)} entries written in {written:.1f} s (set-up)")
    print(f"recheck duty pass of {len(cits)} entries, one citation each, across {len(revs) - 1} commits on one core: "
          f"{took:.2f} s ({took / len(cits) * 1e6:.0f} µs an entry); aim ≤ 30 s")
    print("counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"records written and applied: {records_written}")
    print(f"the next poll, nothing new at the head: {idle_took:.2f} s, "
          f"{idle.result.counts.get('records', 0)} records written")
    print(f"held citations (a sample of 500) failing the write check where they now stand: {wrong}")
    print(machine_load())


if __name__ == "__main__":
    main()
