"""`crewlet confluence import` / `crewlet plane import` and `crewlet search` on a remote company, through the
CLI, against real HTTP servers on 127.0.0.1 that answer as Confluence's and Plane's APIs do.

Conventions (container = parent directory, title = first H1 stripped, frontmatter overrides, `trigger:`
to the skills container, labels and the crewlet-doc marker, Plane's external ids), every problem listed
before anything is written (a missing space or project named with how to create it), a dry run that
writes nothing, idempotence with --update, and --create-space.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import new_home
from typer.testing import CliRunner

from core import config as config_mod
from crewlet_tui.cli import app
from remote_servers import ConfluenceServer, PlaneServer

ENV = {"IMPORT_CF_TOKEN": "company-token", "IMPORT_PLANE_KEY": "company-key"}


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    return root


DOCS = {
    "ENG/onboarding.md": "# Onboarding\n\nWelcome to **engineering**.\n\n```bash\nmake dev\n```\n",
    "ENG/deploy.md": "---\nlabels: [Ops, deploy]\n---\n# Deploy Runbook\n\nRoll back with `make rollback`.\n",
    "ENG/rollback.md": "---\nparent: Deploy Runbook\n---\n# Rollback\n\nStep one.\n",
    "HOME/Onboarding.md": "# Onboarding\n\nWhat is true of the whole company.\n",
    "ENG/skill.md": "---\ntrigger: deploy\ntitle: Deploy skill\n---\nCheck the runbook first.\n",
    ".hidden/x.md": "# Hidden\n",
}


def run(home, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, ["--home", str(home.root), *args], env=ENV if env is None else env)


@pytest.fixture
def cf():
    with ConfluenceServer() as server:
        server.user("company-token", "svc")
        for key in ("ENG", "HOME", "SKILLS"):
            server.space(key)
        yield server


@pytest.fixture
def cf_home(tmp_path, cf):
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "confluence", "confluence_spaces": ["ENG", "HOME"]}
    data["integrations"] = {"confluence": {"url": cf.url, "token_env": "IMPORT_CF_TOKEN"}}
    return new_home(tmp_path / "home", data)


def test_confluence_import_publishes_by_the_conventions(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", DOCS)
    r = run(cf_home, "confluence", "import", str(root), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["created"], out["updated"], out["unchanged"]) == (5, 0, 0) and out["credential"]["credential"] == "company"
    pages = {(p.space, p.title): p for p in cf.pages.values()}
    assert set(pages) == {("ENG", "Onboarding"), ("ENG", "Deploy Runbook"), ("ENG", "Rollback"), ("HOME", "Onboarding"),
                          ("SKILLS", "Deploy skill")}
    onboarding = pages[("ENG", "Onboarding")]
    assert "<h1>" not in onboarding.storage                              # the H1 is the title, not the body
    assert "<strong>engineering</strong>" in onboarding.storage
    assert re.search(r'<ac:structured-macro ac:name="code" ac:schema-version="1" ac:macro-id="[^"]+">'
                     r'<ac:parameter ac:name="language">bash</ac:parameter>'
                     r"<ac:plain-text-body><!\[CDATA\[make dev\n\]\]>", onboarding.storage), onboarding.storage
    assert pages[("ENG", "Deploy Runbook")].labels == {"ops", "deploy", "crewlet-doc"}
    assert pages[("ENG", "Rollback")].parent_id == pages[("ENG", "Deploy Runbook")].id   # parent: by title, same run
    assert pages[("SKILLS", "Deploy skill")].labels == {"crewlet-skill"}
    assert "trigger: deploy" in pages[("SKILLS", "Deploy skill")].storage               # its binding metadata kept
    assert not any(p.title == "Hidden" for p in cf.pages.values())


def test_a_second_run_leaves_pages_and_update_writes_only_what_changed(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", DOCS)
    assert run(cf_home, "confluence", "import", str(root)).exit_code == 0
    writes = len(cf.writes())
    # unchanged files, with or without --update: nothing written
    for extra in ([], ["--update"]):
        r = run(cf_home, "confluence", "import", str(root), "--json", *extra)
        out = json.loads(r.stdout)
        assert r.exit_code == 0 and (out["created"], out["updated"], out["unchanged"]) == (0, 0, 5), r.output
        assert len(cf.writes()) == writes
    # an edited file: left as it is without --update (and said), written with it, then idempotent again
    (root / "ENG/deploy.md").write_text("---\nlabels: [ops, deploy, oncall]\n---\n# Deploy Runbook\n\nNew text.\n")
    out = json.loads(run(cf_home, "confluence", "import", str(root), "--json").stdout)
    assert out["left_differing"] == 1 and len(cf.writes()) == writes
    assert any("--update" in n["message"] for n in out["notes"])
    out = json.loads(run(cf_home, "confluence", "import", str(root), "--update", "--json").stdout)
    assert out["updated"] == 1 and [u["changes"] for u in out["updates"]] == [["body", "labels"]]
    page = next(p for p in cf.pages.values() if p.title == "Deploy Runbook")
    assert page.version == 2 and "New text." in page.storage and "oncall" in page.labels
    writes = len(cf.writes())
    out = json.loads(run(cf_home, "confluence", "import", str(root), "--update", "--json").stdout)
    assert out["updated"] == 0 and len(cf.writes()) == writes


def test_a_dry_run_writes_nothing(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", DOCS)
    r = run(cf_home, "confluence", "import", str(root), "--dry-run")
    assert r.exit_code == 0, r.output
    assert "Would create 5" in r.stdout and "nothing written" in r.stdout
    assert cf.writes() == [] and cf.pages == {}


def test_every_problem_is_listed_before_anything_is_written(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", {**DOCS, "PROD/roadmap.md": "# Roadmap\n", "OPS/a.md": "# Pager\n",
                                    "ENG/untitled.md": "no heading here\n", "ENG/dup.md": "# Rollback\n"})
    r = run(cf_home, "confluence", "import", str(root))
    assert r.exit_code == 1 and cf.writes() == []
    problems = [line for line in r.stderr.splitlines() if line.startswith("problem:")]
    text = "\n".join(problems)
    assert "space OPS does not exist on Confluence" in text and "space PROD does not exist" in text
    assert "Create space" in text and "--create-space" in text
    assert "ENG/untitled.md: has no title" in text and "2 files would publish as the same page ENG/Rollback" in text
    assert "--title-from-name" not in text                 # an option of the native import only
    assert "import stopped: 4 problems, nothing written" in r.stderr


def test_create_space_creates_what_the_tree_needs(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", {"PROD/roadmap.md": "# Roadmap\n\nNext.\n"})
    r = run(cf_home, "confluence", "import", str(root), "--create-space", "--dry-run", "--json")
    assert json.loads(r.stdout)["spaces_to_create"] == ["PROD"] and cf.writes() == []
    r = run(cf_home, "confluence", "import", str(root), "--create-space", "--json")
    out = json.loads(r.stdout)
    assert r.exit_code == 0 and out["spaces_created"] == ["PROD"] and "PROD" in cf.spaces
    assert [(p.space, p.title) for p in cf.pages.values()] == [("PROD", "Roadmap")]


def test_an_unreachable_site_is_a_problem_and_nothing_is_written(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", DOCS)
    cf.mode = "status:401"
    r = run(cf_home, "confluence", "import", str(root))
    assert r.exit_code == 1 and "answered 401: the credential was refused" in r.stderr and cf.writes() == []
    r = run(cf_home, "confluence", "import", str(root), env={})
    assert r.exit_code == 1 and "$IMPORT_CF_TOKEN is not set" in r.stderr


def test_search_on_a_confluence_company_goes_to_the_site(tmp_path, cf, cf_home):
    root = tree(tmp_path / "docs", DOCS)
    assert run(cf_home, "confluence", "import", str(root)).exit_code == 0
    r = run(cf_home, "search", "rollback", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {h["title"] for h in out["hits"]} == {"Deploy Runbook", "Rollback"}
    assert out["outcome"]["source"]["backend"] == "confluence" and out["outcome"]["served_mode"] == "keyword"
    plain = run(cf_home, "search", "rollback", "--mode", "keyword")
    assert "confluence live, no local copy" in plain.stdout and "1 request" in plain.stdout
    assert "searched Confluence at" in plain.stdout and "the company's credential" in plain.stdout
    cf.mode = "status:503"
    failed = run(cf_home, "search", "rollback")
    assert failed.exit_code == 1 and "503" in failed.stderr and len(failed.stderr.strip().splitlines()) == 1


# -- Plane ------------------------------------------------------------------------------------------

@pytest.fixture
def pl():
    with PlaneServer() as server:
        server.key("company-key", "svc")
        for ident in ("ENG", "HOME", "SKILLS"):
            server.project(ident, members={"svc"})
        yield server


@pytest.fixture
def pl_home(tmp_path, pl):
    data = config_mod.example_config()
    data["knowledge"] = {"backend": "plane", "plane_projects": ["ENG", "HOME"]}
    data["integrations"] = {"plane": {"url": pl.url, "workspace": "acme", "token_env": "IMPORT_PLANE_KEY"}}
    return new_home(tmp_path / "home", data)


def test_plane_import_marks_pages_with_external_ids_and_is_idempotent(tmp_path, pl, pl_home):
    root = tree(tmp_path / "docs", DOCS)
    r = run(pl_home, "plane", "import", str(root), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["created"] == 5 and any(n["code"] == "labels_ignored" for n in out["notes"])
    ident = {p["id"]: p["identifier"] for p in pl.projects.values()}
    pages = {(ident[p.project_id], p.name): p for p in pl.pages.values()}
    assert set(pages) == {("ENG", "Onboarding"), ("ENG", "Deploy Runbook"), ("ENG", "Rollback"),
                          ("HOME", "Onboarding"), ("SKILLS", "Deploy skill")}
    runbook = pages[("ENG", "Deploy Runbook")]
    assert (runbook.external_source, runbook.external_id) == ("crewlet", "doc:Deploy Runbook")
    assert pages[("SKILLS", "Deploy skill")].external_id == "skill:Deploy skill"
    assert pages[("ENG", "Rollback")].parent == runbook.id
    assert "<h1>" not in pages[("ENG", "Onboarding")].html and '<code class="language-bash">' in pages[("ENG", "Onboarding")].html
    writes = len(pl.writes())
    for extra in ([], ["--update"]):
        out = json.loads(run(pl_home, "plane", "import", str(root), "--json", *extra).stdout)
        assert (out["created"], out["updated"], out["unchanged"]) == (0, 0, 5) and len(pl.writes()) == writes
    # renamed in Plane: still found by its external id; --update writes the file's title and body back
    runbook.name = "Runbook (renamed in Plane)"
    (root / "ENG/deploy.md").write_text("# Deploy Runbook\n\nNew text.\n")
    out = json.loads(run(pl_home, "plane", "import", str(root), "--update", "--json").stdout)
    assert out["created"] == 0 and out["updated"] == 1 and out["updates"][0]["changes"] == ["body", "title"]
    assert runbook.name == "Deploy Runbook" and "New text." in runbook.html


def test_plane_import_names_a_missing_project_and_writes_nothing(tmp_path, pl, pl_home):
    root = tree(tmp_path / "docs", {**DOCS, "PROD/roadmap.md": "# Roadmap\n"})
    r = run(pl_home, "plane", "import", str(root))
    assert r.exit_code == 1 and pl.writes() == []
    assert "no project PROD in workspace acme" in r.stderr and "Projects → Add project, identifier PROD" in r.stderr
    assert "never creates projects" in r.stderr
    dry = run(pl_home, "plane", "import", str(tmp_path / "docs"), "--dry-run")
    assert dry.exit_code == 1 and pl.writes() == []


def test_plane_dry_run_writes_nothing(tmp_path, pl, pl_home):
    root = tree(tmp_path / "docs", DOCS)
    r = run(pl_home, "plane", "import", str(root), "--dry-run", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["creates"] and pl.writes() == [] and pl.pages == {}


def test_search_on_a_plane_company(tmp_path, pl, pl_home):
    root = tree(tmp_path / "docs", DOCS)
    assert run(pl_home, "plane", "import", str(root)).exit_code == 0
    out = json.loads(run(pl_home, "search", "rollback", "--json").stdout)
    assert [h["title"] for h in out["hits"]] == ["Rollback", "Deploy Runbook"]      # the newest edit first
    assert out["outcome"]["source"]["ranking"] == "recency"
    skills = json.loads(run(pl_home, "search", "runbook", "--json").stdout)
    assert "Deploy skill" not in {h["title"] for h in skills["hits"]}


def test_import_refuses_a_company_without_the_integration(tmp_path):
    home = new_home(tmp_path / "native")
    root = tree(tmp_path / "docs", DOCS)
    r = run(home, "confluence", "import", str(root))
    assert r.exit_code == 1 and "there is no [integrations.confluence]" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# -- --update compares what the page says, not how the site spells it (review finding 6) ------------------

def test_confluence_update_is_idempotent_after_the_site_normalises_storage(tmp_path, cf, cf_home):
    """Confluence stores what it is sent in its own spelling (a saved code macro gains ac:schema-version
    and ac:macro-id, a table its layout): an --update run must not write every such page again. The
    reviewer's reproduction rewrites the stored macros by hand, as Confluence does."""
    root = tree(tmp_path / "docs", DOCS)
    assert run(cf_home, "confluence", "import", str(root)).exit_code == 0
    for p in cf.pages.values():   # what Confluence stores for what was sent
        p.storage = re.sub(r'<ac:structured-macro ac:name="code">',
                           '<ac:structured-macro ac:name="code" ac:schema-version="1" ac:macro-id="6f1c0b9e-1">',
                           p.storage)
    out = json.loads(run(cf_home, "confluence", "import", str(root), "--update", "--json").stdout)
    assert out["updated"] == 0, out["updates"]


