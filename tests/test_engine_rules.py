"""Declared spaces, container documents, the reserved containers, idempotency by op_id and
malformed records — on real SQLite files."""
from __future__ import annotations

import os

import pytest
from conftest import bump_mtime, config_with, count, create_rec, pid, rec, record_types, rows, save_rec

from core.bank.entries import EntryBank
from core import config as config_mod
from core.errors import Refused
from core.log import Record
from core.node import Node
from core.pages.service import KnowledgeBase

# -- declared spaces only ------------------------------------------------------------------------


def test_create_in_an_undeclared_container_is_refused_for_a_person_and_an_agent(kb):
    for who in ("alex", "eng-bot"):
        with pytest.raises(Refused) as exc:
            kb.create_page("NOPE", "A page", "text", actor=who)
        assert exc.value.code == "not_declared"
        msg = str(exc.value)
        assert "NOPE" in msg and "[spaces.NOPE]" in msg and "company.toml" in msg
    assert count(kb.conn, "SELECT count(*) FROM pages") == 0
    assert "page.create" not in record_types(kb.node)  # refused before anything was appended


@pytest.mark.parametrize("container", ["HOME", "SKILLS", "ENG", "LEAD", "PROD"])
def test_every_declared_space_accepts_a_page(kb, container):
    page = kb.create_page(container, "Hello", "text", actor="alex")
    assert page.container == container


def test_an_actors_own_space_is_declared_and_led_by_that_actor(make_home):
    data = config_with(actors={"eng-bot": {"kind": "agent", "space": "BOTS"}})
    with Node.open(make_home(data)) as node:
        kb = KnowledgeBase(node)
        assert node.company.lead_of("BOTS") == "eng-bot"
        page = kb.create_page("BOTS", "Notes", "x", actor="eng-bot")
        alex_page = kb.create_page("BOTS", "Alex's note", "x", actor="alex")
        # the seat whose own container it is leads it: it may tidy a page it did not write
        kb.rename_page(alex_page.id, "Alex note", actor="eng-bot")
        assert page.container == "BOTS"


def test_a_company_that_declares_no_space_has_only_the_reserved_containers(make_home):
    with Node.open(make_home(config_mod.empty_config("root"))) as node:
        kb = KnowledgeBase(node)
        assert set(node.company.declared_containers()) == {"HOME", "SKILLS"}
        with pytest.raises(Refused) as exc:
            kb.create_page("ENG", "x", "y")
        assert exc.value.code == "not_declared"


def test_a_page_in_an_undeclared_container_stays_reachable(kb):
    """A page merely names its container: one written straight to the log is reachable by
    address, and listed apart from the declared spaces."""
    kb.node.submit_one(create_rec("OLD", "Legacy Page", "text"))
    assert kb.resolve("OLD/legacy page").title == "Legacy Page"
    spaces = {s["key"]: s for s in kb.spaces()}
    assert spaces["OLD"]["declared"] is False and spaces["OLD"]["pages"] == 1
    assert spaces["ENG"]["declared"] is True and spaces["ENG"]["has_document"] is True


def test_a_pages_existing_container_is_never_re_judged(home):
    with Node.open(home) as node:
        page = KnowledgeBase(node).create_page("PROD", "Roadmap", "q1", actor="sam")
    data = config_mod.example_config()
    del data["spaces"]["PROD"]  # PROD is no longer declared
    config_mod.write(home.config_file, data)
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        assert not node.company.is_declared("PROD")
        assert kb.save_page(page.id, "q1 and q2", base_revision=1, actor="sam").revision == 2
        assert kb.rename_page(page.id, "Roadmap 2025", actor="sam").container == "PROD"
        with pytest.raises(Refused):
            kb.create_page("PROD", "Another", "x", actor="sam")


# -- a container document per declared space -------------------------------------------------------


def test_opening_a_node_writes_one_container_document_per_declared_space(node):
    declared = node.company.declared_containers()
    got = {r[0]: r[1:] for r in rows(node.conn, "SELECT key, name, purpose, lead, chart_epoch FROM containers")}
    assert set(got) == set(declared) == {"HOME", "SKILLS", "ENG", "LEAD", "PROD"}
    for key, space in declared.items():
        assert got[key][:3] == (space.name, space.purpose, space.lead)
        assert got[key][3] == node.company.activated_at > 0
    assert record_types(node).count("container.declare") == 5


