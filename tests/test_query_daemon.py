"""The home's long-lived process serves query vectors (core/search/query_daemon.py): a one-question
`crewlet search` beside a running worker loads no model, takes a vector only of its own space and width,
and loads the model itself when nobody answers, a stale socket file is left, or the daemon is slow."""
from __future__ import annotations

import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.embed import local
from core.embed.local import SPACE, LocalProvider
from core.embed.provider import EmbeddingSpace
from core.node import Node
from core.paths import Home
from core.search import query_daemon
from core.search.query_cache import QueryVectorStore
from core.search.query_daemon import LOCK_NAME, QueryDaemon, ask, socket_path
from core.search.query_vectors import QueryEmbedder

from test_query_cache import embedded_example_home, search_process

QUESTION = "who reviews a change before the deploy with a xylophone"   # xylophone: a word no page holds


@pytest.fixture(scope="module")
def embedded_example(tmp_path_factory) -> Home:
    return embedded_example_home(tmp_path_factory.mktemp("qdaemon"))


@pytest.fixture(scope="module")
def company(embedded_example) -> Any:
    with Node.open(embedded_example) as node:
        return node.company


def the_models_own(text: str) -> np.ndarray:
    provider = LocalProvider(threads=1)
    try:
        return np.asarray(provider.embed([text], timeout=60)[0], dtype=np.float32)
    finally:
        provider.close()


def same_vector(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal to float rounding: one session may differ from another in a vector's last bits (prepacking, the
    instruction set's kernels: core/embed/local.py), never more."""
    return a.shape == b.shape and float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) > 0.99999


def wait_for(what: Callable[[], bool], seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def served(root: Path) -> bool:
    """Wait until the home's daemon answers with a vector (its first question starts its model's load)."""
    return wait_for(lambda: ask(root, SPACE.key(), SPACE.dimensions, "warm", timeout_s=30)[0] is not None)


def other_space_factory(company: Any, *, threads: int | None = None) -> LocalProvider:
    """The real local model, under another space's name (another tokenizer): a daemon of another model."""
    provider = LocalProvider(threads=threads or 1)
    provider.space = EmbeddingSpace("local", SPACE.model, SPACE.dimensions, tokenizer="0" * 16)
    return provider


# -- a server of our own making: a daemon that answers wrongly, or late ------------------------------------

class FakeDaemon:
    """A real unix socket server on the home's socket path that answers `reply(request)` — or, when `reply`
    is None, reads the question and answers nothing until it is closed."""

    def __init__(self, root: Path, reply: Callable[[dict[str, Any]], list[bytes]] | None) -> None:
        self.reply = reply
        self.asked = threading.Event()
        self.done = threading.Event()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(socket_path(root)))
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            size = struct.unpack(">I", conn.recv(4))[0]
            request = json.loads(conn.recv(size))
            self.asked.set()
            if self.reply is None:
                self.done.wait(60)
                return
            try:
                for message in self.reply(request):
                    conn.sendall(struct.pack(">I", len(message)) + message)
            except OSError:   # the client took what it needed and left (a refusal read, the rest unsent)
                pass

    def close(self) -> None:
        self.done.set()
        self.sock.close()
        self.thread.join()


@pytest.fixture
def home_root(tmp_path) -> Iterator[Path]:
    root = tmp_path / "h"
    root.mkdir()
    yield root


# -- a real worker, a real search ----------------------------------------------------------------------------

def stop_or_kill(worker: subprocess.Popen, root: Path) -> bool:
    """ctrl+c, and wait for the worker to end its pass and close; past 300 s (a machine far busier than CI's) kill
    it and take its socket away, so that one slow stop fails its own test and not every later one of this home's."""
    worker.send_signal(signal.SIGINT)
    try:
        worker.wait(timeout=300)
        return True
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
        socket_path(root).unlink(missing_ok=True)      # its lock went with it; the file is what a kill leaves
        return False


