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
bumps INDEX_DERIVATION (defined in core/search/index_state.py); the indexer then re-derives every row once.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import whoosh
from whoosh import index as whoosh_index
from whoosh.codec.whoosh3 import W3LeafMatcher, W3TermInfo

from . import rank_data
# the index's files (schema, open/create, durable commits) live in .index_files, importable from here
from .index_files import (BODY, INDEX_NAME, TITLE, FileMarks, create_index, document, file_marks,  # noqa: F401
                          index_exists, latest_generation, make_schema, open_index, sync_commit)
# the analysis lives in .analysis; its names stay importable from here, and an index of derivation 2
# unpickles its schema's UnderscoreParts and TermCounts from this module
from .analysis import (MAX_QUERY_TERMS, WORD_PATTERN, TermCounts, TermWeights, UnderscoreParts, analyze,  # noqa: F401
                       make_analyzer, term_counter, token_spans)

from .index_state import INDEX_DERIVATION  # noqa: E402,F401  (bumped there: the status reads it without Whoosh)
DERIVATION_NOTE = ("title and plain-text body (Markdown, YAML front matter and URLs stripped, backslash escapes "
                   "resolved), an identifier's underscore-separated parts as words too, Snowball English stems "
                   "(libstemmer), English stop words; backlinks by page id outside code")

# what opening or reading an index raises besides OSError: whoosh-ng's own errors, and the index
# errors (EmptyIndexError, IndexVersionError, ...), which derive from whoosh.index.IndexError alone
WHOOSH_ERRORS: tuple[type[BaseException], ...] = (whoosh.WhooshError, whoosh_index.IndexError)



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


@dataclass
class QueryTerms:
    """What a query searches for: its terms (at most MAX_QUERY_TERMS), and how many distinct terms
    the index holds that had to be left out (terms the index does not hold are dropped first: they
    could not have matched anything)."""

    terms: dict[str, int]
    dropped: int = 0


# -- the segment cache --------------------------------------------------------------------------------

@dataclass
class _Segment:
    count: int
    ids: np.ndarray             # page ids, fixed-width UTF-8 bytes (rank_data)
    containers: list[str]       # the segment's distinct containers
    codes: np.ndarray           # each document's index into `containers`
    auto_draft: np.ndarray      # bool: the title carries the [Auto-draft] prefix
    lengths: dict[str, np.ndarray]
    entries: np.ndarray | None = None   # bool: the document is an entry (seg_entries: read at the first snapshot)


ENTRY_PREFIX = b"entry:"       # core/search/entry_docs.PREFIX, as the stored ids hold it


def seg_entries(seg: _Segment) -> np.ndarray:
    """Which of a segment's documents are entries (kept on the segment: a segment never changes)."""
    if seg.entries is None:
        seg.entries = np.char.startswith(seg.ids, ENTRY_PREFIX) if seg.count else np.zeros(0, dtype=bool)
    return seg.entries


class PageIds:
    """Every document's page id, as numpy arrays of fixed-width bytes, one a segment (a Python list of a
    million str was built at every CLI search's start): reads as that list (`ids[docnum]` is the str).
    The one array of them all (`data`, 26 MB at a million pages) is put together only when a ranking
    needs the whole id order: a search reads a few ids, each from its segment's array."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        self.parts = [p for p in parts if len(p)]
        self.starts = np.cumsum([0] + [len(p) for p in self.parts])
        self._data: np.ndarray | None = None

    @property
    def data(self) -> np.ndarray:
        if self._data is None:
            self._data = np.concatenate(self.parts) if self.parts else np.zeros(0, "S1")
        return self._data

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, docnum: Any) -> str:
        d = int(docnum)
        if not 0 <= d < len(self):
            raise IndexError(docnum)
        i = int(np.searchsorted(self.starts, d, side="right")) - 1
        return self.parts[i][d - self.starts[i]].decode("utf-8", "surrogatepass")


class DocNums:
    """Page id -> its live document's number, by a binary search of the live ids sorted once."""

    def __init__(self, data: np.ndarray, live: np.ndarray) -> None:
        docs = np.flatnonzero(live)
        order = np.argsort(data[docs], kind="stable")
        self.keys, self.docs = data[docs][order], docs[order]

    def get(self, page_id: str) -> int | None:
        key = page_id.encode("utf-8", "surrogatepass")
        i = int(np.searchsorted(self.keys, key))
        return int(self.docs[i]) if i < len(self.keys) and self.keys[i] == key else None

    def __contains__(self, page_id: object) -> bool:
        return isinstance(page_id, str) and self.get(page_id) is not None

    def __getitem__(self, page_id: str) -> int:
        got = self.get(page_id)
        if got is None:
            raise KeyError(page_id)
        return got


