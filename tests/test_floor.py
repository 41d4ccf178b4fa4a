"""The relevance floor (core/search/floor.py): a page found by meaning alone enters an answer only at the
floor of its space (one number for a question the pages hold every word of, one for a question whose
words no page holds, the line between them by the idf-weighted share held); a page both halves found
stays; a folder is never a hit on its title alone unless the title matches; the answer says what was cut. Real homes, the keyword index built by the indexer, vectors
applied through the vector log; the model is a test provider whose vectors the test chooses."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_semantic import FakeModel, add_page, build_index, near, put, searcher_for, unit

from core.embed import local
from core.search import floor as relevance
from core.search.seam import NO_TERMS, Query

DIMS = 64


def cosine_to(q: np.ndarray, target: float, seed: int) -> np.ndarray:
    """A unit vector at exactly `target` cosine from the unit vector `q`."""
    other = unit(seed, len(q))
    other = other - (other @ q) * q
    other /= np.linalg.norm(other)
    return (target * q + np.sqrt(1 - target ** 2) * other).astype(np.float32)


# -- the floor's own arithmetic --------------------------------------------------------------------------

def test_the_shipped_floor_is_the_local_models_space():
    assert relevance.LOCAL_SPACE == local.SPACE.key()
    floor = relevance.floor_for(local.SPACE.key(), None)
    assert (floor.source, floor.known, floor.unknown) == ("shipped", *relevance.SHIPPED[local.SPACE.key()])
    assert floor.known < floor.unknown
    none = relevance.floor_for("openai:text-embedding-3-small:1536", None)
    assert (none.source, none.known, none.unknown) == ("none", None, None)


def test_a_measured_floor_is_kept_beside_the_logs_by_space_and_wins(tmp_path):
    path = tmp_path / "log" / "relevance-floors.json"
    space = "openai:text-embedding-3-small:1536"
    relevance.save_measured(path, space, {"unknown": 0.31, "known": None, "sources": 1200, "measured_at": 0})
    relevance.save_measured(path, local.SPACE.key(), {"unknown": 0.25, "known": 0.2, "sources": 10, "measured_at": 0})
    measured = relevance.floor_for(space, path)
    assert (measured.source, measured.known, measured.unknown) == ("measured", None, 0.31)
    assert relevance.floor_for(local.SPACE.key(), path).unknown == 0.25          # a measured one wins
    assert relevance.forget_measured(path, local.SPACE.key()) is True
    assert relevance.floor_for(local.SPACE.key(), path).source == "shipped"
    assert relevance.floor_for(space, path).unknown == 0.31                     # the other space's is kept
    assert relevance.forget_measured(path, local.SPACE.key()) is False
    path.write_text("{not json")
    assert relevance.floor_for(space, path).source == "none"                   # a broken file is no floor


def test_a_measured_floor_is_the_level_97_percent_of_the_probes_stay_under():
    assert relevance.measure_floor([0.1] * 97 + [0.5] * 3) == 0.11
    assert relevance.measure_floor([i / 100 for i in range(100)]) == 0.97
    assert relevance.measure_floor([0.3]) == 0.31
    assert len(relevance.probes()) >= 50 and "the" not in relevance.probes()   # none is a nonsense question


def test_apply_keeps_what_both_halves_found_and_cuts_folders_on_their_title_alone():
    ranked = [("a", 0.9), ("folder", 0.8), ("named", 0.7), ("b", 0.25), ("both", 0.1)]
    floor = relevance.Floor("s", 0.2, 0.5, "given")
    cut = relevance.apply(ranked, floor, known_share=1.0, found_by_words=lambda p: p == "both",
                          folders=lambda pages: {"folder": "Drivers", "named": "Rollback"},
                          title_matches=lambda title: title == "Rollback")
    assert [p for p, _ in cut.ranked] == ["a", "named", "b", "both"]
    assert (cut.report.cut, cut.report.folders, cut.report.value) == (0, 1, 0.2)
    strict = relevance.apply(ranked, floor, known_share=0.0, found_by_words=lambda p: p == "both",
                             folders=lambda pages: {}, title_matches=lambda title: False)
    assert [p for p, _ in strict.ranked] == ["a", "folder", "named", "both"]
    assert (strict.report.cut, strict.report.nearest_cut, strict.report.value) == (1, 0.25, 0.5)


# -- through the searcher ----------------------------------------------------------------------------------

@pytest.fixture(params=["", "\n\t \n"], ids=["empty", "blank-lines"])
def corpus(node, request):
    """Three pages at chosen cosines from the question "rollback plan": one near (0.6), one far (0.3), one
    nearly unrelated (0.12); an empty folder near it (0.7) — its body empty, or only blank lines and tabs, a
    folder by the outline's rule all the same —; and what "zzqx" and "the" embed as."""
    model = FakeModel()
    q = unit(3)
    model.vectors["rollback plan"] = q
    model.vectors["zzqx"] = q
    model.vectors["the"] = q
    model.vectors["deploy"] = q
    pages = {"near": add_page(node, "ENG", "Release notes", "what changed in the release"),
             "far": add_page(node, "ENG", "Incident review", "a postmortem of the outage"),
             "unrelated": add_page(node, "ENG", "Deploy checklist", "deploy steps, and the plan for a rollback"),
             "folder": add_page(node, "ENG", "Operations", request.param)}
    for (name, pid), (cos, seed) in zip(pages.items(), ((0.6, 11), (0.3, 12), (0.12, 13), (0.7, 14))):
        put(node, pid, cosine_to(q, cos, seed))
    build_index(node)
    return model, pages


