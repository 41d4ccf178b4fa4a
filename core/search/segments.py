"""The first build's writer: pages analysed and written as whole Whoosh segments, in worker processes.

Whoosh's own writer takes a document at a time: each posting becomes a tuple in an external sort, and
the flush looks up the document's field length once per posting — most of a build's time went there.
A first build (or a re-derivation) writes into a fresh, empty directory, where nothing can need
deleting or merging, so it is done here in bulk: a chunk of pages is read, each body reduced to plain
text and counted once (analysis.term_counter), the postings gathered per term in memory, and the chunk
written as ONE segment through Whoosh's own codec (W3Codec's per-document, field and postings writers —
the files are what Whoosh writes, but for longer blocks whose ids and weights are arrays, which a search
reads without a Python object a posting: tests read them back through Whoosh and compare them with its
writer's), then committed by a new TOC. Each segment's rank file is written with it.

The chunks run in worker processes, one per core, so a build takes the machine's cores rather than
one; a home too small to be worth a process is built in this one. A chunk commits as soon as every
chunk before it has (the build journal's cursor moves with it), so a killed build resumes from the
last committed chunk. Nothing of a page is kept past its analysis but its postings (the rows are read
through a cursor), so memory is the postings of the segments in the making: at most IN_FLIGHT pages
together (one segment of that many in this process, or half as many in each of two workers) — about
200 MB at 50,000 pages — and fewer, larger segments write each term fewer times. IN_FLIGHT is 64,000
because every search pays for the segment count: opening a snapshot reads each segment's term table and
rank file, and a query term is looked up in each. At 1,000,000 pages (bench/scale.py, load ~1.5) 32,000
gave 64 segments, a snapshot opened in 148 ms (profiled) and warm queries p50/p95 70/220 ms, the build peaking at
575 MB; 64,000 gives 32 segments, 80 ms, 51/163 ms, and a 756 MB peak.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from whoosh.codec.whoosh3 import WHOOSH3_HEADER_MAGIC, W3Codec
from whoosh.fields import FieldType
from whoosh.filedb.filetables import _lengths as _hash_lengths, md5_hash
from whoosh.system import pack_int, pack_long, pack_ushort
from whoosh.util.numeric import byte_to_length, length_to_byte

from ..errors import CrewletError
from ..durable import fsync_dir, fsync_file
from ..pages.links import links_from
from ..text.markdown import plain_text
from . import rank_data
from .index_files import BODY, TITLE, open_index
from .analysis import term_counter

IN_FLIGHT = 64_000           # pages all the segments being written hold together (indexer.BUILD_CHUNK)
PARALLEL_MIN = 3000          # below this many pages a build stays in this process (a worker costs ~0.3 s to start)
# Postings a block: a search reads a term's whole list (lexical._blocks), and Whoosh's cost is as much per
# block (a seek, a length, a pickled header) as per posting. Whoosh writes 128; any length reads back.
BLOCK_POSTINGS = 1024
PROGRESS_EVERY = 250         # pages between a worker's progress reports
ID, CONTAINER = "id", "container"


def build_workers(sample_s: float = 0.2) -> int:
    """How many processes a build uses: the cores this process may run on that are idle now (sampled
    from /proc/stat where there is one). A worker on a core something else keeps busy only competes
    with its sibling: on a two-core machine with one core taken, two workers built slower than one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if cores <= 1:
        return 1
    idle = idle_cores(cores, sample_s)
    return cores if idle is None else max(1, min(cores, int(idle + 0.5)))


def idle_cores(cores: int, sample_s: float) -> float | None:
    """How many of the machine's cores sat idle over `sample_s` seconds (None: not measurable here)."""
    def ticks() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as fh:
            values = [int(v) for v in fh.readline().split()[1:9]]
        return values[3] + values[4], sum(values)      # idle + iowait, all

    try:
        idle0, total0 = ticks()
        time.sleep(sample_s)
        idle1, total1 = ticks()
    except (OSError, ValueError, IndexError):
        return None
    machine = os.cpu_count() or cores
    return machine * (idle1 - idle0) / max(1, total1 - total0)


@dataclass
class ChunkResult:
    """What one chunk wrote: its segment (None when it held no live page), and the rows it read."""

    segment: Any
    indexed: int
    trashed: int
    rows: int
    last_id: str
    links: list[tuple[str, list[str]]] = field(default_factory=list)   # (src, sorted dsts) for bodies with links
    seconds: float = 0.0
    stopped: bool = False   # told to stop before the chunk's end: nothing of it was written


