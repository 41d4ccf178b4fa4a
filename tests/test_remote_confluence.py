"""The Confluence searcher against a real HTTP server on 127.0.0.1 that answers as Confluence's REST API.

Hits and their ancestors, whose credential a search runs as (restricted pages absent for one and present
for another, the fallback to the company's), the empty-scope rule, every failure kind as an answer
in words, hostile queries that must stay inside their `text ~` clause, and page bodies read as Markdown.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from core import config as config_mod
from core.errors import CrewletError, NotFound
from core.remote.confluence import ConfluenceSearcher, build_cql, lucene_phrase
from core.remote.searcher import strip_tags
from core.search.seam import NO_EMBEDDINGS, OUT_OF_SCOPE, UNAVAILABLE, Query, modes_in_words
from tests.remote_servers import ConfluenceServer, lucene_unescape, parse_cql

ENV = {"CF_TOKEN": "company-token", "ENG_BOT_CF": "eng-token"}


def company(tmp_path: Path, server: ConfluenceServer, *, spaces: list[str] | None = None, **integration: Any):
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "confluence", "confluence_spaces": spaces if spaces is not None else ["ENG"]}
    data["integrations"] = {"confluence": {"url": server.url, "token_env": "CF_TOKEN", **integration}}
    data["actors"]["eng-bot"]["credentials"] = {"confluence_token_env": "ENG_BOT_CF"}
    return config_mod.parse(data, tmp_path / "company.toml")


@pytest.fixture
def cf():
    with ConfluenceServer() as server:
        server.user("company-token", "svc")
        server.user("eng-token", "eng")
        server.space("ENG", "Engineering")
        server.space("HR")
        server.space("SKILLS")
        yield server


def searcher(tmp_path: Path, server: ConfluenceServer, env: dict[str, str] | None = None, **kw: Any):
    c = company(tmp_path, server, **kw)
    return ConfluenceSearcher(lambda: c, env=ENV if env is None else env)


def test_hits_carry_the_whole_ancestor_chain_a_link_and_a_snippet(tmp_path, cf):
    ops = cf.page("ENG", "Operations", "<p>how we run things</p>")
    deploys = cf.page("ENG", "Deploys", "<p>shipping</p>", parent=ops)
    cf.page("ENG", "Deploy Runbook", "<p>To <strong>roll back</strong> a deploy, run the rollback job.</p>",
            parent=deploys)
    cf.page("HR", "Holidays", "<p>roll back your calendar</p>")
    s = searcher(tmp_path, cf)
    res = s.search(Query("roll back", actor="alex", mode="keyword"))
    assert [h.title for h in res.hits] == ["Deploy Runbook"]          # HR is outside confluence_spaces
    hit = res.hits[0]
    assert hit.container == "ENG" and hit.ancestors == ["Operations", "Deploys"]
    assert hit.url.startswith(cf.url + "/spaces/ENG/pages/") and hit.page_id
    assert "roll back" in hit.snippet and "@@@" not in hit.snippet and "<" not in hit.snippet
    out = res.outcome
    assert out.served_mode == "keyword" and out.modes == ["keyword"] and out.degraded is None
    assert out.source["credential"] == "company" and out.source["env"] == "CF_TOKEN"
    assert out.source["requests"] == 1 and "the company's credential ($CF_TOKEN)" in out.message
    assert cf.searches[-1] == [("type", "=", "page"), ("text", "~", "roll back"), ("space", "IN", ["ENG"]),
                               ("space", "NOT_IN", ["SKILLS"])]
    s.close()


def test_a_restricted_page_is_absent_for_one_credential_and_present_for_another(tmp_path, cf):
    cf.page("ENG", "Incident Postmortem", "<p>the outage timeline</p>", restricted_to={"eng"})
    cf.page("ENG", "Outage Checklist", "<p>what to do in an outage</p>")
    s = searcher(tmp_path, cf)
    as_company = s.search(Query("outage", actor="alex", mode="keyword"))
    as_bot = s.search(Query("outage", actor="eng-bot", mode="keyword"))
    assert [h.title for h in as_company.hits] == ["Outage Checklist"]
    assert {h.title for h in as_bot.hits} == {"Incident Postmortem", "Outage Checklist"}
    assert as_bot.outcome.source["credential"] == "own" and as_bot.outcome.source["actor"] == "eng-bot"
    assert "eng-bot's own credential ($ENG_BOT_CF)" in as_bot.outcome.message
    restricted = next(h for h in as_bot.hits if h.title == "Incident Postmortem")
    assert s.get_page(restricted.page_id, actor="eng-bot").title == "Incident Postmortem"
    with pytest.raises(NotFound, match="company's credential"):
        s.get_page(restricted.page_id, actor="alex")
    s.close()


def test_an_actor_whose_variable_is_unset_falls_back_to_the_company_and_is_told(tmp_path, cf):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    cf.page("ENG", "Incident Postmortem", "<p>outage</p>", restricted_to={"eng"})
    s = searcher(tmp_path, cf, env={"CF_TOKEN": "company-token"})          # ENG_BOT_CF not set
    res = s.search(Query("outage", actor="eng-bot", mode="keyword"))
    assert [h.title for h in res.hits] == ["Outage Checklist"]
    assert res.outcome.source["credential"] == "company"
    assert "eng-bot's own credential was not used: $ENG_BOT_CF is not set" in res.outcome.message


def test_the_empty_scope_rule(tmp_path, cf):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    cf.page("HR", "Outage Pay", "<p>outage</p>")
    s = searcher(tmp_path, cf, spaces=[])
    # the company's credential with no read floor searches nothing, and asks nothing
    before = len(cf.requests)
    res = s.search(Query("outage", actor="alex", mode="keyword"))
    assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == OUT_OF_SCOPE
    assert "knowledge.confluence_spaces, which is empty" in res.outcome.message
    assert len(cf.requests) == before and not s.can_search("alex")
    # an actor with its own credential searches unscoped: no space clause, Confluence's ACLs bound it
    res = s.search(Query("outage", actor="eng-bot", mode="keyword"))
    assert {h.container for h in res.hits} == {"ENG", "HR"} and s.can_search("eng-bot")
    assert cf.searches[-1] == [("type", "=", "page"), ("text", "~", "outage"), ("space", "NOT_IN", ["SKILLS"])]


def test_the_operators_own_narrowing_works_inside_the_scope(tmp_path, cf):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf, spaces=["ENG", "HR"])
    res = s.search(Query("outage", actor="alex", mode="keyword", containers=["HR", "PROD"]))
    assert res.hits == [] and res.outcome.served_mode == "keyword"
    assert "PROD is outside knowledge.confluence_spaces (ENG, HR)" in res.outcome.message
    assert cf.searches[-1][2] == ("space", "IN", ["HR"])
    res = s.search(Query("outage", actor="alex", mode="keyword", containers=["PROD"]))
    assert res.outcome.served_mode is None and res.outcome.degraded == OUT_OF_SCOPE


@pytest.mark.parametrize("mode, words", [
    ("status:401", "answered 401: the credential was refused"),
    ("status:403", "answered 403"),
    ("status:404", "answered 404"),
    ("status:429", "answered 429: rate limited"),
    ("status:500", "answered 500: a server error"),
    ("status:503", "answered 503: a server error"),
    ("not_json", "not JSON"),
])
def test_every_failure_is_an_answer_with_no_hits_no_mode_and_the_reason(tmp_path, cf, mode, words):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf)
    cf.mode = mode
    res = s.search(Query("outage", actor="alex"))
    assert res.hits == [] and res.outcome.served_mode is None and res.outcome.degraded == UNAVAILABLE
    assert res.outcome.message.startswith("the knowledge base could not be searched: Confluence at ")
    assert words in res.outcome.message and "company-token" not in res.outcome.message
    cf.mode = "ok"
    assert s.search(Query("outage", actor="alex")).hits      # the same searcher answers once the site does


def test_a_wrong_token_is_a_401_in_words(tmp_path, cf):
    s = searcher(tmp_path, cf, env={"CF_TOKEN": "not-a-token-anyone-issued"})
    res = s.search(Query("outage", actor="alex"))
    assert res.outcome.served_mode is None and "401: the credential was refused" in res.outcome.message
    assert "not-a-token-anyone-issued" not in res.outcome.message


@pytest.mark.parametrize("mode", ["hang", "trickle"])
def test_a_server_that_hangs_costs_the_bound_and_the_answer_says_so(tmp_path, cf, mode):
    s = searcher(tmp_path, cf, connect_timeout_s=0.5, read_timeout_s=0.3)
    cf.mode = mode
    res = s.search(Query("outage", actor="alex"))
    cf.gate.set()
    assert res.outcome.served_mode is None and res.outcome.degraded == UNAVAILABLE
    assert "timed out: no answer within 0.8 s (connect_timeout_s 0.5 + read_timeout_s 0.3)" in res.outcome.message


def test_an_unreachable_site_is_said(tmp_path, cf):
    c = company(tmp_path, cf)
    cf.stop()
    res = ConfluenceSearcher(lambda: c, env=ENV).search(Query("outage", actor="alex"))
    assert res.outcome.served_mode is None and "cannot be reached" in res.outcome.message


HOSTILE = [
    'deploy" OR space = "HR',
    'deploy\\" OR space = "HR',
    "rollback\\",
    '\\\\" AND type = "blogpost',
    'why NOT deploy (on) friday?',
    'a"b\'c ~ d*e\x00f\nspace IN ("HR")',
    '"',
    "\\",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_a_hostile_query_stays_inside_its_text_clause(tmp_path, cf, query):
    cf.page("HR", "Secret Salaries", "<p>deploy rollback friday blogpost</p>")
    s = searcher(tmp_path, cf)
    res = s.search(Query(query, actor="alex", mode="keyword"))
    assert res.outcome.served_mode == "keyword", res.outcome.message      # the site parsed it: no 400
    clauses = cf.searches[-1]
    assert [(f, op) for f, op, _ in clauses] == [("type", "="), ("text", "~"), ("space", "IN"), ("space", "NOT_IN")]
    assert clauses[2][2] == ["ENG"] and all(h.container == "ENG" for h in res.hits)
    # what the site reads as the phrase is the query's own words, literally
    literal = lucene_unescape(clauses[1][2])
    expected = re.sub(r"\b(AND|OR|NOT|TO)\b", lambda m: m.group(0).lower(),
                      " ".join(query.replace("\x00", " ").replace("\n", " ").split()))
    assert literal == expected


def test_cql_building_escapes_twice():
    assert lucene_phrase('a "b" c\\') == 'a \\"b\\" c\\\\'
    cql = build_cql('say "hi" \\ AND OR', ["ENG"], ["SKILLS"])
    assert cql == ('type = page AND text ~ "say \\\\\\"hi\\\\\\" \\\\\\\\ and or" AND space IN ("ENG") '
                   'AND space NOT IN ("SKILLS")')
    assert parse_cql(cql)[1] == ("text", "~", 'say \\"hi\\" \\\\ and or')


def test_auto_drafts_are_excluded_at_any_depth_and_the_title_backstop_holds(tmp_path, cf):
    drafts = cf.page("ENG", "Auto-Drafted Skills", "<p>container</p>")
    sub = cf.page("ENG", "Batch 7", "<p>rollout drafts</p>", parent=drafts)
    cf.page("ENG", "Rollout Draft", "<p>rollout steps</p>", parent=sub)
    cf.page("ENG", "[Auto-draft] Rollout", "<p>rollout steps</p>")
    cf.page("ENG", "Rollout Guide", "<p>rollout steps</p>")
    s = searcher(tmp_path, cf)
    res = s.search(Query("rollout", actor="alex", mode="keyword"))
    assert [h.title for h in res.hits] == ["Rollout Guide"]
    assert "auto-drafts" in res.outcome.message
    everything = s.search(Query("rollout", actor="alex", mode="keyword", exclude_ancestors=[]))
    assert {h.title for h in everything.hits} == {"Batch 7", "Rollout Draft", "[Auto-draft] Rollout", "Rollout Guide"}


def test_exclusions_cost_hits_not_places(tmp_path, cf):
    drafts = cf.page("ENG", "Auto-Drafted Skills", "<p>x</p>")
    for i in range(5):
        cf.page("ENG", f"Draft {i}", "<p>rollout rollout rollout</p>", parent=drafts)    # ranked first
    for i in range(3):
        cf.page("ENG", f"Guide {i}", "<p>rollout</p>")
    res = searcher(tmp_path, cf).search(Query("rollout", actor="alex", mode="keyword", limit=3))
    assert [h.title for h in res.hits] == ["Guide 0", "Guide 1", "Guide 2"]


def test_modes_a_remote_backend_cannot_rank_by_meaning(tmp_path, cf):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf)
    hybrid = s.search(Query("outage", actor="alex"))
    assert hybrid.outcome.served_mode == "keyword" and hybrid.outcome.degraded == NO_EMBEDDINGS and hybrid.hits
    assert "nothing was ranked by meaning" in hybrid.outcome.message
    semantic = s.search(Query("outage", actor="alex", mode="semantic"))
    assert semantic.outcome.served_mode is None and semantic.outcome.degraded == NO_EMBEDDINGS
    assert not semantic.hits


def test_cloud_basic_auth_with_a_username(tmp_path, cf):
    cf.user("cloud-token", "svc2", username="svc@example.com")
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf, env={"CF_TOKEN": "cloud-token", "CF_USER": "svc@example.com"}, username_env="CF_USER")
    res = s.search(Query("outage", actor="alex"))
    assert res.hits and res.outcome.source["username_env"] == "CF_USER"
    wrong = searcher(tmp_path, cf, env={"CF_TOKEN": "cloud-token", "CF_USER": "mallory@example.com"},
                     username_env="CF_USER")
    assert "401" in wrong.search(Query("outage", actor="alex")).outcome.message


def test_no_credential_at_all_is_said(tmp_path, cf):
    res = searcher(tmp_path, cf, env={}).search(Query("outage", actor="alex"))
    assert res.outcome.served_mode is None and res.outcome.degraded == "no_credential"
    assert "$CF_TOKEN is not set" in res.outcome.message


def test_a_page_opens_as_markdown_through_the_page_api(tmp_path, cf):
    parent = cf.page("ENG", "Operations", "<p>x</p>")
    pid = cf.page("ENG", "Deploy Runbook", (
        '<h2>Steps</h2><p>See <ac:link><ri:page ri:content-title="Rollback" /></ac:link>.</p>'
        '<ac:structured-macro ac:name="code"><ac:parameter ac:name="language">bash</ac:parameter>'
        '<ac:plain-text-body><![CDATA[kubectl rollout undo deploy/web && echo "<done>"]]></ac:plain-text-body>'
        '</ac:structured-macro><ac:structured-macro ac:name="warning"><ac:rich-text-body><p>Tell #ops first.</p>'
        '</ac:rich-text-body></ac:structured-macro>'), parent=parent)
    s = searcher(tmp_path, cf)
    page = s.get_page(pid, actor="alex")
    assert page.title == "Deploy Runbook" and page.container == "ENG" and page.ancestors == ["Operations"]
    assert page.body == ('## Steps\n\nSee Rollback.\n\n```bash\nkubectl rollout undo deploy/web && echo "<done>"\n```\n\n'
                         '> **Warning:** Tell #ops first.\n')
    assert page.url.startswith(cf.url + "/spaces/ENG/pages/") and page.source["credential"] == "company"
    assert s.get_page("ENG/Deploy Runbook", actor="alex").id == pid
    with pytest.raises(NotFound):
        s.get_page("999999", actor="alex")


def test_one_connection_pool_serves_every_search(tmp_path, cf):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf)
    for _ in range(3):
        assert s.search(Query("outage", actor="alex")).hits
    assert s._http is not None and s._http.requests == 3
    assert len(s._http.client()._transport._pool.connections) == 1      # kept alive, reused
    s.close()


# -- a page read stays inside what a search may return (review finding 2) ------------------------------

def test_a_page_read_stays_inside_the_read_floor_and_leaves_out_skills(tmp_path, cf):
    """The reviewer's reproduction: eng-bot has no own credential here (ENG_BOT_CF unset), so the
    company's token reads; confluence_spaces is ENG; HR and SKILLS are outside what a search returns."""
    secret = cf.page("HR", "Salaries", "<p>everyone's pay</p>")
    skill = cf.page("SKILLS", "Rotate keys", "<p>trigger: rotate</p>")
    s = searcher(tmp_path, cf, env={"CF_TOKEN": "company-token"})
    assert s.search(Query("salaries", actor="eng-bot", mode="keyword")).hits == []   # search: outside the floor
    for ref in (secret, skill, "HR/Salaries", "SKILLS/Rotate keys"):
        with pytest.raises(NotFound):
            s.get_page(ref, actor="eng-bot")
    before = len(cf.requests)
    with pytest.raises(NotFound, match=r"HR is outside knowledge\.confluence_spaces \(ENG\)"):
        s.get_page("HR/Salaries", actor="eng-bot")
    assert len(cf.requests) == before                 # an address outside the floor is not even asked for
    # an actor with its own credential is bound by the same floor
    with pytest.raises(NotFound):
        searcher(tmp_path, cf).get_page(secret, actor="eng-bot")


