"""The HTTP layer: a threading server whose handler hands each request to the ``Emulator``.

Sockets only: parses the request line, query and body, routes ``/_emulator/`` to
``serve_control`` and everything else to ``serve_api`` of the ``Application`` it is given (the
``Emulator``), and writes one response. No emulator state lives here, and nothing here imports
the emulator: the ``Application`` protocol is all it knows of it.
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit


class Application(Protocol):
    """What the handler threads call: one ``(status, body)`` answer per request."""

    def serve_api(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        raw: bytes,
        user_project: str | None = None,
    ) -> tuple[int, bytes]: ...

    def serve_control(self, method: str, path: str, raw: bytes) -> tuple[int, bytes]: ...


class EmulatorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], emulator: Application) -> None:
        super().__init__(address, _Handler)
        self.emulator = emulator
        self.closed = False  # set by stop(): kept-alive connections get no more answers

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return  # the client went away (gcloud exits, a test closes its pool): not news
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: EmulatorHTTPServer

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave at once: no 40 ms delayed-ACK stall
    wbufsize = 64 * 1024
    server_version = "tpu-emulator"
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the emulator's, not stderr's

    def _emulator(self) -> Application:
        return self.server.emulator

    def _serve(self, method: str) -> None:
        if self.server.closed:
            self.close_connection = True
            return
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        emulator = self._emulator()
        if parts.path.startswith("/_emulator/"):
            status, payload = emulator.serve_control(method, parts.path, raw)
            content_type = "application/json"
        else:
            status, payload = emulator.serve_api(
                method, parts.path, query, raw, self.headers.get("X-Goog-User-Project")
            )
            content_type = "application/json; charset=UTF-8"
            if payload[:1] not in (b"{", b"["):
                content_type = "text/html; charset=UTF-8"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_PATCH(self) -> None:
        self._serve("PATCH")