def test_reopening_a_node_writes_no_new_container_records(home):
    for _ in range(3):
        with Node.open(home) as node:
            last = node.log.last_seq()
    assert last == 5
    with Node.open(home) as node:
        assert node.sync_containers() == 0
        assert node.log.last_seq() == 5


def test_a_later_activation_re_stamps_and_a_changed_name_is_written(home):
    with Node.open(home) as node:
        before = dict(rows(node.conn, "SELECT key, chart_epoch FROM containers"))
    data = config_mod.example_config()
    data["spaces"]["ENG"]["name"] = "Engineering & Ops"
    config_mod.write(home.config_file, data)
    epoch = bump_mtime(home.config_file, 5_000)  # activated later
    with Node.open(home) as node:
        # a later activation re-stamps every row (unchanged settings too), and carries the new name
        assert record_types(node).count("container.declare") == 5 + 5
        row = node.conn.execute("SELECT name, chart_epoch FROM containers WHERE key='ENG'").fetchone()
        assert tuple(row) == ("Engineering & Ops", epoch)
        assert all(e == epoch for e in dict(rows(node.conn, "SELECT key, chart_epoch FROM containers")).values())
        assert all(e < epoch for e in before.values())
        assert node.sync_containers() == 0


def test_an_older_configuration_never_overwrites_a_newer_one(home):
    with Node.open(home) as node:
        newer = node.company.activated_at
    data = config_mod.example_config()
    data["spaces"]["ENG"]["name"] = "Stale Name"
    config_mod.write(home.config_file, data)
    st = home.config_file.stat()
    os.utime(home.config_file, ns=(st.st_atime_ns, (newer - 60_000) * 1_000_000))  # activated a minute earlier
    with Node.open(home) as node:
        assert node.company.activated_at < newer
        assert record_types(node).count("container.declare") == 5  # nothing written
        row = node.conn.execute("SELECT name, chart_epoch FROM containers WHERE key='ENG'").fetchone()
        assert tuple(row) == ("Engineering", newer)


def test_a_container_record_with_an_older_epoch_is_a_noop(node):
    row = node.conn.execute("SELECT * FROM containers WHERE key='ENG'").fetchone()
    out = node.submit_one(rec("container.declare", "crewlet", key="ENG", name="Old", purpose="", lead=None,
                              chart_epoch=row["chart_epoch"] - 1))
    assert out.status == "noop"
    assert node.conn.execute("SELECT name FROM containers WHERE key='ENG'").fetchone()[0] == "Engineering"
    newer = node.submit_one(rec("container.declare", "crewlet", key="ENG", name="New", purpose="p", lead="sam",
                                chart_epoch=row["chart_epoch"] + 1))
    assert newer.status == "applied"
    assert tuple(node.conn.execute("SELECT name, lead FROM containers WHERE key='ENG'").fetchone()) == ("New", "sam")


# -- the reserved containers ------------------------------------------------------------------------


@pytest.fixture
def skill(kb):
    return kb.create_page("SKILLS", "Deploy Skill", "do the thing", actor="alex")


@pytest.fixture
def root_page(kb):
    return kb.create_page("HOME", "Onboarding", "read me first", actor="alex")


def test_an_agent_may_do_nothing_in_the_skills_container(kb, skill):
    attempts = {
        "create": lambda: kb.create_page("SKILLS", "Bot Skill", "x", actor="eng-bot"),
        "save": lambda: kb.save_page(skill.id, "bot text", base_revision=1, actor="eng-bot"),
        "rename": lambda: kb.rename_page(skill.id, "Bot Renamed", actor="eng-bot"),
        "comment": lambda: kb.add_comment(skill.id, "bot remark", actor="eng-bot"),
        "move": lambda: kb.move_page(skill.id, None, actor="eng-bot"),
        "trash": lambda: kb.trash_page(skill.id, actor="eng-bot"),
    }
    for verb, attempt in attempts.items():
        with pytest.raises(Refused) as exc:
            attempt()
        assert exc.value.code == "reserved", verb
        assert "skills container" in str(exc.value)
    page = kb.resolve(skill.id)
    assert (page.title, page.body, page.revision) == ("Deploy Skill", "do the thing", 1)
    assert kb.comments(skill.id) == []


