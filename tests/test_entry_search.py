"""Entries in search (issue 35): an entry is one more kind of document behind the one Searcher seam — in the real
Whoosh index (the indexer), embedded by the embedding duty with the bundled local model, ranked in every mode,
each hit saying it is an entry and under which page (the Hit, `crewlet search`, MCP `search_knowledge`, the app's
search screen), dropped when archived, superseded, its page trashed or purged; and the neighbours a write is
refused with (SimilarEntries), by meaning, by words where no vector can be had, with the threshold measured on
the labelled pairs (tests/data/entry_pairs.jsonl)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import config_with, new_home
from mcp_client import call, connect
from typer.testing import CliRunner

from core.bank.entries import EntryBank
from core.bank.entries import SimilarEntries
from core.bank.neighbours import MEANING, WORDS, WORDS_FLOOR, NeighbourFinder, jaccard, words_of
from core.duties.embedding import EmbeddingDuty
from core.duties.runner import DutyRunner
from core.embed.registry import make_provider
from core.embed.text import embed_text
from core.node import Node
from core.pages.service import KnowledgeBase
from core.paths import Home
from core.search import lexical
from core.search.entry_docs import doc_id
from core.search.index_state import read_state
from core.search.indexer import Indexer
from core.search.native import NativeSearcher
from core.search.seam import Query
from crewlet_tui.cli import app as cli_app

PAIRS = Path(__file__).resolve().parent / "data" / "entry_pairs.jsonl"
CACHE = "The session cache expires entries after ten minutes."
DEPLOYS = "Deploys to production happen on Tuesdays."


def index(home: Home) -> None:
    with Indexer(home) as ix:
        ix.run_pass()


def embed(node: Node) -> None:
    runner = DutyRunner(node, [EmbeddingDuty(node)])
    try:
        runner.run_until_idle()
    finally:
        runner.release()


def indexed_docs(home: Home) -> set[str]:
    """The live document ids of the keyword index in use, read through Whoosh."""
    st = read_state(home.index_dir)
    assert st is not None
    ix = lexical.open_index(home.index_dir / st.dir)
    with ix.searcher() as s:
        return {f["id"] for f in s.all_stored_fields()}


def entry_vectors(node: Node) -> dict[str, str]:
    return {r["source_id"]: r["kind"] for r in node.conn.execute("SELECT source_id, kind FROM vectors WHERE kind = 'entry'")}


@pytest.fixture
def world(tmp_path):
    home = new_home(tmp_path / "home")
    node = Node.open(home)
    kb = KnowledgeBase(node)
    bank = EntryBank(node)
    page = kb.create_page("ENG", "Caching", "How the caches of the service are laid out.", actor="alex").id
    searcher = NativeSearcher(node)
    yield home, node, kb, bank, page, searcher
    searcher.close()
    bank.close()
    node.close()


def find(searcher: NativeSearcher, text: str, mode: str = "keyword", actor: str | None = None):
    return searcher.search(Query(text, mode=mode, actor=actor, limit=20))


# -- searchable in all three modes ----------------------------------------------------------------------------

def test_an_entry_is_found_in_every_mode_and_its_hit_says_entry_under_its_page(world):
    home, node, kb, bank, page, searcher = world
    entry = bank.add(page, CACHE, actor="alex")
    deploys = bank.add(page, DEPLOYS, actor="alex")
    index(home)
    embed(node)
    assert entry_vectors(node) == {doc_id(entry.id): "entry", doc_id(deploys.id): "entry"}
    for mode in ("keyword", "semantic", "hybrid"):
        result = find(searcher, "when does the session cache expire", mode)
        assert result.outcome.served_mode == mode, (mode, result.outcome.message)
        first = result.hits[0]
        assert (first.entry_id, first.entry_kind, first.entry_status) == (entry.id, "FACT", "STANDING"), mode
        assert (first.page_id, first.container, first.title) == (page, "ENG", "Caching")
        assert first.where() == "entry under ENG/Caching" and first.snippet == CACHE
        assert first.url == f"#/knowledge/entries/{entry.id}"
        data = first.to_json()
        assert data["kind"] == "entry" and data["entry_id"] == entry.id
    # by meaning alone, in words it does not share: the entry about deploys, not the cache's
    by_meaning = find(searcher, "which weekday do releases ship", "semantic")
    assert by_meaning.hits and by_meaning.hits[0].entry_id == deploys.id
    # a page's hit says what it always said: no entry keys
    page_hit = next(h for h in find(searcher, "laid out").hits if not h.is_entry)
    assert set(page_hit.to_json()) == {"title", "url", "container", "page_id", "snippet", "ancestors", "score"}


def test_an_agent_is_shown_entries_in_use_and_a_person_the_proposed_ones_too(world):
    home, node, kb, bank, page, searcher = world
    proposed = bank.add(page, CACHE, actor="eng-bot")
    index(home)
    assert [h.entry_status for h in find(searcher, "session cache").hits if h.is_entry] == ["PROPOSED"]
    assert not [h for h in find(searcher, "session cache", actor="eng-bot").hits if h.is_entry]
    bank.accept(proposed.id, actor="alex")
    index(home)
    assert [h.entry_id for h in find(searcher, "session cache", actor="eng-bot").hits if h.is_entry] == [proposed.id]


def test_an_edit_is_indexed_and_embedded_again_and_archive_and_supersede_take_it_out(world):
    home, node, kb, bank, page, searcher = world
    entry = bank.add(page, CACHE, actor="alex")
    index(home)
    embed(node)
    before = node.conn.execute("SELECT digest FROM vectors WHERE source_id = ?", (doc_id(entry.id),)).fetchone()[0]
    bank.edit(entry.id, body="The session cache expires entries after thirty seconds.", actor="alex")
    index(home)
    embed(node)
    after = node.conn.execute("SELECT digest FROM vectors WHERE source_id = ?", (doc_id(entry.id),)).fetchone()[0]
    assert after != before and after == embed_text("", "The session cache expires entries after thirty seconds.")[1]
    assert [h.entry_id for h in find(searcher, "thirty seconds").hits] == [entry.id]
    assert not find(searcher, "ten minutes").hits
    # a correction supersedes it once a person accepts it: the old one leaves the index and the vectors
    fix = bank.supersede(entry.id, "The session cache expires entries after a minute.", actor="eng-bot")
    index(home)
    assert doc_id(entry.id) in indexed_docs(home)            # still in use until a person accepts the correction
    bank.accept(fix.id, actor="alex")
    index(home)
    embed(node)
    assert doc_id(entry.id) not in indexed_docs(home) and doc_id(fix.id) in indexed_docs(home)
    assert set(entry_vectors(node)) == {doc_id(fix.id)}
    bank.archive(fix.id, actor="alex")
    index(home)
    embed(node)
    assert doc_id(fix.id) not in indexed_docs(home) and entry_vectors(node) == {}
    assert not [h for h in find(searcher, "session cache", "hybrid").hits if h.is_entry]


def test_a_trashed_page_takes_its_entries_out_and_a_restore_brings_them_back_and_a_purge_drops_them(world):
    home, node, kb, bank, page, searcher = world
    entry = bank.add(page, CACHE, actor="alex")
    index(home)
    kb.trash_page(page, actor="alex")
    index(home)
    assert doc_id(entry.id) not in indexed_docs(home)
    kb.restore_page(page, actor="alex")
    index(home)
    assert doc_id(entry.id) in indexed_docs(home) and find(searcher, "session cache").hits[0].entry_id == entry.id
    # trashed and purged before the index saw the trash: the entry's row goes with the page, and its document too
    other = kb.create_page("ENG", "Queues", "", actor="alex").id
    gone = bank.add(other, DEPLOYS, actor="alex")
    index(home)
    embed(node)
    assert doc_id(gone.id) in indexed_docs(home) and doc_id(gone.id) in entry_vectors(node)
    kb.trash_page(other, actor="alex")
    kb.purge_page(other, actor="alex")
    index(home)
    embed(node)
    assert doc_id(gone.id) not in indexed_docs(home) and doc_id(gone.id) not in entry_vectors(node)
    assert doc_id(entry.id) in indexed_docs(home)


def test_a_first_build_indexes_the_entries_already_written(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        entry = bank.add(page, CACHE, actor="alex")
        archived = bank.add(page, DEPLOYS, actor="alex")
        bank.archive(archived.id, actor="alex")
    index(home)      # the first build
    docs = indexed_docs(home)
    assert doc_id(entry.id) in docs and doc_id(archived.id) not in docs and page in docs


# -- every surface says "entry under ENG/Page" ------------------------------------------------------------------

def test_crewlet_search_says_entry_under_its_page(world):
    home, node, kb, bank, page, searcher = world
    entry = bank.add(page, CACHE, actor="alex")
    runner = CliRunner()
    out = runner.invoke(cli_app, ["--home", str(home.root), "search", "session", "cache", "--mode", "keyword"])
    assert out.exit_code == 0, out.output
    assert "entry under ENG/Caching" in out.stdout and f"entry {entry.id}" in out.stdout
    data = json.loads(runner.invoke(cli_app, ["--home", str(home.root), "search", "session", "cache", "--mode",
                                              "keyword", "--json"]).stdout)
    assert [(h["kind"], h["entry_id"], h["page_id"]) for h in data["hits"] if "kind" in h] == [("entry", entry.id, page)]
    assert [h["page_id"] for h in data["hits"] if "kind" not in h] == [page]       # the page itself, as ever


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_search_knowledge_says_entry_under_its_page_with_its_tier_and_records_the_serve(tmp_path):
    home = new_home(tmp_path / "home")
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        entry = bank.add(page, CACHE, actor="alex")
        bank.verify(entry.id, actor="alex")
    async with connect(home.root, "eng-bot") as client:
        text, data = await call(client, "search_knowledge", query="session cache", mode="keyword")
    assert f"FACT entry under ENG/Caching (entry {entry.id}, STANDING, HUMAN_VERIFIED" in text
    [hit] = [h for h in data["hits"] if h.get("kind") == "entry"]
    assert (hit["kind"], hit["entry_id"], hit["status"], hit["tier"], hit["id"]) == (
        "entry", entry.id, "STANDING", "HUMAN_VERIFIED", page)
    with Node.open(home) as node:
        served = [tuple(r) for r in node.conn.execute("SELECT entry_id, actor, via, rank FROM entry_serves")]
    assert served == [(entry.id, "eng-bot", "search_knowledge", 1)]


async def test_the_app_search_screen_says_entry_under_its_page_and_opens_it(tmp_path):
    from test_app_support import SIZE, app_for, wait_screen, wait_until
    from textual.widgets import OptionList

    home = new_home(tmp_path / "home")
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "How the caches are laid out.", actor="alex").id
        bank.add(page, CACHE, actor="alex")
        bank.add(page, "The session cache is shared by every worker process.", distinct=True, actor="alex")
    index(home)
    app = app_for(home, start_search="session cache")
    async with app.run_test(size=SIZE) as pilot:
        await wait_screen(pilot, "SearchScreen")
        screen = app.screen
        results = screen.query_one("#search-results", OptionList)
        await wait_until(pilot, lambda: screen.last is not None and len(screen.last.hits) >= 2)
        prompts = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        assert sum("FACT entry under Caching · STANDING" in p for p in prompts) == 2   # two entries of one page
        results.focus()
        results.highlighted = 0
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ != "SearchScreen")


# -- neighbours before write ----------------------------------------------------------------------------------

def test_a_near_repeat_by_meaning_is_returned_with_nothing_written_unless_distinct_or_a_correction(world):
    home, node, kb, bank, page, searcher = world
    first = bank.add(page, CACHE, actor="alex")
    other = bank.add(page, DEPLOYS, actor="alex")
    embed(node)
    before = (node.applied_seq(), node.conn.execute("SELECT count(*) FROM entries").fetchone()[0])
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "Entries in the session cache expire after 10 minutes.", actor="eng-bot")
    [(near, similarity)] = exc.value.similar
    assert near.id == first.id and similarity > 0.75 and near.id != other.id
    text = str(exc.value)
    assert "\n" not in text and "by meaning" in text and first.id in text and "distinct" in text
    assert exc.value.code == "similar_entries"
    assert (node.applied_seq(), node.conn.execute("SELECT count(*) FROM entries").fetchone()[0]) == before
    # said distinct: written; a correction of the one it is near: written, never checked
    distinct = bank.add(page, "Entries in the session cache expire after 10 minutes.", distinct=True, actor="eng-bot")
    assert distinct.status == "PROPOSED" and not distinct.folded
    fix = bank.supersede(other.id, "Deploys to production happen on Wednesdays.", actor="eng-bot")
    assert fix.supersedes == other.id


def test_an_entry_not_embedded_yet_is_compared_by_meaning_in_the_writes_own_request(world):
    home, node, kb, bank, page, searcher = world
    first = bank.add(page, CACHE, actor="alex")
    assert entry_vectors(node) == {}                 # the duty has not run
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "Entries in the session cache expire after 10 minutes.", actor="eng-bot")
    assert exc.value.similar[0][0].id == first.id and "by meaning" in str(exc.value)
    assert entry_vectors(node) == {}                 # nothing published: the duty files the vectors


def test_after_the_duty_an_entry_added_or_edited_since_is_compared_as_it_is_now_not_by_its_old_vector(world):
    """The engine ranks the vectors the duty filed; an entry written after them is embedded in the write's own
    request, and an entry edited since is compared by its new body — never by the vector of what it said before."""
    home, node, kb, bank, page, searcher = world
    cache = bank.add(page, CACHE, actor="alex")
    bank.add(page, DEPLOYS, actor="alex")
    embed(node)
    staging = bank.add(page, "Staging resets every Sunday night.", actor="alex")        # after the duty's vectors
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "Every Sunday night the staging environment is reset.", actor="eng-bot")
    assert [e.id for e, _ in exc.value.similar] == [staging.id] and "by meaning" in str(exc.value)
    bank.edit(cache.id, body="Invoices are generated on the first of the month.", actor="alex")
    # what the entry said before, which its filed vector still holds: no longer a neighbour
    written = bank.add(page, "Entries in the session cache expire after 10 minutes.", actor="eng-bot")
    assert written.status == "PROPOSED"
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "Invoices are created on the first day of each month.", actor="eng-bot")
    assert [e.id for e, _ in exc.value.similar] == [cache.id]


def test_with_vectors_off_neighbours_are_compared_by_words_and_it_says_so(tmp_path):
    home = new_home(tmp_path / "home", config_with(knowledge={"vectors": False}))
    with Node.open(home) as node, EntryBank(node) as bank:
        page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
        first = bank.add(page, CACHE, actor="alex")
        with pytest.raises(SimilarEntries) as exc:
            bank.add(page, "The session cache expires its entries after 10 minutes.", actor="eng-bot")
        assert exc.value.similar[0][0].id == first.id and "by words" in str(exc.value)
        assert "vectors are off" in exc.value.details["compared"]
        assert bank.add(page, DEPLOYS, actor="eng-bot").status == "PROPOSED"      # far in words: written


def test_scopes_that_do_not_meet_an_open_page_and_a_zero_threshold_check_nothing(world, tmp_path):
    home, node, kb, bank, page, searcher = world
    bank.add(page, CACHE, scope="apps/server", actor="alex")
    # the same fact of another module is another fact
    assert bank.add(page, "Entries in the session cache expire after 10 minutes.", scope="apps/web",
                    actor="eng-bot").status == "PROPOSED"
    with pytest.raises(SimilarEntries):             # … but of a folder inside it, the same one
        bank.add(page, "In the session cache, entries expire after 10 minutes.", scope="apps/server/cache",
                 actor="eng-bot")
    bank.set_policy(page, "open", actor="alex")     # scratch work: no repeat checks
    assert bank.add(page, "The session cache expires entries after 10 minutes.", scope="apps/server",
                    actor="eng-bot").status == "PROPOSED"
    other = new_home(tmp_path / "zero", config_with(knowledge={"similarity_threshold": 0}))
    with Node.open(other) as n, EntryBank(n) as b:
        p = KnowledgeBase(n).create_page("ENG", "Caching", "", actor="alex").id
        b.add(p, CACHE, actor="alex")
        assert b.add(p, "Entries in the session cache expire after 10 minutes.", actor="eng-bot").status == "PROPOSED"


def test_a_provider_that_fails_falls_back_to_words_and_says_why(world):
    home, node, kb, bank, page, searcher = world
    from core.embed.provider import ProviderUnavailable

    class Down:
        def __init__(self, real):
            self.space, self.limits, self.fingerprint = real.space, real.limits, real.fingerprint

        def embed(self, texts, *, timeout):
            raise ProviderUnavailable("the embedding endpoint is down")

        def close(self):
            pass

    real = make_provider(node.company)
    bank.neighbours = NeighbourFinder(node, provider_factory=lambda company: Down(real))
    first = bank.add(page, CACHE, actor="alex")
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "The session cache expires its entries after 10 minutes.", actor="eng-bot")
    assert exc.value.similar[0][0].id == first.id and "by words" in str(exc.value)
    assert "the embedding provider failed" in exc.value.details["compared"]


def test_the_sign_codes_choose_whom_to_score_and_read_deeper_while_the_furthest_could_be_near(world, monkeypatch):
    """Entries with vectors: the semantic engine's stage one by Hamming distance over the entries' codes, then
    exact cosines; a stage one cut inside the threshold's radius reads deeper, so a neighbour is never cut off."""
    home, node, kb, bank, page, searcher = world
    import core.bank.neighbours as neighbours

    first = bank.add(page, CACHE, actor="alex")
    for body in ["Deploys to production happen on Tuesdays.", "Staging resets every Sunday night.",
                 "Invoices are generated on the first of the month."]:
        bank.add(page, body, distinct=True, actor="alex")
    embed(node)
    seen: list[int] = []
    engine = bank.neighbours.semantic()
    rank_where = engine.rank_where

    def counted(*args, **kwargs):
        ranking = rank_where(*args, **kwargs)
        seen.append(ranking.candidates)
        return ranking

    monkeypatch.setattr(engine, "rank_where", counted)
    monkeypatch.setattr(neighbours, "STAGE_ONE", 1)
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "Entries in the session cache expire after 10 minutes.", actor="eng-bot")
    assert [e.id for e, _ in exc.value.similar] == [first.id]
    assert seen[0] == 1 and len(seen) >= 1
    # a radius nothing is within: one stage one of one candidate, the nearest code — still the repeat
    seen.clear()
    monkeypatch.setattr(neighbours, "RADIUS_SLACK", 0.0)
    with pytest.raises(SimilarEntries) as exc:
        bank.add(page, "Entries in the session cache expire after 10 minutes.", actor="eng-bot")
    assert seen == [1] and [e.id for e, _ in exc.value.similar] == [first.id]


