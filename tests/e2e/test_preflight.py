"""Before the first call a run checks that each remote endpoint answers (issue 24 item 7): a server that is not
there, or that refuses the key, stops the run at once with one error line naming the spec (exit 2, nothing
written); a server without a /models route still runs."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.servers.fault_server import fault_server


def cli(*args: str):
    from finharness.cli import app

    return CliRunner().invoke(app, ["run", "demo", *args, "-q"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_is_not_there_stops_the_run_before_any_call(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    spec = f"openai:m@http://127.0.0.1:{free_port()}/v1"
    result = cli("--model", "fake", "--judge", spec, "--out", str(tmp_path / "a"))  # demo takes no judge: unused
    assert result.exit_code == 2 and "cannot reach" in result.output and spec in result.output
    result = cli("--model", spec, "--out", str(tmp_path / "b"))
    assert result.exit_code == 2 and "nothing was run" in result.output
    assert not (tmp_path / "b" / "results.json").exists()


class Refusing(BaseHTTPRequestHandler):
    status = 401

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("status, stops", [(401, True), (403, True), (404, False)])
def test_a_refused_key_stops_the_run_a_missing_route_does_not(tmp_path: Path, monkeypatch, status: int, stops: bool):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    handler = type("Handler", (Refusing,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        spec = f"openai:m@http://127.0.0.1:{server.server_address[1]}/v1?timeout=2"
        result = cli("--model", spec, "--out", str(tmp_path / "o"), "--limit", "1")
    finally:
        server.shutdown()
        server.server_close()
    if stops:
        assert result.exit_code == 2 and f"HTTP {status}" in result.output and "credentials" in result.output
    else:  # the server is there: the run goes on (and its POST fails: 501 from http.server)
        assert "cannot reach" not in result.output and (tmp_path / "o" / "results.json").exists()


def test_a_healthy_server_runs(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-preflight")
    with fault_server(script=[]) as server:
        result = cli("--model", f"openai:fault-model@{server.base_url}", "--out", str(tmp_path / "o"), "--limit", "2")
    assert result.exit_code == 0, result.output
