"""Query vectors served by the home's long-lived process, so a one-question `crewlet search` loads no model.

A hybrid `crewlet search` that meets a new question pays for the local model in full — onnxruntime's
import, the tokenizer, a session — ~0.12 s of CPU over a keyword process of ~0.27 s (docs/relevance.md,
"The hybrid process"). A long-lived process of the same home (`crewlet worker`, the app, `crewlet mcp`)
holds that model already, or can hold it once for every search after. So one of them serves query
embeddings on a unix socket in the home, and `query_vectors.py` asks it first.

- **One server a home.** Whoever holds an flock on `query-embed.lock` serves; the others try again every
  few seconds (a worker that stops hands the duty to the app still open). The kernel drops the lock with
  its holder, so a socket file left by a killed server is stale exactly when its lock is free: the next
  server (or a client that finds nobody listening and the lock free) removes it.
- **The file.** `query-embed.sock`, mode 0600, bound under a temporary name, chmodded and renamed into
  place, so nobody ever connects to it before it is private and listening. No network port.
- **The protocol.** Each message is a 4-byte big-endian length and that many bytes. The client sends one
  JSON object `{"space": EmbeddingSpace.key(), "text": the query}`; the server answers one JSON object,
  `{"ok": true, "space": …, "dims": n, "whole_words": {word: bool}}` followed by a message of n
  little-endian float32 (`whole_words`: which of the question's words are whole words of the model's
  vocabulary, for the relevance floor — so the search reads no tokenizer either), or
  `{"ok": false, "error": "…"}` — among them a refusal of any space but the one it holds (the space's key
  names the provider, the model, the width and the tokenizer's digest). One question a connection.
- **Never a wrong vector.** The client checks the answer's space and width against its own provider's,
  the byte count, and that the vector is finite and not all zero; anything else (no file, nobody
  listening, a refusal, no answer within `ASK_TIMEOUT_S`) is answered None and the caller loads the model
  as before.
- **No model loaded for nobody.** The server loads its model when first asked (or finds it loaded: the
  embedding duty's session is the same one), and until it has it refuses at once ("loading"), so a client
  never waits on another process's load: the first new question after a worker starts is embedded by its
  own process, every later one is served. A process nobody asks (the app in a test, a worker beside no
  search) pays nothing for serving.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .query_vectors import QueryEmbedder

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("crewlet.search")

SOCKET_NAME = "query-embed.sock"
LOCK_NAME = "query-embed.lock"
ASK_TIMEOUT_S = 0.5          # the model answers a warm question in ~10 ms; a daemon this late is not waited for
RETRY_S = 5.0                # a process that does not serve looks again this often whether it can
HANDLER_TIMEOUT_S = 10.0     # a client that stops mid-message does not hold a server thread for long
MAX_REQUEST = 64 * 1024
MAX_PATH = 107               # sun_path's 108 bytes, the terminating NUL included

_HEADER = struct.Struct(">I")
_WORDS = re.compile(r"\w+")         # as the relevance floor splits a question (floor.py)
_serving: set[str] = set()   # the homes this process serves: its own searches embed in-process
_serving_lock = threading.Lock()


def socket_path(root: Path) -> Path:
    return root / SOCKET_NAME


def served_here(root: Path) -> bool:
    """Does this process serve `root`'s query embeddings (a search of its own then asks nobody)?"""
    with _serving_lock:
        return str(root.resolve()) in _serving


# -- the messages ----------------------------------------------------------------------------------------

def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _receive(sock: socket.socket, limit: int) -> bytes:
    size = _HEADER.unpack(_exactly(sock, _HEADER.size))[0]
    if size > limit:
        raise ValueError(f"a message of {size} bytes, over the {limit} this protocol takes")
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the other end closed mid-message")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# -- the client --------------------------------------------------------------------------------------------