# -- one segment ------------------------------------------------------------------------------------------

Postings = dict[str, list[int]]   # term -> [docnum, count, docnum, count, ...] (one list a term: fewer objects)


def _post(postings: Postings, terms: dict[str, int], docnum: int) -> None:
    get = postings.get
    for term, n in terms.items():
        got = get(term)
        if got is None:
            postings[term] = [docnum, n]
        else:
            got += (docnum, n)


def _length_byte(length: int) -> int:
    """The byte Whoosh stores a field length as (0 for an empty field)."""
    return length_to_byte(length) if length else 0


class SegmentBuilder:
    """One new segment of `ix`, a page at a time: each page's stored fields and lengths go to Whoosh's
    per-document writer as SegmentWriter.add_document sends them, and its terms straight into the
    segment's posting lists (nothing of a page is kept past its `add`: memory is the postings); `finish`
    writes the term index and postings, assembles the segment and writes its rank file."""

    def __init__(self, ix: Any) -> None:
        self.storage = ix.storage
        self.codec = W3Codec(blocklimit=BLOCK_POSTINGS)
        self.segment = self.codec.new_segment(self.storage, ix.indexname)
        schema = ix.schema
        self.fields = {name: schema[name] for name in (BODY, CONTAINER, ID, TITLE)}
        self.perdoc = self.codec.per_document_writer(self.storage, self.segment)
        self.terms_out = self.codec.field_writer(self.storage, self.segment)
        self.postings: dict[str, Postings] = {BODY: {}, CONTAINER: {}, ID: {}, TITLE: {}}
        self.lengths: dict[str, list[int]] = {BODY: [], TITLE: []}   # per document, as Whoosh's length byte
        self.rank = rank_data.RankCollector()

    @property
    def count(self) -> int:
        return self.rank.count

    def add(self, page_id: str, container: str, title: str, title_terms: dict[str, int],
            body_terms: dict[str, int]) -> None:
        docnum = self.rank.count
        body_len, title_len = sum(body_terms.values()), sum(title_terms.values())
        perdoc, fields_ = self.perdoc, self.fields
        perdoc.start_doc(docnum)       # fields in name order, stored values, lengths: as add_document does
        perdoc.add_field(BODY, fields_[BODY], None, body_len)
        perdoc.add_field(CONTAINER, fields_[CONTAINER], container, 0)
        perdoc.add_field(ID, fields_[ID], page_id, 0)
        perdoc.add_field(TITLE, fields_[TITLE], title, title_len)
        perdoc.finish_doc()
        body_byte, title_byte = _length_byte(body_len), _length_byte(title_len)
        self.lengths[BODY].append(body_byte)
        self.lengths[TITLE].append(title_byte)
        self.rank.add(page_id, container, title, float(byte_to_length(title_byte)), float(byte_to_length(body_byte)))
        postings = self.postings
        _post(postings[BODY], body_terms, docnum)
        _post(postings[TITLE], title_terms, docnum)
        _post(postings[CONTAINER], {container: 1}, docnum)
        _post(postings[ID], {page_id: 1}, docnum)

    def finish(self) -> Any:
        """Write the segment (not yet committed: see commit_segments) and its rank file; returns it."""
        try:
            self.perdoc.close()
            for name in sorted(self.postings):   # fields, then terms, in byte order: as Whoosh's reader expects
                _write_field(self.codec, self.terms_out, name, self.fields[name], self.postings[name],
                             self.lengths.get(name))
                self.postings[name] = {}
            self.terms_out.close()
        except BaseException:
            self.cancel()
            raise
        segment, storage = self.segment, self.storage
        segment.set_doc_count(self.count)
        if segment.should_assemble():
            segment.create_compound_file(storage)
            segment.compound = True
        folder = Path(storage.folder)
        rank_data.write(folder, segment.segment_id(), self.rank.data())
        for name in storage.list():
            if name.startswith(segment.segment_id() + "."):
                fsync_file(folder / name)
        return segment

    def cancel(self) -> None:
        """Close what a failed or stopped write left open and remove its files: no TOC will name this
        segment, and on a nearly full disk a retry needs the space back."""
        for w in (self.perdoc, self.terms_out):
            try:
                if not w.is_closed:
                    w.close()
            except Exception:  # noqa: BLE001 - closing what a failed write left open
                pass
        segid = self.segment.segment_id()
        folder = Path(self.storage.folder)
        for name in self.storage.list():
            if name.startswith(segid + ".") or name == rank_data.file_name(segid):
                try:
                    (folder / name).unlink()
                except OSError:
                    pass