def test_an_admin_agent_is_still_an_agent_in_the_skills_container(make_home):
    data = config_with(actors={**config_mod.example_config()["actors"], "ops-bot": {"kind": "agent", "admin": True}})
    with Node.open(make_home(data)) as node:
        kb = KnowledgeBase(node)
        with pytest.raises(Refused) as exc:
            kb.create_page("SKILLS", "x", "y", actor="ops-bot")
        assert exc.value.code == "reserved"


def test_an_agent_may_not_create_in_the_root_space(kb):
    with pytest.raises(Refused) as exc:
        kb.create_page("HOME", "Bot Page", "x", actor="eng-bot")
    assert exc.value.code == "reserved"
    assert "root space" in str(exc.value)


def test_an_agent_may_keep_a_root_page_current_and_remark_on_it(kb, root_page):
    saved = kb.save_page(root_page.id, "read me first, then the runbook", base_revision=1, actor="eng-bot")
    assert (saved.revision, saved.saved_by) == (2, "eng-bot")
    c = kb.add_comment(root_page.id, "linked the runbook", actor="eng-bot")
    assert c.author == "eng-bot"


def test_an_agent_may_rename_a_root_page_it_may_tidy(make_home):
    """The root's reservation holds back only a create: an agent that may tidy a page (here an
    admin agent) renames one there."""
    data = config_with(actors={**config_mod.example_config()["actors"], "ops-bot": {"kind": "agent", "admin": True}})
    with Node.open(make_home(data)) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("HOME", "Onboarding", "x", actor="alex")
        renamed = kb.rename_page(page.id, "Onboarding Guide", actor="ops-bot")
        assert renamed.title == "Onboarding Guide"


def test_a_person_writing_the_skills_container_needs_admin(kb, skill):
    with pytest.raises(Refused) as exc:
        kb.create_page("SKILLS", "Sam Skill", "x", actor="sam")
    assert exc.value.code == "forbidden" and "admin" in str(exc.value)
    with pytest.raises(Refused) as exc:
        kb.save_page(skill.id, "sam's text", base_revision=1, actor="sam")
    assert exc.value.code == "forbidden"
    with pytest.raises(Refused):
        kb.rename_page(skill.id, "Sam's", actor="sam")
    # a remark on a skill page is not the skill: an ordinary comment
    assert kb.add_comment(skill.id, "typo in step 2", actor="sam").author == "sam"
    # the admin writes it
    assert kb.save_page(skill.id, "do the thing, carefully", base_revision=1, actor="alex").revision == 2


def test_reserved_keys_move_with_the_configuration(make_home):
    data = config_with(knowledge={"backend": "native", "root_space": "ROOT", "skills_container": "TOOLS", "scope": []},
                       spaces={**config_mod.example_config()["spaces"], "SKILLS": {"name": "Ordinary now"}})
    with Node.open(make_home(data)) as node:
        kb = KnowledgeBase(node)
        assert kb.create_page("SKILLS", "Bot page", "x", actor="eng-bot").container == "SKILLS"
        for container in ("ROOT", "TOOLS"):
            with pytest.raises(Refused) as exc:
                kb.create_page(container, "Bot page", "x", actor="eng-bot")
            assert exc.value.code == "reserved"
        with pytest.raises(Refused) as exc:  # no longer a reserved key, and nothing declares it
            kb.create_page("HOME", "Page", "x", actor="alex")
        assert exc.value.code == "not_declared"


# -- idempotency by op_id ------------------------------------------------------------------------------


def test_the_same_record_submitted_twice_changes_nothing(node):
    create = create_rec("ENG", "Once", "body")
    first = node.submit_one(create)
    snapshot = {t: rows(node.conn, f"SELECT * FROM {t}") for t in ("pages", "revisions")}
    again = node.submit_one(create)
    assert again.status == first.status == "applied"
    assert again.seq == first.seq  # the outcome decided the first time
    assert {t: rows(node.conn, f"SELECT * FROM {t}") for t in ("pages", "revisions")} == snapshot
    save = save_rec(create.payload["page_id"], "body 2", 1)
    assert node.submit_one(save).status == "applied"
    node.submit([save, save])
    assert count(node.conn, "SELECT count(*) FROM revisions") == 2
    assert count(node.conn, "SELECT count(*) FROM applied_ops WHERE op_id = ?", (save.op_id,)) == 1


