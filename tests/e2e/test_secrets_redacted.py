"""No key reaches an output (issue 26 item 4, issue 34 item 3): a key is planted in every place a server or a user
can put one, and every output of the runs is searched for it, the run store's raw bytes included.

Planted (PLANTED): the OpenAI key in $OPENAI_API_KEY (sent as `Authorization: Bearer`), which the server echoes
in a 400's error body, in the replies, and in its /models entry (the model's identity); a key read through
`?key_env=NAME` under a name no pattern knows (Anthropic's `x-api-key`, echoed back in replies and errors);
$HF_TOKEN, which a reply quotes; a URL's userinfo inside a reply; and, refused before any call, a key in the base
URL's userinfo (also one with a `/`, which no URL parser reads as userinfo), in a `?api_key=` option, and given as
`?key_env=` itself (also one that looks like a variable's name). A third run's key, with `/`, `+` and `=` in it,
is echoed by its server in every encoding (ECHOES: percent-encoded with upper- and lower-case hex and by
quote_plus, base64 standard, unpadded and URL-safe, inside the base64 of HTTP basic auth and of the Bearer header,
JSON-escaped with `\\/`, and in part) in replies, error bodies and /models. Searched (each run's results.json,
samples.jsonl, manifest.json, store.sqlite with its -wal, the HTML report over both runs, every command's stdout
and stderr): each planted key and each echoed form; for the keys refused before any call, every piece of WINDOW
characters of them. A `?key_env=` naming an unset variable is refused before the server sees any request, with
one error line that names it.

`python tests/e2e/test_secrets_redacted.py SRC_DIR` prints the same search made with the finharness whose
sources are in SRC_DIR (an older checkout, to see what it leaked).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import quote, quote_plus

OPENAI_KEY = "sk-plantedOpenAI-7f3c9a2e41b8"
KEY_ENV_NAME = "LEAKY_CREDENTIAL"
KEY_ENV_KEY = "ant-plantedViaKeyEnv-5d1e88"
HF_TOKEN = "hf_plantedHubToken_93ac10"
REPLY_USERINFO = "UserinfoInReply-4b2f"
BASE_URL_KEY = "BaseUrlUserinfo-61d0"
OPTION_KEY = "SpecOptionKey-22aa7"
VARIABLE_KEY = "sk-GivenAsVariableName-09be"
ENCODED_KEY = "sk-proj-Enc0ded/Key+Planted=9f4e2a7c1d"
SLASH_USERINFO_KEY = "Sl4shed/Cr3dXq+K3y=77ac"
NAME_LIKE_KEY = "skPlantedLooksLikeName7c4e91Ab"
UNSET_VARIABLE = "FINHARNESS_TEST_UNSET_KEY"

WINDOW = 8
"""A piece of a key this long counts as a leak of the key (finharness.redact.WINDOW)."""


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


ECHOES = {
    "percent-encoded": quote(ENCODED_KEY, safe=""),
    "percent-encoded, lower-case hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote(ENCODED_KEY, safe="")),
    "quote_plus": quote_plus(ENCODED_KEY),
    "base64": b64(ENCODED_KEY),
    "base64 without padding": b64(ENCODED_KEY).rstrip("="),
    "base64 URL-safe": base64.urlsafe_b64encode(ENCODED_KEY.encode()).decode(),
    "base64 of user:key (basic auth)": b64(f"bob:{ENCODED_KEY}"),
    "base64 of the Bearer header": b64(f"Bearer {ENCODED_KEY}"),
    "JSON-escaped with \\/": json.dumps(ENCODED_KEY)[1:-1].replace("/", "\\/"),
    "in part (18 characters)": ENCODED_KEY[10:28],
    "in part (its last 12)": ENCODED_KEY[-12:],
}
"""How the encoding server echoes its caller's key (ENCODED_KEY), by name."""

SEARCHED_ECHOES = {name: echo[12:-4] if name.startswith("base64 of") else echo for name, echo in ECHOES.items()}
"""What each echo leaves if not redacted: a base64 of the key behind other text only in the characters that depend on
the key alone (12 in, 4 short of the end: past `bob:` and `Bearer `, and their alignment)."""