def ask(root: Path, space: str, dims: int, text: str, *, timeout_s: float = ASK_TIMEOUT_S) -> tuple[np.ndarray | None, str]:
    """The vector of `text` in `space` from the home's daemon, and "" — or None and why not (for the log).
    Bounded by `timeout_s` in all (connect, ask, answer)."""
    import numpy as np

    path = socket_path(root)
    deadline = time.monotonic() + timeout_s
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            if isinstance(exc, ConnectionRefusedError):
                _remove_if_stale(root)
            return None, "no daemon"
        _send(sock, json.dumps({"space": space, "text": text}).encode())
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        head = json.loads(_receive(sock, MAX_REQUEST))
        if not isinstance(head, dict) or not head.get("ok"):
            said = head.get("error") if isinstance(head, dict) else repr(head)
            return None, f"refused: {said}"
        if head.get("space") != space or head.get("dims") != dims:
            return None, f"answered {head.get('space')}/{head.get('dims')}, asked {space}/{dims}"
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        body = _receive(sock, 4 * dims)
    except (OSError, ValueError, ConnectionError) as exc:   # socket.timeout is an OSError
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        sock.close()
    if len(body) != 4 * dims:
        return None, f"{len(body)} bytes for {dims} dimensions"
    vector = np.frombuffer(body, dtype="<f4").astype(np.float32)
    if not np.all(np.isfinite(vector)) or not np.any(vector):
        return None, "the vector is not finite or is all zero"
    words = head.get("whole_words")
    if isinstance(words, dict) and space.startswith("local:"):
        from ..embed.local import SPACE, told_whole_words

        if space == SPACE.key():      # the daemon's vocabulary is this one: the space names its tokenizer
            told_whole_words({w: v for w, v in words.items() if isinstance(w, str) and isinstance(v, bool)})
    return vector, ""