def test_a_page_read_leaves_out_auto_drafts_as_a_search_does(tmp_path, cf):
    drafts = cf.page("ENG", "Auto-Drafted Skills", "<p>container</p>")
    deep = cf.page("ENG", "Rollout Draft", "<p>rollout</p>", parent=cf.page("ENG", "Batch 7", "<p>x</p>", parent=drafts))
    titled = cf.page("ENG", "[Auto-draft] Rollout", "<p>rollout</p>")
    s = searcher(tmp_path, cf)
    for ref in (deep, titled):
        with pytest.raises(NotFound, match="auto-draft"):
            s.get_page(ref, actor="alex")
    assert s.get_page(cf.page("ENG", "Rollout Guide", "<p>rollout</p>"), actor="alex").title == "Rollout Guide"


def test_an_empty_floor_on_the_companys_credential_reads_nothing(tmp_path, cf):
    pid = cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf, spaces=[])
    before = len(cf.requests)
    with pytest.raises(CrewletError, match="knowledge.confluence_spaces, which is empty") as refused:
        s.get_page(pid, actor="alex")
    assert "nothing searched" not in str(refused.value) and len(cf.requests) == before
    assert s.get_page(pid, actor="eng-bot").title == "Outage Checklist"      # its own credential: unscoped


# -- snippets (review finding 7), modes (main's aliases), ids in URL paths --------------------------------

