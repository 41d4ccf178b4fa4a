"""core/repos/anchor.py: citations carried across real commits that move, rewrite, rename and delete the
code they cite."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_repos_support import GitRepo, numbered

from core.repos import (CHANGED, GONE, HELD, HOLDS, MOVED, NOT_READ_YET, SHIFTED, CodeCitation, Repositories,
                        Repository, check_code, recheck, recheck_all)


@pytest.fixture
def g(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "server")


def at(sha: str, start: int, end: int, path: str = "app.py", quote: str | None = None) -> CodeCitation:
    return CodeCitation("server", path, start, end, sha, quote)


def carry(g: GitRepo, *cits: CodeCitation, new: str | None = None) -> list:
    with Repository("server", g.path) as repo:
        anchors = recheck(repo, list(cits), new)
        for a in anchors:
            assert "\n" not in a.reason
            if a.holds:  # a citation that holds at the new commit passes the write check there
                moved = a.moved_citation()
                assert moved is not None
                assert check_code(1, moved, repo).outcome == HOLDS, a
        return anchors


def lines(n: int) -> list[str]:
    return [f"line {i}" for i in range(1, n + 1)]


def text(ls: list[str]) -> str:
    return "".join(f"{x}\n" for x in ls)


def test_a_file_the_jump_did_not_touch_is_held(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    g.write("other.py", "x\n")
    a = g.commit()
    g.write("other.py", "y\n")
    b = g.commit()
    (anchor,) = carry(g, at(a, 10, 12, quote="line 11"))
    assert (anchor.outcome, anchor.path, anchor.start, anchor.end, anchor.commit) == (HELD, "app.py", 10, 12, b)
    assert anchor.blob == g.git("rev-parse", f"{b}:app.py").strip()


def test_lines_inserted_or_removed_above_shift_the_range(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    a = g.commit()
    ls = lines(40)
    g.write("app.py", text(["new 1", "new 2", "new 3"] + ls[:4] + ls[6:]))   # +3 at top, lines 5-6 gone
    g.commit()
    g.write("app.py", text(["new 1", "new 2", "new 3"] + ls[:4] + ls[6:35] + ["tail"]))  # edits below
    g.commit()
    anchors = carry(g, at(a, 10, 12, quote="line 12"), at(a, 1, 2), at(a, 36, 40))
    assert [(x.outcome, x.start, x.end) for x in anchors[:2]] == [(SHIFTED, 11, 13), (SHIFTED, 4, 5)]
    assert anchors[2].outcome in (CHANGED,)  # its lines were deleted: not found anywhere
    assert anchors[2].old_text == "\n".join(ls[35:40])


def test_an_edit_below_leaves_the_lines_held(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    a = g.commit()
    g.write("app.py", numbered(30) + "changed\n")
    g.commit()
    (anchor,) = carry(g, at(a, 5, 8))
    assert (anchor.outcome, anchor.start, anchor.end) == (HELD, 5, 8)


def test_rewritten_lines_are_changed_with_old_and_new_text(g: GitRepo) -> None:
    g.write("app.py", numbered(20))
    a = g.commit()
    ls = lines(20)
    ls[10] = "line 11 rewritten"
    g.write("app.py", text(ls))
    g.commit()
    (anchor,) = carry(g, at(a, 10, 12))
    assert anchor.outcome == CHANGED and not anchor.holds
    assert anchor.old_text == "line 10\nline 11\nline 12"
    assert anchor.new_text == "line 10\nline 11 rewritten\nline 12"
    assert (anchor.start, anchor.end) == (10, 12)
    assert "rewrote lines 10-12" in anchor.reason


def test_a_line_inserted_inside_the_range_touches_it(g: GitRepo) -> None:
    g.write("app.py", numbered(20))
    a = g.commit()
    ls = lines(20)
    g.write("app.py", text(ls[:10] + ["inserted"] + ls[10:]))
    g.commit()
    plain, quoted = carry(g, at(a, 10, 12), at(a, 10, 12, quote="line 12"))
    assert plain.outcome == CHANGED
    assert quoted.outcome == MOVED and (quoted.start, quoted.end) == (10, 13)   # the quote still inside


def test_cut_and_pasted_lines_are_found_where_they_moved(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    a = g.commit()
    ls = lines(40)
    block = ls[9:12]
    rest = ls[:9] + ls[12:]
    g.write("app.py", text(["header"] + rest[:25] + ["    " + block[0], block[1] + "   ", block[2]] + rest[25:]))
    b = g.commit()
    (anchor,) = carry(g, at(a, 10, 12, quote="line 11"))
    assert anchor.outcome == MOVED and anchor.holds
    assert (anchor.start, anchor.end) == (27, 29)
    assert anchor.moved_citation() == CodeCitation("server", "app.py", 27, 29, b, "line 11")


def test_a_block_found_twice_is_not_guessed(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    a = g.commit()
    ls = lines(40)
    block = ls[9:12]
    rest = ls[:9] + ls[12:]
    g.write("app.py", text(rest[:20] + block + rest[20:30] + block + rest[30:]))
    g.commit()
    plain, quoted = carry(g, at(a, 10, 12), at(a, 10, 12, quote="line 11"))
    assert plain.outcome == CHANGED and "appear more than once" in plain.reason
    assert quoted.outcome == CHANGED and "quote appears more than once" in quoted.reason


def test_a_quote_moved_alone_is_followed(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    a = g.commit()
    ls = lines(40)
    g.write("app.py", text(ls[:9] + ["rewritten a", "rewritten b"] + ls[12:30] + ["x = line 11 # kept"] + ls[30:]))
    g.commit()
    (anchor,) = carry(g, at(a, 10, 12, quote="line 11"))
    assert anchor.outcome == MOVED and (anchor.start, anchor.end) == (30, 30)


def test_a_renamed_file_is_followed(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    g.write("util.py", numbered(40, "util"))
    a = g.commit()
    g.move("app.py", "src/server/app.py")
    g.move("util.py", "src/util.py")
    g.commit()
    g.write("src/util.py", "import os\n" + numbered(40, "util"))
    g.commit()
    same, shifted = carry(g, at(a, 3, 4), at(a, 3, 4, path="util.py", quote="util 4"))
    assert (same.outcome, same.path, same.followed_from, same.start) == (HELD, "src/server/app.py", "app.py", 3)
    assert (shifted.outcome, shifted.path, shifted.followed_from, shifted.start, shifted.end) == (
        SHIFTED, "src/util.py", "util.py", 4, 5)


def test_a_deleted_file_is_gone(g: GitRepo) -> None:
    g.write("app.py", numbered(10))
    g.write("keep.py", "k\n")
    a = g.commit()
    g.remove("app.py")
    b = g.commit()
    (anchor,) = carry(g, at(a, 2, 3))
    assert anchor.outcome == GONE and anchor.path is None and anchor.commit == b
    assert anchor.old_text == "line 2\nline 3"


def test_crlf_lines_shift_and_reindent(g: GitRepo) -> None:
    g.write("win.txt", "".join(f"row {i}\r\n" for i in range(1, 21)))
    a = g.commit()
    rows = [f"row {i}\r\n" for i in range(1, 21)]
    rows[14] = "    row 15   \r\n"                      # the same words, other whitespace
    g.write("win.txt", "top\r\n" + "".join(rows))
    g.commit()
    shifted, reindented = carry(g, at(a, 5, 6, "win.txt", "row 6"), at(a, 15, 15, "win.txt", "row 15"))
    assert (shifted.outcome, shifted.start, shifted.end) == (SHIFTED, 6, 7)
    assert (reindented.outcome, reindented.start, reindented.end) == (MOVED, 16, 16)
    assert "found again in place" in reindented.reason


def test_a_file_turned_binary_is_changed(g: GitRepo) -> None:
    g.write("app.py", numbered(10))
    a = g.commit()
    g.write("app.py", b"\0\1\2" * 50)
    g.commit()
    (anchor,) = carry(g, at(a, 2, 3))
    assert anchor.outcome == CHANGED and "binary" in anchor.reason


def test_a_commit_the_repository_no_longer_holds(g: GitRepo) -> None:
    g.write("app.py", numbered(10))
    g.commit()
    (anchor,) = carry(g, at("ab" * 20, 2, 3))
    assert anchor.outcome == CHANGED and "no longer in repository" in anchor.reason


def test_an_unreadable_repository_is_not_read_yet(tmp_path: Path) -> None:
    with Repositories({"server": Repository("server", tmp_path / "nowhere")}) as repos:
        (anchor,) = recheck_all(repos, [at("ab" * 20, 1, 1)])
    assert anchor.outcome == NOT_READ_YET and "no folder" in anchor.reason
    (other,) = recheck_all({}, [at("ab" * 20, 1, 1)])
    assert other.outcome == NOT_READ_YET and "not configured" in other.reason


def test_many_citations_of_several_commits_keep_their_order(g: GitRepo) -> None:
    g.write("app.py", numbered(40))
    a = g.commit()
    g.write("app.py", "top\n" + numbered(40))
    b = g.commit()
    g.write("app.py", "top\ntop\n" + numbered(40))
    c = g.commit()
    anchors = carry(g, at(a, 1, 1), at(b, 2, 2), at(c, 3, 3), at(a, 40, 40), at(b, 1, 1), new=b)
    assert [(x.outcome, x.start) for x in anchors] == [
        (SHIFTED, 2), (HELD, 2), (SHIFTED, 2), (SHIFTED, 41), (HELD, 1)]   # c's line 3 carried back to b


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_every_surviving_line_lands_where_it_went(g: GitRepo, seed: int) -> None:
    """Random inserts, deletes and rewrites over several commits, every line text unique: the lines that
    survive are the one longest common subsequence, so git's diff must leave exactly them untouched, and
    each must land where the edits took it; a range with something inserted inside is changed."""
    rng = random.Random(seed)
    fresh = iter(range(10_000))
    current = [("orig", i) for i in range(120)]       # (origin, old line index) survivors; ("new", k) others
    g.write("app.py", "".join(f"{o}-{i}\n" for o, i in current))
    a = g.commit()
    for _ in range(4):
        for _ in range(rng.randint(3, 12)):
            op, k = rng.random(), rng.randrange(len(current) + 1)
            if op < 0.45:
                current[k:k] = [("new", next(fresh)) for _ in range(rng.randint(1, 4))]
            elif op < 0.75 and k < len(current):
                del current[k:k + rng.randint(1, 3)]
            elif k < len(current):
                current[k] = ("new", next(fresh))
        g.write("app.py", "".join(f"{o}-{i}\n" for o, i in current))
        g.commit()
    where = {i: n + 1 for n, (o, i) in enumerate(current) if o == "orig"}
    singles = [at(a, i + 1, i + 1) for i in range(120)]
    triples = [at(a, i + 1, i + 3) for i in range(0, 117)]
    anchors = carry(g, *singles, *triples)
    for i, anchor in enumerate(anchors[:120]):
        if i in where:
            assert anchor.outcome in (HELD, SHIFTED) and anchor.start == anchor.end == where[i], (i, anchor)
        else:
            assert anchor.outcome == CHANGED, (i, anchor)
    for i, anchor in enumerate(anchors[120:]):
        kept = [where.get(j) for j in (i, i + 1, i + 2)]
        if None not in kept and kept == list(range(kept[0], kept[0] + 3)):  # type: ignore[operator]
            assert anchor.outcome in (HELD, SHIFTED) and (anchor.start, anchor.end) == (kept[0], kept[2])
        else:
            assert anchor.outcome == CHANGED, (i, anchor, kept)


def test_a_block_is_matched_as_whole_lines_only(g: GitRepo) -> None:
    g.write("app.py", "def total(x):\n    return total\n\ndef taxed(x):\n    return other\n")
    a = g.commit()
    g.write("app.py", "def total(x):\n    return x.sum()\n\ndef taxed(x):\n    return total + tax\n")
    g.commit()
    (anchor,) = carry(g, at(a, 2, 2))       # "return total" now only as the head of a longer line
    assert anchor.outcome == CHANGED and anchor.new_text == "    return x.sum()"


def test_a_citation_of_a_file_its_commit_never_held_is_gone(g: GitRepo) -> None:
    g.write("app.py", numbered(5))
    a = g.commit()
    (anchor,) = carry(g, at(a, 1, 1, path="never.py"))
    assert anchor.outcome == GONE and "no file never.py" in anchor.reason


def test_the_cost_follows_files_not_citations(g: GitRepo) -> None:
    """60 citations of 6 files, every file edited: two git diffs for the jump (which files, their hunks),
    each file's blob read once at each commit however many of its citations were rewritten, and the reads
    asked of cat-file together."""
    for f in range(6):
        g.write(f"f{f}.py", numbered(40, f"f{f}"))
    a = g.commit()
    for f in range(6):
        body = [f"f{f} {i}" for i in range(1, 41)]
        body[0] = "rewritten"                                          # line 1 of each file rewritten
        g.write(f"f{f}.py", text(["top"] + body))
    b = g.commit()
    # half cite the commit by its full id, half by an abbreviated one: one jump all the same
    cits = [at(a if k < 30 else a[:10], 1 + (k % 2) * 10, 1 + (k % 2) * 10, path=f"f{k % 6}.py")
            for k in range(60)]
    with Repository("server", g.path) as repo:
        head = repo.head()
        calls, asked, trips = repo.git_calls, repo.reader.requests, repo.reader.round_trips
        anchors = recheck(repo, cits, head)
        assert repo.git_calls - calls == 2
        # the target resolved, the old commit resolved, per file: old and new blob read, new blob id
        assert repo.reader.requests - asked <= 2 + 6 * 3
        # and those reads asked at once: the two commits, the blobs read, the blob ids
        assert repo.reader.round_trips - trips <= 4
    assert head == b
    assert {x.outcome for x in anchors[0::2]} == {CHANGED} and {x.outcome for x in anchors[1::2]} == {SHIFTED}


def test_a_recheck_after_cat_file_was_killed_starts_it_again(g: GitRepo) -> None:
    import os
    import signal
    g.write("app.py", numbered(20))
    a = g.commit()
    g.write("app.py", "top\n" + numbered(20))
    g.commit()
    with Repository("server", g.path) as repo:
        assert repo.commit(a) == a
        pid = repo.reader.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        (anchor,) = recheck(repo, [at(a, 3, 4)])
        assert (anchor.outcome, anchor.start, anchor.end) == (SHIFTED, 4, 5)
        assert repo.reader.starts == 2


def test_a_users_git_settings_do_not_change_what_is_read(g: GitRepo) -> None:
    """A repository whose own config asks for colour, no prefixes, mnemonic prefixes, an external diff and
    a textconv driver: the hunks read are git's plain ones all the same."""
    for key, value in [("color.ui", "always"), ("color.diff", "always"), ("diff.noprefix", "true"),
                       ("diff.mnemonicPrefix", "true"), ("diff.external", "false"), ("core.pager", "less"),
                       ("diff.py.textconv", "tac"), ("core.quotepath", "true")]:
        g.git("config", key, value)
    g.write(".gitattributes", "*.py diff=py\n")
    g.write("ünï.py", numbered(20))
    a = g.commit()
    g.write("ünï.py", "top\n" + numbered(20))
    g.commit()
    (anchor,) = carry(g, at(a, 3, 4, path="ünï.py", quote="line 4"))
    assert (anchor.outcome, anchor.start, anchor.end) == (SHIFTED, 4, 5)
