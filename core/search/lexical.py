"""The lexical index: a Whoosh index of every live page's title and plain-text body, ranked by BM25.

Whoosh holds the index on disk — analysis, segments, postings, deletions, crash-safe commits. The
ranking is computed here, over Whoosh's own postings, with numpy: Whoosh's scorer walks every posting
in Python (about five times slower than SQLite FTS5 on a 14k-page wiki), where reading a posting list
block by block and scoring it as one array is faster than FTS5. The formula is BM25F (Lucene's idf,
term-frequency saturation k1, length normalisation b per field), the title weighted 2:1 over the
body — saturation and length normalisation are what stop a 20 KB runbook that mentions a word thirty
times outranking the one-paragraph page that is about it.

What is safe to cache is cached, keyed on what cannot change under it: a segment's field lengths,
stored ids and posting lists by the segment's id (Whoosh never rewrites a segment; deletions are
read afresh per generation), and everything else per index generation (a `Snapshot`).

A change to what the index derives — a field, the analyser, the body's text, the link grammar —
bumps INDEX_DERIVATION; the indexer then re-derives every row once, on its own.
"""
from __future__ import annotations

import math
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import whoosh
from whoosh import fields, formats, index as whoosh_index
from whoosh.codec.whoosh3 import W3LeafMatcher
from whoosh.analysis import Filter, LowercaseFilter, RegexTokenizer, StemFilter, StopFilter
from whoosh.system import pack_uint

from ..config import AUTO_DRAFT_TITLE_PREFIX

INDEX_DERIVATION = 2
DERIVATION_NOTE = ("title and plain-text body (Markdown, YAML front matter and URLs stripped, backslash escapes "
                   "resolved), an identifier's underscore-separated parts as words too, Snowball English stems, "
                   "English stop words; backlinks by page id outside code")

# what opening or reading an index raises besides OSError: whoosh-ng's own errors, and the index
# errors (EmptyIndexError, IndexVersionError, ...), which derive from whoosh.index.IndexError alone
WHOOSH_ERRORS: tuple[type[BaseException], ...] = (whoosh.WhooshError, whoosh_index.IndexError)

TITLE, BODY = "title", "body"
INDEX_NAME = "MAIN"
MAX_QUERY_TERMS = 64
# a word: letters, digits and underscores, with inner dots kept (IoCreateDevice, IRP_MJ_READ, 3.5, e.g);
# whoosh-ng's own default also takes `*` into words (its wildcard syntax), which plain text has none of
WORD_PATTERN = r"\w+(?:\.?\w+)*"


@dataclass(frozen=True)
class Ranking:
    """BM25F parameters (measured on SciFact and vaswani: bench/relevance.py).

    Each field's term frequency is normalised by that field's length against its average (b_title,
    b_body), weighted (title_weight, body_weight) and summed into one pseudo-frequency, which is then
    saturated once (k1) and multiplied by the term's idf over documents holding it in either field —
    so a word in both the title and the body counts once, more strongly, rather than twice.
    """

    k1: float = 1.2
    b_title: float = 0.75
    b_body: float = 0.75
    title_weight: float = 2.0
    body_weight: float = 1.0


DEFAULT_RANKING = Ranking()


def underscore_parts(word: str) -> list[str]:
    """The parts of an identifier joined by underscores (WM_PALETTECHANGED: WM, PALETTECHANGED), so
    that a search for one part finds it; [] for a word without an inner part."""
    if "_" not in word:
        return []
    return [p for p in word.split("_") if p]


class UnderscoreParts(Filter):
    """Each token as it is, then (for an identifier with underscores) each of its parts as a token of
    its own, with its own character span."""

    def __call__(self, tokens: Any) -> Any:
        for t in tokens:
            word = t.text
            chars = getattr(t, "chars", False)
            start = t.startchar if chars else 0
            yield t
            if "_" not in word:
                continue
            offset = 0
            for part in word.split("_"):
                if part:
                    t.text = part
                    if chars:
                        t.startchar = start + offset
                        t.endchar = start + offset + len(part)
                    t.stopped = False
                    yield t
                offset += len(part) + 1


