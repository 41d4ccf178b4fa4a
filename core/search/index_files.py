"""The keyword index's files: its Whoosh schema, opening and creating it, and making a commit durable.

Kept apart from the ranking (lexical.py) so that what writes an index — the first build's worker
processes — loads Whoosh and nothing heavier.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from whoosh import fields, index as whoosh_index

from ..durable import fsync_dir, fsync_file
from .analysis import TermWeights, make_analyzer

TITLE, BODY = "title", "body"
INDEX_NAME = "MAIN"


def make_schema() -> fields.Schema:
    analyzer = make_analyzer()
    title = fields.TEXT(analyzer=analyzer, phrase=False, stored=True)
    body = fields.TEXT(analyzer=analyzer, phrase=False)
    for field in (title, body):
        field.format = TermWeights()  # a term's count as the posting's weight; no positions, no value bytes
    return fields.Schema(id=fields.ID(stored=True, unique=True), container=fields.ID(stored=True), title=title, body=body)


def create_index(path: Path) -> Any:
    path.mkdir(parents=True, exist_ok=True)
    return whoosh_index.create_in(str(path), make_schema(), indexname=INDEX_NAME)


def open_index(path: Path) -> Any:
    """The index in `path`, read through plain file reads: Whoosh's memory-mapped reading copies every
    segment's whole term and posting files into memory each time a reader opens (about 40 ms and the
    files' size per generation on a 14k-page wiki); a search reads a few blocks of them. (The reads of
    one reader are serialised by its searcher: a sub-file reads its segment file at an offset.)"""
    from whoosh.filedb.filestore import FileStorage

    return FileStorage(str(path), supports_mmap=False).open_index(INDEX_NAME)


def index_exists(path: Path) -> bool:
    return path.is_dir() and whoosh_index.exists_in(str(path), indexname=INDEX_NAME)


def latest_generation(ix: Any) -> int:
    return int(ix.latest_generation())


# -- durability ------------------------------------------------------------------------------------------
# whoosh-ng writes a commit's segment files and its TOC without fsync, while the indexer's state.json is
# fsynced: after a machine crash the state could name a position the index files never reached (and the
# pages changed in between would never be indexed again). So after each commit, and before the state is
# written, the files that commit wrote are fsynced, then the directory.

FileMarks = dict[str, tuple[int, int, int]]


def file_marks(path: Path) -> FileMarks:
    """Each file in an index directory with (inode, size, mtime), to tell afterwards what a commit wrote."""
    marks: FileMarks = {}
    try:
        entries = os.scandir(path)
    except FileNotFoundError:
        return marks
    with entries:
        for e in entries:
            try:
                if e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    marks[e.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
            except FileNotFoundError:  # removed under us (an old TOC, a merged segment)
                continue
    return marks


def sync_commit(path: Path, before: FileMarks) -> list[str]:
    """fsync every file of the index directory `path` that is new or changed since `before` (the new
    segment's files and the new TOC), then the directory itself (the new names, and the old TOC's
    removal). Returns the names synced."""
    synced = []
    for name, mark in sorted(file_marks(path).items()):
        if before.get(name) == mark or name.endswith(".lock"):
            continue
        try:
            fsync_file(path / name)
        except FileNotFoundError:  # pragma: no cover - removed since it was listed
            continue
        synced.append(name)
    fsync_dir(path)
    return synced


def document(page_id: str, container: str, title: str, plain_body: str) -> dict[str, str]:
    """What the index holds for one page."""
    return {"id": page_id, "container": container, "title": title, "body": plain_body}
