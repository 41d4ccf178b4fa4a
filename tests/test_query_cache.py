"""Query vectors kept on disk (core/search/query_cache.py): a query asked again by a new `crewlet search`
process is answered by meaning without loading the model, and the cache keeps to its space and size."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from core import config as config_mod
from core.importer import import_directory
from core.node import Node, init_home
from core.pages.service import KnowledgeBase
from core.paths import Home, examples_dir
from core.search.query_cache import QueryVectorStore

ROOT = Path(__file__).resolve().parent.parent

# One `crewlet search --json` in this interpreter; prints the answer and which heavy modules it loaded.
CLI = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    sys.argv = ["crewlet", "--home", {home!r}, "search", "--json", "--", {query!r}]
    from crewlet_tui.cli import main
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
    print(json.dumps({{"heavy": [m for m in ("onnxruntime", "tokenizers") if m in sys.modules]}}))
""")


def vec(seed: int, dims: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(dims).astype(np.float32)


def test_a_vector_is_kept_by_space_and_query_and_the_oldest_go_first(tmp_path):
    store = QueryVectorStore(tmp_path / "q.db", size=3)
    store.put("local:a:8", "deploy", vec(1))
    assert np.array_equal(store.get("local:a:8", "deploy", 8), vec(1))
    assert store.get("local:a:8", "deploy", 16) is None          # another width is never served
    assert store.get("local:b:8", "deploy", 8) is None           # nor another space
    for i, q in enumerate(("b", "c", "d"), start=2):
        store.put("local:a:8", q, vec(i))
    assert store.get("local:a:8", "deploy", 8) is None           # the oldest of four left, at three
    assert all(store.get("local:a:8", q, 8) is not None for q in ("b", "c", "d"))
    store.put("local:b:8", "deploy", vec(9))                     # the model changed: the rest is emptied
    assert store.get("local:a:8", "b", 8) is None
    assert np.array_equal(store.get("local:b:8", "deploy", 8), vec(9))
    store.close()
    again = QueryVectorStore(tmp_path / "q.db")                  # on disk: another process reads it
    assert np.array_equal(again.get("local:b:8", "deploy", 8), vec(9))
    again.close()


def test_a_read_only_store_reads_and_never_writes_and_a_broken_one_is_a_miss(tmp_path):
    writer = QueryVectorStore(tmp_path / "q.db")
    writer.put("s", "q", vec(1))
    writer.close()
    reader = QueryVectorStore(tmp_path / "q.db", readonly=True)
    assert np.array_equal(reader.get("s", "q", 8), vec(1))
    reader.put("s", "other", vec(2))
    assert reader.get("s", "other", 8) is None
    reader.close()
    assert QueryVectorStore(tmp_path / "absent.db", readonly=True).get("s", "q", 8) is None
    (tmp_path / "garbage.db").write_bytes(b"not a database at all" * 100)
    broken = QueryVectorStore(tmp_path / "garbage.db")
    broken.put("s", "q", vec(1))                                 # says nothing, raises nothing
    assert broken.get("s", "q", 8) is None


def embedded_example_home(base) -> Home:
    """The example home, imported and embedded by the duties as a worker does (shared with test_query_daemon)."""
    home = Home(base / "example")
    init_home(home, config_mod.example_config())
    with Node.open(home) as node:
        import_directory(KnowledgeBase(node), examples_dir(), actor="alex")
        from core.duties.roster import default_duties
        from core.duties.runner import DutyRunner

        runner = DutyRunner(node, default_duties(node, embed_threads=1))
        runner.run_until_idle()
        runner.close()
    return home


@pytest.fixture(scope="module")
def embedded_example(tmp_path_factory) -> Home:
    return embedded_example_home(tmp_path_factory.mktemp("qcache"))


def search_process(home: Home, query: str) -> tuple[dict, list[str]]:
    out = subprocess.run([sys.executable, "-c", CLI.format(root=str(ROOT), home=str(home.root), query=query)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    return json.loads("\n".join(lines[:-1])), json.loads(lines[-1])["heavy"]


def test_a_query_asked_again_by_a_new_process_needs_no_model(embedded_example):
    first, heavy = search_process(embedded_example, "how do we handle rate limits")
    assert heavy == ["onnxruntime", "tokenizers"]
    # a loaded machine can miss the 2 s bound: the embedding then finishes before the process exits and
    # is kept all the same, which is what the second process needs
    assert (first["outcome"]["served_mode"], first["outcome"]["degraded"]) in (("hybrid", None), ("keyword", "provider_slow"))
    second, heavy = search_process(embedded_example, "how  do we handle rate limits")   # spacing folded
    # no model; the tokenizer alone answers the relevance floor which words are words of the language ("limits",
    # which no page holds, is one): cheaper than the vocabulary read as JSON, which it replaced
    assert heavy == ["tokenizers"]
    assert (second["outcome"]["served_mode"], second["outcome"]["degraded"]) == ("hybrid", None)
    if first["outcome"]["served_mode"] == "hybrid":
        assert second["hits"] == first["hits"]


def test_prefetch_embeds_the_query_once_while_the_caller_works_and_the_search_takes_that_vector(node):
    """`crewlet search` starts the query's embedding before its index catch-up (NativeSearcher.prefetch);
    the search then waits on that same embedding instead of asking the model a second time. A keyword
    search, or a home with no vector stored yet, starts nothing."""
    import threading
    import time

    from test_semantic import FakeModel, add_page, build_index, put, searcher_for, unit

    from core.search.seam import Query

    gate = threading.Event()
    model = FakeModel(gate=gate)
    pid = add_page(node, "ENG", "Rollback plan", "how to roll back a release")
    s = searcher_for(node, model)
    s.prefetch(Query("rollback"))
    assert model.calls == 0                                  # nothing stored in the space yet: no model asked
    put(node, pid, unit("rollback"))
    build_index(node)
    s.prefetch(Query("rollback", mode="keyword"))
    assert model.calls == 0                                  # keyword mode never embeds
    s.prefetch(Query("rollback"))
    deadline = time.monotonic() + 30
    while model.calls == 0 and time.monotonic() < deadline:  # the embedding runs on the searcher's own thread
        time.sleep(0.01)
    assert model.calls == 1
    gate.set()
    res = s.search(Query("rollback"))
    assert [h.page_id for h in res.hits] == [pid] and res.outcome.served_mode == "hybrid"
    assert model.calls == 1                                  # the search took the prefetched vector
    s.close()


def test_the_keyword_half_ranks_while_the_model_still_embeds_and_only_the_meaning_half_waits(node):
    """A hybrid search whose question is still being embedded (the model loading in a `crewlet search`
    process: here a provider the test holds) ranks its keyword half meanwhile; only the meaning half waits on
    the model. Held past the bound, the answer says it served keyword only (test_semantic.py has that case)."""
    import threading

    from test_semantic import FakeModel, add_page, build_index, put, searcher_for, unit

    from core.search.seam import Query

    gate = threading.Event()
    model = FakeModel(gate=gate)
    pid = add_page(node, "ENG", "Rollback plan", "how to roll back a release")
    put(node, pid, unit("rollback"))
    build_index(node)
    s = searcher_for(node, model, query_timeout_s=120)   # a busy machine's pauses never pass the bound here
    ranked = threading.Event()
    keyword_rank = s.keyword.rank

    def observed(*args, **kwargs):          # the real ranking, observed: when it has answered
        out = keyword_rank(*args, **kwargs)
        ranked.set()
        return out

    s.keyword.rank = observed
    s.prefetch(Query("rollback"))
    answers: list = []
    searching = threading.Thread(target=lambda: answers.append(s.search(Query("rollback"))))
    searching.start()
    assert ranked.wait(60)                  # the keyword half answered while the model still held the question
    assert not gate.is_set() and not answers
    gate.set()
    searching.join(60)
    assert answers[0].outcome.served_mode == "hybrid" and [h.page_id for h in answers[0].hits] == [pid]
    assert model.calls == 1
    s.close()
