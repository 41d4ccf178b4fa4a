"""Carrying code citations to a newer commit of the default branch (as Gerrit carries review comments
across patch sets).

For a citation at commit A and the branch at commit B:

- the file untouched by A → B: HELD, the same lines;
- the file changed, the cited lines not: SHIFTED — the same lines, moved by the hunks above them, still held;
- the file renamed: followed to its new path (the outcome above or below, with `followed_from`);
- the cited lines rewritten: the old lines (whitespace-folded, as a block of whole lines), else the quote,
  looked for in the new file; found once → MOVED (re-anchored there); otherwise CHANGED, with the old
  and the new text of the range for a model or a person to judge;
- the file deleted: GONE;
- the repository unreadable just then: NOT_READ_YET (read again on the next pass).

One `changed_files(A, B)` a jump, one batched `git diff -U0` for the files it touched that citations cite,
and one blob read per file whose cited lines were rewritten: the cost follows the files, not the citations.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from core.repos.citations import CodeCitation
from core.repos.diff import Change, FilePatch, map_range
from core.repos.git import Unreadable
from core.repos.lines import FoldedFile, fold, is_binary, range_text, split_lines
from core.repos.repository import Repository

HELD, SHIFTED, MOVED, CHANGED, GONE, NOT_READ_YET = "held", "shifted", "moved", "changed", "gone", "not_read_yet"
HOLDING = frozenset({HELD, SHIFTED, MOVED})


@dataclass(frozen=True)
class Anchor:
    """Where a citation stands at the newer commit, and what happened to it on the way."""

    citation: CodeCitation
    outcome: str
    reason: str                     # one line: what happened
    commit: str | None = None       # the newer commit (full id)
    path: str | None = None         # the file's path there (None when gone)
    start: int | None = None
    end: int | None = None
    blob: str | None = None         # the file's blob id there
    followed_from: str | None = None  # the old path when a rename was followed
    old_text: str | None = None     # CHANGED: the cited lines as they were
    new_text: str | None = None     # CHANGED: the lines the range maps to now

    @property
    def holds(self) -> bool:
        return self.outcome in HOLDING

    def moved_citation(self) -> CodeCitation | None:
        """The citation as it stands at the newer commit, when it holds there."""
        if not self.holds or self.commit is None or self.path is None or self.start is None or self.end is None:
            return None
        return replace(self.citation, path=self.path, start=self.start, end=self.end, commit=self.commit)


class _Files:
    """Blobs read once per (commit, path) during one recheck, and their lines and folded text."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._read: dict[tuple[str, str], tuple[str, bytes] | None] = {}
        self._lines: dict[tuple[str, str], list[str]] = {}
        self._folded: dict[tuple[str, str], FoldedFile] = {}
        self._blob: dict[tuple[str, str], str | None] = {}

    def prefetch(self, blobs: set[tuple[str, str]], reads: set[tuple[str, str]]) -> None:
        """What a pass will ask for, asked at once: a few round trips to cat-file instead of one a file."""
        want_reads = sorted(k for k in reads if k not in self._read)
        for key, got in zip(want_reads, self.repo.read_many(want_reads)):
            self._read[key] = got
            self._blob[key] = got[0] if got else None
        want_blobs = sorted(k for k in blobs if k not in self._blob)
        for key, oid in zip(want_blobs, self.repo.blob_ids(want_blobs)):
            self._blob[key] = oid

    def read(self, commit: str, path: str) -> tuple[str, bytes] | None:
        key = (commit, path)
        if key not in self._read:
            self._read[key] = self.repo.read(commit, path)
            got = self._read[key]
            self._blob[key] = got[0] if got else None
        return self._read[key]

    def blob(self, commit: str, path: str) -> str | None:
        key = (commit, path)
        if key not in self._blob:
            self._blob[key] = self.repo.blob_id(commit, path)
        return self._blob[key]

    def lines(self, commit: str, path: str) -> list[str] | None:
        key = (commit, path)
        if key not in self._lines:
            got = self.read(commit, path)
            if got is None or is_binary(got[1]):
                return None
            self._lines[key] = split_lines(got[1])
        return self._lines[key]

    def folded(self, commit: str, path: str) -> FoldedFile | None:
        key = (commit, path)
        if key not in self._folded:
            lines = self.lines(commit, path)
            if lines is None:
                return None
            self._folded[key] = FoldedFile.of(lines)
        return self._folded[key]


