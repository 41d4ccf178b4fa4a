"""The Plane searcher against a real HTTP server on 127.0.0.1 that answers as Plane's API (and the fork's
workspace page search) does.

The relaxation sequence (exactly the requests allowed), the 16-token cap, recency said, the skills
project dropped wholesale, fail-closed drops of hits whose project cannot be established, auto-drafts by
their parent with the title backstop, whose key a search runs as, and failures as answers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import config as config_mod
from core.errors import CrewletError, NotFound
from core.remote.plane import PlaneSearcher, distinct_tokens, relaxation
from core.search.seam import OUT_OF_SCOPE, UNAVAILABLE, Query
from tests.remote_servers import PlaneServer

ENV = {"PLANE_KEY": "company-key", "ENG_BOT_PLANE": "eng-key"}


@pytest.fixture
def pl():
    with PlaneServer() as server:
        server.key("company-key", "svc")
        server.key("eng-key", "eng")
        server.eng = server.project("ENG", members={"svc", "eng"})
        server.skills = server.project("SKILLS", members={"svc", "eng"})
        server.priv = server.project("PRIV", members={"eng"})
        yield server


def searcher(tmp_path: Path, server: PlaneServer, *, projects: list[str] | None = None,
             env: dict[str, str] | None = None, **integration: Any) -> PlaneSearcher:
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "plane", "plane_projects": projects if projects is not None else ["ENG"]}
    data["integrations"] = {"plane": {"url": server.url, "workspace": "acme", "token_env": "PLANE_KEY",
                                      **integration}}
    data["actors"]["eng-bot"]["credentials"] = {"plane_token_env": "ENG_BOT_PLANE"}
    c = config_mod.parse(data, tmp_path / "company.toml")
    return PlaneSearcher(lambda: c, env=ENV if env is None else env)


def test_hits_ranked_by_recency_and_the_answer_says_so(tmp_path, pl):
    old = pl.page(pl.eng, "Deploy Runbook", "<p>how to deploy and roll back</p>")
    new = pl.page(pl.eng, "Deploy Checklist", "<p>before you deploy</p>")
    s = searcher(tmp_path, pl)
    res = s.search(Query("deploy", actor="alex", mode="keyword"))
    assert [h.page_id for h in res.hits] == [new, old]
    pl.touch(old)
    assert [h.page_id for h in s.search(Query("deploy", actor="alex", mode="keyword")).hits] == [old, new]
    hit = res.hits[1]
    assert hit.container == "ENG" and hit.ancestors == [] and hit.snippet == "how to deploy and roll back"
    assert hit.url == f"{pl.url}/acme/projects/{pl.eng}/pages/{old}/"
    assert res.outcome.served_mode == "keyword" and res.outcome.source["ranking"] == "recency"
    assert "ranked by recency" in res.outcome.message and "not by relevance" in res.outcome.message
    assert res.outcome.source["requests"] == 1


@pytest.mark.parametrize("query, matching, sent", [
    # the whole query matches: one request
    ("deploy runbook", "deploy runbook", ["deploy runbook"]),
    # nothing has all nine words, the leading four match: two requests, stopping there
    ("deploy runbook rollback steps for the web tier today", "deploy runbook rollback steps",
     ["deploy runbook rollback steps for the web tier today", "deploy runbook rollback steps"]),
    # the leading four match nothing either, the leading two do: three requests
    ("deploy runbook canary zebra for the web tier", "deploy runbook",
     ["deploy runbook canary zebra for the web tier", "deploy runbook canary zebra", "deploy runbook"]),
    # nothing at any length: three requests, then nothing matched
    ("zebra yak gnu okapi eland kudu", None, ["zebra yak gnu okapi eland kudu", "zebra yak gnu okapi", "zebra yak"]),
    # three tokens: the whole, then the leading two (a 4-prefix would be the same query)
    ("zebra yak gnu", None, ["zebra yak gnu", "zebra yak"]),
    # two tokens: nothing shorter is tried
    ("zebra yak", None, ["zebra yak"]),
])
def test_the_relaxation_sequence_is_exactly_the_requests_allowed(tmp_path, pl, query, matching, sent):
    if matching:
        pl.page(pl.eng, "Page", f"<p>{matching}</p>")
    res = searcher(tmp_path, pl).search(Query(query, actor="alex", mode="keyword"))
    assert pl.searches == sent
    assert res.outcome.source["queries"] == sent and res.outcome.source["requests"] == len(sent)
    assert bool(res.hits) == bool(matching) and res.outcome.served_mode == "keyword"
    if matching and len(sent) > 1:
        assert f"matched the leading {len(sent[-1].split())} ({sent[-1]})" in res.outcome.message


def test_the_query_is_trimmed_to_sixteen_distinct_tokens(tmp_path, pl):
    words = [f"w{i}" for i in range(20)]
    pl.page(pl.eng, "Everything", "<p>" + " ".join(words) + "</p>")
    query = " ".join(words[:10] + ["W3", "w3"] + words[10:])       # repeats count once
    res = searcher(tmp_path, pl).search(Query(query, actor="alex", mode="keyword"))
    assert pl.searches == [" ".join(words[:16])] and res.hits          # the server took it: no 400
    assert "20 distinct words and Plane's search takes 16: the last 4 were left out" in res.outcome.message
    assert distinct_tokens("a A b a") == ["a", "b"]
    assert relaxation([str(i) for i in range(30)]) == [[str(i) for i in range(16)], ["0", "1", "2", "3"], ["0", "1"]]


def test_the_skills_project_is_dropped_wholesale(tmp_path, pl):
    pl.page(pl.skills, "Deploy skill", "<p>deploy</p>")
    pl.page(pl.eng, "Deploy Runbook", "<p>deploy</p>")
    s = searcher(tmp_path, pl, projects=[], env={"ENG_BOT_PLANE": "eng-key", "PLANE_KEY": "company-key"})
    res = s.search(Query("deploy", actor="eng-bot", mode="keyword"))     # unscoped: its own key
    assert [h.title for h in res.hits] == ["Deploy Runbook"]
    assert res.outcome.source["dropped"] == {"skills": 1}


def test_a_hit_whose_project_cannot_be_established_is_dropped(tmp_path, pl):
    orphan = pl.page(pl.eng, "Deploy Orphan", "<p>deploy</p>")
    pl.page(pl.eng, "Deploy Runbook", "<p>deploy</p>")
    pl.rows_without_project.add(orphan)
    res = searcher(tmp_path, pl).search(Query("deploy", actor="alex", mode="keyword"))
    assert [h.title for h in res.hits] == ["Deploy Runbook"]
    assert res.outcome.degraded == "unverified" and "1 hit(s) withheld" in res.outcome.message


def test_a_skills_project_that_does_not_resolve_withholds_every_hit(tmp_path, pl):
    pl.page(pl.eng, "Deploy Runbook", "<p>deploy</p>")
    res = searcher(tmp_path, pl, skills_project="TOOLS").search(Query("deploy", actor="alex", mode="keyword"))
    assert res.hits == [] and res.outcome.served_mode == "keyword" and res.outcome.degraded == "unverified"
    assert "the tool-skills project TOOLS (integrations.plane.skills_project) does not resolve" in res.outcome.message


def test_auto_drafts_are_hidden_by_their_parent_and_the_title_backstop(tmp_path, pl):
    drafts = pl.page(pl.eng, "Auto-Drafted Skills", "<p>drafts live here</p>")
    pl.page(pl.eng, "Rollout Draft", "<p>rollout</p>", parent=drafts)
    pl.page(pl.eng, "[Auto-draft] Rollout", "<p>rollout</p>")
    pl.page(pl.eng, "Rollout Guide", "<p>rollout</p>")
    s = searcher(tmp_path, pl)
    res = s.search(Query("rollout", actor="alex", mode="keyword"))
    assert [h.title for h in res.hits] == ["Rollout Guide"]
    assert res.outcome.source["lookups"] == 2             # the project list, one parent
    again = s.search(Query("rollout", actor="alex", mode="keyword"))
    assert again.outcome.source["lookups"] == 0 and [h.title for h in again.hits] == ["Rollout Guide"]
    assert len(s.search(Query("rollout", actor="alex", mode="keyword", exclude_ancestors=[])).hits) == 3


def test_when_the_parent_lookup_fails_the_title_prefix_still_holds(tmp_path, pl):
    hidden = pl.page(pl.priv, "Auto-Drafted Skills", "<p>x</p>")      # a parent the company key cannot read
    pl.page(pl.eng, "Rollout Draft", "<p>rollout</p>", parent=hidden)
    pl.page(pl.eng, "[Auto-draft] Rollout", "<p>rollout</p>", parent=hidden)
    res = searcher(tmp_path, pl).search(Query("rollout", actor="alex", mode="keyword"))
    assert [h.title for h in res.hits] == ["Rollout Draft"]     # the parent could not be read: backstop only


def test_the_actors_own_key_and_the_fallback(tmp_path, pl):
    pl.page(pl.priv, "Private deploy notes", "<p>deploy</p>")
    pl.page(pl.eng, "Deploy Runbook", "<p>deploy</p>")
    s = searcher(tmp_path, pl, projects=["ENG", "PRIV"])
    company = s.search(Query("deploy", actor="alex", mode="keyword"))
    own = s.search(Query("deploy", actor="eng-bot", mode="keyword"))
    assert [h.title for h in company.hits] == ["Deploy Runbook"]
    assert "PRIV: no such project visible to the company's credential ($PLANE_KEY)" in company.outcome.message
    assert {h.title for h in own.hits} == {"Deploy Runbook", "Private deploy notes"}
    assert own.outcome.source["credential"] == "own"
    unset = searcher(tmp_path, pl, projects=["ENG", "PRIV"], env={"PLANE_KEY": "company-key"})
    res = unset.search(Query("deploy", actor="eng-bot", mode="keyword"))
    assert res.outcome.source["credential"] == "company" and "$ENG_BOT_PLANE is not set" in res.outcome.message


def test_the_empty_scope_rule(tmp_path, pl):
    pl.page(pl.eng, "Deploy Runbook", "<p>deploy</p>")
    s = searcher(tmp_path, pl, projects=[])
    res = s.search(Query("deploy", actor="alex", mode="keyword"))
    assert res.outcome.served_mode is None and res.outcome.degraded == OUT_OF_SCOPE and not pl.requests
    assert "knowledge.plane_projects, which is empty" in res.outcome.message
    assert s.search(Query("deploy", actor="eng-bot", mode="keyword")).hits


def test_a_scope_no_project_of_which_is_visible_searches_nothing(tmp_path, pl):
    res = searcher(tmp_path, pl, projects=["NOPE"]).search(Query("deploy", actor="alex", mode="keyword"))
    assert res.outcome.served_mode is None and res.outcome.degraded == OUT_OF_SCOPE and pl.searches == []


@pytest.mark.parametrize("mode, words", [
    ("status:401", "answered 401"), ("status:403", "answered 403"), ("status:500", "answered 500"),
    ("status:502", "answered 502"), ("not_json", "not JSON"),
])
def test_failures_are_answers_in_words(tmp_path, pl, mode, words):
    pl.page(pl.eng, "Deploy Runbook", "<p>deploy</p>")
    s = searcher(tmp_path, pl)
    pl.mode = mode
    res = s.search(Query("deploy", actor="alex", mode="keyword"))
    assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == UNAVAILABLE
    assert words in res.outcome.message and "company-key" not in res.outcome.message


def test_a_failure_in_the_middle_of_the_relaxation_stops_it(tmp_path, pl):
    s = searcher(tmp_path, pl)
    s.search(Query("warm", actor="alex", mode="keyword"))                  # the project list is remembered
    pl.searches.clear()
    pl.script = ["ok", "status:503"]
    res = s.search(Query("zebra yak gnu okapi eland", actor="alex", mode="keyword"))
    assert len(pl.searches) == 1 and res.outcome.served_mode is None and "503" in res.outcome.message


def test_a_hanging_server_costs_the_bound(tmp_path, pl):
    s = searcher(tmp_path, pl, connect_timeout_s=0.5, read_timeout_s=0.2)
    pl.mode = "hang"
    res = s.search(Query("deploy", actor="alex", mode="keyword"))
    pl.gate.set()
    assert res.outcome.served_mode is None and "timed out: no answer within 0.7 s" in res.outcome.message


def test_the_project_list_is_followed_across_pages(tmp_path, pl):
    pl.page_size = 2
    for i in range(5):
        pl.project(f"P{i}", members={"svc"})
    p4 = next(p for p, v in pl.projects.items() if v["identifier"] == "P4")
    pl.page(p4, "Deploy in P4", "<p>deploy</p>")
    res = searcher(tmp_path, pl, projects=["P4"]).search(Query("deploy", actor="alex", mode="keyword"))
    assert [h.container for h in res.hits] == ["P4"] and pl.count("GET", "/projects") == 4


def test_a_page_opens_as_markdown(tmp_path, pl):
    parent = pl.page(pl.eng, "Operations", "<p>x</p>")
    pid = pl.page(pl.eng, "Deploy Runbook", '<h2 class="editor-heading-block">Steps</h2><ul data-type="taskList">'
                  '<li data-checked="true" data-type="taskItem"><label><input type="checkbox" checked></label>'
                  '<div><p>drain the node</p></div></li></ul><pre><code class="language-bash">make deploy\n</code></pre>',
                  parent=parent)
    s = searcher(tmp_path, pl)
    page = s.get_page(f"ENG/{pid}", actor="alex")
    assert page.title == "Deploy Runbook" and page.container == "ENG" and page.ancestors == ["Operations"]
    assert page.body == "## Steps\n\n- [x] drain the node\n\n```bash\nmake deploy\n```\n"
    hit = s.search(Query("deploy", actor="alex", mode="keyword")).hits[0]
    assert s.get_page(hit.page_id, actor="alex").id == hit.page_id      # a hit opens by its id alone
    with pytest.raises(NotFound):
        s.get_page(f"PRIV/{pid}", actor="alex")


def test_a_page_read_stays_inside_the_read_floor(tmp_path, pl):
    """Review finding 2 on Plane: eng-bot's own key sees PRIV, but plane_projects is ENG: a search never
    returns PRIV, and neither does a page read; the skills project never, an auto-draft never."""
    private = pl.page(pl.priv, "Salaries", "<p>pay</p>")
    drafts = pl.page(pl.eng, "Auto-Drafted Skills", "<p>x</p>")
    draft = pl.page(pl.eng, "Rollout Draft", "<p>rollout</p>", parent=drafts)
    titled = pl.page(pl.eng, "[Auto-draft] Rollout", "<p>rollout</p>")
    skill = pl.page(pl.skills, "Rotate keys", "<p>trigger: rotate</p>")
    s = searcher(tmp_path, pl)
    assert s.search(Query("salaries", actor="eng-bot", mode="keyword")).hits == []
    for ref, why in ((f"PRIV/{private}", "outside knowledge.plane_projects"), (f"SKILLS/{skill}", "tool skills"),
                     (f"ENG/{draft}", "auto-draft"), (f"ENG/{titled}", "auto-draft")):
        with pytest.raises(NotFound, match=why):
            s.get_page(ref, actor="eng-bot")
    with pytest.raises(NotFound):
        searcher(tmp_path, pl, projects=[]).get_page(f"ENG/{draft}", actor="eng-bot")   # unscoped: drafts still out
    assert searcher(tmp_path, pl, projects=[]).get_page(f"PRIV/{private}", actor="eng-bot").title == "Salaries"


def test_a_page_id_is_one_path_segment(tmp_path, pl):
    """A ref of ENG/.. would GET the project's own endpoint once httpx resolves the dot segment."""
    s = searcher(tmp_path, pl)
    for ref in ("ENG/..", "ENG/.", "ENG/x/../..", f"ENG/{pl.eng}#x"):
        with pytest.raises(NotFound):
            s.get_page(ref, actor="alex")
    reached = {path.rstrip("/") for _, path, _ in pl.requests}
    assert not any(p.endswith(f"/projects/{pl.eng}") or p.endswith(f"/projects/{pl.eng}/pages") for p in reached), reached


