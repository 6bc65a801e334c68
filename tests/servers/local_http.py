"""What the local JSON stub servers share: a handler that reads and sends JSON, and serving one on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, TypeVar

S = TypeVar("S", bound=ThreadingHTTPServer)


class JSONHandler(BaseHTTPRequestHandler):
    """Keep-alive (like real servers, so a client's pool is exercised), quiet, JSON both ways."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def read_json(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")

    def send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def no_route(self) -> None:
        self.send_json(404, {"error": {"message": f"no route {self.path}"}})

    def model_listing(self, entry: dict) -> None:
        """GET /v1/models with one model `entry`; any other GET has no route."""
        if self.path.rstrip("/") != "/v1/models":
            return self.no_route()
        self.send_json(200, {"object": "list", "data": [{"object": "model", **entry}]})


@contextlib.contextmanager
def serving(server: S) -> Iterator[S]:
    """Serve `server` (bound to 127.0.0.1, an ephemeral port) in a daemon thread until the block ends."""
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
