"""Real HTTP servers on 127.0.0.1 that serve files the way the data hosts do: the Hugging Face Hub and
GitHub's raw host.

    with hub_server() as hub:
        commit = hub.commit("kensho/bizbench", {"data/test-x.parquet": b"..."}, ref="main")
        os.environ["HF_ENDPOINT"] = hub.url

Hub routes, as huggingface_hub reads them:
  GET  /api/datasets/{repo}/revision/{rev}          {"id", "sha", "siblings": [{"rfilename", "size"}]}
  HEAD /datasets/{repo}/resolve/{rev}/{path}        rev a commit id or a ref. A file with `lfs=True`
       (the default) answers 302 to the CDN, a second server (another origin, so the client keeps this
       response's metadata and drops its Authorization) with X-Repo-Commit, X-Linked-Etag ("SHA256"),
       X-Linked-Size and ETag (the pointer's id); a regular file answers 200 with ETag = its git blob
       id, X-Repo-Commit and Content-Length.
  GET  the same URL: the bytes (regular file) or the same 302 (LFS file).
  GET  CDN /lfs/{sha256}: the bytes, Range honoured (206 and Content-Range).
GitHub raw (`raw_server`): GET /{owner}/{repo}/{commit}/{path}, Range honoured.

`host.cut_next(path)` makes the next GET of a path (a CDN path for the Hub) send its Content-Length and
half the bytes, then close the connection: a download stopped mid-file. `host.requests` logs every
request (method, path, headers) so a test can check what was asked for. Unknown paths are 404s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class _Host:
    """What one server serves: bytes by path, and a router for computed answers."""

    files: dict[str, bytes] = field(default_factory=dict)
    router: Callable[[str, str], tuple[int, dict[str, str], bytes | None]] | None = None
    requests: list[Request] = field(default_factory=list)
    cuts: set[str] = field(default_factory=set)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cut_next(self, path: str) -> None:
        self.cuts.add(path)

    def gets(self, path_part: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and path_part in r.path]


def _handler(host: _Host):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _answer(self, method: str) -> None:
            with host.lock:
                host.requests.append(Request(method, self.path, {k.lower(): v for k, v in self.headers.items()}))
            status, headers, body = (host.router(method, self.path) if host.router else (404, {}, None))
            if status == 404 and self.path in host.files:
                status, headers, body = 200, {}, host.files[self.path]
            if status == 200 and body is not None and method == "GET":
                self._send_bytes(body, headers)
                return
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            if body is not None and "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if method == "GET" and body is not None:
                self.wfile.write(body)

        def _send_bytes(self, body: bytes, headers: dict[str, str]) -> None:
            start = 0
            match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
            if match:
                start = int(match.group(1))
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(part)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            with host.lock:
                cut = self.path in host.cuts
                host.cuts.discard(self.path)
            if cut:  # half the promised bytes, then the connection goes
                self.wfile.write(part[: len(part) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(part)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._answer("GET")

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer("HEAD")

    return Handler


@contextlib.contextmanager
def _serve(host: _Host) -> Iterator[_Host]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(host))
    server.daemon_threads = True
    host.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class HubFile:
    data: bytes
    lfs: bool = True


@dataclass
class Hub:
    """The Hub's state: commits of dataset repositories, refs, and the CDN that serves LFS bytes."""

    cdn: _Host
    api: _Host
    commits: dict[tuple[str, str], dict[str, HubFile]] = field(default_factory=dict)
    refs: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.api.url

    @property
    def requests(self) -> list[Request]:
        return self.api.requests

    def commit(self, repo: str, files: dict[str, bytes | HubFile], *, ref: str | None = "main",
               sha: str | None = None) -> str:
        """Add a commit holding `files` (bytes: LFS files); `ref` then points at it. Returns its id."""
        stored = {path: f if isinstance(f, HubFile) else HubFile(f) for path, f in files.items()}
        sha = sha or hashlib.sha1(json.dumps([repo, sorted((p, f.data.hex()) for p, f in stored.items()),
                                              len(self.commits)]).encode()).hexdigest()
        self.commits[(repo, sha)] = stored
        for file in stored.values():
            if file.lfs:
                self.cdn.files[f"/lfs/{hashlib.sha256(file.data).hexdigest()}"] = file.data
        if ref:
            self.refs[(repo, ref)] = sha
        return sha

    def replace_bytes(self, repo: str, sha: str, path: str, data: bytes) -> None:
        """Rewrite a file inside an existing commit (what an honest host never does): the LFS sha256 it then
        sends is that of the new bytes."""
        self.commit(repo, {**self.commits[(repo, sha)], path: HubFile(data)}, ref=None, sha=sha)

    def _resolve(self, repo: str, rev: str) -> str | None:
        return rev if (repo, rev) in self.commits else self.refs.get((repo, rev))

    def route(self, method: str, path: str) -> tuple[int, dict[str, str], bytes | None]:
        if match := re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/revision/([^/?]+)(\?.*)?", path):
            repo, rev = match.group(1), match.group(2)
            sha = self._resolve(repo, rev)
            if sha is None:
                return 404, {"X-Error-Code": "RevisionNotFound"}, b'{"error": "Invalid rev id"}'
            siblings = [{"rfilename": p, "size": len(f.data)} for p, f in sorted(self.commits[(repo, sha)].items())]
            body = json.dumps({"id": repo, "sha": sha, "siblings": siblings}).encode()
            return 200, {"Content-Type": "application/json"}, body
        match = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if not match:
            return 404, {}, None
        repo, rev, file_path = match.groups()
        sha = self._resolve(repo, rev)
        file = self.commits.get((repo, sha), {}).get(file_path) if sha else None
        if file is None:
            headers = {"X-Error-Code": "EntryNotFound"} | ({"X-Repo-Commit": sha} if sha else {})
            return 404, headers, b"Entry not found"
        if not file.lfs:
            return 200, {"X-Repo-Commit": sha, "ETag": f'"{git_blob_id(file.data)}"'}, file.data
        digest = hashlib.sha256(file.data).hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{digest}\nsize {len(file.data)}\n"
        return 302, {"Location": f"{self.cdn.url}/lfs/{digest}", "X-Repo-Commit": sha,
                     "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(file.data)),
                     "ETag": f'"{git_blob_id(pointer.encode())}"', "Content-Length": "0"}, b""


@contextlib.contextmanager
def hub_server() -> Iterator[Hub]:
    """A Hub (API and resolve URLs) and its CDN, two origins on 127.0.0.1."""
    with _serve(_Host()) as cdn, _serve(_Host()) as api:
        hub = Hub(cdn=cdn, api=api)
        api.router = hub.route
        yield hub


@contextlib.contextmanager
def raw_server(files: dict[str, bytes] | None = None) -> Iterator[_Host]:
    """GitHub's raw host: `files` maps '/OWNER/REPO/COMMIT/PATH' to bytes."""
    with _serve(_Host(files=dict(files or {}))) as raw:
        yield raw