def test_a_page_found_by_meaning_alone_enters_only_at_the_floor(node, corpus):
    model, pages = corpus
    s = searcher_for(node, model, relevance_floor=(0.25, 0.5))
    res = s.search(Query("rollback plan", mode="semantic"))
    assert [h.page_id for h in res.hits] == [pages["near"], pages["far"]]     # 0.12 cut, the folder too
    f = res.outcome.floor
    assert (f.value, f.known_words, f.cut, f.folders) == (0.25, True, 1, 1)
    assert f.nearest_cut == pytest.approx(0.12, abs=1e-4)
    assert res.outcome.to_json()["floor"] == {"value": 0.25, "source": "given", "known_words": True,
                                              "known_share": 1.0, "cut": 1, "nearest_cut": pytest.approx(0.12, abs=1e-4), "folders": 1}
    hybrid = s.search(Query("rollback plan"))
    # the checklist holds "rollback" and "plan": found by both halves, it stays whatever its cosine
    assert set(h.page_id for h in hybrid.hits) == {pages["near"], pages["far"], pages["unrelated"]}
    assert hybrid.outcome.floor.cut == 0 and hybrid.outcome.floor.folders == 1
    s.close()


def test_hybrid_cuts_a_page_found_by_meaning_alone_under_the_floor_and_keeps_what_words_found(node, corpus):
    """The floor applies in hybrid as in semantic: a page only the semantic half brought, under the floor,
    leaves the fused answer; the page the keyword half matched stays though its cosine (0.12) is lower."""
    model, pages = corpus
    s = searcher_for(node, model, relevance_floor=(0.35, 0.65))
    res = s.search(Query("rollback plan"))
    assert res.outcome.served_mode == "hybrid"
    assert set(h.page_id for h in res.hits) == {pages["near"], pages["unrelated"]}   # "far" (0.3) is cut
    f = res.outcome.floor
    assert (f.value, f.known_words, f.cut, f.folders) == (0.35, True, 1, 1)
    assert f.nearest_cut == pytest.approx(0.3, abs=1e-4)
    from crewlet_tui.search_words import hidden, search_words

    assert hidden(f.cut, f.folders) == "1 weaker match and 1 folder matched by title alone hidden"
    assert "1 weaker match and 1 folder matched by title alone hidden" in search_words(res, asked="hybrid", limit=10).line()
    unfloored = searcher_for(node, model, relevance_floor=False)       # the bench's baseline: nothing cut
    assert set(h.page_id for h in unfloored.search(Query("rollback plan")).hits) == set(pages.values())
    unfloored.close()
    s.close()