def make_analyzer() -> Any:
    """Words (`\\w+` runs, dotted names kept whole, and an identifier's underscore-separated parts as
    words too), lower-cased, English stop words out (single characters kept: the 2 of "type 2", the
    6 of "IL-6"), Snowball English stems."""
    return (RegexTokenizer(WORD_PATTERN) | UnderscoreParts() | LowercaseFilter() | StopFilter(minsize=1)
            | StemFilter(lang="en", cachesize=100_000))


class TermCounts(formats.Frequency):
    """Whoosh's Frequency postings, with the words counted in one regex pass and one stem per distinct
    word, instead of a token object per word through the analyser's generator chain (three times
    faster to index). The terms are exactly the analyser's — tests hold the two equal — and any
    analyser this does not recognise goes the ordinary way."""

    def word_values(self, value: Any, analyzer: Any, **kwargs: Any) -> Any:
        count = _fast_counter(analyzer)
        if count is None or not isinstance(value, str):
            return super().word_values(value, analyzer, **kwargs)
        fb = self.field_boost
        return ((word, n, n * fb, pack_uint(n)) for word, n in count(value).items())


_COUNTERS: dict[int, tuple[Any, Any]] = {}


def _fast_counter(analyzer: Any) -> Any:
    """A function text -> {term: count} equal to running `analyzer`, for the pipeline make_analyzer
    builds (tokenizer, lower-case, stop words, stems); None for any other analyser."""
    got = _COUNTERS.get(id(analyzer))
    if got is not None and got[0] is analyzer:
        return got[1]
    items = list(getattr(analyzer, "items", ()))
    kinds = [type(i) for i in items]
    parts = bool(kinds) and kinds[1:2] == [UnderscoreParts]
    if parts:  # derivation 2 on; an index of derivation 1 keeps its own analyser until it is re-derived
        items.pop(1)
        kinds.pop(1)
    if kinds != [RegexTokenizer, LowercaseFilter, StopFilter, StemFilter] or items[0].gaps:
        return None
    rx, stop, stem = items[0].expression, items[2], items[3]
    stops, low, high, ignore = stop.stops, stop.min, stop.max, stem.ignore
    stemfn = stem._stem
    cache: dict[str, str | None] = {}

    def words(text: str) -> Counter[str]:
        found = rx.findall(text)
        counted = Counter(map(str.lower, found))
        if parts:
            for word in found:
                if "_" in word:
                    counted.update(p.lower() for p in underscore_parts(word))
        return counted

    def count(text: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for word, n in words(text).items():
            term = cache.get(word, "")
            if term == "":
                if len(word) < low or (high is not None and len(word) > high) or word in stops:
                    term = None
                else:
                    term = word if word in ignore else stemfn(word)
                if len(cache) > 500_000:
                    cache.clear()
                cache[word] = term
            if term is not None:
                out[term] = out.get(term, 0) + n
        return out

    if rx.groups:  # findall would return groups, not words: go the ordinary way
        return None
    _COUNTERS[id(analyzer)] = (analyzer, count)
    return count


def make_schema() -> fields.Schema:
    analyzer = make_analyzer()
    title = fields.TEXT(analyzer=analyzer, phrase=False, stored=True)
    body = fields.TEXT(analyzer=analyzer, phrase=False)
    for field in (title, body):
        field.format = TermCounts()  # frequencies only, no positions: there is no phrase query
    return fields.Schema(id=fields.ID(stored=True, unique=True), container=fields.ID(stored=True), title=title, body=body)


def create_index(path: Path) -> Any:
    path.mkdir(parents=True, exist_ok=True)
    return whoosh_index.create_in(str(path), make_schema(), indexname=INDEX_NAME)


def open_index(path: Path) -> Any:
    return whoosh_index.open_dir(str(path), indexname=INDEX_NAME)


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


def fsync_path(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_commit(path: Path, before: FileMarks) -> list[str]:
    """fsync every file of the index directory `path` that is new or changed since `before` (the new
    segment's files and the new TOC), then the directory itself (the new names, and the old TOC's
    removal). Returns the names synced."""
    synced = []
    for name, mark in sorted(file_marks(path).items()):
        if before.get(name) == mark or name.endswith(".lock"):
            continue
        try:
            fsync_path(path / name)
        except FileNotFoundError:  # pragma: no cover - removed since it was listed
            continue
        synced.append(name)
    try:
        fsync_path(path, directory=True)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass
    return synced


def document(page_id: str, container: str, title: str, plain_body: str) -> dict[str, str]:
    """What the index holds for one page."""
    return {"id": page_id, "container": container, "title": title, "body": plain_body}


# -- analysis ---------------------------------------------------------------------------------------

def analyze(analyzer: Any, text: str, limit: int | None = MAX_QUERY_TERMS) -> dict[str, int]:
    """The query's terms with how often each occurs, in first-seen order (at most `limit` distinct
    ones; None: every one); no query language: every character is text, so nothing a person types
    can be syntax."""
    terms: dict[str, int] = {}
    if not text:
        return terms
    for tok in analyzer(text):
        word = tok.text
        if word in terms:
            terms[word] += 1
        elif limit is None or len(terms) < limit:
            terms[word] = 1
    return terms


@dataclass
class QueryTerms:
    """What a query searches for: its terms (at most MAX_QUERY_TERMS), and how many distinct terms
    the index holds that had to be left out (terms the index does not hold are dropped first: they
    could not have matched anything)."""

    terms: dict[str, int]
    dropped: int = 0


def token_spans(analyzer: Any) -> Any:
    """A function text -> (term, start, end) for every analysed token, lazily (for snippets)."""

    def spans(text: str) -> Iterator[tuple[str, int, int]]:
        for tok in analyzer(text, chars=True):
            yield tok.text, tok.startchar, tok.endchar

    return spans


# -- the segment cache --------------------------------------------------------------------------------

@dataclass
class _Segment:
    count: int
    ids: list[str]
    containers: list[str]
    auto_draft: np.ndarray      # bool: the title carries the [Auto-draft] prefix
    lengths: dict[str, np.ndarray]


class SegmentCache:
    """What a segment holds never changes, so it is read once per segment id and kept across index
    generations; posting lists are kept in an LRU bounded by the number of postings held."""

    def __init__(self, max_postings: int = 4_000_000) -> None:
        self.lock = threading.Lock()
        self.segments: dict[str, _Segment] = {}
        self.postings: OrderedDict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.max_postings = max_postings
        self.held = 0

    def segment(self, segid: str, reader: Any) -> _Segment:
        with self.lock:
            seg = self.segments.get(segid)
        if seg is not None:
            return seg
        n = reader.doc_count_all()
        ids: list[str] = []
        containers: list[str] = []
        draft = np.zeros(n, dtype=bool)
        prefix = AUTO_DRAFT_TITLE_PREFIX.lower()
        for docnum in range(n):
            stored = reader.stored_fields(docnum) or {}
            ids.append(stored.get("id", ""))
            containers.append(stored.get("container", ""))
            draft[docnum] = str(stored.get("title", "")).lower().startswith(prefix)
        lengths = {}
        for name in (TITLE, BODY):
            lengths[name] = np.fromiter(((reader.doc_field_length(d, name) or 0) for d in range(n)),
                                        dtype=np.float64, count=n)
        seg = _Segment(n, ids, containers, draft, lengths)
        with self.lock:
            self.segments[segid] = seg
        return seg

    def forget_except(self, live_segids: set[str]) -> None:
        """Drop what belongs to segments no longer in the index (merged away)."""
        with self.lock:
            for segid in [s for s in self.segments if s not in live_segids]:
                del self.segments[segid]
            for key in [k for k in self.postings if k[0] not in live_segids]:
                ids, _ = self.postings.pop(key)
                self.held -= len(ids)

    def posting_list(self, segid: str, reader: Any, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        key = (segid, field, term)
        with self.lock:
            hit = self.postings.get(key)
            if hit is not None:
                self.postings.move_to_end(key)
                return hit
        got = _read_postings(reader, field, term)
        with self.lock:
            if key not in self.postings:
                self.postings[key] = got
                self.held += len(got[0])
                while self.held > self.max_postings and self.postings:
                    _, (old_ids, _) = self.postings.popitem(last=False)
                    self.held -= len(old_ids)
        return got


_EMPTY = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))


def _read_postings(reader: Any, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
    """(docnums, term frequencies) of one term in one segment, deletions included (masked later)."""
    try:
        fieldobj = reader.schema[field]
        tbytes = fieldobj.to_bytes(term)
        terms = reader._terms  # the segment's own terms reader: the matcher without a deletion filter
        if (field, tbytes) not in terms:
            return _EMPTY
        matcher = terms.matcher(field, tbytes, fieldobj.format)
    except (KeyError, AttributeError):
        return _read_postings_generic(reader, field, term)
    blocks = _blocks(matcher)
    if blocks is not None:
        return blocks
    return _drain(matcher)


def _blocks(matcher: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Read a Whoosh 3 posting list a block at a time (ids are delta-coded per block)."""
    if not isinstance(matcher, W3LeafMatcher) or matcher._byteids:
        return None
    id_parts, w_parts = [], []
    while not matcher._atend:
        matcher._read_data()
        data = matcher._data
        n = matcher._blocklength
        ids = np.cumsum(np.asarray(data[0], dtype=np.int64))
        w = data[1]
        if w is None:
            weights = np.ones(n, dtype=np.float64)
        elif isinstance(w, float):
            weights = np.full(n, w, dtype=np.float64)
        else:
            weights = np.asarray(w, dtype=np.float64)
        id_parts.append(ids)
        w_parts.append(weights)
        if matcher._lastblock:
            break
        matcher._goto(matcher._nextoffset)
    if not id_parts:
        return _EMPTY
    return np.concatenate(id_parts), np.concatenate(w_parts)


def _drain(matcher: Any) -> tuple[np.ndarray, np.ndarray]:
    """Every (doc id, weight) a matcher yields, when its blocks cannot be read directly."""
    ids, weights = [], []
    while matcher.is_active():
        ids.append(matcher.id())
        weights.append(matcher.weight())
        matcher.next()
    return np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float64)


def _read_postings_generic(reader: Any, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        matcher = reader.postings(field, term)
    except Exception:
        return _EMPTY
    return _drain(matcher)


# -- one generation of the index ------------------------------------------------------------------------

class Snapshot:
    """One generation of the index, open for reading, with every per-document array a ranking needs.
    Never changes after it is built; a commit makes a new one."""

    def __init__(self, ix: Any, cache: SegmentCache, ranking: Ranking = DEFAULT_RANKING) -> None:
        self.cache = cache
        self.ranking = ranking
        self.reader = ix.reader()
        try:
            self.generation = int(self.reader.generation() if self.reader.generation() is not None else -1)
            self.schema = self.reader.schema
            self.analyzer = self.schema[BODY].analyzer
            self.tokens = token_spans(self.analyzer)
            leaves = self.reader.leaf_readers() if self.reader.doc_count_all() else []
            self._leaves: list[tuple[str, Any, int, _Segment]] = []
            ids: list[str] = []
            containers: list[str] = []
            drafts, live, lengths = [], [], {TITLE: [], BODY: []}
            for sub, offset in leaves:
                segid = sub.segment().segment_id()
                seg = cache.segment(segid, sub)
                self._leaves.append((segid, sub, offset, seg))
                ids.extend(seg.ids)
                containers.extend(seg.containers)
                drafts.append(seg.auto_draft)
                mask = np.ones(seg.count, dtype=bool)
                deleted = list(sub.segment().deleted_docs() or ())
                if deleted:
                    mask[np.asarray(deleted, dtype=np.int64)] = False
                live.append(mask)
                for name in lengths:
                    lengths[name].append(seg.lengths[name])
            self.size = len(ids)
            self.ids = ids
            self.live = np.concatenate(live) if live else np.zeros(0, dtype=bool)
            self.auto_draft = np.concatenate(drafts) if drafts else np.zeros(0, dtype=bool)
            self.lengths = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in lengths.items()}
            self.count = int(self.live.sum())
            self.container_names = sorted(set(containers))
            code = {name: i for i, name in enumerate(self.container_names)}
            self.container_codes = np.fromiter((code[c] for c in containers), dtype=np.int32, count=len(containers))
            self.avg_length = {}
            for name, arr in self.lengths.items():
                total = float(arr[self.live].sum()) if self.count else 0.0
                self.avg_length[name] = (total / self.count) if self.count and total > 0 else 1.0
            self._terms: OrderedDict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
            self._lock = threading.Lock()
            cache.forget_except({segid for segid, *_ in self._leaves})
        except BaseException:
            self.reader.close()
            raise

    def close(self) -> None:
        try:
            self.reader.close()
        except Exception:
            pass

    @cached_property
    def docnum(self) -> dict[str, int]:
        """Page id -> document number, for live documents (built on first use)."""
        return {self.ids[i]: int(i) for i in np.flatnonzero(self.live)}

    # -- reading -----------------------------------------------------------------------------------
    def terms(self, text: str) -> dict[str, int]:
        return self.query_terms(text).terms

    def query_terms(self, text: str, limit: int = MAX_QUERY_TERMS) -> QueryTerms:
        """The query's terms, at most `limit`: past the limit, the terms this generation holds are kept
        in preference (in first-seen order) and those it does not are dropped first."""
        every = analyze(self.analyzer, text, None)
        if len(every) <= limit:
            return QueryTerms(every)
        known = {t: n for t, n in every.items() if (TITLE, t) in self.reader or (BODY, t) in self.reader}
        kept = dict(list(known.items())[:limit])
        for t, n in every.items():  # room left: unknown terms, in order (they match nothing either way)
            if len(kept) >= limit:
                break
            kept.setdefault(t, n)
        return QueryTerms(kept, dropped=max(0, len(known) - limit))

    def container_mask(self, allowed: set[str] | None, excluded: set[str]) -> np.ndarray:
        """Live documents in `allowed` containers (None: every container) and not in `excluded`."""
        mask = self.live.copy()
        if allowed is not None:
            codes = [i for i, name in enumerate(self.container_names) if name in allowed]
            mask &= np.isin(self.container_codes, np.asarray(codes, dtype=np.int32))
        drop = [i for i, name in enumerate(self.container_names) if name in excluded]
        if drop:
            mask &= ~np.isin(self.container_codes, np.asarray(drop, dtype=np.int32))
        return mask

    def _postings(self, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
        key = (field, term)
        with self._lock:
            hit = self._terms.get(key)
            if hit is not None:
                self._terms.move_to_end(key)
                return hit
        id_parts, tf_parts = [], []
        for segid, sub, offset, _seg in self._leaves:
            ids, tfs = self.cache.posting_list(segid, sub, field, term)
            if len(ids):
                id_parts.append(ids + offset)
                tf_parts.append(tfs)
        if id_parts:
            ids = np.concatenate(id_parts)
            tfs = np.concatenate(tf_parts)
            keep = self.live[ids]
            if not keep.all():
                ids, tfs = ids[keep], tfs[keep]
            got = (ids, tfs)
        else:
            got = _EMPTY
        with self._lock:
            self._terms[key] = got
            while len(self._terms) > 4096:
                self._terms.popitem(last=False)
        return got

    def scores(self, terms: dict[str, int]) -> np.ndarray:
        """BM25F of every document for these query terms (0 where no term occurs)."""
        r = self.ranking
        scores = np.zeros(self.size, dtype=np.float64)
        n = self.count
        if not n:
            return scores
        fields_ = [(TITLE, r.title_weight, r.b_title), (BODY, r.body_weight, r.b_body)]
        norms = {name: weight / ((1.0 - b) + b * self.lengths[name] / self.avg_length[name])
                 for name, weight, b in fields_ if weight > 0}
        k1 = r.k1
        for term, qf in terms.items():
            parts = [(name, *self._postings(name, term)) for name in norms]
            parts = [(name, ids, tf) for name, ids, tf in parts if len(ids)]
            if not parts:
                continue
            if len(parts) == 1:
                name, ids, tf = parts[0]
                pseudo = tf * norms[name][ids]
            else:
                acc = np.zeros(self.size, dtype=np.float64)
                for name, ids, tf in parts:
                    acc[ids] += tf * norms[name][ids]
                ids = np.flatnonzero(acc)
                pseudo = acc[ids]
            df = len(ids)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            scores[ids] += (qf * idf * (k1 + 1.0)) * pseudo / (pseudo + k1)
        return scores

    def ranked(self, scores: np.ndarray, mask: np.ndarray, first: int = 64) -> Iterator[tuple[int, float]]:
        """Documents with a score, best first (ties by document number), lazily: the top `first` by
        a partial sort, the rest sorted only if a caller walks that far."""
        cand = np.flatnonzero((scores > 0) & mask)
        if not len(cand):
            return
        vals = scores[cand]
        if len(cand) > first:
            threshold = np.partition(vals, len(vals) - first)[len(vals) - first]
            head = vals >= threshold
            top, rest = cand[head], cand[~head]
        else:
            top, rest = cand, cand[:0]
        for part in (top, rest):
            if not len(part):
                continue
            order = np.lexsort((part, -scores[part]))
            for i in part[order]:
                yield int(i), float(scores[i])
