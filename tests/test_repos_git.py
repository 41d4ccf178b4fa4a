"""core/repos: a Repository read through its one cat-file process, over real git repositories."""
from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from test_repos_support import GitRepo, numbered

from core.repos import Repository, Unreadable
from core.repos.diff import parse_patch


@pytest.fixture
def made(tmp_path: Path) -> tuple[GitRepo, str]:
    g = GitRepo(tmp_path / "r", branch="trunk")
    g.write("src/app.py", numbered(20))
    g.write("README.md", "hello\n")
    return g, g.commit("first")


def test_default_branch_is_what_head_is_on(made: tuple[GitRepo, str]) -> None:
    g, sha = made
    with Repository("r", g.path) as repo:
        assert repo.default_branch == "trunk"
        assert repo.head() == sha
    g.git("branch", "release")
    with Repository("r", g.path, default_branch="release") as repo:
        assert repo.default_branch == "release"
        assert repo.head() == sha


def test_blob_read_and_id_agree_with_git(made: tuple[GitRepo, str]) -> None:
    g, sha = made
    with Repository("r", g.path) as repo:
        blob, data = repo.read(sha, "src/app.py")  # type: ignore[misc]
        assert data == numbered(20).encode()
        assert blob == g.git("rev-parse", f"{sha}:src/app.py").strip()
        assert repo.blob_id(sha, "src/app.py") == blob
        assert repo.read_blob(blob) == data
        assert repo.read(sha, "src/none.py") is None
        assert repo.blob_id(sha, "src") is None          # a folder is no blob
        assert repo.is_folder(sha, "src") and not repo.is_folder(sha, "README.md")
        assert repo.commit(sha[:9]) == sha               # an abbreviated id names the commit
        assert repo.commit("0" * 40) is None
        assert repo.commit(blob) is None                  # a blob is no commit
        assert repo.files(sha) == ["README.md", "src/app.py"]


def test_a_path_that_is_no_repository_cannot_be_read_yet(tmp_path: Path) -> None:
    with Repository("gone", tmp_path / "nowhere") as repo:
        with pytest.raises(Unreadable, match="'gone': no folder"):
            repo.commit("HEAD")
        with pytest.raises(Unreadable):
            _ = repo.default_branch
    (tmp_path / "plain").mkdir()
    with Repository("plain", tmp_path / "plain") as repo:
        with pytest.raises(Unreadable, match="not a git repository"):
            repo.commit("HEAD")


def test_a_killed_cat_file_is_started_again(made: tuple[GitRepo, str]) -> None:
    g, sha = made
    with Repository("r", g.path) as repo:
        assert repo.blob_id(sha, "README.md")
        pid = repo.reader.pid
        assert pid is not None and repo.reader.starts == 1
        os.kill(pid, signal.SIGKILL)
        # the next read finds the pipe broken or the process gone, starts a new one, and answers
        got = repo.read(sha, "README.md")
        assert got is not None and got[1] == b"hello\n"
        assert repo.reader.starts == 2 and repo.reader.pid not in (None, pid)


def test_close_ends_the_process_and_a_later_read_starts_one(made: tuple[GitRepo, str]) -> None:
    g, sha = made
    repo = Repository("r", g.path)
    assert repo.blob_id(sha, "README.md")
    proc = repo.reader._proc
    assert proc is not None
    repo.close()
    assert proc.returncode is not None                  # waited for, not left behind
    assert repo.reader.pid is None
    assert repo.blob_id(sha, "README.md")
    assert repo.reader.starts == 2
    repo.close()