PLANTED = {
    "$OPENAI_API_KEY (echoed in error bodies, replies, /models)": OPENAI_KEY,
    f"?key_env={KEY_ENV_NAME} (x-api-key echoed)": KEY_ENV_KEY,
    "$HF_TOKEN (quoted in a reply)": HF_TOKEN,
    "URL userinfo in a reply": REPLY_USERINFO,
    "base URL userinfo (user:KEY@host)": BASE_URL_KEY,
    "base URL userinfo with a / in KEY": SLASH_USERINFO_KEY,
    "?api_key= spec option": OPTION_KEY,
    "?key_env= holding the key itself": VARIABLE_KEY,
    "?key_env= holding a key that looks like a name": NAME_LIKE_KEY,
    "$OPENAI_API_KEY with / + = (echoed encoded)": ENCODED_KEY,
    **{f"$OPENAI_API_KEY echoed {name}": echo for name, echo in SEARCHED_ECHOES.items()},
}

REFUSED = {"base URL userinfo": BASE_URL_KEY, "base URL userinfo with /": SLASH_USERINFO_KEY, "?api_key=": OPTION_KEY,
           "?key_env=KEY": VARIABLE_KEY, "?key_env=NAME-LIKE KEY": NAME_LIKE_KEY}
"""Commands refused before any call -> the key each was given: no piece of WINDOW characters of it may show."""


def _fails(text: str) -> bool:
    """A third of the questions get a 400 (by a hash of the question: the same each run)."""
    return hashlib.sha256(text.encode()).digest()[0] % 3 == 0


class LeakyHandler(BaseHTTPRequestHandler):
    """An OpenAI- and Anthropic-shaped server that repeats the caller's key wherever it can."""

    seen: list[str] = []
    """Every request's method and path, in arrival order (shared by the servers of a test)."""

    def log_message(self, *args) -> None:
        pass

    def echo(self, key: str | None) -> str:
        """How this server repeats the key it was sent."""
        return str(key)

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Authorization", self.headers.get("Authorization") or "")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path}")
        if self.path.endswith("/models"):
            self._send(200, {"data": [{"id": "leaky", "owned_by": f"you, {self.echo(self.headers.get('Authorization'))}"}]})
        else:
            self._send(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        self.seen.append(f"POST {self.path}")
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        question = body["messages"][-1]["content"]
        key = self.headers.get("Authorization") or self.headers.get("x-api-key")
        if _fails(question):
            self._send(400, {"error": {"type": "invalid_request_error",
                                       "message": f"invalid request; you sent the key {self.echo(key)}"}})
            return
        text = (f"Answer: B. (debug: you sent {self.echo(key)}; HF token {HF_TOKEN}; mirror at "
                f"http://admin:{REPLY_USERINFO}@internal.example/v1)")
        if self.path.endswith("/messages"):
            self._send(200, {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                             "usage": {"input_tokens": 10, "output_tokens": 12}})
        else:
            self._send(200, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 10, "completion_tokens": 12}})


class EncodingHandler(LeakyHandler):
    """The same server, echoing the key in every encoding of ECHOES (the key it was sent, whatever it is)."""

    def echo(self, key: str | None) -> str:
        sent = (key or "").removeprefix("Bearer ")
        forms = {name: echo.replace(ENCODED_KEY, sent) for name, echo in ECHOES.items()} if sent == ENCODED_KEY else {}
        return " | ".join(f"{name}: {form}" for name, form in forms.items())