def test_a_service_write_with_a_fixed_op_id_is_applied_once(kb):
    page = kb.create_page("ENG", "Fixed", "x", op_id="op-fixed-1", page_id="fixedpage0000001")
    kb.create_page("ENG", "Fixed", "x", op_id="op-fixed-1", page_id="fixedpage0000001")  # a retry
    assert count(kb.conn, "SELECT count(*) FROM pages") == 1
    assert kb.resolve("ENG/fixed").id == page.id


# -- malformed records ----------------------------------------------------------------------------------


def _assert_nothing_of(node, page_id):
    assert count(node.conn, "SELECT count(*) FROM pages WHERE id = ?", (page_id,)) == 0
    assert count(node.conn, "SELECT count(*) FROM revisions WHERE page_id = ?", (page_id,)) == 0


def test_a_malformed_payload_is_refused_and_later_records_still_apply(node):
    bad = rec("page.create", page_id="bad1", container="ENG", body="no title")  # lacks "title"
    bad_save = rec("page.save", page_id="nope", body="x")  # lacks base_revision
    good = create_rec("ENG", "After", "fine")
    outs = node.submit([bad, bad_save, good])
    assert [o.status for o in outs] == ["refused", "refused", "applied"]
    assert outs[0].code == "malformed" and "title" in outs[0].reason
    _assert_nothing_of(node, "bad1")
    assert node.conn.execute("SELECT title FROM pages WHERE id = ?", (good.payload["page_id"],)).fetchone()[0] == "After"


def test_an_unknown_record_type_is_refused_and_does_not_stop_the_log(node):
    outs = node.submit([rec("page.teleport", page_id="x"), create_rec("ENG", "Still", "ok")])
    assert (outs[0].status, outs[0].code) == ("refused", "unknown_record")
    assert outs[1].status == "applied"


@pytest.mark.parametrize("payload", [
    {"body": ["a list, not text"]},             # a body SQLite cannot bind
    {"body": {"a": "dict"}},
    {"message": {"not": "a string"}},          # fails on the revision insert, after the page row
    {"parent_id": 10 ** 20},                   # an integer past SQLite's 64 bits
], ids=["list-body", "dict-body", "dict-message", "huge-int"])
def test_a_payload_sqlite_cannot_bind_is_refused_not_half_applied_and_never_blocks_the_log(home, payload):
    """A record whose values SQLite refuses (a list body, a dict message) must be refused like any
    other malformed record — not raise out of catch_up, which would stop this node (and every node
    replaying the log) at that record for good."""
    page_id = pid()
    bad = create_rec("ENG", "Poison", "text", page_id=page_id)
    bad = bad.__class__(bad.type, bad.op_id, bad.actor, bad.at, {**bad.payload, **payload})
    good = create_rec("ENG", "Behind It", "ok")
    with Node.open(home) as node:
        outs = node.submit([bad, good])
        assert [(o.status, o.code) for o in outs] == [("refused", "malformed"), ("applied", None)]
        _assert_nothing_of(node, page_id)
    with Node.open(home) as node:  # the node still opens
        assert node.applied_seq() == node.log.last_seq()


def test_a_comment_with_a_duplicate_id_is_refused_not_a_crash(node):
    page = create_rec("ENG", "Commented", "x")
    node.submit_one(page)
    first = rec("comment.add", page_id=page.payload["page_id"], comment_id="c1", body="first")
    dup = rec("comment.add", actor="sam", page_id=page.payload["page_id"], comment_id="c1", body="second")
    outs = node.submit([first, dup, create_rec("ENG", "Next", "x")])
    assert [o.status for o in outs] == ["applied", "refused", "applied"]
    assert rows(node.conn, "SELECT author, body FROM comments") == [("alex", "first")]


# -- a malformed payload of every record kind ---------------------------------------------------------------
# A record on a log is data another build, node or tool wrote. A page.create whose title was a number raised
# AttributeError in the applier (not one of the errors it took as "malformed"), so the record stopped the log
# on every node, at that seq, for good. Every kind's worst shapes — each key missing, each key of the wrong
# JSON type — must be one refusal every node records alike, with nothing written and the log going on.