def test_the_fake_site_respells_what_it_saves_and_update_still_writes_nothing(tmp_path, cf, cf_home):
    """The fake Confluence normalises saved storage as Confluence does, so every idempotence test runs
    against the spelling a real site gives back; an edited file is still written."""
    docs = {**DOCS, "ENG/matrix.md": "# Matrix\n\n| who | what |\n| --- | --- |\n| ops | `deploy` |\n\n"
                                     "```python\nprint('hi')\n```\n"}
    root = tree(tmp_path / "docs", docs)
    assert run(cf_home, "confluence", "import", str(root)).exit_code == 0
    matrix = next(p for p in cf.pages.values() if p.title == "Matrix")
    assert 'ac:schema-version="1"' in matrix.storage and "ac:macro-id=" in matrix.storage
    assert '<table data-layout="default"' in matrix.storage and "<thead>" not in matrix.storage
    writes = len(cf.writes())
    out = json.loads(run(cf_home, "confluence", "import", str(root), "--update", "--json").stdout)
    assert (out["updated"], out["unchanged"]) == (0, 6) and len(cf.writes()) == writes, out["updates"]
    (root / "ENG/matrix.md").write_text(docs["ENG/matrix.md"].replace("`deploy`", "`rollback`"))
    out = json.loads(run(cf_home, "confluence", "import", str(root), "--update", "--json").stdout)
    assert out["updated"] == 1 and [u["changes"] for u in out["updates"]] == [["body"]]


def test_plane_update_is_idempotent_after_the_site_normalises_html(tmp_path, pl, pl_home):
    root = tree(tmp_path / "docs", DOCS)
    assert run(pl_home, "plane", "import", str(root)).exit_code == 0
    onboarding = next(p for p in pl.pages.values() if p.name == "Onboarding" and "engineering" in p.html)
    assert 'class="editor-paragraph-block"' in onboarding.html        # Plane's editor spelling
    writes = len(pl.writes())
    out = json.loads(run(pl_home, "plane", "import", str(root), "--update", "--json").stdout)
    assert out["updated"] == 0 and len(pl.writes()) == writes, out["updates"]
