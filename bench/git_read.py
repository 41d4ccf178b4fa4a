"""Reading a blob at a commit (`<commit>:<path>`): core/repos's one long-lived `git cat-file
--batch-command` against pygit2 (libgit2 in process) and dulwich (pure Python, C helpers), and against a
`git cat-file -p` process per read (what a naive reader does).

    python bench/git_read.py [--files 1000] [--reads 5000] [--size 4000] [--rounds 3] [--one-core] [--jump]

Makes a throwaway repository with `--files` files of about `--size` bytes (git fast-import, one commit,
then `git gc` so reads come from a pack, as in a real clone), reads `--reads` random files by path at the
commit through each reader, alternating readers each round so load drifts hit all of them. Also times crewlet's
many-at-once path (`read_many`, 100 reads a round trip). Prints the
median microseconds per read, each reader's ratio to cat-file, and the load. A reader whose library is
not installed is skipped (neither is a dependency of crewlet). With `--jump`, also times what a recheck
spends most on, a jump's diff (bench/recheck.py's repository: 2,000 files, 500 commits): git's
`--name-status` and `-U0` patch against pygit2's diff, rename detection and hunks. Never asserts a time.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._common import machine_load  # noqa: E402
from core.repos import Repository  # noqa: E402


def make_repo(path: Path, files: int, size: int, seed: int = 7) -> tuple[str, list[str]]:
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    names = [f"src/pkg{i % 40}/mod{i}.py" for i in range(files)]
    chunks = [b"commit refs/heads/main\ncommitter Bench <b@example.com> 1700000000 +0000\ndata 5\nbench\n"]
    for name in names:
        lines = []
        while sum(map(len, lines)) < size:
            lines.append(f"def f{rng.randrange(10**9)}(x):  return x * {rng.randrange(1000)}\n")
        body = "".join(lines).encode()
        chunks.append(f"M 100644 inline {name}\ndata {len(body)}\n".encode() + body + b"\n")
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=b"".join(chunks), check=True)
    subprocess.run(["git", "-C", str(path), "gc", "-q"], check=True)
    sha = subprocess.run(["git", "-C", str(path), "rev-parse", "main"], capture_output=True, check=True)
    return sha.stdout.decode().strip(), names


def readers(path: Path, sha: str) -> dict[str, Callable[[str], bytes]]:
    repo = Repository("bench", path)
    out: dict[str, Callable[[str], bytes]] = {
        "cat-file --batch-command (crewlet)": lambda p: repo.read(sha, p)[1],  # type: ignore[index]
    }
    try:
        import pygit2
        r = pygit2.Repository(str(path))
        commit = r.revparse_single(sha)
        out["pygit2 (libgit2 %s)" % pygit2.LIBGIT2_VERSION] = lambda p: commit.tree[p].data
    except ImportError:
        print("pygit2 not installed: skipped", file=sys.stderr)
    try:
        from dulwich.object_store import tree_lookup_path
        from dulwich.repo import Repo
        d = Repo(str(path))
        tree = d[sha.encode()].tree

        def dulwich_read(p: str) -> bytes:
            _, oid = tree_lookup_path(d.object_store.__getitem__, tree, p.encode())
            return d.object_store[oid].data
        out["dulwich"] = dulwich_read
    except ImportError:
        print("dulwich not installed: skipped", file=sys.stderr)
    out["git cat-file -p, a process per read"] = lambda p: subprocess.run(
        ["git", "-C", str(path), "cat-file", "-p", f"{sha}:{p}"], capture_output=True, check=True).stdout
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--reads", type=int, default=5000)
    ap.add_argument("--size", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one-core", action="store_true",
                    help="pin this process and its git children to one core (each round trip then waits for "
                         "a switch between them)")
    ap.add_argument("--jump", action="store_true", help="also time a 500-commit jump's diff: git against pygit2")
    args = ap.parse_args()
    if args.one_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "repo"
        sha, names = make_repo(path, args.files, args.size)
        rng = random.Random(1)
        picks = [rng.choice(names) for _ in range(args.reads)]
        reads = readers(path, sha)
        expect = {p: reads["cat-file --batch-command (crewlet)"](p) for p in set(picks[:50])}
        for name, read in reads.items():  # all agree on the bytes, and each is warmed once
            assert all(read(p) == data for p, data in expect.items()), name
        per_read: dict[str, list[float]] = {name: [] for name in reads}
        for _ in range(args.rounds):
            for name, read in reads.items():
                n = len(picks) if "per read" not in name else min(len(picks), 300)
                t = time.perf_counter()
                for p in picks[:n]:
                    read(p)
                per_read[name].append((time.perf_counter() - t) / n * 1e6)
        # crewlet's many-at-once path (a recheck's prefetch): 100 reads written before their answers are read
        repo = Repository("bench-many", path)
        many = "cat-file, 100 asked at once (crewlet)"
        per_read[many] = []
        for _ in range(args.rounds):
            t = time.perf_counter()
            for i in range(0, len(picks), 100):
                repo.read_many([(sha, p) for p in picks[i:i + 100]])
            per_read[many].append((time.perf_counter() - t) / len(picks) * 1e6)
        repo.close()
        base = statistics.median(per_read["cat-file --batch-command (crewlet)"])
        print(f"{args.files} files of ~{args.size} B, {args.reads} reads by path at one commit, "
              f"{args.rounds} rounds{', one core' if args.one_core else ''}; {machine_load()}")
        for name, values in per_read.items():
            med = statistics.median(values)
            print(f"  {name:42s} {med:9.1f} µs/read   ×{med / base:6.2f} of cat-file")
        if args.jump:
            jump_diff(Path(tmp) / "jump", args.rounds)


def jump_diff(path: Path, rounds: int) -> None:
    from bench.recheck import build
    ns = argparse.Namespace(files=2000, commits=500, per_commit=12, cited_at=1)
    revs, _ = build(path, ns)
    a, b = revs[0], revs[-1]
    git_s, lib_s = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        for extra in (["--name-status", "-z"], ["-U0"]):
            subprocess.run(["git", "-C", str(path), "diff", "--find-renames", *extra, a, b], capture_output=True,
                           check=True)
        git_s.append(time.perf_counter() - t)
        try:
            import pygit2
        except ImportError:
            continue
        t = time.perf_counter()
        diff = pygit2.Repository(str(path)).diff(a, b, context_lines=0)
        diff.find_similar()
        hunks = sum(len(patch.hunks) for patch in diff)
        lib_s.append(time.perf_counter() - t)
    g = statistics.median(git_s)
    print(f"a 500-commit jump over 2,000 files: git diff --name-status + -U0 {g:.2f} s", end="")
    if lib_s:
        lib = statistics.median(lib_s)
        print(f"; pygit2 diff + find_similar + {hunks} hunks {lib:.2f} s (×{lib / g:.2f} of git)")
    else:
        print()


if __name__ == "__main__":
    main()