def test_a_question_whose_words_no_page_holds_meets_the_other_floor_and_says_nothing_close(node, corpus):
    model, pages = corpus
    s = searcher_for(node, model, relevance_floor=(0.25, 0.65))
    for text, mode, served in (("zzqx", "hybrid", "hybrid"), ("zzqx", "semantic", "semantic"), ("the", "hybrid", "semantic")):
        res = s.search(Query(text, mode=mode))
        assert res.hits == [] and res.outcome.served_mode == served, (text, mode)
        assert res.outcome.floor.known_words is False and res.outcome.floor.value == 0.65
        assert res.outcome.message.startswith(
            "nothing close enough: the nearest of the 3 pages found by meaning scores 0.60, and fake needs 0.65 to "
            "show a page found by meaning alone (more than when the pages hold the question's words: no page holds "
            "any of them)"), res.outcome.message
        assert "floor" not in res.outcome.message
    assert s.search(Query("the", mode="hybrid")).outcome.degraded == NO_TERMS
    assert s.search(Query("zzqx", mode="keyword")).outcome.floor is None          # nothing ranked by meaning
    s.close()


def test_the_floor_follows_how_much_of_the_question_the_corpus_knows(node):
    """Issue 38: "zzzqqq xylophone" over pages one of which says xylophone. One known word used to lower the
    floor for the whole question to the known-word one (0.20), and pages near it by meaning alone at
    0.21-0.23 entered beside the real keyword hit. The floor now lies between the two by the idf-weighted
    share of the question the corpus holds: about half here, so those pages stay out."""
    model = FakeModel()
    q = unit(5)
    model.vectors["zzzqqq xylophone"] = q
    model.vectors["xylophone"] = q
    hit = add_page(node, "ENG", "Band room", "the xylophone lives in the band room cupboard")
    near_by_meaning = [add_page(node, "ENG", f"Note {i}", f"meeting notes number {i} about budgets") for i in range(3)]
    others = [add_page(node, "ENG", f"Other {i}", f"travel policy and expenses {i}") for i in range(6)]
    put(node, hit, cosine_to(q, 0.15, 20))
    for i, (pid, cos) in enumerate(zip(near_by_meaning, (0.23, 0.22, 0.21))):
        put(node, pid, cosine_to(q, cos, 21 + i))
    for i, pid in enumerate(others):
        put(node, pid, cosine_to(q, 0.05, 30 + i))
    build_index(node)
    s = searcher_for(node, model, relevance_floor=(0.20, 0.45))
    res = s.search(Query("zzzqqq xylophone"))
    assert res.outcome.served_mode == "hybrid"
    assert [h.page_id for h in res.hits] == [hit]
    f = res.outcome.floor
    assert f.known_words and 0.3 < f.known_share < 0.7, f
    assert 0.20 < f.value < 0.45 and f.value == pytest.approx(0.45 - 0.25 * f.known_share, abs=1e-3)
    assert f.cut == 9 and f.nearest_cut == pytest.approx(0.23, abs=1e-4)     # the three near ones and six far
    # the whole question known: the known-word floor, and the pages at 0.21-0.23 enter by meaning
    whole = s.search(Query("xylophone"))
    assert whole.outcome.floor.known_share == 1.0 and whole.outcome.floor.value == 0.20
    assert set(near_by_meaning) <= {h.page_id for h in whole.hits}
    assert s.search(Query("zzzqqq", mode="semantic")).outcome.floor.value == 0.45     # none of it known
    s.close()