def test_threads_share_one_process(made: tuple[GitRepo, str]) -> None:
    g, _ = made
    for i in range(30):
        g.write(f"f/{i}.txt", f"content {i}\n" * (i + 1))
    sha = g.commit("many")
    errors: list[str] = []
    with Repository("r", g.path) as repo:
        def reader(k: int) -> None:
            for n in range(100):
                i = (n * 7 + k) % 30
                got = repo.read(sha, f"f/{i}.txt")
                if got is None or got[1] != (f"content {i}\n" * (i + 1)).encode():
                    errors.append(f"thread {k} read {i} wrong")
        threads = [threading.Thread(target=reader, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert repo.reader.starts == 1
    assert errors == []


def test_changed_files_names_each_kind_of_change(made: tuple[GitRepo, str]) -> None:
    g, first = made
    g.write("src/app.py", "top\n" + numbered(20))
    g.write("new.txt", "new\n")
    g.remove("README.md")
    g.write("lib/big.py", numbered(50, "big"))
    mid = g.commit("second")
    g.move("lib/big.py", "lib/moved.py")
    last = g.commit("third")
    with Repository("r", g.path) as repo:
        changes = repo.changed_files(first, mid)
        assert {p: c.status for p, c in changes.items()} == {
            "src/app.py": "M", "new.txt": "A", "README.md": "D", "lib/big.py": "A"}
        renamed = repo.changed_files(mid, last)["lib/big.py"]
        assert (renamed.status, renamed.new_path) == ("R", "lib/moved.py")


def test_patches_read_paths_git_quotes(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "q")
    names = ["dir/a b.txt", 'we"ird.txt', "ünï.txt", "tab\there.txt"]
    for n in names:
        g.write(n, numbered(5))
    first = g.commit()
    for n in names:
        g.write(n, "zero\n" + numbered(5))
    second = g.commit()
    with Repository("q", g.path) as repo:
        patches = repo.patches(first, second, [(n, n) for n in names])
    assert sorted(p.old_path for p in patches) == sorted(names)  # type: ignore[type-var]
    for p in patches:
        assert p.new_path == p.old_path
        assert [(h.old_start, h.old_count, h.new_start, h.new_count) for h in p.hunks] == [(0, 0, 1, 1)]


def test_a_binary_patch_is_marked() -> None:
    raw = (b"diff --git a/x.bin b/x.bin\nindex 1..2 100644\nBinary files a/x.bin and b/x.bin differ\n"
           b"diff --git a/y b/z\nsimilarity index 100%\nrename from y\nrename to z\n")
    x, yz = parse_patch(raw)
    assert x.binary and not x.hunks and x.old_path == x.new_path == "x.bin"
    assert (yz.old_path, yz.new_path, yz.hunks) == ("y", "z", [])


def test_a_blob_at_the_head_changed_since_the_one_checked(made: tuple[GitRepo, str]) -> None:
    g, first = made
    with Repository("r", g.path) as repo:
        checked = repo.blob_id(first, "src/app.py")
        assert checked is not None
        assert not repo.head_blob_changed("src/app.py", checked)
        g.write("README.md", "other\n")
        g.commit()
        assert not repo.head_blob_changed("src/app.py", checked)     # another file's commit
        g.write("src/app.py", "x\n")
        g.commit()
        assert repo.head_blob_changed("src/app.py", checked)
        g.remove("src/app.py")
        g.commit()
        assert repo.head_blob_changed("src/app.py", checked)         # gone counts as changed
        readme = repo.blob_id(repo.head(), "README.md")
        assert readme is not None
        assert repo.changed_at_head({"src/app.py": checked, "README.md": readme}) == {"src/app.py"}


def test_paths_with_spaces_and_quotes_read_through_cat_file(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "s")
    g.write("dir/a b.txt", "spaced\n")
    g.write('we"ird\tname.txt', "odd\n")
    sha = g.commit()
    with Repository("s", g.path) as repo:
        assert repo.read(sha, "dir/a b.txt")[1] == b"spaced\n"  # type: ignore[index]
        assert repo.read(sha, 'we"ird\tname.txt')[1] == b"odd\n"  # type: ignore[index]
        assert repo.read(sha, "dir/a b.txt missing") is None
        assert repo.read(sha, "two\nlines") is None             # cannot be asked on a line: no file


def test_many_reads_asked_at_once_come_back_in_order(tmp_path: Path) -> None:
    """More requests than one pipelined write holds, blobs larger than a pipe, missing names among them:
    every answer in its place, no wait on a full pipe."""
    g = GitRepo(tmp_path / "m")
    for i in range(40):
        g.write(f"big/{i}.txt", f"{i}\n" * (40_000 + i))           # ~120-200 kB each
    sha = g.commit()
    names = [f"big/{i % 40}.txt" if i % 7 else f"missing/{i}.txt" for i in range(1200)]
    with Repository("m", g.path) as repo:
        got = repo.read_many([(sha, n) for n in names[:200]])
        for n, answer in zip(names[:200], got):
            if n.startswith("missing"):
                assert answer is None
            else:
                i = int(n.split("/")[1].split(".")[0])
                assert answer is not None and answer[1] == f"{i}\n".encode() * (40_000 + i)
        ids = repo.blob_ids([(sha, "x" * 40 + n) for n in names] + [(sha, "big/3.txt")])
        assert ids[:-1] == [None] * len(names) and ids[-1] == repo.blob_id(sha, "big/3.txt")
        assert repo.reader.round_trips >= 3          # 1,200 long names do not fit one write
        assert repo.reader.starts == 1


def test_the_git_on_path_is_new_enough_for_batch_command() -> None:
    from core.repos.git import MIN_GIT, git_version
    assert git_version() >= MIN_GIT, "core/repos reads through `git cat-file --batch-command` (git 2.36)"


def test_patches_in_batches_keep_a_rename_together(tmp_path: Path) -> None:
    """More files than one git call takes, and a rename whose two paths sort far apart: every file's hunks
    come back, and the rename is paired (its hunks, not a deletion of every line)."""
    g = GitRepo(tmp_path / "b")
    for i in range(450):
        g.write(f"m/{i:03}.txt", numbered(10, f"m{i}"))
    g.write("a/first.txt", numbered(30, "moved"))
    first = g.commit()
    for i in range(450):
        g.write(f"m/{i:03}.txt", "top\n" + numbered(10, f"m{i}"))
    g.move("a/first.txt", "z/last.txt")
    g.write("z/last.txt", "head\n" + numbered(30, "moved"))
    second = g.commit()
    with Repository("b", g.path) as repo:
        changes = repo.changed_files(first, second)
        pairs = [(p, c.new_path or p) for p, c in changes.items()]
        calls = repo.git_calls
        patches = {p.old_path: p for p in repo.patches(first, second, pairs)}
        assert repo.git_calls - calls >= 2
    assert len(patches) == 451
    renamed = patches["a/first.txt"]
    assert renamed.new_path == "z/last.txt"
    assert [(h.old_start, h.old_count, h.new_start, h.new_count) for h in renamed.hunks] == [(0, 0, 1, 1)]


def test_a_path_inside_a_checkout_reads_the_whole_repository(made: tuple[GitRepo, str]) -> None:
    """A repository configured at a folder inside its checkout: paths still count from the top."""
    g, first = made
    g.git("config", "diff.relative", "true")
    g.write("src/app.py", "top\n" + numbered(20))
    second = g.commit()
    with Repository("r", g.path / "src") as repo:
        assert repo.files(first) == ["README.md", "src/app.py"]
        assert list(repo.changed_files(first, second)) == ["src/app.py"]
        (patch,) = repo.patches(first, second, [("src/app.py", "src/app.py")])
        assert patch.old_path == "src/app.py"
        assert repo.read(second, "src/app.py") is not None


def test_a_cat_file_that_stops_answering_is_not_waited_on_for_ever(made: tuple[GitRepo, str]) -> None:
    """A stopped cat-file (SIGSTOP: a real process that no longer answers, as on a stuck disk): the read
    ends as "not read yet" after the reader's deadline, the process is killed, the next read starts anew."""
    g, sha = made
    with Repository("r", g.path, read_timeout_s=0.5) as repo:
        assert repo.blob_id(sha, "README.md")
        proc = repo.reader._proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(Unreadable, match="gave no answer in 0.5 s"):
                repo.read(sha, "README.md")
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
        assert proc.returncode is not None             # killed and reaped, not left stopped
        repo.reader.timeout_s = 60.0                   # a new process on a busy machine: no race with it
        got = repo.read(sha, "README.md")
        assert got is not None and got[1] == b"hello\n"
        assert repo.reader.starts == 2
