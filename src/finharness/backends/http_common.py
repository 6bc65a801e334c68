"""HTTP plumbing shared by the remote backends (OpenAI-compatible, OpenAI completions, Anthropic).

One place turns every way an HTTP call can go wrong into a `BackendError`
that says whether trying again may help; the retrying itself is done once,
by `finharness.core.retry`, never here.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import logging
import os
import re
import ssl
import time
from dataclasses import dataclass, field, fields
from typing import Any, Mapping
from urllib.parse import parse_qsl, unquote_plus

import httpx

from ..core.backend import BackendError, SpecError
from ..redact import REDACTED, known_prefix, note_secret, redact
from .spec_options import float_option as spec_float_option
from .spec_options import int_option as spec_int_option
from .spec_options import run_only

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""4xx statuses worth retrying (request timeout, conflict, rate limit); every 5xx is too."""

_MAX_ERROR_DETAIL = 300


RemoteError = BackendError
"""Remote failures are plain BackendErrors with a `kind` (kept as a name for readability)."""


@dataclass(frozen=True)
class RemoteSpec:
    """A parsed remote model spec: `SCHEME:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=S]`."""

    scheme: str
    """'openai' or 'anthropic'."""

    model: str
    """The model name sent to the server."""

    base_url: str
    """API root including the version path (e.g. http://127.0.0.1:8080/v1), no trailing slash."""

    key_env: str
    """Environment variable that holds the API key."""

    api_key: str | None
    """The key read from `key_env` (None when unset: allowed for local servers)."""

    concurrency: int
    """Connection-pool size, reported as capabilities.max_concurrency."""

    timeout: float
    """Read timeout (seconds) of one call."""

    options: Mapping[str, str] = field(default_factory=dict)
    """The backend's own options, as written in the spec (reasoning_effort, thinking_budget...)."""


@dataclass(frozen=True)
class RemoteOptions:
    """The query options every remote spec takes (`openai:m@URL?concurrency=4`); a backend's own derive from it."""

    key_env: str | None = run_only(None)
    """The environment variable holding the API key (default: the provider's, e.g. OPENAI_API_KEY); never the key."""

    concurrency: int | None = run_only(None)
    """Calls in flight at once (connection-pool size; default: the backend's, 8 for openai:)."""

    timeout: float | None = run_only(None)
    """Read timeout of one call, in seconds (default: the backend's, 120 for openai:)."""


COMMON_OPTIONS = frozenset(f.name for f in fields(RemoteOptions))
"""Options every remote spec takes."""


def own_options(declared: type[RemoteOptions]) -> tuple[str, ...]:
    """The options a remote backend's declaration adds to those every remote spec takes."""
    return tuple(f.name for f in fields(declared) if f.name not in COMMON_OPTIONS)

KEY_OPTION = re.compile(r"(?:api_?)?key|.*_key|.*token|.*secret|password|auth.*", re.I)
"""Option names that would put a key in the spec (refused: the key goes in an environment variable)."""

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What `key_env` must look like: a variable's name, not the key."""

MAX_CONCURRENCY = 1024
"""The most calls `?concurrency=` may keep open at once (the run keeps twice as many samples in flight)."""

MAX_TIMEOUT = 86_400.0
"""The longest read timeout `?timeout=` may set, in seconds (a day: longer is a hang, not a timeout)."""

MAX_INT_OPTION = 10_000_000
"""The largest integer option a remote spec takes unless it says otherwise (a thinking budget of more tokens than
any model's context is a typo)."""

_KEY_ENV_VALUE = re.compile(r"([?&;]key_env=)([^&;#]*)")


def looks_like_key(name: str) -> bool:
    """Whether a `key_env` value is more likely a key than a variable's name: a well-known key prefix (`sk-`,
    `hf_`, `ghp_`...) with 16 or more characters after it; or 16 or more characters mixing lower-case letters,
    upper-case letters and digits (a name keeps to one case: OPENAI_API_KEY, my_key); or 24 or more letters and
    digits with digits among them and no `_`."""
    prefix = known_prefix(name)
    if prefix and len(name) - len(prefix) >= 16:
        return True
    if len(name) >= 16 and any(c.islower() for c in name) and any(c.isupper() for c in name) \
            and any(c.isdigit() for c in name):
        return True
    return len(name) >= 24 and "_" not in name and any(c.isdigit() for c in name)