def test_a_known_share_weighs_each_word_by_how_rare_it_is():
    """Between the ends the floor is the straight line; a word no page holds outweighs a common one."""
    from core.search.keyword import known_share

    floor = relevance.Floor("s", 0.2, 0.45, "given")
    assert (floor.value(0.0), floor.value(1.0), floor.value(0.5)) == (0.45, 0.2, 0.325)
    assert relevance.Floor("s", None, 0.4, "measured").value(0.5) == 0.2          # an uncut known floor counts as 0
    assert relevance.Floor("s", None, 0.4, "measured").value(1.0) is None
    # idf weights: "the page says it once" (rare, 5.0), "every page says it" (0.1), unknown (6.0)
    assert known_share([("rare", 1, 5.0), ("zzz", 0, 6.0)]) == pytest.approx(5 / 11)
    assert known_share([("rare", 1, 5.0), ("limit", 0, 6.0)], lambda: {"limit"}) == 1.0   # a word of the language
    assert known_share([("limit", 0, 6.0)], lambda: {"limit"}) == 0.0                     # nothing known to lean on
    assert known_share([("common", 900, 0.1), ("zzz", 0, 6.0)]) < 0.02
    assert known_share([]) == 0.0


def test_a_folder_whose_title_matches_the_question_stays(node, corpus):
    model, pages = corpus
    model.vectors["operations"] = model.vectors["rollback plan"]
    s = searcher_for(node, model, relevance_floor=(0.25, 0.5))
    res = s.search(Query("operations", mode="semantic"))
    assert pages["folder"] in [h.page_id for h in res.hits] and res.outcome.floor.folders == 0
    s.close()


def test_a_space_with_no_floor_cuts_nothing_but_folders_and_says_so(node, corpus):
    model, pages = corpus
    s = searcher_for(node, model)                   # the test model's space: nothing shipped, nothing measured
    res = s.search(Query("rollback plan", mode="semantic"))
    assert len(res.hits) == 3 and res.outcome.floor.source == "none" and res.outcome.floor.value is None
    assert res.outcome.floor.folders == 1
    relevance.save_measured(node.home.floors_file, model.space.key(), {"unknown": 0.5, "known": 0.4,
                                                                       "sources": 4, "measured_at": 0})
    res = s.search(Query("rollback plan", mode="semantic"))          # read again when the file changed
    assert [h.page_id for h in res.hits] == [pages["near"]] and res.outcome.floor.source == "measured"
    s.close()


# -- the CLI, with the real model on the bundled example -------------------------------------------------