class SegmentCache:
    """What a segment holds never changes, so it is read once per segment id (from its rank file) and
    kept across index generations; posting lists are kept in an LRU bounded by the number of postings
    held."""

    def __init__(self, max_postings: int = 4_000_000) -> None:
        self.lock = threading.Lock()
        self.segments: dict[str, _Segment] = {}
        self.postings: OrderedDict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.max_postings = max_postings
        self.held = 0

    def segment(self, segid: str, reader: Any, folder: Path | None = None) -> _Segment:
        with self.lock:
            seg = self.segments.get(segid)
        if seg is not None:
            return seg
        n = reader.doc_count_all()
        got = rank_data.load(folder, segid, reader)
        seg = _Segment(n, got["ids"], got["containers"], got["codes"].reshape(n), got["auto_draft"].reshape(n),
                       {TITLE: got["title"].reshape(n), BODY: got["body"].reshape(n)})
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


def _union_size(a: np.ndarray, b: np.ndarray) -> int:
    """How many distinct document numbers two posting lists hold together (each holds a document once).
    By a binary search rather than np.union1d, whose np.unique imports numpy.ma (~40 ms in a new process)."""
    if len(b) > 1 and np.any(b[1:] < b[:-1]):
        b = np.sort(b)
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return int(len(a) + len(b) - np.count_nonzero(b[at] == a))


