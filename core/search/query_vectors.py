"""The query's own vector: embedded once through the configured provider, in the corpus's space.

The last 1,024 query vectors are kept (per node: in this process's memory, and on disk in the home
through `query_cache.py`, so a query asked again by a new process needs no model), emptied when the
model changes; one query embedding is bounded at two seconds. An embedding that runs past the bound is
not abandoned: it finishes in the background and fills both caches, so asking again a moment later is
answered by meaning. `start` begins the embedding early (the CLI calls it before its index catch-up, so
the model loads while the process does other work).
"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..embed.provider import Provider, ProviderError
from ..embed.registry import make_provider
from .query_cache import QueryVectorStore

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("crewlet.search")

CACHE_SIZE = 1024
TIMEOUT_S = 2.0


@dataclass
class QueryVector:
    vector: np.ndarray | None
    space: str
    model: str
    failure: str = ""            # "" | "slow" | "failed" | "off"
    message: str = ""
    cached: bool = False


class QueryEmbedder:
    """Thread-safe. One background thread runs the provider, so a slow one never blocks past the bound."""

    def __init__(self, provider_factory: Callable[..., Provider | None] = make_provider, *,
                 cache_size: int = CACHE_SIZE, timeout_s: float = TIMEOUT_S, threads: int | None = None,
                 store: QueryVectorStore | None = None) -> None:
        self.provider_factory = provider_factory
        self.store = store
        self.cache_size = cache_size
        self.timeout_s = timeout_s
        self.threads = threads
        self._lock = threading.Lock()
        self._settings: Any = None
        self._provider: Provider | None = None
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._inflight: dict[str, Future[np.ndarray]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def provider(self, company: Any) -> Provider | None:
        """The provider as configured now; a change of model or width empties the cache."""
        settings = (company.knowledge.vectors, company.embeddings)
        with self._lock:
            if settings != self._settings:
                if self._provider is not None:
                    self._provider.close()
                self._provider = self.provider_factory(company, threads=self.threads) if company.knowledge.vectors else None
                self._settings = settings
                self._cache.clear()
                self._inflight.clear()
            return self._provider

    def _lookup(self, provider: Provider, key: str) -> tuple[np.ndarray | None, Future[np.ndarray] | None]:
        """The cached vector, else the embedding under way (started here when none is)."""
        space = provider.space.key()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit, None
            future = self._inflight.get(key)
            if future is not None:
                return None, future
        stored = self.store.get(space, key, provider.space.dimensions) if self.store is not None else None
        with self._lock:
            if stored is not None:
                if self._provider is provider:
                    self._remember(key, stored)
                return stored, None
            future = self._inflight.get(key)
            if future is None:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crewlet-query-embed")
                future = self._pool.submit(self._embed, provider, key)
                self._inflight[key] = future
            return None, future

    def start(self, company: Any, text: str) -> None:
        """Begin embedding `text` now (or find it cached), without waiting for it."""
        provider = self.provider(company)
        if provider is not None:
            self._lookup(provider, " ".join(text.split()))

    def vector(self, company: Any, text: str) -> QueryVector:
        provider = self.provider(company)
        if provider is None:
            return QueryVector(None, "", "", "off", "vectors are off (knowledge.vectors = false)")
        space = provider.space.key()
        key = " ".join(text.split())
        hit, future = self._lookup(provider, key)
        if hit is not None:
            return QueryVector(hit, space, provider.space.model, cached=True)
        assert future is not None
        try:
            vector = future.result(timeout=self.timeout_s)
        except FutureTimeout:
            return QueryVector(None, space, provider.space.model, "slow",
                               f"{provider.space.model} did not embed the query within {self.timeout_s:g} s")
        except ProviderError as exc:
            return QueryVector(None, space, provider.space.model, "failed",
                               f"{provider.space.model} could not embed the query: {exc}")
        return QueryVector(vector, space, provider.space.model)

    def _remember(self, key: str, vector: np.ndarray) -> None:
        """Into the memory cache (under the lock)."""
        self._cache[key] = vector
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _embed(self, provider: Provider, key: str) -> np.ndarray:
        import numpy as np

        try:
            vector = np.asarray(provider.embed([key], timeout=max(self.timeout_s, 15.0))[0], dtype=np.float32)
            if not np.all(np.isfinite(vector)) or not np.any(vector):
                raise ProviderError("the query's vector is not finite or is all zero")
            with self._lock:
                current = self._provider is provider
                if current:
                    self._remember(key, vector)
            if current and self.store is not None:
                self.store.put(provider.space.key(), key, vector)
            return vector
        finally:
            with self._lock:
                self._inflight.pop(key, None)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            if self._provider is not None:
                self._provider.close()
                self._provider = None
            self._settings = None
        if self.store is not None:
            self.store.close()