@contextlib.contextmanager
def leaky_server(handler: type[LeakyHandler] = LeakyHandler) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def finharness(args: list[str], cwd: Path, pythonpath: str | None,
               openai_key: str = OPENAI_KEY) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": openai_key, KEY_ENV_NAME: KEY_ENV_KEY, "HF_TOKEN": HF_TOKEN,
           "COLUMNS": "200"}
    env.pop("FINHARNESS_STORE", None)
    env.pop(UNSET_VARIABLE, None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-m", "finharness", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def plant_and_search(tmp: Path, pythonpath: str | None = None
                     ) -> tuple[dict[str, list[str]], dict[str, int], dict[str, str]]:
    """Run everything; (planted place -> the outputs holding its key (for a refused key: any WINDOW characters of
    it), command -> exit status, output -> its text)."""
    outputs: dict[str, str] = {}
    codes: dict[str, int] = {}

    def command(name: str, args: list[str], openai_key: str = OPENAI_KEY) -> None:
        proc = finharness(args, tmp, pythonpath, openai_key)
        codes[name] = proc.returncode
        outputs[f"{name}: stdout"] = proc.stdout
        outputs[f"{name}: stderr"] = proc.stderr

    with leaky_server(EncodingHandler) as url:
        command("run encodings", ["run", "demo", "--model", f"openai:leaky@{url}", "--limit", "6", "--out",
                                  "encodings"], openai_key=ENCODED_KEY)
        host = url.removeprefix("http://")
        command("base URL userinfo with /", ["run", "demo", "--model",
                                             f"openai:leaky@http://bob:{SLASH_USERINFO_KEY}@{host}", "--limit", "1",
                                             "--out", "userinfo-slash"])
        command("?key_env=NAME-LIKE KEY", ["run", "demo", "--model", f"openai:leaky@{url}?key_env={NAME_LIKE_KEY}",
                                           "--limit", "1", "--out", "name-like"])
        before = len(LeakyHandler.seen)
        command("?key_env=UNSET", ["run", "demo", "--model", f"openai:leaky@{url}?key_env={UNSET_VARIABLE}",
                                   "--limit", "1", "--out", "unset"])
        codes["requests while ?key_env=UNSET"] = len(LeakyHandler.seen) - before
        command("?api_key=$HF_TOKEN", ["run", "demo", "--model", f"openai:leaky@{url}?api_key={HF_TOKEN}",
                                       "--limit", "1", "--out", "option-hf"])
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
    refused = set(REFUSED.values())
    leaks = {place: sorted(where for where, text in outputs.items()  # as it is, and as it stands in JSON text
                           if any(piece in text for piece in (pieces(key) if key in refused else
                                                              {key, json.dumps(key)[1:-1]})))
             for place, key in PLANTED.items()}
    return leaks, codes, outputs


def pieces(key: str) -> list[str]:
    """Every WINDOW characters of `key`."""
    return [key[i:i + WINDOW] for i in range(len(key) - WINDOW + 1)]


def test_no_planted_key_reaches_any_output(tmp_path: Path):
    leaks, codes, outputs = plant_and_search(tmp_path)
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
    for refused in (*REFUSED, "?key_env=UNSET", "?api_key=$HF_TOKEN"):  # before any file: one error line each
        assert codes[refused] == 2
        assert outputs[f"{refused}: stderr"].startswith("error: ") and outputs[f"{refused}: stderr"].count("\n") == 1
    assert not any(path.startswith(("userinfo", "option", "variable", "name-like", "unset")) for path in written)
    assert f"${UNSET_VARIABLE} is not set" in outputs["?key_env=UNSET: stderr"]
    assert codes["requests while ?key_env=UNSET"] == 0, "refused before any call"
    assert "?api_key=[redacted $HF_TOKEN]'" in outputs["?api_key=$HF_TOKEN: stderr"]  # reads as one redacted value
    results = json.loads((tmp_path / "encodings" / "results.json").read_text(encoding="utf-8"))
    assert codes["run encodings"] == 1 and results["counts"]["failed_samples"] >= 1  # the 400s: error bodies too
    replies = [json.loads(line)["response"] for line in
               (tmp_path / "encodings" / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    reply = next(r for r in replies if r)  # each echo is there, redacted (a base64 behind other text keeps its start)
    assert all(re.search(re.escape(name) + r": [A-Za-z0-9+/]{0,12}\[redacted \$OPENAI_API_KEY\]", reply)
               for name in ECHOES), reply
    assert leaks == {place: [] for place in PLANTED}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        found, statuses, _ = plant_and_search(Path(folder), sys.argv[1] if len(sys.argv) > 1 else None)
    print(json.dumps({"exit_status": statuses, "leaks": found}, indent=2))