def idf(n: int, df: int) -> float:
    """Lucene's BM25 idf of a term `df` of `n` documents hold (df 0 included: the largest)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def _read_postings(reader: Any, field: str, term: str) -> tuple[np.ndarray, np.ndarray]:
    """(docnums, term frequencies) of one term in one segment, deletions included (masked later)."""
    try:
        fieldobj = reader.schema[field]
        tbytes = fieldobj.to_bytes(term)
        terms = reader._terms  # the segment's own terms reader: the matcher without a deletion filter
        # one look in the segment's term table (`in` and `matcher` would look three times: at a million
        # pages a tenth of a search was Whoosh's hash table read through small file reads)
        entry = terms._tindex.get(terms._keycoder(field, tbytes))
        if entry is None:
            return _EMPTY
        info = W3TermInfo.from_bytes(entry)
        if info.is_inlined():
            ids, weights, _values = info.inlined_postings()
            return np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float64)
        matcher = terms._codec.postings_reader(terms._postfile, info, fieldobj.format, term=(field, tbytes))
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

SHORT_SORT = 512   # a ranking part this long or shorter is sorted in Python; a longer one by numpy


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
            folder = Path(ix.storage.folder) if hasattr(ix.storage, "folder") else None
            self._leaves: list[tuple[str, Any, int, _Segment]] = []
            for sub, offset in leaves:
                segid = sub.segment().segment_id()
                self._leaves.append((segid, sub, offset, cache.segment(segid, sub, folder)))
            segs = [seg for *_, seg in self._leaves]
            self.container_names = sorted({c for seg in segs for c in seg.containers})
            code = {name: i for i, name in enumerate(self.container_names)}
            id_parts: list[np.ndarray] = []
            codes, drafts, live = [], [], []
            lengths: dict[str, list[np.ndarray]] = {TITLE: [], BODY: []}
            for _segid, sub, _offset, seg in self._leaves:
                id_parts.append(seg.ids)
                # the segment's own container codes, mapped onto this generation's sorted names
                remap = np.asarray([code[c] for c in seg.containers] or [0], dtype=np.int32)
                codes.append(remap[seg.codes] if seg.count else np.zeros(0, dtype=np.int32))
                drafts.append(seg.auto_draft)
                mask = np.ones(seg.count, dtype=bool)
                deleted = list(sub.segment().deleted_docs() or ())
                if deleted:
                    mask[np.asarray(deleted, dtype=np.int64)] = False
                live.append(mask)
                for name in lengths:
                    lengths[name].append(seg.lengths[name])
            self.ids = PageIds(id_parts)
            self.size = len(self.ids)
            self.live = np.concatenate(live) if live else np.zeros(0, dtype=bool)
            self.auto_draft = np.concatenate(drafts) if drafts else np.zeros(0, dtype=bool)
            self.lengths = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in lengths.items()}
            self.count = int(self.live.sum())
            # documents that are entries (core/search/entry_docs.py): each segment's own mask, read once
            self.entries = sum(int(np.count_nonzero(seg_entries(seg) & part))
                               for seg, part in zip(segs, live)) if segs else 0
            self.container_codes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)
            self.avg_length = {}
            for name, arr in self.lengths.items():
                total = float(arr[self.live].sum(dtype=np.float64)) if self.count else 0.0
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
    def docnum(self) -> DocNums:
        """Page id -> document number, for live documents (sorted on first use)."""
        return DocNums(self.ids.data, self.live)

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
        fields_ = {name: (weight, b) for name, weight, b in
                   [(TITLE, r.title_weight, r.b_title), (BODY, r.body_weight, r.b_body)] if weight > 0}

        def norm(name: str, ids: np.ndarray) -> np.ndarray:
            # the field's weight over its length normalisation, for the documents holding the term only
            weight, b = fields_[name]
            return weight / ((1.0 - b) + b * self.lengths[name][ids].astype(np.float64) / self.avg_length[name])

        k1 = r.k1
        for term, qf in terms.items():
            parts = [(name, *self._postings(name, term)) for name in fields_]
            parts = [(name, ids, tf) for name, ids, tf in parts if len(ids)]
            if not parts:
                continue
            if len(parts) == 1:
                name, ids, tf = parts[0]
                pseudo = tf * norm(name, ids)
            else:
                acc = np.zeros(self.size, dtype=np.float64)
                for name, ids, tf in parts:
                    acc[ids] += tf * norm(name, ids)
                ids = np.flatnonzero(acc)
                pseudo = acc[ids]
            scores[ids] += (qf * idf(n, len(ids)) * (k1 + 1.0)) * pseudo / (pseudo + k1)
        return scores

    def doc_frequencies(self, terms: dict[str, int]) -> dict[str, int]:
        """How many live documents hold each term, in either field (0: the corpus does not hold it)."""
        out: dict[str, int] = {}
        for term in terms:
            parts = [ids for name in (TITLE, BODY) for ids, _tf in [self._postings(name, term)] if len(ids)]
            out[term] = 0 if not parts else len(parts[0]) if len(parts) == 1 else _union_size(*parts)
        return out

    def holds(self, term: str, docnum: int) -> bool:
        """Does the live document hold the term, in either field?"""
        return any(bool(np.any(self._postings(name, term)[0] == docnum)) for name in (TITLE, BODY))

    def term_weights(self, terms: dict[str, int]) -> list[tuple[str, int, float]]:
        """(term, documents holding it, its idf weighted by how often the query says it), for what a
        search knows of its own words: how much of the question the corpus holds (the relevance floor)
        and how specific the words it matched are (fusion). A term no document holds weighs as one a
        single document would hold and a little more: the rarest word of all, which it is."""
        n = max(self.count, 1)
        return [(t, df, terms[t] * idf(n, df)) for t, df in self.doc_frequencies(terms).items()]

    @cached_property
    def id_rank(self) -> np.ndarray:
        """Each document's place in page-id order (ties in a long ranking go by it), worked out once per
        snapshot, by the first ranking walked that far."""
        rank = np.empty(self.size, dtype=np.int64)
        rank[np.argsort(self.ids.data, kind="stable")] = np.arange(self.size)   # UTF-8 bytes sort as the str
        return rank

    def ranked(self, scores: np.ndarray, mask: np.ndarray, first: int = 64) -> Iterator[tuple[int, float]]:
        """Documents with a score, best first (ties by page id: the same order however this node's
        index was built — in bulk, by id, or page by page), lazily: the top `first` by a partial sort,
        the rest sorted only if a caller walks that far."""
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
            if len(part) <= SHORT_SORT:   # the head: sorted here, without the whole index's id order
                ids = self.ids
                order = sorted(part.tolist(), key=lambda d: (-scores[d], ids[d]))
            else:
                order = part[np.lexsort((self.id_rank[part], -scores[part]))].tolist()
            for i in order:
                yield i, float(scores[i])