def variable_name(value: str) -> bool:
    """Whether `value` may be shown as the name of the variable that holds a key (not the key itself)."""
    return bool(VARIABLE_NAME.fullmatch(value)) and not looks_like_key(value)


def userinfo_hidden(spec: str) -> str:
    """`spec` with any userinfo of its BASE_URL replaced by [redacted]: everything between `://` and the last `@`
    (or between the model's `@` and a second one), whether it parses as userinfo or not: `http://user:KEY@host`,
    also with a `/`, `?` or `#` in KEY, which no URL parser reads as userinfo."""
    last = spec.rfind("@")
    scheme = spec.find("://")
    start = scheme + 3 if 0 <= scheme < last else spec.find("@") + 1
    return spec if start > last else spec[:start] + REDACTED + spec[last:]


def shown_spec(spec: str) -> str:
    """A remote spec as a message may show it: its userinfo (`userinfo_hidden`) and a key_env that is not a
    variable's name (it may be the key) replaced by [redacted], the rest redacted."""
    shown = _KEY_ENV_VALUE.sub(lambda m: m.group(1) + (m.group(2) if variable_name(unquote_plus(m.group(2)))
                                                       else REDACTED), userinfo_hidden(spec))
    return redact(shown)


def parse_remote_spec(spec: str, *, scheme: str, default_base_url: str, default_key_env: str,
                      default_concurrency: int = 8, default_timeout: float = 120.0,
                      declared: type[RemoteOptions] = RemoteOptions) -> RemoteSpec:
    """Parse and check a remote spec; raise SpecError saying what to write instead. `declared`: the backend's
    options (RemoteOptions or a subclass); those beyond RemoteOptions' are the backend's own, handed back as
    written in `RemoteSpec.options` for the backend to check.

    A key never stands in the spec (the spec is stored with every result): credentials in BASE_URL
    (`http://user:KEY@host`, also userinfo no URL parser reads, with a `/` in KEY), a key-like option (`?api_key=`)
    and a key given as key_env are refused, and no message shows them. A key_env written in the spec names a
    variable that must be set."""
    extra_options = own_options(declared)
    extras = "".join(f"&{name}=..." for name in sorted(extra_options))
    usage = (f"expected '{scheme}:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS{extras}]', "
             f"e.g. '{scheme}:my-model@http://127.0.0.1:8080/v1?concurrency=4'")
    key_hint = (f"put the key in an environment variable (default ${default_key_env}; another: ?key_env=NAME): "
                "it is sent in the request's header and never stored")
    shown = shown_spec(spec)
    if userinfo_hidden(spec) != spec:  # before anything parses the URL: a KEY with a `/` reads as host and path
        raise SpecError(f"model spec {shown!r}: BASE_URL holds credentials (USER:KEY@, or an '@' that would be "
                        f"read as them), which would be stored with every result; {key_hint}")
    prefix = scheme + ":"
    if not spec.startswith(prefix):
        raise SpecError(f"model spec {shown!r}: {usage}")
    body, _, query = spec[len(prefix):].partition("?")
    model, _, base_url = body.partition("@")
    model, base_url = model.strip(), base_url.strip().rstrip("/") or default_base_url
    if not model:
        raise SpecError(f"model spec {shown!r} names no model: {usage}")
    if not base_url.startswith(("http://", "https://")):
        raise SpecError(f"model spec {shown!r}: BASE_URL {redact(base_url)!r} must start with http:// or https://")
    try:
        host = httpx.URL(base_url).host
    except httpx.InvalidURL as err:
        raise SpecError(f"model spec {shown!r}: BASE_URL is not a URL ({err})") from None
    if not host:
        raise SpecError(f"model spec {shown!r}: BASE_URL names no host: {usage}")
    options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False))
    unknown = set(options) - COMMON_OPTIONS - set(extra_options)
    if any(KEY_OPTION.fullmatch(name) for name in unknown):
        raise SpecError(f"model spec {shown!r}: a key is never written in the spec (it would be stored with "
                        f"every result); {key_hint}")
    if unknown:
        raise SpecError(f"model spec {shown!r}: unknown option(s) {sorted(unknown)}; {usage}")
    concurrency = int_option(spec, options, "concurrency", minimum=1, maximum=MAX_CONCURRENCY)
    timeout = float_option(spec, options, "timeout", minimum=0.0, maximum=MAX_TIMEOUT, inclusive=False)
    key_env = options.get("key_env") or default_key_env
    if not variable_name(key_env):
        raise SpecError(f"model spec {shown!r}: key_env names the environment variable that holds the key "
                        "(letters, digits and _, e.g. MY_PROVIDER_KEY), never the key itself; what was given does "
                        "not look like a variable's name and is not shown; " + key_hint)
    api_key = os.environ.get(key_env) or None
    if api_key is None and options.get("key_env"):  # named on purpose: a run without its key would fail each call
        raise SpecError(f"model spec {shown!r}: ${key_env} is not set (key_env={key_env} names the variable that "
                        "holds the key); set it, or leave key_env out for a server that needs no key")
    note_secret(api_key, key_env)  # redacted from everything stored or printed, whatever the variable's name
    if api_key is None and base_url == default_base_url:
        raise SpecError(f"model spec {shown!r}: the hosted API needs a key; set ${key_env} "
                        f"(or name another variable with ?key_env=NAME)")
    own = {k: v for k, v in options.items() if k in extra_options}
    return RemoteSpec(scheme, model, base_url, key_env, api_key,
                      default_concurrency if concurrency is None else concurrency,
                      default_timeout if timeout is None else timeout, own)