def _remove_if_stale(root: Path) -> None:
    """Nobody listens on the socket file: when nobody holds the lock either, its server is gone — remove it."""
    try:
        fd = os.open(root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return
    try:
        socket_path(root).unlink(missing_ok=True)
        log.debug("removed the stale query-embedding socket of %s", root)
    except OSError:
        pass
    finally:
        os.close(fd)   # and the lock with it


# -- the server ----------------------------------------------------------------------------------------------

class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(HANDLER_TIMEOUT_S)
        if not _same_user(sock):
            log.info("a query-embedding request from another user was refused")
            return
        try:
            request = json.loads(_receive(sock, MAX_REQUEST))
            if not (isinstance(request, dict) and isinstance(request.get("space"), str)
                    and isinstance(request.get("text"), str)):
                raise ValueError("a request is {\"space\": str, \"text\": str}")
            head, body = self.server.daemon.answer(request["space"], request["text"])
            _send(sock, json.dumps(head).encode())
            if body is not None:
                _send(sock, body)
        except (OSError, ValueError, ConnectionError) as exc:
            log.debug("a query-embedding request failed: %s", exc)


def _same_user(sock: socket.socket) -> bool:
    """Is the peer this process's own user? The file is 0600 already; this holds where the home's directory
    is shared wider than its owner meant (Linux's SO_PEERCRED; elsewhere the file's mode alone)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return False
    return uid == os.getuid()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, daemon: QueryDaemon) -> None:
        self.daemon = daemon
        super().__init__(path, _Handler)


class QueryDaemon:
    """Serve `root`'s query embeddings from this process while it lives: `start()`, then `close()`.
    `company` is read at every question (an edit of company.toml applies: the embedder follows it)."""

    def __init__(self, root: Path, company: Callable[[], Any], *, threads: int | None = None,
                 retry_s: float = RETRY_S, embedder: QueryEmbedder | None = None) -> None:
        self.root = root.resolve()
        self.company = company
        self.retry_s = retry_s
        self.embedder = embedder or QueryEmbedder(threads=threads)
        self.ready = threading.Event()            # set once it listens (tests wait on it)
        self.loaded = threading.Event()           # set once its model is loaded (the first question starts it)
        self._loading: threading.Thread | None = None
        self._loaded_for: Any = None              # the provider whose model is loaded (a config edit makes another)
        self._loading_for: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._serving = False
        self._lock_fd: int | None = None
        self._inode: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> QueryDaemon:
        self._thread = threading.Thread(target=self._run, name="crewlet-query-daemon", daemon=True)
        self._thread.start()
        return self

    def answer(self, space: str, text: str) -> tuple[dict[str, Any], bytes | None]:
        import numpy as np

        company = self.company()
        provider = self.embedder.provider(company)
        if provider is None:
            return {"ok": False, "error": "vectors are off here"}, None
        held = provider.space.key()
        if space != held:
            return {"ok": False, "error": f"this process holds {held}, not {space}"}, None
        if self._loaded_for is not provider:
            self._load(provider)
            if self._loaded_for is not provider:
                return {"ok": False, "error": "the model is loading here"}, None
        qv = self.embedder.vector(company, text)
        if qv.vector is None or qv.space != held:
            return {"ok": False, "error": qv.message or "no vector"}, None
        body = np.asarray(qv.vector, dtype="<f4").tobytes()
        head: dict[str, Any] = {"ok": True, "space": held, "dims": len(qv.vector)}
        if provider.space.provider == "local":
            from ..embed.local import whole_word

            head["whole_words"] = {w: whole_word(w) for w in dict.fromkeys(_WORDS.findall(text.lower()))}
        return head, body

    # -- its thread --------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if not self._take_lock():
                return
            server = self._bind()
            if server is None:
                self._release_lock()      # another process of the home may do better (a shorter path of its own)
                return
            with self._lock:
                self._server = server
                if self._stop.is_set():
                    return
                self._serving = True
            with _serving_lock:
                _serving.add(str(self.root))
            self.ready.set()
            log.debug("serving query embeddings on %s", socket_path(self.root))
            server.serve_forever(poll_interval=0.5)
        except Exception as exc:  # noqa: BLE001 - a daemon that cannot serve leaves every search to its own model
            log.info("the query-embedding daemon of %s stopped: %s", self.root, exc)
            with self._lock:
                serving = self._serving
            if not serving:
                self._release_lock()

    def _release_lock(self) -> None:
        with self._lock:
            fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    def _take_lock(self) -> bool:
        """Hold the home's lock (trying every `retry_s` while another process holds it), or False when closed."""
        fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                with self._lock:
                    self._lock_fd = fd
                return True
            except OSError:
                if self._stop.wait(self.retry_s):
                    os.close(fd)
                    return False

    def _load(self, provider: Any) -> None:
        """Begin loading `provider`'s model on a thread of its own (once a provider); `loaded` is set when it is
        done — at once for a provider with nothing to load."""
        load = getattr(provider, "load", None)
        if not callable(load):
            self._loaded_for = provider
            self.loaded.set()
            return
        with self._lock:
            if self._loading_for is provider or self._stop.is_set():
                return
            previous = self._loading
            self._loading_for = provider

            def run() -> None:
                if previous is not None:
                    previous.join()   # one load at a time (the previous model's, before a config edit)
                try:
                    load()
                    self._loaded_for = provider
                    self.loaded.set()
                except Exception as exc:  # noqa: BLE001 - each question then says the model is loading; logged
                    log.info("the query daemon's model did not load: %s", exc)

            self._loading = threading.Thread(target=run, name="crewlet-query-daemon-load", daemon=True)
            self._loading.start()

    def _bind(self) -> _Server | None:
        path = socket_path(self.root)
        temporary = self.root / f".{SOCKET_NAME}.{os.getpid()}"
        if len(str(temporary).encode()) > MAX_PATH:
            log.info("the home's path is too long for a unix socket (%s): searches load their own model", path)
            return None
        path.unlink(missing_ok=True)        # we hold the lock: whoever bound it is gone
        temporary.unlink(missing_ok=True)
        server = _Server(str(temporary), self)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
        self._inode = path.stat().st_ino
        return server

    def close(self) -> None:
        with self._lock:
            self._stop.set()
            server, serving = self._server, self._serving
            self._server, self._serving = None, False
        if server is not None:
            if serving:
                server.shutdown()
            server.server_close()
        with _serving_lock:
            _serving.discard(str(self.root))
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            loading = self._loading
        if loading is not None:   # onnxruntime aborts a process that exits under a load
            loading.join()
        path = socket_path(self.root)
        try:
            if self._inode is not None and path.stat().st_ino == self._inode:
                path.unlink()
        except OSError:
            pass
        self._release_lock()
        self.embedder.close()

    def __enter__(self) -> QueryDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
