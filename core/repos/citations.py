"""Citations: their shapes, and the check a code citation passes when an entry is written.

A code citation `{"repository", "path", "lines": [start, end], "commit", "quote"?}` holds when the commit
exists, the file exists at it (and is text), the lines lie within the file, and the quote, whitespace-folded,
lies inside those lines. A link citation `{"link", "kind", "external"?}` is checked for its shape only.

Each check is a `CitationCheck` whose `outcome` is HOLDS, FAILS (with one line naming the citation and what
failed: the writer's to fix) or NOT_READ_YET (the repository could not be read just then: not the writer's
fault, read again later). Only the count bound refuses outright.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from core.errors import Refused
from core.repos.git import Unreadable
from core.repos.lines import fold, is_binary, split_lines
from core.repos.repository import SHA, Repository

MAX_CITATIONS = 10
MAX_QUOTE = 2000          # characters: a quote is a line or a few, not a file
MAX_LINK = 2000
LINK_KINDS = ("issue", "pull_request", "comment", "run")
HOLDS, FAILS, NOT_READ_YET = "holds", "fails", "not_read_yet"
_CODE_KEYS = {"repository", "path", "lines", "commit", "quote"}
_LINK_KEYS = {"link", "kind", "external"}
# a reference that is not a URL: owner/repo#12, #12, PROJ-123, a run or comment id
_REFERENCE = re.compile(r"[\w.\-/]*#\d+|[A-Z][A-Z0-9_]+-\d+|[\w.\-/#:]+")


@dataclass(frozen=True)
class CodeCitation:
    repository: str
    path: str
    start: int
    end: int
    commit: str
    quote: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"repository": self.repository, "path": self.path,
                               "lines": [self.start, self.end], "commit": self.commit}
        if self.quote is not None:
            out["quote"] = self.quote
        return out


@dataclass(frozen=True)
class LinkCitation:
    link: str
    kind: str
    external: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"link": self.link, "kind": self.kind, "external": self.external}


@dataclass(frozen=True)
class CitationCheck:
    index: int                   # 1-based, as the writer counts its citations
    outcome: str                 # HOLDS, FAILS, NOT_READ_YET
    message: str                 # one line naming the citation and what failed or held
    citation: CodeCitation | LinkCitation | None = None
    commit: str | None = None    # the full commit id the check read
    blob: str | None = None      # the cited file's blob id at that commit

    @property
    def holds(self) -> bool:
        return self.outcome == HOLDS


class ShapeError(ValueError):
    """A citation that is not a citation: its message is the part after "citation N (…): "."""


def _label(index: int, raw: Any) -> str:
    if isinstance(raw, Mapping):
        named = raw.get("path") if "path" in raw else raw.get("link")
        if isinstance(named, str) and named:
            return f"citation {index} ({named[:80]})"
    return f"citation {index}"


def parse_citation(raw: Any, repositories: Sequence[str]) -> CodeCitation | LinkCitation:
    """A citation's shape checked and read; ShapeError says what is wrong and how to write it."""
    if not isinstance(raw, Mapping):
        raise ShapeError("is not an object; write {repository, path, lines, commit} or {link, kind}")
    keys = set(raw)
    if "link" in keys:
        return _parse_link(raw, keys)
    if not keys & _CODE_KEYS:
        raise ShapeError("is neither code {repository, path, lines, commit, quote?} nor a link {link, kind}")
    return _parse_code(raw, keys, repositories)


def _parse_link(raw: Mapping[str, Any], keys: set[str]) -> LinkCitation:
    extra = keys - _LINK_KEYS
    if extra:
        raise ShapeError(f"a link citation takes link, kind, external; not {', '.join(sorted(extra))}")
    link, kind, external = raw.get("link"), raw.get("kind"), raw.get("external", False)
    if not isinstance(link, str) or not link.strip():
        raise ShapeError("link must be a URL or a reference such as owner/repo#12")
    link = link.strip()
    if len(link) > MAX_LINK or any(c.isspace() or ord(c) < 32 for c in link):
        raise ShapeError(f"link must be one URL or reference, no spaces, at most {MAX_LINK} characters")
    if "://" in link:
        parts = urlsplit(link)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ShapeError(f"link '{link[:80]}' must be an http(s) URL with a host, or a reference")
    elif not _REFERENCE.fullmatch(link) or not any(c.isalnum() for c in link):
        raise ShapeError(f"link '{link[:80]}' is neither a URL nor a reference such as owner/repo#12")
    if kind not in LINK_KINDS:
        raise ShapeError(f"kind must be one of {', '.join(LINK_KINDS)}, not {kind!r}")
    if not isinstance(external, bool):
        raise ShapeError("external must be true or false")
    return LinkCitation(link, kind, external)