def int_option(spec: str, options: Mapping[str, str], name: str, *, minimum: int,
               maximum: int = MAX_INT_OPTION) -> int | None:
    """An integer option of a remote spec (spec_options.int_option, the spec shown as shown_spec shows it)."""
    return spec_int_option(shown_spec(spec), options, name, minimum=minimum, maximum=maximum)


def float_option(spec: str, options: Mapping[str, str], name: str, *, minimum: float, maximum: float,
                 inclusive: bool = True, unit: str = "seconds") -> float | None:
    """A number option of a remote spec (spec_options.float_option, the spec shown as shown_spec shows it)."""
    return spec_float_option(shown_spec(spec), options, name, minimum=minimum, maximum=maximum, inclusive=inclusive,
                             unit=unit)


def flag_option(spec: str, options: Mapping[str, str], name: str) -> bool:
    """A yes/no option of a spec (`?name=1`, `?name=true`; absent: False)."""
    raw = options.get(name)
    if raw is None:
        return False
    if raw.lower() in ("1", "true", "yes", "on", ""):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise SpecError(f"model spec {spec!r}: {name} takes 1 or 0, got {raw!r}")


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unreadable header: fall back to our own backoff
    now = time.time() if now is None else now
    return max(when.timestamp() - now, 0.0)


class StatusError(BackendError):
    """An HTTP error status. `error`: the server's own error object (OpenAI: {"message", "type", "param",
    "code"}; Anthropic: {"type", "message"}), {} when it sent none."""

    error: Mapping[str, Any] = {}


def _error_object(response: httpx.Response) -> Mapping[str, Any]:
    """{"error": {...}} of OpenAI and Anthropic bodies, {"message": ...} for a bare {"error": "..."}."""
    try:
        body = response.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error
    return {"message": str(error)} if error is not None else {}


def error_for_status(response: httpx.Response, what: str) -> StatusError:
    """The BackendError for an HTTP error status."""
    status = response.status_code
    retryable = status in RETRYABLE_STATUSES or status >= 500
    kind = ("rate_limit" if status == 429 else "server_error" if status >= 500
            else "timeout" if status == 408 else "client_error")
    error = _error_object(response)
    detail = str(error["message"]) if "message" in error else response.text  # any other shape: the raw start
    err = StatusError(f"{what}: HTTP {status}: {detail[:_MAX_ERROR_DETAIL]}", kind=kind,
                      retryable=retryable, status=status,
                      retry_after=parse_retry_after(response.headers) if retryable else None)
    err.error = error
    return err