# W3TermInfo's bytes: flags, total weight, document frequency, min and max length bytes, max weight, first
# and last document; then, for a list of one posting (flag 2) its document, weight and value length, and for
# two to eight (flag 3) their count, documents, weights and value lengths. Longer lists go to blocks.
_TERMINFO = struct.Struct("!BfIBBfII")
_ONE = struct.Struct("!IfH")
_OFFSET, _COMPACT, _COMPACT_SHORT, _SHORT_MAX = 0, 2, 3, 8
_COMPRESSION = 3               # W3Codec's default: zlib level 3 for every block
_PACK_COUNT = struct.Struct("!B").pack


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


def _md5_low32(key: bytes) -> int:
    """filetables.md5_hash (the low 32 bits of the key's MD5, big-endian), without a hex round trip."""
    return int.from_bytes(hashlib.md5(key, usedforsecurity=False).digest()[12:], "big")


def _write_field(codec: Any, out: Any, name: str, fieldobj: Any, postings: Postings, lengths: list[int] | None) -> None:
    """One field's terms and posting lists as W3FieldWriter and W3PostingsWriter write them (tests compare
    the two): a list of at most eight postings is inlined in its term's entry, byte for byte, a longer one
    written to the postings file in blocks of `blocklimit` (_write_blocks). Packed here a term at a time —
    Whoosh's writers take a posting at a time, and the terms are counted in hundreds of thousands."""
    if not postings:
        return
    out.start_field(name, fieldobj)
    limit = out._postwriter._blocklimit
    postfile = out._postfile.raw_file()
    tindex = out._tindex                      # an OrderedHashWriter: its add(), inlined below
    raw = tindex.dbfile.raw_file()
    index_append = tindex.index.append
    buckets, pack_lengths = tindex.buckets, _hash_lengths.pack
    hashfn = _md5_low32 if tindex.hashfn is md5_hash else tindex.hashfn
    prefix = pack_ushort(out._fieldid)
    to_bytes = _utf8 if type(fieldobj).to_bytes is FieldType.to_bytes else fieldobj.to_bytes
    key = tindex.lastkey
    pos = raw.tell()
    for term in sorted(postings):   # str order is code point order, which is UTF-8 byte order
        flat = postings[term]
        n = len(flat) // 2
        if n == 1:                  # a term of one document: most of them
            first, w = flat
            lo = hi = lengths[first] if lengths is not None else 0
            value = _TERMINFO.pack(_COMPACT, w, 1, lo, hi, w, first, first) + _ONE.pack(first, w, 0)
        elif n <= _SHORT_MAX:
            ids, weights = flat[0::2], flat[1::2]
            ls = [lengths[i] for i in ids if lengths[i]] if lengths is not None else None
            lo, hi = (min(ls), max(ls)) if ls else (0, 0)
            value = (_TERMINFO.pack(_COMPACT_SHORT, sum(weights), n, lo, hi, max(weights), ids[0], ids[-1])
                     + _PACK_COUNT(n) + struct.pack(f"!{n}I", *ids) + struct.pack(f"!{n}f", *weights)
                     + b"\0\0" * n)
        else:
            value = _write_blocks(postfile, limit, flat[0::2], flat[1::2], lengths)
        key = prefix + to_bytes(term)
        index_append(pos)
        record = pack_lengths(len(key), len(value)) + key + value
        raw.write(record)
        h = hashfn(key)
        buckets[h & 255].append((h, pos))
        pos += len(record)
    tindex.lastkey = key
    out.finish_field()