def _wrong(value):
    """A value of another JSON type than `value`'s."""
    return {str: 7, int: "7", bool: "yes", list: "not a list", dict: ["not", "an object"]}.get(type(value), 7)


def _every_page_kind(page: str, other: str, trashed: str, comment: str, entry: str = "no-entry") -> dict:
    from core.pages import generated_handlers as G
    from core.pages import records as R
    from core.recover import tombstone

    return {
        "container.declare": R.container_declare(key="OPS", name="Ops", purpose="run it", lead="alex", chart_epoch=5),
        "page.create": R.page_create("alex", page_id=pid(), container="ENG", title="New", body="b", parent_id=page,
                                     message="first", labels=["ops"]),
        "page.save": R.page_save("alex", page_id=page, base_revision=1, body="v2", message="second"),
        "page.rename": R.page_rename("alex", page_id=page, title="Renamed"),
        "page.move": R.page_move("alex", page_id=page, parent_id=other),
        "page.trash": R.page_trash("alex", page_id=other),
        "page.restore": R.page_restore("alex", page_id=trashed),
        "page.purge": R.page_purge("alex", page_id=trashed, reason="done", cutoff=2**40),
        "page.labels": R.page_labels("alex", page_id=page, labels=["x"]),
        "comment.add": R.comment_add("alex", comment_id=pid(), page_id=page, body="hi"),
        "comment.edit": R.comment_edit("alex", comment_id=comment, body="edited"),
        "comment.remove": R.comment_remove("alex", comment_id=comment),
        "knowledge.read": R.knowledge_read("eng-bot", via="search", query="q", pages=[{"page_id": page, "rank": 1}],
                                           turn="t1", phase="answer"),
        "onboarding.mark": R.onboarding_mark("eng-bot", chain_hash="abc"),
        "entry.add": R.entry_add("eng-bot", entry_id=pid(), page_id=page, kind="GOTCHA", body="Retries double the load.",
                                 by="agent", scope="apps/server", citations=[{"link": "acme/api#12", "kind": "issue"}],
                                 checks=[{"index": 1, "result": "held", "commit": None, "blob": None}],
                                 supersedes=entry, budget=10),
        "entry.edit": R.entry_edit("eng-bot", entry_id=entry, body="The cache holds for five minutes.", kind="FACT",
                                   scope="apps/server", by="agent", reason="misread the TTL"),
        "entry.status": R.entry_status("alex", entry_id=entry, action="accept", by="person", reason="checked it"),
        "entry.corroborate": R.entry_corroborate("sam", entry_id=entry),
        "entry.citation_check": R.entry_citation_check("crewlet", entry_id=entry, index=1, result="shifted",
                                                       commit="a" * 40, blob="b" * 40,
                                                       anchor={"path": "a.py", "lines": [3, 4]}, message="moved"),
        "page.policy": R.page_policy("alex", page_id=page, policy="LOCKED", by="person"),
        "page.about": R.page_about("alex", page_id=page, item_kind="module", item="apps/server"),
        "entry.serve": R.entry_serve("eng-bot", via="load_context", query="cache", entries=[{"entry_id": entry, "rank": 1}],
                                     run="run-1"),
        "triage.decide": R.triage_decide("crewlet", entry_id=entry, entry_version=1, mode="shadow", decision="accept",
                                         acted=False, reasons=["UNKNOWN_SOURCE"], held=["UNKNOWN_SOURCE"],
                                         fold_into=None, refusal=None, inputs={"neighbours": [], "rules": []},
                                         audited=False),
        "triage.audit": R.triage_audit("alex", decision_id="no-decision", answer="agree", by="person"),
        "triage.state": R.triage_state("crewlet", decision_type="accept", state="escalating",
                                       figures={"kappa": 0.2, "verdicts": 12}),
        "run.start": R.run_start("alex", run_id="run-2", agent="eng-bot", modules=["apps/server"], arm="holdout",
                                 holdout_rate=0.1, issue="ENG-12"),
        "run.finish": R.run_finish("alex", run_id="run-1", checks="passed", review="failed", pr="merged", cost=0.5,
                                   findings=[{"module": "apps/server", "text": "retries need a backoff"}]),
        "knowledge.gap": R.gap_ask("eng-bot", question="How is the zebra ledger rotated?", via="recall_knowledge"),
        "upkeep.issue": R.upkeep_issue("crewlet", subject="gap:how is the zebra ledger rotated", kind="gap",
                                       space="ENG", title="Knowledge gap: How is the zebra ledger rotated?",
                                       ref="ENG-7", url="https://plane.example.com/acme/issues/7/"),
        "consolidation.propose": R.consolidation_propose("eng-bot", proposal_id="prop-1", page_id=page, base_revision=1,
                                                         body="one paragraph", entries=[entry], by="agent",
                                                         message="folded"),
        "consolidation.decide": R.consolidation_decide("alex", proposal_id="prop-1", action="accept", by="person"),
        "page.generated": G.page_generated("alex", page_id=page, action="make", question="How?", by_kind="person"),
        "page.build": G.page_build("crewlet", page_id=page, base_revision=1, body="b", question_no=1, digest="d",
                                   built_at=1, sections=[{"id": "s-1", "text": "b", "entries": [],
                                                          "inputs": {"question": "How?", "entries": {}}}]),
        "log.lost": Record("log.lost", "op-lost-shape", "crewlet", 1, {
            "seq": 1, "log": "pages", "why": "given back as its outcome",
            "outcome": {"type": "page.save", "status": "refused", "code": "stale_revision", "reason": "r",
                        "result": {}}}),
    }