def bad_response(what: str, problem: str) -> RemoteError:
    """A 200 whose body is unusable (truncated JSON, no choices, no content): retryable,
    since a proxy or an overloaded server produces these and a retry usually succeeds."""
    return RemoteError(f"{what}: {problem}", kind="bad_response", retryable=True)


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context per process: httpx builds a new one (loading the CA bundle, 0.1-0.7 s here)
    for every client otherwise, and a remote run makes at least two clients."""
    return httpx.create_ssl_context()


def make_client(remote: RemoteSpec, headers: Mapping[str, str]) -> httpx.AsyncClient:
    """An AsyncClient whose pool matches the backend's concurrency.

    No transport retries (the retry layer does that) and no pool timeout: the
    runner bounds concurrency, so a request waiting for a free connection is normal."""
    return httpx.AsyncClient(
        base_url=remote.base_url,
        headers=dict(headers),
        verify=ssl_context(),
        timeout=httpx.Timeout(remote.timeout, connect=min(10.0, remote.timeout), pool=None),
        limits=httpx.Limits(max_connections=remote.concurrency,
                            max_keepalive_connections=remote.concurrency),
    )


class LoopBoundClient:
    """One AsyncClient per event loop: an httpx pool cannot outlive the loop that made it
    (tests and CLIs may call asyncio.run several times on one backend)."""

    def __init__(self, remote: RemoteSpec, headers: Mapping[str, str]):
        self._remote = remote
        self._headers = dict(headers)
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            # A client of a finished loop cannot be closed any more; dropping it frees it.
            self._client, self._loop = make_client(self._remote, self._headers), loop
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._loop = None


async def post_json(client: httpx.AsyncClient, path: str, payload: Mapping[str, Any],
                    what: str) -> Mapping[str, Any]:
    """POST JSON and return the decoded object; every failure becomes a RemoteError."""
    try:
        response = await client.post(path, json=payload)
    except httpx.TimeoutException as exc:
        raise RemoteError(f"{what}: timed out ({type(exc).__name__})", kind="timeout",
                          retryable=True) from exc
    except httpx.RequestError as exc:  # connect errors, resets, a server that hung up
        detail = str(exc) or "the server closed the connection without a response"
        raise RemoteError(f"{what}: connection error ({type(exc).__name__}: {detail})",
                          kind="connection", retryable=True) from exc
    if response.status_code >= 400:
        raise error_for_status(response, what)
    try:
        body = response.json()
    except ValueError:
        raise bad_response(what, f"truncated JSON (HTTP {response.status_code}, "
                                 f"{len(response.content)} bytes: {response.text[:80]!r})") from None
    if not isinstance(body, dict):
        raise bad_response(what, f"expected a JSON object, got {type(body).__name__}")
    return body


def fetch_json_sync(url: str, headers: Mapping[str, str], timeout: float = 5.0) -> Any | None:
    """A best-effort GET used for metadata (e.g. /models); None on any failure."""
    try:
        response = httpx.get(url, headers=dict(headers), timeout=timeout, verify=ssl_context())
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        log.info("metadata request %s failed: %s", url, exc)
        return None


def endpoint_problem(url: str, headers: Mapping[str, str], timeout: float = 5.0) -> str | None:
    """Why the server behind `url` cannot be used (None: it answered): one cheap GET before a run's first call.
    A server that answers with any status but an authentication refusal is there (some have no such route)."""
    try:
        response = httpx.get(url, headers=dict(headers), timeout=timeout, verify=ssl_context())
    except httpx.TimeoutException:
        return f"no answer from {url} within {timeout:.0f} s"
    except httpx.HTTPError as exc:
        return f"cannot reach {url} ({type(exc).__name__}: {exc})"
    if response.status_code in (401, 403):
        return f"{url} refused the credentials (HTTP {response.status_code}): check the key variable"
    return None


def warn_once(seen: set[str], key: str, message: str) -> None:
    """Log a warning the first time `key` comes up (e.g. a parameter a backend ignores)."""
    if key not in seen:
        seen.add(key)
        log.warning(message)
