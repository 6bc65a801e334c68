"""No key reaches an output (issue 26 item 4): a key is planted in every place a server or a user can put one,
and every output of the runs is searched for it, the run store's raw bytes included.

Planted (PLANTED): the OpenAI key in $OPENAI_API_KEY (sent as `Authorization: Bearer`), which the server echoes
in a 400's error body, in the replies, and in its /models entry (the model's identity); a key read through
`?key_env=NAME` under a name no pattern knows (Anthropic's `x-api-key`, echoed back in replies and errors);
$HF_TOKEN, which a reply quotes; a URL's userinfo inside a reply; and, refused before any call, a key in the base
URL's userinfo, in a `?api_key=` option, and given as `?key_env=` itself. Searched (each run's results.json,
samples.jsonl, manifest.json, store.sqlite with its -wal, the HTML report over both runs, every command's stdout
and stderr).

`python tests/e2e/test_secrets_redacted.py SRC_DIR` prints the same search made with the finharness whose
sources are in SRC_DIR (an older checkout, to see what it leaked).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

OPENAI_KEY = "sk-plantedOpenAI-7f3c9a2e41b8"
KEY_ENV_NAME = "LEAKY_CREDENTIAL"
KEY_ENV_KEY = "ant-plantedViaKeyEnv-5d1e88"
HF_TOKEN = "hf_plantedHubToken_93ac10"
REPLY_USERINFO = "UserinfoInReply-4b2f"
BASE_URL_KEY = "BaseUrlUserinfo-61d0"
OPTION_KEY = "SpecOptionKey-22aa7"
VARIABLE_KEY = "sk-GivenAsVariableName-09be"

PLANTED = {
    "$OPENAI_API_KEY (echoed in error bodies, replies, /models)": OPENAI_KEY,
    f"?key_env={KEY_ENV_NAME} (x-api-key echoed)": KEY_ENV_KEY,
    "$HF_TOKEN (quoted in a reply)": HF_TOKEN,
    "URL userinfo in a reply": REPLY_USERINFO,
    "base URL userinfo (user:KEY@host)": BASE_URL_KEY,
    "?api_key= spec option": OPTION_KEY,
    "?key_env= holding the key itself": VARIABLE_KEY,
}


def _fails(text: str) -> bool:
    """A third of the questions get a 400 (by a hash of the question: the same each run)."""
    return hashlib.sha256(text.encode()).digest()[0] % 3 == 0


class LeakyHandler(BaseHTTPRequestHandler):
    """An OpenAI- and Anthropic-shaped server that repeats the caller's key wherever it can."""

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Authorization", self.headers.get("Authorization") or "")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            self._send(200, {"data": [{"id": "leaky", "owned_by": f"you, {self.headers.get('Authorization')}"}]})
        else:
            self._send(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        question = body["messages"][-1]["content"]
        key = self.headers.get("Authorization") or self.headers.get("x-api-key")
        if _fails(question):
            self._send(400, {"error": {"type": "invalid_request_error",
                                       "message": f"invalid request; you sent the key {key}"}})
            return
        text = (f"Answer: B. (debug: you sent {key}; HF token {HF_TOKEN}; mirror at "
                f"http://admin:{REPLY_USERINFO}@internal.example/v1)")
        if self.path.endswith("/messages"):
            self._send(200, {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                             "usage": {"input_tokens": 10, "output_tokens": 12}})
        else:
            self._send(200, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 12}})


@contextlib.contextmanager
def leaky_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), LeakyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def finharness(args: list[str], cwd: Path, pythonpath: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": OPENAI_KEY, KEY_ENV_NAME: KEY_ENV_KEY, "HF_TOKEN": HF_TOKEN,
           "COLUMNS": "200"}
    env.pop("FINHARNESS_STORE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-m", "finharness", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def plant_and_search(tmp: Path, pythonpath: str | None = None) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Run everything; (planted place -> the outputs holding its key, command -> exit status)."""
    outputs: dict[str, str] = {}
    codes: dict[str, int] = {}

    def command(name: str, args: list[str]) -> None:
        proc = finharness(args, tmp, pythonpath)
        codes[name] = proc.returncode
        outputs[f"{name}: stdout"] = proc.stdout
        outputs[f"{name}: stderr"] = proc.stderr

    with leaky_server() as url:
        command("run openai", ["run", "demo", "--model", f"openai:leaky@{url}", "--limit", "6", "--out", "openai"])
        command("run anthropic", ["run", "demo", "--model", f"anthropic:leaky@{url}?key_env={KEY_ENV_NAME}",
                                  "--limit", "6", "--out", "anthropic"])
        command("report --html", ["report", "openai", "anthropic", "--html", "report.html"])
        host = url.removeprefix("http://")
        command("base URL userinfo", ["run", "demo", "--model", f"openai:leaky@http://bob:{BASE_URL_KEY}@{host}",
                                      "--limit", "1", "--out", "userinfo"])
        command("?api_key=", ["run", "demo", "--model", f"openai:leaky@{url}?api_key={OPTION_KEY}", "--limit", "1",
                              "--out", "option"])
        command("?key_env=KEY", ["run", "demo", "--model", f"openai:leaky@{url}?key_env={VARIABLE_KEY}",
                                 "--limit", "1", "--out", "variable"])
    for path in sorted(tmp.rglob("*")):
        if path.is_file():
            outputs[str(path.relative_to(tmp))] = path.read_bytes().decode("utf-8", "replace")
    leaks = {place: sorted(where for where, text in outputs.items() if key in text)
             for place, key in PLANTED.items()}
    return leaks, codes


def test_no_planted_key_reaches_any_output(tmp_path: Path):
    leaks, codes = plant_and_search(tmp_path)
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    for run in ("openai", "anthropic"):  # the searched outputs exist, and they hold what the server sent
        assert {f"{run}/results.json", f"{run}/samples.jsonl", f"{run}/manifest.json", f"{run}/store.sqlite"} <= written
        results = json.loads((tmp_path / run / "results.json").read_text(encoding="utf-8"))
        assert codes[f"run {run}"] == 1 and results["counts"]["failed_samples"] >= 1  # the 400s: incomplete
        assert any("you sent the key " in m and "[redacted $" in m for m in results["counts"]["failure_examples"])
        samples = (tmp_path / run / "samples.jsonl").read_text(encoding="utf-8")
        assert "mirror at http://[redacted]@internal.example/v1" in samples
        assert "HF token [redacted $HF_TOKEN]" in samples
    assert "[redacted $OPENAI_API_KEY]" in (tmp_path / "openai" / "results.json").read_text(encoding="utf-8")
    assert f"[redacted ${KEY_ENV_NAME}]" in (tmp_path / "anthropic" / "samples.jsonl").read_text(encoding="utf-8")
    assert codes["report --html"] == 0 and "report.html" in written
    for refused in ("base URL userinfo", "?api_key=", "?key_env=KEY"):  # refused before any file is written
        assert codes[refused] == 2
        assert not any(path.startswith(("userinfo/", "option/", "variable/")) for path in written)
    assert leaks == {place: [] for place in PLANTED}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        found, statuses = plant_and_search(Path(folder), sys.argv[1] if len(sys.argv) > 1 else None)
    print(json.dumps({"exit_status": statuses, "leaks": found}, indent=2))