def _needed(kinds, kind: str) -> list[str]:
    """The keys a record of `kind` cannot do without, as its declaration's shape says (the others have a default
    the applier has always used)."""
    return [key for key, f in kinds[kind].shape.items() if f.required]


def _shapes_of(good: Record) -> list[tuple[str, Record]]:
    """Every worst shape of `good`: each needed key missing, each key (and a list's item) of the wrong type."""
    from core.pages.kinds import KINDS

    out = []
    for key in _needed(KINDS, good.type):
        out.append((f"no {key}", Record(good.type, f"{good.op_id}-no-{key}", good.actor, good.at,
                                        {k: v for k, v in good.payload.items() if k != key})))
    for key, value in good.payload.items():
        out.append((f"{key} wrong", Record(good.type, f"{good.op_id}-{key}", good.actor, good.at,
                                           {**good.payload, key: _wrong(value)})))
        if isinstance(value, list) and value:
            out.append((f"{key} item wrong", Record(good.type, f"{good.op_id}-{key}-item", good.actor, good.at,
                                                    {**good.payload, key: [_wrong(value[0])]})))
    if good.type == "log.lost":
        out.append(("outcome lacks its type", Record(good.type, "op-lost-no-type", good.actor, good.at, {
            **good.payload, "outcome": {k: v for k, v in good.payload["outcome"].items() if k != "type"}})))
    return out


def _page_kinds() -> list[str]:
    from core.pages.kinds import KINDS

    return list(KINDS.types)


@pytest.mark.parametrize("kind", _page_kinds())
def test_every_worst_shape_of_every_record_kind_is_refused_as_malformed_and_the_log_goes_on(tmp_path, make_home, kind):
    from core.store.digest import content_digest

    home = make_home()
    with Node.open(home) as node:
        kb = KnowledgeBase(node)
        page = kb.create_page("ENG", "Page", "v1", actor="alex").id
        other = kb.create_page("ENG", "Other", "", actor="alex").id
        trashed = kb.create_page("ENG", "Trashed", "", actor="alex").id
        kb.trash_page(trashed, actor="alex")
        comment = kb.add_comment(page, "first", actor="alex").id
        entry = EntryBank(node).add(page, "The cache holds for ten minutes.", actor="eng-bot",
                                    citations=[{"link": "acme/api#7", "kind": "pull_request"}]).id
        samples = _every_page_kind(page, other, trashed, comment, entry)
        assert kind in samples, f"declared kind {kind} has no sample record here: add one to _every_page_kind"
        good = samples[kind]
        bad = _shapes_of(good)
        before = content_digest(node.conn).tables
        outs = node.submit([r for _, r in bad])
        assert [(name, o.status, o.code) for (name, _), o in zip(bad, outs)] == [
            (name, "refused", "malformed") for name, _ in bad]
        assert all(f"malformed {kind} record" in o.reason for o in outs), [o.reason for o in outs]
        after = content_digest(node.conn).tables
        assert {t: d for t, d in after.items() if t != "applied_ops"} == {
            t: d for t, d in before.items() if t != "applied_ops"}     # nothing of any of them was written
        last = node.submit_one(good)                                      # the log goes on: the good one applies
        assert last.code != "malformed", last
        seq = node.applied_seq()
    # every node decides alike: a fresh database replaying the whole log (the fast path, chunk by chunk)
    import shutil

    from core.paths import Home

    shutil.copytree(home.root, tmp_path / "replay", ignore=shutil.ignore_patterns("crewlet.db*", "index"))
    with Node.open(Home(tmp_path / "replay"), sync_containers=False) as other_node:
        assert other_node.applied_seq() == seq
        decided = {r[0]: (r[1], r[2]) for r in other_node.conn.execute("SELECT op_id, status, code FROM applied_ops")}
    assert all(decided[r.op_id] == ("refused", "malformed") for _, r in bad)