def test_the_cli_says_nothing_close_enough_and_exits_as_its_help_says(tmp_path):
    from typer.testing import CliRunner

    from core import config as config_mod
    from core.importer import import_directory
    from core.node import Node, init_home
    from core.pages.service import KnowledgeBase
    from core.paths import Home, examples_dir
    from crewlet_tui.cli import app

    home = Home(tmp_path / "example")
    init_home(home, config_mod.example_config())
    with Node.open(home) as node:
        import_directory(KnowledgeBase(node), examples_dir(), actor="alex")
        from core.duties.roster import default_duties
        from core.duties.runner import DutyRunner

        runner = DutyRunner(node, default_duties(node, embed_threads=1))
        runner.run_until_idle()
        runner.close()

    def run(*args: str):
        return CliRunner().invoke(app, ["--home", str(home.root), *args])

    help_text = run("search", "--help").stdout
    assert "Exit 0 when it ran, hits or none; 1 when it could not run" in " ".join(help_text.split())
    for text in ("zzzqqq xylophone", "the", "?!"):
        r = run("search", "--", text)
        assert r.exit_code == 0 and r.stdout.startswith("nothing close enough"), (text, r.output)
        out = json.loads(run("search", "--json", "--", text).stdout)
        assert out["hits"] == [] and out["outcome"]["floor"]["cut"] > 0 and not out["outcome"]["floor"]["known_words"]
        k = run("search", "--mode", "keyword", "--", text)
        assert k.exit_code == (1 if text in ("the", "?!") else 0), (text, k.output)   # no word: keyword cannot run
    r = json.loads(run("search", "--json", "rate limits").stdout)
    titles = [h["title"] for h in r["hits"]]
    assert "429 backoff in the GitLab client" in titles and "Manager 1:1" not in titles
    assert r["outcome"]["floor"]["known_words"] and r["outcome"]["floor"]["cut"] > 0
    said = " ".join(run("search", "rate limits").stdout.split())      # the answer says what the floor left out
    cut = r['outcome']['floor']['cut']
    assert f"{cut} weaker match{'es' if cut != 1 else ''} hidden" in said and "floor" not in said, said
    shown = run("search", "floor", "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["floor"]["source"] == "shipped"
    measured = run("search", "floor", "--measure", "--json")
    assert measured.exit_code == 0, measured.output
    m = json.loads(measured.stdout)
    assert m["floor"]["source"] == "measured" and m["measured"]["pages"] == 10
    assert m["floor"]["unknown"] == relevance.measure_floor([n["cosine"] for n in m["measured"]["nearest"]])
    assert json.loads((home.log_dir / "relevance-floors.json").read_text())["floors"][local.SPACE.key()]["unknown"] \
        == m["floor"]["unknown"]
    again = json.loads(run("search", "--json", "zzzqqq xylophone").stdout)["outcome"]["floor"]
    assert again["source"] == "measured" and again["value"] == m["floor"]["unknown"]
    assert run("search", "floor", "--forget").exit_code == 0
    assert json.loads(run("search", "floor", "--json").stdout)["floor"]["source"] == "shipped"
    assert run("search", "floor", "--measure", "--forget").exit_code == 2


def test_one_known_word_no_longer_lowers_the_floor_for_the_whole_question_on_the_example(tmp_path):
    """Issue 38 on a real home with the real model: the bundled example plus one page that says
    "xylophone". "zzzqqq xylophone" is about half known (zzzqqq is no page's word and no word of the model's
    language), so its floor lies between the two and only the page that says xylophone answers; "rate
    limits" ("limits" is no page's word but an ordinary one) keeps the known-word floor and its answer."""
    from typer.testing import CliRunner

    from core import config as config_mod
    from core.duties.roster import default_duties
    from core.duties.runner import DutyRunner
    from core.importer import import_directory
    from core.node import Node, init_home
    from core.pages.service import KnowledgeBase
    from core.paths import Home, examples_dir
    from crewlet_tui.cli import app

    home = Home(tmp_path / "example")
    init_home(home, config_mod.example_config())
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        import_directory(kb, examples_dir(), actor="alex")
        kb.create_page("ENG", "Band room", "The xylophone lives in the band room cupboard, beside the drums.",
                       actor="alex")
        runner = DutyRunner(node, default_duties(node, embed_threads=1))
        runner.run_until_idle()
        runner.close()

    def search(text: str) -> dict:
        r = CliRunner().invoke(app, ["--home", str(home.root), "search", "--json", "--", text])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    mixed = search("zzzqqq xylophone")
    assert [h["title"] for h in mixed["hits"]] == ["Band room"], mixed["hits"]
    floor = mixed["outcome"]["floor"]
    assert floor["known_words"] and 0 < floor["known_share"] < 1 and 0.20 < floor["value"] < 0.45, floor
    rate = search("rate limits")
    assert "429 backoff in the GitLab client" in [h["title"] for h in rate["hits"]]
    assert rate["outcome"]["floor"]["known_share"] == 1.0 and rate["outcome"]["floor"]["value"] == 0.20


def test_the_words_of_the_models_language_are_its_vocabularys_whole_words_as_the_index_analyses_them():
    """"limits" is a whole word of the local model's vocabulary (analysed: "limit"); "zzzqqq" is not; a space
    whose vocabulary crewlet cannot read (a remote model) has none, so every word no page holds counts."""
    from core.search import lexical

    analyzer = lexical.make_analyzer()

    def analyze(word: str) -> dict[str, int]:
        return lexical.analyze(analyzer, word, None)

    words = relevance.language_words(relevance.LOCAL_SPACE, "rate limits zzzqqq", analyze)
    assert "zzzqqq" not in words and set(analyze("limits")) <= words and set(analyze("rate")) <= words
    assert relevance.language_words("openai:text-embedding-3-small:1536", "rate limits", analyze) == set()