# -- what the threshold means, measured ---------------------------------------------------------------------------

def test_the_default_threshold_on_the_labelled_pairs_returns_the_related_and_few_different(tmp_path):
    """KNOWLEDGE_SIMILARITY_THRESHOLD (0.25) as a cosine distance with the shipped model, and the words fallback at
    WORDS_FLOOR, on tests/data/entry_pairs.jsonl: floors a little under what docs/entries.md reports (related
    returned 0.91 both; different returned 0.11 by meaning, 0.07 by words)."""
    from conftest import new_home as make

    home = make(tmp_path / "home")
    with Node.open(home) as node:
        provider = make_provider(node.company)
        assert provider is not None
        rows = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
        texts = [embed_text("", body)[0] for r in rows for body in (r["new"]["body"], r["old"]["body"])]
        vectors = np.asarray(provider.embed(texts, timeout=600), dtype=np.float32)
        provider.close()
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = (vectors[0::2] * vectors[1::2]).sum(axis=1)
    related = np.asarray([r["label"] != "different" for r in rows])
    near = (1.0 - cosine) < 0.25
    assert near[related].mean() >= 0.88 and near[~related].mean() <= 0.15
    by_words = np.asarray([jaccard(words_of(r["new"]["body"]), words_of(r["old"]["body"])) >= WORDS_FLOOR
                           for r in rows])
    assert by_words[related].mean() >= 0.88 and by_words[~related].mean() <= 0.10
    assert (MEANING, WORDS) == ("meaning", "words")