def test_a_running_worker_serves_a_search_process_its_query_vector_and_the_search_loads_no_model(embedded_example):
    root = embedded_example.root
    worker = subprocess.Popen([sys.executable, "-m", "crewlet_tui.cli", "--home", str(root), "worker"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert wait_for(lambda: socket_path(root).exists() or worker.poll() is not None), "the worker never served"
        assert worker.poll() is None, worker.stderr.read().decode() if worker.stderr else ""
        assert stat.S_IMODE(socket_path(root).stat().st_mode) == 0o600        # the socket is the user's alone
        # the worker loads no model until asked: the first question is embedded by the search's own (the daemon
        # refuses at once while it loads), every later one by the worker's
        first, _ = search_process(embedded_example, "the first question beside the worker")
        assert first["outcome"]["query_vector"] in ("model", "daemon", None)
        assert served(root)
        answer, heavy = search_process(embedded_example, QUESTION)
        assert answer["outcome"]["served_mode"] == "hybrid"
        assert answer["outcome"]["query_vector"] == "daemon"
        # the search loaded no model, nor the tokenizer (the daemon said which words are the model's, for the
        # relevance floor: "xylophone" is one no page holds)
        assert heavy == []
        assert answer["outcome"]["floor"]["known_words"] is True
        # the daemon's vector is the model's own, and the search kept it on disk as it keeps its own
        store = QueryVectorStore(embedded_example.query_cache_file, readonly=True)
        kept = store.get(SPACE.key(), QUESTION, SPACE.dimensions)
        store.close()
        assert kept is not None and same_vector(kept, the_models_own(QUESTION))
        again, heavy = search_process(embedded_example, QUESTION)
        assert again["outcome"]["query_vector"] == "cache" and again["hits"] == answer["hits"]
    finally:
        stopped_in_time = stop_or_kill(worker, root)
    assert stopped_in_time, "the worker did not stop within 300 s of ctrl+c (killed, so the next tests run)"
    assert not socket_path(root).exists()                                     # a worker that stops cleans up


def test_with_no_daemon_the_search_process_loads_the_model_and_says_so(embedded_example):
    assert not socket_path(embedded_example.root).exists()
    answer, heavy = search_process(embedded_example, "a question nobody asked about the deploy")
    assert answer["outcome"]["query_vector"] in ("model", None)     # None: past the 2 s bound on a loaded machine
    assert "onnxruntime" in heavy
    keyword = subprocess.run([sys.executable, "-m", "crewlet_tui.cli", "--home", str(embedded_example.root), "search",
                              "--mode", "keyword", "--json", "deploy"], capture_output=True, text=True, timeout=300)
    assert keyword.returncode == 0, keyword.stderr[-2000:]
    assert json.loads(keyword.stdout)["outcome"]["query_vector"] is None     # no vector was used


# -- the daemon in this process ----------------------------------------------------------------------------------

def test_the_daemon_answers_its_own_space_with_the_models_vector_and_refuses_another(embedded_example, company):
    root = embedded_example.root
    with QueryDaemon(root, lambda: company, threads=1) as daemon:
        assert daemon.ready.wait(120)
        vector, why = ask(root, SPACE.key(), SPACE.dimensions, "warm", timeout_s=30)
        assert (vector is None and why == "refused: the model is loading here") or daemon.loaded.is_set()
        assert daemon.loaded.wait(120) and served(root)
        local._told_words.clear()
        vector, why = ask(root, SPACE.key(), SPACE.dimensions, "rollback plan zzzqqq", timeout_s=30)
        assert why == "" and vector is not None and same_vector(vector, the_models_own("rollback plan zzzqqq"))
        # what the model's own tokenizer says
        assert local._told_words == {w: local.shared_tokenizer().token_to_id(w) is not None
                                     for w in ("rollback", "plan", "zzzqqq")}
        assert local._told_words["plan"] and not local._told_words["zzzqqq"]
        other = EmbeddingSpace("local", SPACE.model, SPACE.dimensions, tokenizer="0" * 16).key()
        vector, why = ask(root, other, SPACE.dimensions, "rollback plan", timeout_s=30)
        assert vector is None and why.startswith("refused: this process holds " + SPACE.key())
        vector, why = ask(root, SPACE.key(), 768, "rollback plan", timeout_s=30)     # another width: not taken
        assert vector is None and "asked" in why
    assert not socket_path(root).exists()


def test_a_daemon_of_another_model_is_refused_and_the_search_embeds_with_its_own(home_root, company):
    with QueryDaemon(home_root, lambda: company, embedder=QueryEmbedder(other_space_factory)) as daemon:
        assert daemon.ready.wait(120)
        daemon._load(daemon.embedder.provider(company))
        assert daemon.loaded.wait(120)      # loaded: the refusal below is of the model, not of a load
        embedder = QueryEmbedder(threads=1, daemon=home_root, daemon_timeout_s=30)
        query_daemon._serving.discard(str(home_root.resolve()))   # as if this were another process
        try:
            qv = embedder.vector(company, "rollback plan")
        finally:
            embedder.close()
        assert qv.source == "model" and same_vector(qv.vector, the_models_own("rollback plan"))


def test_a_stale_socket_file_is_removed_and_the_model_answers(home_root, company):
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path(home_root)))     # a server that died: its file is left, nobody listens
    stale.close()
    assert socket_path(home_root).exists()
    embedder = QueryEmbedder(threads=1, daemon=home_root, daemon_timeout_s=30)
    try:
        qv = embedder.vector(company, "rollback plan")
    finally:
        embedder.close()
    assert qv.source == "model" and qv.vector is not None
    assert not socket_path(home_root).exists()     # the lock was free: nobody serves, the file went