def recheck(repo: Repository, citations: Sequence[CodeCitation], new: str | None = None) -> list[Anchor]:
    """Every citation (of this repository) carried to `new` (default: the branch head), in input order."""
    try:
        target = repo.commit(new) if new else repo.head()
    except Unreadable as exc:
        return [Anchor(c, NOT_READ_YET, f"not read yet ({exc})") for c in citations]
    if target is None:
        return [Anchor(c, NOT_READ_YET, f"not read yet: no commit {new} in repository '{repo.name}'")
                for c in citations]
    out: list[Anchor | None] = [None] * len(citations)
    refs = sorted({c.commit for c in citations})
    try:
        resolved = dict(zip(refs, repo.commits(refs)))  # every old commit in one round trip
    except Unreadable as exc:
        return [Anchor(c, NOT_READ_YET, f"not read yet ({exc})") for c in citations]
    by_old: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(citations):
        old = resolved[c.commit]
        if old is None:
            out[i] = Anchor(c, CHANGED, f"changed: commit {c.commit} is no longer in repository "
                            f"'{repo.name}'; cite the lines again at {target[:7]}", target)
        else:
            by_old[old].append(i)  # an abbreviated id and the full one are one jump
    files = _Files(repo)
    for old, indices in by_old.items():
        group = [citations[i] for i in indices]
        try:
            anchors = _jump(repo, files, old, target, group)
        except Unreadable as exc:
            anchors = [Anchor(c, NOT_READ_YET, f"not read yet ({exc})") for c in group]
        for i, a in zip(indices, anchors):
            out[i] = a
    return [a for a in out if a is not None]


def recheck_all(repositories: Mapping[str, Repository],
                citations: Sequence[CodeCitation]) -> list[Anchor]:
    """Citations of any configured repositories, each carried to its repository's branch head."""
    by_repo: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(citations):
        by_repo[c.repository].append(i)
    out: list[Anchor | None] = [None] * len(citations)
    for name, indices in by_repo.items():
        group = [citations[i] for i in indices]
        repo = repositories.get(name)
        anchors = (recheck(repo, group) if repo is not None else
                   [Anchor(c, NOT_READ_YET, f"not read yet: repository '{name}' is not configured")
                    for c in group])
        for i, a in zip(indices, anchors):
            out[i] = a
    return [a for a in out if a is not None]


def _jump(repo: Repository, files: _Files, old: str, new: str, group: list[CodeCitation]) -> list[Anchor]:
    """One group's jump old → new (full commit ids): which files changed, their hunks, then each citation."""
    changes: dict[str, Change] = {} if old == new else repo.changed_files(old, new)
    touched = sorted({c.path for c in group if c.path in changes and changes[c.path].status != "D"})
    patches: dict[str, FilePatch] = {}
    if touched:
        for patch in repo.patches(old, new, [(p, changes[p].new_path or p) for p in touched]):
            if patch.old_path is not None:
                patches[patch.old_path] = patch
    _prefetch(files, old, new, group, changes, patches)
    return [_carry(files, old, new, c, changes.get(c.path), patches.get(c.path)) for c in group]


def _prefetch(files: _Files, old: str, new: str, group: list[CodeCitation], changes: dict[str, Change],
              patches: dict[str, FilePatch]) -> None:
    """The blob ids and blobs `_carry` will want, by the same decisions, asked at once (a guess that
    misses costs one more round trip, never a wrong answer)."""
    blobs: set[tuple[str, str]] = set()
    reads: set[tuple[str, str]] = set()
    for c in group:
        change = changes.get(c.path)
        if change is None:
            blobs.add((new, c.path))
        elif change.new_path is None:
            reads.add((old, c.path))
        else:
            patch = patches.get(c.path)
            if patch is not None and (patch.binary or not map_range(patch.hunks, c.start, c.end).touched):
                blobs.add((new, change.new_path))
                if patch.binary:
                    reads.add((old, c.path))
            else:
                reads.update({(old, c.path), (new, change.new_path)})
    files.prefetch(blobs, reads)