def _every_vector_kind() -> dict:
    import numpy as np

    from core.vectors import index as ivf
    from core.vectors import records as V

    vec = np.linspace(-1, 1, 8).astype("<f4")
    return {
        "vector.put": V.put_record(pid(), "space-a", "ENG", 1, "d1", 10, 0, vec),
        "vector.restamp": V.restamp_record(pid(), "space-a", "ENG", 2, "d1"),
        "vector.drop": V.drop_record(pid()),
        "index.install": ivf.install_record("space-a", np.zeros((2, 1), dtype=np.uint8), 1, [(1, 5)], 3, 2,
                                            {"recall": 0.9}, 5),
        "index.refile": ivf.refile_record("space-a", 1, 0, 1, 5, np.array([1]), np.array([0])),
        "index.measure": ivf.measure_record("space-a", 1, 2, {"recall": 0.9}, 6),
        "index.retire": ivf.retire_record("space-a", 1, "replaced"),
    }


def _vector_kinds() -> list[str]:
    from core.vectors.kinds import KINDS

    return [k for k in KINDS.types if k != "log.lost"]     # a tombstone files nothing whatever its shape


@pytest.mark.parametrize("kind", _vector_kinds())
def test_every_worst_shape_of_every_vector_record_kind_files_nothing_and_the_log_goes_on(make_home, kind):
    """The vector log files what nobody waits on: a malformed record files nothing (no outcome to store) —
    and never raises out of the applier (a list where text belongs made SQLite refuse the binding, which
    stopped the vector log for good)."""
    import numpy as np

    from core.store.digest import content_digest
    from core.vectors import records as V

    from core.replica.shapes import shape_problem
    from core.vectors.kinds import KINDS

    samples = _every_vector_kind()
    assert kind in samples, f"declared kind {kind} has no sample record here: add one to _every_vector_kind"
    good = samples[kind]
    assert shape_problem(good.payload, KINDS.shapes[kind]) is None      # what the builder writes is of its shape
    bad = []
    for key in _needed(KINDS, kind):
        bad.append(Record(kind, f"{good.op_id}-no-{key}", good.actor, good.at,
                          {k: v for k, v in good.payload.items() if k != key}))
    for key, value in good.payload.items():
        for wrong in (_wrong(value), ["a", "list"]):
            if type(wrong) is not type(value):
                bad.append(Record(kind, f"{good.op_id}-{key}-{type(wrong).__name__}", good.actor, good.at,
                                  {**good.payload, key: wrong}))
    with Node.open(make_home()) as node:
        before = content_digest(node.conn).tables
        node.submit_vectors(bad)
        assert content_digest(node.conn).tables == before        # nothing of any of them was filed
        put = V.put_record(pid(), "space-a", "ENG", 1, "d9", 10, 0, np.ones(8, dtype="<f4"))
        node.submit_vectors([put])                                 # the log goes on
        assert node.conn.execute("SELECT count(*) FROM vectors WHERE source_id = ?",
                                 (put.payload["source_id"],)).fetchone()[0] == 1
        assert V.position(node.conn)[0] == len(bad) + 1