def _parse_code(raw: Mapping[str, Any], keys: set[str], repositories: Sequence[str]) -> CodeCitation:
    extra = keys - _CODE_KEYS
    if extra:
        raise ShapeError(f"a code citation takes repository, path, lines, commit, quote; "
                         f"not {', '.join(sorted(extra))}")
    missing = [k for k in ("repository", "path", "lines", "commit") if k not in keys]
    if missing:
        raise ShapeError(f"lacks {', '.join(missing)}")
    repo, path, lines, commit, quote = (raw.get(k) for k in ("repository", "path", "lines", "commit", "quote"))
    if not isinstance(repo, str) or repo not in repositories:
        known = ", ".join(sorted(repositories)) or "none"
        raise ShapeError(f"names no configured repository {repo!r} (configured: {known})")
    if not isinstance(path, str) or not path.strip():
        raise ShapeError("path must be a file's path inside the repository")
    norm = path.strip().removeprefix("./")
    if norm.startswith("/") or ".." in norm.split("/") or "\n" in norm or "\0" in norm:
        raise ShapeError(f"path '{path[:80]}' must be relative to the repository's top, without '..'")
    if (not isinstance(lines, (list, tuple)) or len(lines) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
            or not 1 <= lines[0] <= lines[1]):
        raise ShapeError(f"lines must be [start, end], 1-based with start <= end, not {lines!r}")
    if not isinstance(commit, str) or not SHA.fullmatch(commit.strip().lower()):
        raise ShapeError(f"commit must be a commit id (7 to 64 hex digits), not {commit!r}")
    if quote is not None:
        if not isinstance(quote, str) or not fold(quote):
            raise ShapeError("quote, when given, must be text from the cited lines")
        if len(quote) > MAX_QUOTE:
            raise ShapeError(f"quote is {len(quote)} characters; at most {MAX_QUOTE}")
    return CodeCitation(repo, norm, lines[0], lines[1], commit.strip().lower(), quote)


def check_code(index: int, cit: CodeCitation, repo: Repository) -> CitationCheck:
    """Read the cited file at the cited commit and say whether the citation holds."""
    return _check_group(repo, [(index, cit)])[0]


def _check_group(repo: Repository, cits: list[tuple[int, CodeCitation]]) -> list[CitationCheck]:
    """Citations of one repository checked together: their commits resolved in one round trip to cat-file,
    their files read in one more."""
    try:
        commits = repo.commits([c.commit for _, c in cits])
        wanted = [(sha, c.path) for sha, (_, c) in zip(commits, cits) if sha is not None]
        reads = iter(repo.read_many(wanted))
    except Unreadable as exc:
        return [CitationCheck(i, NOT_READ_YET, f"citation {i} ({c.path}): not read yet ({exc})", c)
                for i, c in cits]
    return [_judge(i, c, sha, next(reads) if sha is not None else None) for sha, (i, c) in zip(commits, cits)]


def _judge(index: int, cit: CodeCitation, commit: str | None, got: tuple[str, bytes] | None) -> CitationCheck:
    label = f"citation {index} ({cit.path})"
    if commit is None:
        return CitationCheck(index, FAILS, f"{label}: commit {cit.commit} is not in repository "
                             f"'{cit.repository}' (or names more than one commit); cite a commit it "
                             f"holds", cit)
    short = commit[:7]
    if got is None:
        return CitationCheck(index, FAILS, f"{label}: no file {cit.path} at {short}", cit, commit)
    blob, data = got
    if is_binary(data):
        return CitationCheck(index, FAILS, f"{label}: {cit.path} is binary at {short}; cite a text file",
                             cit, commit, blob)
    lines = split_lines(data)
    if cit.end > len(lines):
        return CitationCheck(index, FAILS, f"{label}: lines {cit.start}-{cit.end} run past the end of "
                             f"{cit.path} ({len(lines)} lines at {short})", cit, commit, blob)
    if cit.quote is not None and fold(cit.quote) not in fold("\n".join(lines[cit.start - 1:cit.end])):
        return CitationCheck(index, FAILS, f"{label}: the quote is not in lines {cit.start}-{cit.end} at "
                             f"{short}", cit, commit, blob)
    return CitationCheck(index, HOLDS, f"{label}: held at {short}", cit, commit, blob)


def check_citations(raw: Any, repositories: Mapping[str, Repository]) -> list[CitationCheck]:
    """Every citation of an entry checked, in order. Refused only when there are more than
    MAX_CITATIONS or they are not a list; each other problem is its citation's FAILS line."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise Refused("citations must be a list of citation objects", bound=MAX_CITATIONS)
    if len(raw) > MAX_CITATIONS:
        raise Refused(f"{len(raw)} citations; an entry cites at most {MAX_CITATIONS} (MAX_CITATIONS): keep "
                      f"the ones it rests on", bound=MAX_CITATIONS)
    checks: dict[int, CitationCheck] = {}
    code: dict[str, list[tuple[int, CodeCitation]]] = {}
    for index, item in enumerate(raw, 1):
        try:
            cit = parse_citation(item, list(repositories))
        except ShapeError as exc:
            checks[index] = CitationCheck(index, FAILS, f"{_label(index, item)}: {exc}")
            continue
        if isinstance(cit, LinkCitation):
            checks[index] = CitationCheck(index, HOLDS, f"citation {index} ({cit.link[:80]}): a {cit.kind} link",
                                          cit)
        else:
            code.setdefault(cit.repository, []).append((index, cit))
    for name, cits in code.items():
        for check in _check_group(repositories[name], cits):
            checks[check.index] = check
    return [checks[i] for i in sorted(checks)]


def first_failure(checks: Sequence[CitationCheck]) -> CitationCheck | None:
    return next((c for c in checks if c.outcome == FAILS), None)