def _carry(files: _Files, old: str, new: str, cit: CodeCitation, change: Change | None,
           patch: FilePatch | None) -> Anchor:
    short = new[:7]
    if change is None:
        blob = files.blob(new, cit.path)
        if blob is None:  # never there: a citation that did not hold at its own commit (never checked)
            return Anchor(cit, GONE, f"gone: no file {cit.path} at {short}", new)
        return Anchor(cit, HELD, f"held: {cit.path} unchanged at {short}", new, cit.path, cit.start, cit.end,
                      blob)
    if change.status == "D" or change.new_path is None:
        return Anchor(cit, GONE, f"gone: {cit.path} was deleted by {short}", new,
                      old_text=_old_text(files, old, cit))
    path = change.new_path
    followed = cit.path if path != cit.path else None
    where = f"{cit.path} → {path}" if followed else path
    if patch is not None and patch.binary:
        return Anchor(cit, CHANGED, f"changed: {where} is binary at {short}", new, path,
                      blob=files.blob(new, path), followed_from=followed, old_text=_old_text(files, old, cit))
    if patch is not None:
        mapped = map_range(patch.hunks, cit.start, cit.end)
        if not mapped.touched:
            moved = (mapped.start, mapped.end) != (cit.start, cit.end)
            outcome = SHIFTED if moved else HELD
            said = f"lines {cit.start}-{cit.end} now {mapped.start}-{mapped.end}" if moved else "lines untouched"
            return Anchor(cit, outcome, f"{outcome}: {where}, {said} at {short}", new, path, mapped.start,
                          mapped.end, files.blob(new, path), followed)
        near = (mapped.start, mapped.end)
    else:
        near = (cit.start, cit.end)  # git did not pair the paths in the patch: look in the whole file
    return _relocate(files, old, new, cit, path, followed, near)


def _old_text(files: _Files, old: str, cit: CodeCitation) -> str | None:
    lines = files.lines(old, cit.path)
    return range_text(lines, cit.start, cit.end) if lines is not None else None


def _relocate(files: _Files, old: str, new: str, cit: CodeCitation, path: str, followed: str | None,
              near: tuple[int, int]) -> Anchor:
    """The cited lines were rewritten: find the old block, else the quote, once in the new file."""
    short = new[:7]
    where = f"{cit.path} → {path}" if followed else path
    old_text = _old_text(files, old, cit)
    new_lines = files.lines(new, path)
    folded = files.folded(new, path)
    blob = files.blob(new, path)
    if new_lines is None or folded is None:
        return Anchor(cit, CHANGED, f"changed: {where} is binary at {short}", new, path, blob=blob,
                      followed_from=followed, old_text=old_text)
    lo = min(near[0], len(new_lines))
    hi = min(near[1], len(new_lines))
    new_text = range_text(new_lines, lo, hi) if lo >= 1 else ""

    def changed(why: str) -> Anchor:
        return Anchor(cit, CHANGED, f"changed: {where} {why} at {short}", new, path, lo or None, hi or None,
                      blob, followed, old_text, new_text)

    block = fold(old_text or "")
    block_hits = folded.find_all(block, whole_lines=True) if block else []
    if len(block_hits) == 1:
        s, e = block_hits[0]
        said = "found again in place" if (s, e) == near else f"moved to lines {s}-{e}"
        return Anchor(cit, MOVED, f"moved: {where}, lines {cit.start}-{cit.end} {said} at {short}", new, path,
                      s, e, blob, followed)
    if cit.quote is not None:
        quote_hits = folded.find_all(fold(cit.quote))
        if len(quote_hits) == 1:
            qs, qe = quote_hits[0]
            s, e = near if near[0] <= qs and qe <= near[1] else (qs, qe)
            return Anchor(cit, MOVED, f"moved: {where}, the lines rewritten, the quote now in lines {s}-{e} "
                          f"at {short}", new, path, s, e, blob, followed)
        if len(quote_hits) > 1:
            return changed("rewrote the cited lines and the quote appears more than once")
    if len(block_hits) > 1:
        return changed("rewrote the cited lines and they appear more than once")
    return changed(f"rewrote lines {cit.start}-{cit.end}")
