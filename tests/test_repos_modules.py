"""core/repos/modules.py: modules found by their manifests, scopes read and matched, modules reached."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_repos_support import GitRepo

from core.errors import Invalid, NotFound
from core.repos import Repositories, Repository, Scope, find_modules, modules_reached, parse_scope, scope_matches


def test_manifests_make_modules_and_vendored_ones_do_not() -> None:
    files = ["pyproject.toml", "apps/server/package.json", "apps/server/src/index.ts", "apps/web/go.mod",
             "libs/core/Core.csproj", "libs/rb/Gemfile", "tools/x/build.gradle.kts", "docs/readme.md",
             "apps/server/node_modules/left-pad/package.json", "vendor/github.com/x/go.mod"]
    assert find_modules(files, listed=["./docs/"]) == [
        "", "apps/server", "apps/web", "docs", "libs/core", "libs/rb", "tools/x"]


def test_a_scope_names_its_repository_where_several_are_configured() -> None:
    assert parse_scope("apps/server/", ["mono"]) == Scope("mono", "apps/server")
    assert parse_scope("./apps//server", ["mono"]) == Scope("mono", "apps/server")
    assert parse_scope("mono:apps/server", ["mono"]) == Scope("mono", "apps/server")
    assert parse_scope("web:.", ["mono", "web"]) == Scope("web", "")
    assert parse_scope("", ["mono"]) is None and parse_scope(None, ["mono"]) is None
    with pytest.raises(Invalid, match="several are configured: write NAME:apps/server with NAME one of mono, web"):
        parse_scope("apps/server", ["web", "mono"])
    with pytest.raises(Invalid, match="no configured repository 'api'"):
        parse_scope("api:src", ["mono"])
    with pytest.raises(Invalid, match="climbs out"):
        parse_scope("../etc", ["mono"])


@pytest.mark.parametrize(("entry", "work", "served"), [
    ("apps/server", "apps/server/prisma", True),      # an entry on a module serves work inside it
    ("apps/server/prisma", "apps/server", True),      # and the reverse
    ("apps/server", "apps/server", True),
    ("apps/server", "apps/serverless", False),        # whole folder names, not prefixes of them
    ("apps/server", "apps/web", False),
    (".", "apps/web", True),                          # the top holds everything
    (None, "apps/web", True),                         # no scope: every query
    ("apps/server", None, True),                      # no work area: every entry
])
def test_scope_matches_either_way(entry: str | None, work: str | None, served: bool) -> None:
    e, w = parse_scope(entry, ["mono"]), parse_scope(work, ["mono"])
    assert scope_matches(e, w) is served


def test_scopes_of_other_repositories_never_match() -> None:
    names = ["mono", "web"]
    assert not scope_matches(parse_scope("mono:src", names), parse_scope("web:src", names))
    assert scope_matches(parse_scope("web:.", names), parse_scope("web:src/x", names))


def test_the_modules_a_scope_reaches() -> None:
    modules = {"mono": ["", "apps/server", "apps/web", "libs/core"], "web": ["", "packages/ui"]}
    names = list(modules)

    def reached(text: str | None) -> list[tuple[str, str]]:
        return modules_reached(parse_scope(text, names), modules)

    assert reached("mono:apps") == [("mono", "apps/server"), ("mono", "apps/web")]
    assert reached("mono:apps/server/prisma") == [("mono", "apps/server")]   # the module it lies in
    assert reached("mono:docs") == [("mono", "")]
    assert len(reached("mono:.")) == 4
    assert len(reached(None)) == 6


def test_repositories_find_modules_at_the_branch_head(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "mono")
    g.write("apps/server/package.json", "{}")
    g.write("apps/server/prisma/schema.prisma", "model X {}")
    g.write("apps/web/package.json", "{}")
    g.write("README.md", "mono")
    first = g.commit()
    g.write("libs/core/pyproject.toml", "[project]\nname='core'\n")
    g.commit()
    with Repositories({"mono": Repository("mono", g.path)}, listed={"mono": ["docs"]}) as repos:
        assert repos.modules("mono") == ["apps/server", "apps/web", "docs", "libs/core"]
        assert repos.modules("mono", first) == ["apps/server", "apps/web", "docs"]
        assert repos.reached(repos.scope("apps")) == [("mono", "apps/server"), ("mono", "apps/web")]
        assert repos.reached(repos.scope("apps/server/prisma")) == [("mono", "apps/server")]
        assert len(repos.reached(None)) == 4
        with pytest.raises(NotFound, match="no commit abababa"):
            repos.modules("mono", "abababa")
