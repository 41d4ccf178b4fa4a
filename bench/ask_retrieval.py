"""The retrieval side of `crewlet ask`: how often the page that answers a question is among the sources
the model is given, at each budget of source tokens, on the own question set.

    .venv/bin/python bench/ask_retrieval.py [--reuse] [--budgets 500,1000,2000,3000,4000,6000] [--limit 8]
        [--misses]

The home is bench/relevance.py's question-set home (../shared/corpora imported with `crewlet import DIR
--into KEY --title-from-name`, indexed, embedded with the default local model; kept under
bench/.out/relevance/corpora with --reuse). Each question of bench/questions/corpora.jsonl goes through
`Asker.answer` — the code path `crewlet ask` runs — with no model configured, so the answer is exactly
the sources a model would be given (search, passages, budget), and nothing is spent.

Printed for each budget: the share of questions whose target page is among the sources (and the search's
own success@limit beside it: the ceiling no budget can pass), the sources given and the tokens of the
prompt (mean), how often the target's passage is not its page's opening and how often one was chosen by
meaning, and the time an ask spends on its sources beside the time of the search alone (same run,
alternating, with the load). Bytes per token of the chosen passages says what the shipped tokenizer's
count is in bytes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _common import OUT, machine_load

import relevance
from core.ask.answer import NO_MODEL, Asker
from core.chat import DEFAULT_MAX_SOURCES
from core.node import Node
from core.paths import Home
from core.search.native import NativeSearcher
from core.search.seam import Query

QUERY_TIMEOUT_S = 60.0      # what is found, not how fast: a loaded machine must not serve keyword alone


def run(args: argparse.Namespace) -> None:
    built, pages = relevance.corpora_home(args.out, args.corpora, args.reuse)
    print(f"== crewlet ask, retrieval: {built.facts['pages']:,} pages, home {built.folder / 'home'}")
    print(f"{relevance._phases(built)}")
    with Node.open(Home(built.folder / "home")) as node:
        if node.company.llm is not None:
            raise SystemExit("the bench home has a [providers.llm]: remove it (the bench must spend nothing)")
        questions = relevance.load_questions(args.questions, args.corpora, pages, node)
        print(f"{len(questions)} questions; search limit {args.limit}; {machine_load()}")
        searcher = NativeSearcher(node, query_timeout_s=QUERY_TIMEOUT_S)
        try:
            # the search alone: the ceiling, and the peer the time of an ask is set against
            search_s: list[float] = []
            ceiling = 0
            for q in questions:
                started = time.perf_counter()
                res = searcher.search(Query(q.text, actor="alex", limit=args.limit))
                search_s.append(time.perf_counter() - started)
                if res.outcome.served_mode != "hybrid" or res.outcome.degraded:
                    raise SystemExit(f"{q.qid}: the search served {res.outcome.served_mode} ({res.outcome.degraded})")
                ceiling += any(h.page_id in q.page_ids for h in res.hits)
            print(f"the search alone: target in its top {args.limit} for {ceiling}/{len(questions)} "
                  f"({ceiling / len(questions):.3f})")
            print(f"{'budget':>7} {'target in sources':>18} {'sources':>8} {'src tok':>8} {'prompt tok':>10} "
                  f"{'not opening':>11} {'by meaning':>10} {'ask ms':>7} {'search ms':>9} {'ratio':>6}")
            for budget in args.budgets:
                asker = Asker(node, searcher, search_limit=args.limit, source_tokens=budget)
                found = 0
                n_sources: list[int] = []
                src_tokens: list[int] = []
                prompt_tokens: list[int] = []
                not_opening = by_meaning = target_sources = 0
                ask_s: list[float] = []
                peer_s: list[float] = []
                text_bytes = text_tokens = 0
                all_sources = all_by_meaning = 0
                misses: list[str] = []
                for q in questions:
                    # alternate: the search alone, then the ask (which searches again, as `crewlet ask` does)
                    started = time.perf_counter()
                    searcher.search(Query(q.text, actor="alex", limit=args.limit))
                    peer_s.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    answer = asker.answer(q.text, "alex", use_cache=False)
                    ask_s.append(time.perf_counter() - started)
                    if answer.status != NO_MODEL:
                        raise SystemExit(f"{q.qid}: answered {answer.status}: {answer.reason}")
                    n_sources.append(len(answer.sources))
                    src_tokens.append(answer.source_tokens)
                    prompt_tokens.append(answer.prompt_tokens)
                    for s in answer.sources:
                        all_sources += 1
                        all_by_meaning += s.by_meaning
                        text = "".join(s.passages)
                        text_bytes += len(text.encode("utf-8"))
                        text_tokens += s.tokens
                    hit = [s for s in answer.sources if s.page_id in q.page_ids]
                    if hit:
                        found += 1
                        target_sources += 1
                        not_opening += _not_opening(node, hit[0])
                        by_meaning += hit[0].by_meaning
                    else:
                        misses.append(q.qid)
                asker.close()
                n = len(questions)
                ask_ms, peer_ms = 1000 * statistics.median(ask_s), 1000 * statistics.median(peer_s)
                print(f"{budget:>7} {found:>9}/{n} {found / n:6.3f} {statistics.mean(n_sources):8.1f} "
                      f"{statistics.mean(src_tokens):8.0f} {statistics.mean(prompt_tokens):10.0f} "
                      f"{not_opening:>6}/{target_sources:<4} {by_meaning:>6}/{target_sources:<3} "
                      f"{ask_ms:7.0f} {peer_ms:9.0f} {ask_ms / peer_ms:6.2f}")
                if args.misses:
                    print(f"        not among the sources: {', '.join(misses)}")
                print(f"        {text_bytes / max(text_tokens, 1):.2f} bytes a token in the passages given; "
                      f"{all_by_meaning} of {all_sources} sources' passages chosen by meaning; {machine_load()}",
                      flush=True)
        finally:
            searcher.close()


def _not_opening(node: Node, source: object) -> int:
    """Whether the first passage given for the target page is not the opening of its body."""
    from core.ask import passages

    with node.lock:
        body = node.conn.execute("SELECT body FROM pages WHERE id = ?", (source.page_id,)).fetchone()[0]  # type: ignore[attr-defined]
    found = passages.split(body)
    if not found:
        return 0
    given = source.passages[0].removesuffix(" …")  # type: ignore[attr-defined] - a cut passage ends so
    return int(not found[0].rendered().startswith(given))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT / "relevance", type=Path, help="where relevance.py keeps its homes")
    ap.add_argument("--corpora", default=Path("/work/shared/corpora"), type=Path)
    ap.add_argument("--questions", default=relevance.QUESTIONS, type=Path)
    ap.add_argument("--reuse", action="store_true", help="search the home kept by an earlier run (built when missing)")
    ap.add_argument("--budgets", type=_ints, default=[500, 1000, 2000, 3000, 4000, 6000])
    ap.add_argument("--limit", type=int, default=DEFAULT_MAX_SOURCES, help="pages the search is asked for (max_sources)")
    ap.add_argument("--misses", action="store_true", help="name the questions whose target is not among the sources")
    run(ap.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
