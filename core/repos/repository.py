"""A configured repository: a local git checkout read through its one cat-file process and a few git calls.

Nothing here writes to the repository or moves its HEAD; every read names a commit, so what a citation
says can be checked again later against the same bytes.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from pathlib import Path

from core.repos.diff import Change, FilePatch, parse_name_status, parse_patch
from core.repos.git import READ_TIMEOUT_S, CatFile, Unreadable, run_git

SHA = re.compile(r"[0-9a-f]{7,64}")
_PATHSPEC_BATCH = 400  # paths per `git diff` call: one process for many files, argument lists kept short


class Repository:
    """`Repository(name, path, default_branch=None)`: the default branch is what HEAD is on, asked
    the first time it is needed (so a repository that cannot be read yet can still be configured)."""

    def __init__(self, name: str, path: str | Path, default_branch: str | None = None, *,
                 read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.name = name
        self.path = Path(path).expanduser()
        self._branch = default_branch
        self._cat = CatFile(self.path, name, read_timeout_s)
        self._lock = threading.Lock()
        self._trees: dict[str, list[str]] = {}
        self.git_calls = 0  # git processes run besides cat-file (what a pass cost shows here)

    def __repr__(self) -> str:
        return f"Repository({self.name!r}, {str(self.path)!r})"

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._cat.close()

    @property
    def reader(self) -> CatFile:
        return self._cat

    def git(self, *args: str, ok_codes: tuple[int, ...] = (0,)) -> bytes:
        self.git_calls += 1
        return run_git(self.path, list(args), name=self.name, ok_codes=ok_codes)

    # -- branches and commits ------------------------------------------------------------------------

    @property
    def default_branch(self) -> str:
        with self._lock:
            if self._branch is None:
                out = self.git("rev-parse", "--abbrev-ref", "HEAD").decode().strip()
                if out == "HEAD":  # detached: no branch to follow
                    raise Unreadable(f"repository '{self.name}': HEAD is on no branch; set default_branch",
                                     repository=self.name)
                self._branch = out
            return self._branch

    def head(self) -> str:
        """The commit the default branch is at now."""
        branch = self.default_branch
        for ref in (f"refs/heads/{branch}", f"refs/remotes/{branch}", branch):
            sha = self.commit(ref)
            if sha:
                return sha
        raise Unreadable(f"repository '{self.name}': no branch '{branch}'", repository=self.name)

    def commit(self, rev: str) -> str | None:
        """The full id of the commit `rev` names, or None when it names none (missing, ambiguous, not a
        commit)."""
        info = self._cat.info(f"{rev}^{{commit}}")
        return info.oid if info is not None and info.type == "commit" else None

    def commits(self, revs: list[str]) -> list[str | None]:
        """`commit` of many revisions in one round trip."""
        infos = self._cat.info_many([f"{r}^{{commit}}" for r in revs])
        return [i.oid if i is not None and i.type == "commit" else None for i in infos]

    # -- files at a commit ---------------------------------------------------------------------------

    def blob_id(self, commit: str, path: str) -> str | None:
        """The blob id of `path` at `commit`, or None when there is no file there."""
        info = self._cat.info(f"{commit}:{path}")
        return info.oid if info is not None and info.type == "blob" else None

    def read(self, commit: str, path: str) -> tuple[str, bytes] | None:
        """(blob id, bytes) of `path` at `commit`, or None when there is no file there."""
        got = self._cat.contents(f"{commit}:{path}")
        if got is None or got[0].type != "blob":
            return None
        return got[0].oid, got[1]

    def blob_ids(self, at: list[tuple[str, str]]) -> list[str | None]:
        """`blob_id` of many (commit, path) pairs in a few round trips."""
        infos = self._cat.info_many([f"{c}:{p}" for c, p in at])
        return [i.oid if i is not None and i.type == "blob" else None for i in infos]

    def read_many(self, at: list[tuple[str, str]]) -> list[tuple[str, bytes] | None]:
        """`read` of many (commit, path) pairs in a few round trips."""
        got = self._cat.contents_many([f"{c}:{p}" for c, p in at])
        return [(g[0].oid, g[1]) if g is not None and g[0].type == "blob" else None for g in got]

    def read_blob(self, oid: str) -> bytes | None:
        got = self._cat.contents(oid)
        return got[1] if got is not None and got[0].type == "blob" else None

    def is_folder(self, commit: str, path: str) -> bool:
        info = self._cat.info(f"{commit}:{path}" if path else f"{commit}^{{tree}}")
        return info is not None and info.type == "tree"

    def head_blob_changed(self, path: str, last_blob: str) -> bool:
        """Whether `path`'s blob at the branch head differs from the one last checked (a file gone counts
        as changed)."""
        return self.blob_id(self.head(), path) != last_blob

    def changed_at_head(self, checked: Mapping[str, str]) -> set[str]:
        """Of the files given with the blob last checked ({path: blob id}), those whose blob at the branch
        head differs (or that are gone): the serve-time check for many citations, two round trips."""
        head = self.head()
        paths = sorted(checked)
        now = self.blob_ids([(head, p) for p in paths])
        return {p for p, blob in zip(paths, now) if blob != checked[p]}

    def files(self, commit: str) -> list[str]:
        """Every file path at `commit` (kept per commit: a commit's tree never changes)."""
        with self._lock:
            cached = self._trees.get(commit)
        if cached is not None:
            return cached
        raw = self.git("ls-tree", "-r", "--full-tree", "--name-only", "-z", commit)
        names = [p for p in raw.decode("utf-8", "surrogateescape").split("\0") if p]
        with self._lock:
            if len(self._trees) > 32:
                self._trees.clear()
            self._trees[commit] = names
        return names

    # -- between two commits -------------------------------------------------------------------------

    def changed_files(self, old: str, new: str) -> dict[str, Change]:
        """Every file the jump old → new changed, renames found: {old path (new path for additions): Change}."""
        raw = self.git("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-relative", "--name-status",
                       "-z", "--find-renames", old, new)
        return parse_name_status(raw)

    def patches(self, old: str, new: str, files: list[tuple[str, str]]) -> list[FilePatch]:
        """The -U0 hunks of the given files — (old path, new path) pairs, the same path twice when not
        renamed — across old → new, in batches of paths; both sides of a rename go in one batch, for git
        to pair them."""
        out: list[FilePatch] = []
        pairs = sorted(set(files))
        batch: list[str] = []

        def run() -> None:
            # the prefixes named: a user's diff.srcPrefix / diff.noprefix would change the lines parsed
            # paths from the top, taken literally, wherever in the checkout the repository was configured
            raw = self.git("diff", "--no-ext-diff", "--no-textconv", "--no-color", "--no-relative",
                           "--src-prefix=a/", "--dst-prefix=b/", "-U0", "--find-renames", old, new, "--",
                           *[f":(top,literal){p}" for p in dict.fromkeys(batch)])
            out.extend(parse_patch(raw))
            batch.clear()

        for a, b in pairs:
            batch.extend((a, b) if a != b else (a,))
            if len(batch) >= _PATHSPEC_BATCH:
                run()
        if batch:
            run()
        return out