def test_remote_snippets_read_every_html_entity_once():
    assert strip_tags("<p>don&#8217;t roll back &hellip; write &amp;lt;b&amp;gt;</p>") == \
        "don’t roll back … write &lt;b&gt;"
    assert strip_tags("a&nbsp;b &quot;c&quot; &#39;d&#39; &lt;e&gt;") == "a\xa0b \"c\" 'd' <e>"


def test_the_modes_are_mains_own_names_and_aliases(tmp_path, cf):
    cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf)
    meaning = s.search(Query("outage", actor="alex", mode="meaning"))       # main's alias of semantic
    assert meaning.outcome.degraded == NO_EMBEDDINGS and "cannot rank by meaning" in meaning.outcome.message
    fuzzy = s.search(Query("outage", actor="alex", mode="fuzzy"))
    assert fuzzy.outcome.served_mode is None and modes_in_words() in fuzzy.outcome.message


def test_a_page_id_cannot_reach_another_path_on_the_site(tmp_path, cf):
    pid = cf.page("ENG", "Outage Checklist", "<p>outage</p>")
    s = searcher(tmp_path, cf)
    for ref in (f"{pid}#x", f"{pid}?expand=x", "..", "."):
        with pytest.raises(NotFound):
            s.get_page(ref, actor="alex")
    api = f"{cf.context}/rest/api"
    assert not {path.rstrip("/") for _, path, _ in cf.requests} & {api, f"{api}/content", f"{api}/content/{pid}"}


def test_a_title_is_looked_up_in_one_space_inside_the_read_floor(tmp_path, cf):
    """How onboarding finds a space's Onboarding page on Confluence: one address lookup, inside the read
    floor (an address outside it is not asked for), and not an agent's knowledge_read."""
    eng = cf.page("ENG", "Onboarding", "<p>welcome to ENG</p>")
    cf.page("HR", "Onboarding", "<p>pay day</p>")
    read: list[tuple] = []
    c = company(tmp_path, cf)
    s = ConfluenceSearcher(lambda: c, env=ENV, recorder=lambda *a: read.append(a))
    page = s.titled("ENG", "Onboarding", actor="eng-bot")
    assert page is not None and (page.id, page.container) == (eng, "ENG") and "welcome to ENG" in page.body
    before = len(cf.requests)
    assert s.titled("HR", "Onboarding", actor="eng-bot") is None and len(cf.requests) == before
    assert s.titled("ENG", "Offboarding", actor="eng-bot") is None
    assert read == []
    with pytest.raises(CrewletError, match="no credential"):
        ConfluenceSearcher(lambda: c, env={}).titled("ENG", "Onboarding", actor="eng-bot")