def _write_blocks(postfile: Any, limit: int, ids: list[int], weights: list[int], lengths: list[int] | None) -> bytes:
    """A posting list of more than eight postings, written to the postings file as W3PostingsWriter
    writes it (a header, then blocks: a length, negative for the last; the pickled block facts; the
    compressed pickle of the delta-coded ids and the weights), but with ids and weights as arrays;
    returns its term entry."""
    start = postfile.tell()
    postfile.write(WHOOSH3_HEADER_MAGIC)
    n = len(ids)
    total = maxweight = 0.0
    minlength = maxlength = 0
    for s in range(0, n, limit):
        block_ids, block_w = ids[s:s + limit], weights[s:s + limit]
        # Whoosh pickles tuples of ints; an array pickles as its bytes, and a search reads it back without
        # a Python object a posting (4x faster at 1,024 a block). Whoosh's matchers iterate either.
        deltas = array("I", [block_ids[0], *[b - a for a, b in zip(block_ids, block_ids[1:])]])
        floats = array("f", block_w)
        if block_w.count(1) == len(block_w):
            mini: Any = None
        elif block_w.count(block_w[0]) == len(block_w):
            mini = floats[0]
        else:
            mini = floats
        data = zlib.compress(pickle.dumps((deltas, mini, None)), _COMPRESSION)
        top = float(max(block_w))
        ls = [lengths[i] for i in block_ids if lengths[i]] if lengths is not None else None
        lo, hi = (min(ls), max(ls)) if ls else (0, 0)
        info = pickle.dumps((len(block_ids), block_ids[-1], top, _COMPRESSION, lo, hi))
        size = len(info) + len(data)
        postfile.write(pack_int(-size if s + limit >= n else size) + info + data)
        total += sum(floats)
        maxweight = max(maxweight, top)
        if lo:
            minlength = lo if not minlength else min(minlength, lo)
        maxlength = max(maxlength, hi)
    return (_TERMINFO.pack(_OFFSET, total, n, minlength, maxlength, maxweight, ids[0], ids[-1])
            + pack_long(start) + pack_int(postfile.tell() - start))


@contextmanager
def _write_lock(ix: Any) -> Iterator[None]:
    """Whoosh's write lock on the index, as its own writers take it."""
    from whoosh.index import LockError
    from whoosh.util.filelock import try_for

    lock = ix.lock("WRITELOCK")
    if not try_for(lock.acquire, timeout=30.0, delay=0.1):
        raise LockError("the index is locked by another writer")
    try:
        yield
    finally:
        lock.release()


def commit_segments(ix: Any, segments: list[Any]) -> int:
    """Add written segments to the index by a new TOC (under Whoosh's write lock); returns the new
    generation."""
    from whoosh.index import TOC

    with _write_lock(ix):
        info = ix._read_toc()
        toc = TOC(info.schema, list(info.segments) + list(segments), info.generation + 1)
        toc.write(ix.storage, ix.indexname)
    folder = Path(ix.storage.folder)
    fsync_file(folder / f"_{ix.indexname}_{toc.generation}.toc")
    fsync_dir(folder)
    return int(toc.generation)


def clean_index_dir(ix: Any) -> None:
    """Remove what the index's current generation does not use: segments a stopped, failed or killed
    build left half-written, a killed worker's scratch directories and rank files in the making. Never
    while a worker may still be writing a segment into the directory."""
    from whoosh.index import clean_files

    with _write_lock(ix):
        info = ix._read_toc()
        clean_files(ix.storage, ix.indexname, info.generation, info.segments)
        folder = Path(ix.storage.folder)
        for scratch in folder.glob("*.tmp"):   # Whoosh removes its own on close
            if scratch.is_dir():
                shutil.rmtree(scratch, ignore_errors=True)
        for partial in folder.glob(f".*{rank_data.EXT}.*.tmp"):   # a dot name, which Whoosh's clean-up skips
            try:
                partial.unlink()
            except OSError:
                pass


# -- one chunk, in a worker process or this one --------------------------------------------------------

def read_rows(conn: Any, lo: str, hi: str | None) -> Iterable[Any]:
    """The pages with lo < id <= hi (hi None: every id past lo), in id order, as a cursor: a chunk's
    bodies are read as they are analysed, never held all at once."""
    cols = "id, container, title, body, trashed_at"
    if hi is None:
        return conn.execute(f"SELECT {cols} FROM pages WHERE id > ? ORDER BY id", (lo,))
    return conn.execute(f"SELECT {cols} FROM pages WHERE id > ? AND id <= ? ORDER BY id", (lo, hi))


def build_chunk(db_file: str, index_path: str, lo: str, hi: str | None,
                tick: Callable[[int], None] | None = None) -> ChunkResult:
    """Read, analyse and write one chunk of pages as a segment (uncommitted): a worker's job."""
    from ..store import connect

    started = time.perf_counter()
    conn = connect(db_file, migrate_schema=False)
    try:
        return write_chunk(open_index(Path(index_path)), read_rows(conn, lo, hi), started=started, tick=tick)
    finally:
        conn.close()


