"""A new process's first search by meaning on a cold disk: the code table read from the database against
the same table read from its file (core/search/code_file.py), alternated, on the synthetic homes
bench/ivf.py builds.

    CREWLET_BENCH_OUT=/work/cache/ivf .venv/bin/python bench/cold_start.py [--sizes 1000000] [--dims 384 1536]
                                                                           [--rounds 2]

Before each run the home's files are dropped from the kernel's page cache (posix_fadvise DONTNEED: no root
needed, clean pages only), so every read comes from the disk, as after a reboot or once other work has
pushed the home out of memory. Each run is a fresh interpreter that opens the node, loads the table and
answers one semantic search (stage two included); it prints the load's and the search's seconds. For a
"database" run the file is set aside and a plain file stands where its directory goes, so the run neither
reads one nor spends time writing one — nor a vector file (stage two then reads its candidates by id, as a
node past its rerank_memory_mb does); a "file" run reads both, the code file and the vector file's compact
part (core/search/vector_file.py), the latter inside the first search's time. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import machine_load as load  # noqa: E402
from _vectors import cached_home, space_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

FIRST_SEARCH = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
import numpy as np
from core.node import Node
from core.paths import Home
from core.search import semantic
from core.search.access import Access
every = Access(actor=None, mode="semantic", allowed=None, skills="SKILLS", exclusions=(), draft_backstop=True)
started = time.perf_counter()
with Node.open(Home(Path({home!r}))) as node:
    retriever = semantic.SemanticRetriever(node)
    table = retriever.table({space!r})
    loaded = time.perf_counter() - started
    q = np.random.default_rng(11).standard_normal({dims}).astype(np.float32)
    t = time.perf_counter()
    how = retriever.rank(q, {space!r}, every).stage_two
    print(loaded, time.perf_counter() - t, table.live, how)
"""


def drop_cache(root: Path) -> None:
    """Ask the kernel to forget the home's clean pages (what a reboot would)."""
    for path in root.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno()) if os.access(path, os.W_OK) else None
                os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def first_search(home: Path, space: str, dims: int) -> tuple[float, float, int, str]:
    script = FIRST_SEARCH.format(root=str(ROOT), home=str(home), space=space, dims=dims)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"the search process failed: {out.stderr[-800:]}")
    loaded, searched, live, how = out.stdout.split()
    return float(loaded), float(searched), int(live), how


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--dims", type=int, nargs="+", default=[384])
    ap.add_argument("--rounds", type=int, default=2, help="database and file runs each, alternated")
    args = ap.parse_args()
    print(f"crewlet cold-start bench   [{load()}]")
    for dims in args.dims:
        for n in args.sizes:
            home, _, _ = cached_home(n, dims)
            space = space_of(dims)
            from core.search import code_file

            cache = code_file.file_for(home.codes_dir, space)
            print(f"\n== {n:,} sources × {dims} dimensions ==")
            if not cache.exists():
                first_search(home.root, space, dims)                  # the first process keeps the file
            aside = home.codes_dir.with_name("codes.aside")
            for rnd in range(args.rounds):
                for how in ("database", "file"):
                    if how == "database":
                        home.codes_dir.rename(aside)
                        home.codes_dir.write_text("set aside by bench/cold_start.py")
                    drop_cache(home.root)
                    try:
                        loaded, searched, live, stage = first_search(home.root, space, dims)
                    finally:
                        if aside.exists():
                            home.codes_dir.unlink()
                            aside.rename(home.codes_dir)
                    size = f", the file {cache.stat().st_size / 1e6:,.0f} MB" if how == "file" else ""
                    print(f"  round {rnd + 1}, the table from the {how}: loaded in {loaded:.2f} s, the first search "
                          f"{searched * 1000:.0f} ms, stage two {stage} ({live:,} sources{size})   [{load()}]", flush=True)


if __name__ == "__main__":
    main()