def test_the_coverage_counts_pages_not_entry_documents(world):
    home, node, kb, bank, page, searcher = world
    bank.add(page, CACHE, actor="alex")
    bank.add(page, DEPLOYS, actor="alex")
    index(home)
    result = find(searcher, "session cache")
    assert result.hits and result.outcome.coverage.pages_indexed == 1
    assert read_state(home.index_dir).pages == 1


def test_an_entry_the_endpoint_refuses_is_held_and_offered_again_alone_after_its_hour(tmp_path):
    """The embedding duty over an OpenAI-compatible endpoint on 127.0.0.1 (tests/embed_server.py) that refuses any
    input holding its mark: the entry is held (its hour, as a page is), the others embedded, then offered alone."""
    from embed_server import REFUSE_MARK, EmbedServer

    with EmbedServer(dimensions=16) as server:
        data = config_with(providers={"embeddings": {"provider": "openai", "base_url": server.url,
                                                     "model": "test-embed", "dimensions": 16}})
        home = new_home(tmp_path / "home", data)
        with Node.open(home) as node, EntryBank(node) as bank:
            page = KnowledgeBase(node).create_page("ENG", "Caching", "", actor="alex").id
            held = bank.add(page, f"The cache key holds the marker {REFUSE_MARK} verbatim.", actor="alex")
            fine = bank.add(page, DEPLOYS, actor="alex")
            embed(node)
            assert set(entry_vectors(node)) == {doc_id(fine.id)}
            assert [r[0] for r in node.conn.execute("SELECT source_id FROM embed_holds")] == [doc_id(held.id)]
            node.conn.execute("UPDATE embed_holds SET held_until = 0")     # the hour is up
            before = server.requests
            embed(node)
            assert server.requests == before + 1 and len(server.batches[-1]) == 1   # offered again, alone
            assert node.conn.execute("SELECT count(*) FROM embed_holds").fetchone()[0] == 1   # refused again