def write_chunk(ix: Any, rows: Iterable[Any], *, started: float | None = None,
                tick: Callable[[int], None] | None = None, stop: Callable[[], bool] | None = None) -> ChunkResult:
    """Rows (id, container, title, body, trashed_at) analysed and written as one segment: the live pages
    indexed, every row's links kept (a trashed page keeps its links: a restore needs them back). `stop`
    is asked every PROGRESS_EVERY rows: when it says so the chunk is abandoned (nothing written), so a
    chunk of tens of thousands of pages never holds up the app's quit."""
    started = time.perf_counter() if started is None else started
    count = term_counter(ix.schema[BODY].analyzer)
    if count is None:  # pragma: no cover - the schema's analyser is always one make_analyzer builds
        raise RuntimeError("the index's analyser is not one the bulk writer can count")
    builder = SegmentBuilder(ix)
    links: list[tuple[str, list[str]]] = []
    trashed = n = 0
    last = ""
    try:
        for page_id, container, title, body, trashed_at in rows:
            n += 1
            last = page_id
            dsts = links_from(page_id, body)
            if dsts:
                links.append((page_id, dsts))
            if trashed_at is not None:
                trashed += 1
            else:
                builder.add(page_id, container, title, count(title), count(plain_text(body, one_line=False)))
            if n % PROGRESS_EVERY == 0:
                if stop is not None and stop():
                    builder.cancel()
                    return ChunkResult(None, 0, 0, 0, "", [], time.perf_counter() - started, stopped=True)
                if tick is not None:
                    tick(n)
        indexed = builder.count
        segment = builder.finish() if indexed else None
    except OSError as exc:
        builder.cancel()
        if exc.filename is None:   # Whoosh's files carry no name: say which index it was
            exc.filename = str(ix.storage.folder)
        raise
    except BaseException:
        builder.cancel()
        raise
    if segment is None:
        builder.cancel()
    return ChunkResult(segment, indexed, trashed, n, last, links, time.perf_counter() - started)


# -- a whole build ------------------------------------------------------------------------------------

