"""core/repos/citations.py: a citation checked at write against a real git repository."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_repos_support import GitRepo, numbered

from core.errors import Refused
from core.repos import (FAILS, HOLDS, MAX_CITATIONS, NOT_READ_YET, Repositories, Repository, check_citations,
                        first_failure)


@pytest.fixture
def world(tmp_path: Path) -> tuple[Repositories, str, GitRepo]:
    g = GitRepo(tmp_path / "server")
    g.write("src/app.py", "def handler(request):\n    return   respond(\n        request.user)\n" + numbered(7))
    g.write("win.txt", "first line\r\nsecond   line\r\nthird\r\n")
    g.write("empty.txt", "")
    g.write("logo.png", b"\x89PNG\r\n\x1a\n\0\0\0binary")
    g.write("no_newline.txt", "one\ntwo")
    sha = g.commit("first")
    repos = Repositories({"server": Repository("server", g.path)})
    yield repos, sha, g
    repos.close()


def cite(sha: str, path: str = "src/app.py", lines: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    return {"repository": "server", "path": path, "lines": lines or [1, 3], "commit": sha, **extra}


def one(repos: Repositories, citation: Any) -> Any:
    checks = check_citations([citation], repos)
    assert len(checks) == 1
    assert "\n" not in checks[0].message
    return checks[0]


def test_a_citation_that_holds_names_its_blob(world: tuple[Repositories, str, GitRepo]) -> None:
    repos, sha, g = world
    c = one(repos, cite(sha, quote="return respond( request.user)"))   # whitespace folded
    assert c.outcome == HOLDS and c.commit == sha
    assert c.blob == g.git("rev-parse", f"{sha}:src/app.py").strip()
    assert one(repos, cite(sha[:8], lines=[10, 10])).outcome == HOLDS      # the last line; short id


@pytest.mark.parametrize(("citation", "said"), [
    (lambda s: cite("ab" * 20), "commit abababa"),
    (lambda s: cite(s, path="src/none.py"), "no file src/none.py"),
    (lambda s: cite(s, lines=[9, 11]), "lines 9-11 run past the end of src/app.py (10 lines"),
    (lambda s: cite(s, path="empty.txt", lines=[1, 1]), "(0 lines"),
    (lambda s: cite(s, path="no_newline.txt", lines=[3, 3]), "(2 lines"),
    (lambda s: cite(s, quote="line 5"), "the quote is not in lines 1-3"),
    (lambda s: cite(s, path="logo.png", lines=[1, 1]), "is binary"),
])
def test_each_failure_names_the_citation_and_what_failed(world: tuple[Repositories, str, GitRepo],
                                                          citation: Any, said: str) -> None:
    repos, sha, _ = world
    c = one(repos, citation(sha))
    assert c.outcome == FAILS
    assert c.message.startswith("citation 1 (")
    assert said in c.message


def test_a_quote_in_a_crlf_file_and_the_last_line_without_newline(world: tuple[Repositories, str, GitRepo]) -> None:
    repos, sha, _ = world
    assert one(repos, cite(sha, path="win.txt", lines=[1, 2], quote="line second line")).outcome == HOLDS
    assert one(repos, cite(sha, path="no_newline.txt", lines=[2, 2], quote="two")).outcome == HOLDS
    assert one(repos, cite(sha, path="win.txt", lines=[3, 3], quote="second")).outcome == FAILS


def test_the_failing_one_is_named_among_several(world: tuple[Repositories, str, GitRepo]) -> None:
    repos, sha, _ = world
    checks = check_citations([cite(sha), {"link": "acme/server#12", "kind": "issue"},
                              cite(sha, path="src/gone.py")], repos)
    assert [c.outcome for c in checks] == [HOLDS, HOLDS, FAILS]
    failed = first_failure(checks)
    assert failed is not None and failed.index == 3
    assert failed.message.startswith("citation 3 (src/gone.py): no file")


def test_more_than_ten_is_refused_naming_the_bound(world: tuple[Repositories, str, GitRepo]) -> None:
    repos, sha, _ = world
    assert len(check_citations([cite(sha)] * MAX_CITATIONS, repos)) == MAX_CITATIONS
    with pytest.raises(Refused, match="11 citations; an entry cites at most 10"):
        check_citations([cite(sha)] * (MAX_CITATIONS + 1), repos)
    with pytest.raises(Refused, match="must be a list"):
        check_citations({"path": "x"}, repos)


@pytest.mark.parametrize(("citation", "said"), [
    ({"repository": "web", "path": "a", "lines": [1, 1], "commit": "a" * 40}, "no configured repository 'web'"),
    ({"repository": "server", "path": "a", "lines": [2, 1], "commit": "a" * 40}, "start <= end"),
    ({"repository": "server", "path": "a", "lines": [0, 1], "commit": "a" * 40}, "1-based"),
    ({"repository": "server", "path": "a", "lines": [1, True], "commit": "a" * 40}, "lines must be"),
    ({"repository": "server", "path": "a", "lines": "1-2", "commit": "a" * 40}, "lines must be"),
    ({"repository": "server", "path": "../etc/passwd", "lines": [1, 1], "commit": "a" * 40}, "without '..'"),
    ({"repository": "server", "path": "a", "lines": [1, 1], "commit": "main"}, "commit must be a commit id"),
    ({"repository": "server", "path": "a", "lines": [1, 1]}, "lacks commit"),
    ({"repository": "server", "path": "a", "lines": [1, 1], "commit": "a" * 40, "quote": "  "}, "quote"),
    ({"repository": "server", "path": "a", "lines": [1, 1], "commit": "a" * 40, "why": 1}, "not why"),
    ("src/app.py:1", "is not an object"),
    ({"link": "https://", "kind": "issue"}, "http(s) URL with a host"),
    ({"link": "ftp://x.org/1", "kind": "issue"}, "http(s) URL"),
    ({"link": "two words", "kind": "issue"}, "no spaces"),
    ({"link": "#12", "kind": "bug"}, "kind must be one of issue, pull_request, comment, run"),
    ({"link": "#12", "kind": "run", "external": "yes"}, "external must be true or false"),
    ({"link": "#12", "kind": "run", "path": "x"}, "not path"),
])
def test_shapes_are_checked_with_the_fix(world: tuple[Repositories, str, GitRepo], citation: Any,
                                         said: str) -> None:
    repos, _, _ = world
    c = one(repos, citation)
    assert c.outcome == FAILS and said in c.message and c.message.startswith("citation 1")


@pytest.mark.parametrize("link", ["https://github.com/acme/server/issues/12", "acme/server#12", "#7",
                                  "PROJ-123", "run:8812"])
def test_links_that_hold(world: tuple[Repositories, str, GitRepo], link: str) -> None:
    repos, _, _ = world
    c = one(repos, {"link": link, "kind": "issue", "external": True})
    assert c.outcome == HOLDS and c.citation.external is True


def test_a_repository_that_cannot_be_read_is_not_read_yet(tmp_path: Path) -> None:
    repos = Repositories({"server": Repository("server", tmp_path / "not-cloned-yet")})
    c = one(repos, {"repository": "server", "path": "a.py", "lines": [1, 1], "commit": "a" * 40})
    assert c.outcome == NOT_READ_YET and not c.holds
    assert c.message.startswith("citation 1 (a.py): not read yet")
    repos.close()


def test_an_entrys_citations_are_read_together(world: tuple[Repositories, str, GitRepo]) -> None:
    repos, sha, _ = world
    reader = repos["server"].reader
    trips = reader.round_trips
    checks = check_citations([cite(sha), cite(sha, path="win.txt", lines=[1, 1]), cite("ab" * 20),
                              cite(sha, lines=[2, 2], quote="respond")], repos)
    assert [c.outcome for c in checks] == [HOLDS, HOLDS, FAILS, HOLDS]
    assert reader.round_trips - trips == 2          # the commits at once, then the files at once