def test_a_stale_socket_file_is_kept_while_its_lock_is_held_and_replaced_by_the_next_server(home_root, company):
    import fcntl

    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(socket_path(home_root)))
    stale.close()
    held = os.open(home_root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(held, fcntl.LOCK_EX)                # a server still starting (it holds the lock)
    try:
        vector, why = ask(home_root, SPACE.key(), SPACE.dimensions, "x", timeout_s=5)
        assert vector is None and why == "no daemon" and socket_path(home_root).exists()
    finally:
        os.close(held)
    with QueryDaemon(home_root, lambda: company, threads=1) as daemon:   # the next server takes the path over
        assert daemon.ready.wait(120) and served(home_root)


def test_a_slow_daemon_times_out_to_the_local_model(home_root, company):
    slow = FakeDaemon(home_root, reply=None)
    embedder = QueryEmbedder(threads=1, daemon=home_root, daemon_timeout_s=0.2)
    try:
        qv = embedder.vector(company, "rollback plan")
        assert slow.asked.is_set()
    finally:
        embedder.close()
        slow.close()
    assert qv.source == "model" and same_vector(qv.vector, the_models_own("rollback plan"))


@pytest.mark.parametrize("reply", [
    lambda r: [json.dumps({"ok": True, "space": r["space"], "dims": 384}).encode(),
               np.full(384, np.nan, dtype="<f4").tobytes()],                       # not finite
    lambda r: [json.dumps({"ok": True, "space": r["space"], "dims": 384}).encode(),
               np.ones(100, dtype="<f4").tobytes()],                               # too few bytes
    lambda r: [json.dumps({"ok": True, "space": "local:other:384", "dims": 384}).encode(),
               np.ones(384, dtype="<f4").tobytes()],                               # another space named
    lambda r: [b"not json"],
], ids=["nan", "short", "other-space", "garbage"])
def test_a_wrong_answer_is_never_taken(home_root, company, reply):
    wrong = FakeDaemon(home_root, reply=reply)
    embedder = QueryEmbedder(threads=1, daemon=home_root, daemon_timeout_s=30)
    try:
        qv = embedder.vector(company, "rollback plan")
    finally:
        embedder.close()
        wrong.close()
    assert wrong.asked.is_set()
    assert qv.source == "model" and same_vector(qv.vector, the_models_own("rollback plan"))


def test_one_server_a_home_and_the_next_takes_over_when_it_stops(home_root, company):
    first = QueryDaemon(home_root, lambda: company, threads=1).start()
    assert first.ready.wait(120)
    second = QueryDaemon(home_root, lambda: company, threads=1, retry_s=0.05).start()
    try:
        assert socket_path(home_root).stat().st_ino == first._inode   # the first serves; the second waits
        first.close()
        assert second.ready.wait(120) and served(home_root)
    finally:
        first.close()
        second.close()


def test_crewlet_mcp_serves_query_vectors_while_it_runs_and_cleans_up_when_its_client_leaves(embedded_example):
    root = embedded_example.root
    mcp = subprocess.Popen([sys.executable, "-m", "crewlet_tui.cli", "--home", str(root), "mcp"],
                           stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: socket_path(root).exists() or mcp.poll() is not None), "crewlet mcp never served"
        assert mcp.poll() is None, mcp.stderr.read().decode() if mcp.stderr else ""
        assert served(root)
        vector, why = ask(root, SPACE.key(), SPACE.dimensions, "rollback plan", timeout_s=30)
        assert why == "" and vector is not None and same_vector(vector, the_models_own("rollback plan"))
    finally:
        assert mcp.stdin is not None
        mcp.stdin.close()                          # the client left
        mcp.wait(timeout=120)
    assert not socket_path(root).exists()


def test_a_home_whose_path_is_too_long_for_a_socket_serves_nothing_and_frees_the_lock(tmp_path, company):
    import fcntl

    root = tmp_path / ("h" * 100)
    root.mkdir()
    daemon = QueryDaemon(root, lambda: company, threads=1).start()
    assert daemon._thread is not None
    daemon._thread.join(120)
    assert not daemon.ready.is_set() and not socket_path(root).exists()
    fd = os.open(root / LOCK_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # free: another process of the home may serve
    finally:
        os.close(fd)
        daemon.close()
    embedder = QueryEmbedder(threads=1, daemon=root, daemon_timeout_s=30)
    try:
        assert embedder.vector(company, "rollback plan").source == "model"
    finally:
        embedder.close()


def test_after_a_configuration_edit_the_daemon_serves_with_the_new_provider_once_it_has_loaded(home_root, company):
    import dataclasses

    current = {"company": company}
    made: list[Any] = []

    def factory(c: Any, *, threads: int | None = None) -> LocalProvider:
        made.append(LocalProvider(threads=threads or 1))
        return made[-1]

    with QueryDaemon(home_root, lambda: current["company"], embedder=QueryEmbedder(factory, threads=1)) as daemon:
        assert daemon.ready.wait(120) and served(home_root) and len(made) == 1
        # company.toml edited: another provider (its own batch size), whose model this daemon has not loaded
        current["company"] = dataclasses.replace(company, embeddings=dataclasses.replace(
            company.embeddings, max_batch_inputs=7))
        vector, why = ask(home_root, SPACE.key(), SPACE.dimensions, "rollback plan", timeout_s=30)
        assert len(made) == 2 and made[0] is not made[1]
        assert why in ("", "refused: the model is loading here")   # "" when the load beat the check
        assert served(home_root) and daemon._loaded_for is made[1]