def plan_chunks(ids: list[str], cursor: str, workers: int, chunk_max: int = IN_FLIGHT) -> list[tuple[str, str | None]]:
    """Split the ids past `cursor` (in order) into (lo, hi] ranges of even size, each at most chunk_max
    pages, their count a multiple of the workers (so they run in even rounds); the last range is open
    (a page created since the ids were read is read too)."""
    n = len(ids)
    if not n:
        return [(cursor, None)]
    parts = -(-n // chunk_max)
    if workers > 1:
        parts = -(-parts // workers) * workers
    size = -(-n // min(parts, n))
    out: list[tuple[str, str | None]] = []
    lo = cursor
    for start in range(0, n, size):
        hi = ids[min(n, start + size) - 1]
        out.append((lo, hi))
        lo = hi
    out[-1] = (out[-1][0], None)
    return out


class BuildWorkerFailed(CrewletError):
    """A worker process could not build its chunk (the message carries its error)."""

    code = "index_build_failed"


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    errors: Any                     # its stderr, a temporary file
    chunk: int | None = None        # the chunk it is building
    reader: threading.Thread | None = None


class ParallelBuild:
    """Chunks built by worker processes, their results handed back in chunk order.

    A worker is `python -m core.search.segments` on pipes (pickled jobs in, progress and results out):
    a process of its own rather than a multiprocessing child, so it never re-imports the caller's main
    module (a script, the app) and nothing of a threaded caller is forked."""

    def __init__(self, db_file: Path, index_path: Path, chunks: list[tuple[str, str | None]], workers: int) -> None:
        self.jobs = [(str(db_file), str(index_path), lo, hi) for lo, hi in chunks]
        self.results: dict[int, ChunkResult] = {}
        self.progress = [0] * len(chunks)
        self.events: queue.Queue[tuple[_Worker, tuple[Any, ...]]] = queue.Queue()
        self.next = 0
        self.workers: list[_Worker] = []
        try:
            for _ in range(max(1, min(workers, len(chunks)))):
                w = self._start()
                self.workers.append(w)
                self._assign(w)
        except BaseException:
            self.close(abandon=True)
            raise

    def _start(self) -> _Worker:
        here = str(Path(__file__).resolve().parent.parent.parent)   # the directory `core` is imported from
        boot = ("import sys\n"
                f"if {here!r} not in sys.path: sys.path.insert(0, {here!r})\n"
                "from core.search.segments import worker_main\nworker_main()")
        errors = tempfile.TemporaryFile()   # noqa: SIM115  the worker's stderr for its life: closed with it
        proc = subprocess.Popen([sys.executable, "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errors, close_fds=True)
        w = _Worker(proc, errors)
        w.reader = threading.Thread(target=self._read, args=(w,), name="index-build-worker", daemon=True)
        w.reader.start()
        return w

    def _read(self, w: _Worker) -> None:
        assert w.proc.stdout is not None
        try:
            while True:
                self.events.put((w, pickle.load(w.proc.stdout)))
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        self.events.put((w, ("exit", w.proc.wait())))

    def _assign(self, w: _Worker) -> None:
        assert w.proc.stdin is not None
        if self.next < len(self.jobs):
            w.chunk = self.next
            self.next += 1
            pickle.dump(self.jobs[w.chunk], w.proc.stdin)
        else:
            w.chunk = None
            pickle.dump(None, w.proc.stdin)  # no more work: the worker exits
        w.proc.stdin.flush()

    def in_flight(self, start: int) -> int:
        """Pages read by the chunks from `start` on that are not yet committed."""
        return sum(self.results[i].rows if i in self.results else self.progress[i]
                   for i in range(start, len(self.jobs)))

    def result(self, i: int, poll: Callable[[], None], stop: Callable[[], bool]) -> ChunkResult | None:
        """Chunk i's result, calling `poll` as progress arrives; None when `stop` says to stop first."""
        while i not in self.results:
            if stop():
                return None
            try:
                w, msg = self.events.get(timeout=0.25)
            except queue.Empty:
                continue
            kind = msg[0]
            if kind == "progress" and w.chunk is not None:
                self.progress[w.chunk] = msg[1]
                poll()
            elif kind == "done" and w.chunk is not None:
                self.results[w.chunk] = msg[1]
                self._assign(w)
                poll()
            elif kind == "oserror":   # the worker's disk trouble, as the caller's own (a full disk says so)
                raise OSError(msg[1], msg[2], msg[3])
            elif kind == "error":
                lo, hi = self.jobs[w.chunk][2:] if w.chunk is not None else ("?", "?")
                raise BuildWorkerFailed(f"an index build worker failed on the pages after {lo!r} "
                                        f"up to {hi!r}: {msg[1]}")
            elif kind == "exit" and w.chunk is not None:
                w.errors.seek(0)
                tail = w.errors.read().decode("utf-8", "replace").strip().splitlines()[-1:]
                raise BuildWorkerFailed(f"an index build worker exited with code {msg[1]} before finishing its "
                                        f"pages{': ' + tail[0] if tail else ''}")
        return self.results.pop(i)

    def close(self, *, abandon: bool = False) -> None:
        """Stop the workers; `abandon`: kill them mid-chunk (a stopped or failed build — what a worker
        leaves half-written is no segment of the index, and is cleaned away)."""
        for w in self.workers:
            try:
                if abandon:
                    w.proc.kill()
                elif w.proc.stdin is not None and w.chunk is not None:
                    pickle.dump(None, w.proc.stdin)
                if w.proc.stdin is not None:
                    w.proc.stdin.close()
            except OSError:
                pass
        for w in self.workers:
            try:
                w.proc.wait(timeout=None if not abandon else 10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a killed process always ends
                pass
            if w.reader is not None:
                w.reader.join(timeout=5)
            w.errors.close()


def worker_main() -> None:
    """A build worker: read pickled jobs from stdin, build each chunk, write its progress and result."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # anything printed goes to stderr: stdout carries the protocol alone
    jobs = sys.stdin.buffer

    def send(msg: tuple[Any, ...]) -> None:
        pickle.dump(msg, out)
        out.flush()

    while True:
        try:
            job: tuple[str, str, str, str | None] | None = pickle.load(jobs)
        except EOFError:
            return
        if job is None:
            return
        try:
            send(("done", build_chunk(*job, tick=lambda n: send(("progress", n)))))
        except OSError as exc:
            send(("oserror", exc.errno, exc.strerror, exc.filename))
        except Exception as exc:
            import traceback

            traceback.print_exc()
            send(("error", f"{type(exc).__name__}: {exc}"))