def test_a_title_is_found_in_one_project_as_a_search_would_return_it(tmp_path, pl):
    """How onboarding finds a space's Onboarding page on a Plane site (core.knowledge.onboarding_pages):
    the exact title, in that project, inside the read floor, not an auto-draft — and no knowledge_read."""
    eng = pl.page(pl.eng, "Onboarding", "<p>welcome to ENG</p>")
    pl.page(pl.eng, "Onboarding notes", "<p>not the page</p>")
    pl.page(pl.priv, "Onboarding", "<p>private</p>")
    drafts = pl.page(pl.eng, "Auto-Drafted Skills", "<p>x</p>")
    s = searcher(tmp_path, pl)
    page = s.titled("ENG", "Onboarding", actor="eng-bot")
    assert page is not None and (page.id, page.container, page.title) == (eng, "ENG", "Onboarding")
    assert "welcome to ENG" in page.body
    assert page.ref == f"ENG/{eng}" and s.get_page(page.ref, actor="eng-bot").id == eng   # what get_page opens
    assert s.titled("PRIV", "Onboarding", actor="eng-bot") is None          # outside plane_projects
    assert s.titled("ENG", "Onboarding notes x", actor="eng-bot") is None
    pl.page(pl.eng, "Runbook", "<p>x</p>", parent=drafts)
    assert s.titled("ENG", "Runbook", actor="eng-bot") is None               # an auto-draft
    with pytest.raises(CrewletError, match="no credential"):
        searcher(tmp_path, pl, env={}).titled("ENG", "Onboarding", actor="eng-bot")


def test_a_title_among_hits_withheld_as_unverifiable_is_not_taken_to_be_missing(tmp_path, pl):
    """Without a resolvable tool-skills project a Plane search withholds its hits (none can be checked
    against it): onboarding must hear "could not say", not "there is no Onboarding page"."""
    pl.page(pl.eng, "Onboarding", "<p>welcome to ENG</p>")
    s = searcher(tmp_path, pl, skills_project="NOPE")
    with pytest.raises(CrewletError, match=r"could not say whether ENG has a page titled 'Onboarding': 1 hit\(s\) withheld"):
        s.titled("ENG", "Onboarding", actor="eng-bot")
    assert s.titled("ENG", "Offboarding", actor="eng-bot") is None    # nothing matched, so nothing was withheld
