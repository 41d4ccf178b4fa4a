"""The plumbing every fake HTTP service of the tests shares (the embedding and chat APIs, Confluence, Plane):
a real threading server on 127.0.0.1 at a free port, started and stopped with the test, each request handed
to the subclass's `_handle(handler)`. A client that gives up (its timeout, a cancel) is expected, not an error."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalHttpServer:
    name = "local"                      # the serving thread's name: "<name>-server"
    path = ""                           # what `url` adds after host and port ("/v1" for an OpenAI-shaped API)
    protocol = "HTTP/1.0"
    methods: tuple[str, ...] = ("POST",)

    def __init__(self) -> None:
        self._stopping = threading.Event()       # set by stop: a request waiting on purpose ends its wait
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self.path}"

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def start(self) -> Any:
        server = self

        def go(handler: BaseHTTPRequestHandler) -> None:
            try:
                server._handle(handler)
            except (BrokenPipeError, ConnectionResetError):
                pass                                  # the client gave up (its timeout, a cancel): expected

        attrs: dict[str, Any] = {"protocol_version": self.protocol,
                                 "log_message": lambda handler, *args: None}   # keep pytest's output clean
        attrs |= {f"do_{method}": go for method in self.methods}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (BaseHTTPRequestHandler,), attrs))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"{self.name}-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
