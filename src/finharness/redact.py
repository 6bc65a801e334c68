"""Secrets never leave the process: the one redaction step every string finharness stores or prints passes.

What counts as a secret:
- the value of every environment variable whose name says it holds a credential (KEY_NAME: `*_API_KEY`,
  `*_TOKEN`, `*_SECRET`, `*_SECRET_KEY`, `*_PASSWORD`: OPENAI_API_KEY, ANTHROPIC_API_KEY, HF_TOKEN...), read at
  each use, so a key set later is covered too;
- every key a backend read from a variable of another name (`?key_env=NAME`: `note_secret`);
- the userinfo of any URL (`http://user:KEY@host/v1` -> `http://[redacted]@host/v1`), and the value of a
  credential-named URL parameter (`?api_key=...`, `&token=...`).

A value shorter than MIN_SECRET_LENGTH is left alone: no real key is that short, and replacing `1` everywhere
would wreck the text around it. Where the step is applied: the run store's rows (core/store.py), results.json
and samples.jsonl (core/results.py), manifest.json (core/pool.py), the HTML report (report/html.py), and the
terminal: every command's stdout and stderr (log lines and tracebacks included) pass `redacting_streams`
(cli_plugins.py, cli.py).

This module imports nothing from finharness: anything in the package may import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from typing import Any, Iterator, TextIO

REDACTED = "[redacted]"
"""What a secret is replaced by (an environment variable's value says which: `[redacted $OPENAI_API_KEY]`)."""

MIN_SECRET_LENGTH = 8
"""Values shorter than this are not treated as secrets."""

KEY_NAME = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|SECRET_KEY|SECRET_ACCESS_KEY|PASSWORD|PASSWD)$", re.I)
"""Names of environment variables whose values are secrets."""

URL_USERINFO = re.compile(r"(://)[^\s/?#@\"'<>\\]+@")
"""The `user:password@` of a URL (kept: the scheme and host)."""

SECRET_PARAMETER = re.compile(r"([?&;](?:api_?key|access_token|token|password|secret|key)=)[^&;\s\"'<>\\#]+", re.I)
"""A credential passed as a URL parameter (`?api_key=...`); its name is kept, its value replaced."""

_PARAMETER_ENDINGS = ("key=", "token=", "password=", "secret=")
"""What every SECRET_PARAMETER name ends with: looked for in the lowered text first (faster than the case-blind
pattern, which then runs only on text that has one)."""

_noted: dict[str, str] = {}
"""Secrets read by the harness itself (a key from `?key_env=NAME`) -> the label shown in their place."""

_lock = threading.Lock()
_seen_environ: dict[Any, Any] | None = None
_secrets: list[tuple[str, str]] = []
"""(secret, replacement), longest first, as of `_seen_environ`."""


def note_secret(value: str | None, name: str) -> None:
    """Redact `value` (a key read from variable `name`) from everything from now on, whatever its name."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _noted[value] = f"[redacted ${name}]"
            _refresh(force=True)


def _refresh(force: bool = False) -> None:
    """Recompute the secrets when the environment changed (the lock is held). os.environ keeps its encoded
    items in `_data`: comparing that dict with the one seen last costs ~1 µs, a scan of the names ~100 µs."""
    global _seen_environ, _secrets
    data = getattr(os.environ, "_data", None)
    if not force and data is not None and data == _seen_environ:
        return
    found = dict(_noted)
    for name, value in os.environ.items():
        if len(value) >= MIN_SECRET_LENGTH and KEY_NAME.search(name):
            found.setdefault(value, f"[redacted ${name}]")
    pairs = set()
    for value, label in found.items():
        pairs.add((value, label))
        for ascii_only in (True, False):  # as it stands inside JSON text, \u-escaped or not
            pairs.add((json.dumps(value, ensure_ascii=ascii_only)[1:-1], label))
    _secrets = sorted(pairs, key=lambda pair: (-len(pair[0]), pair))
    _seen_environ = dict(data) if data is not None else None


def secrets() -> list[tuple[str, str]]:
    """(secret, its replacement) for every secret known now, longest first."""
    with _lock:
        _refresh()
        return list(_secrets)


def redact(text: str) -> str:
    """`text` with every secret (see the module docstring) replaced. Also valid on JSON text: the
    replacements hold no quote or backslash."""
    if not text:
        return text
    for secret, label in secrets():
        if secret in text:
            text = text.replace(secret, label)
    if "://" in text:
        text = URL_USERINFO.sub(r"\1" + REDACTED + "@", text)
    if "=" in text:
        lowered = text.lower()
        if any(ending in lowered for ending in _PARAMETER_ENDINGS):
            text = SECRET_PARAMETER.sub(r"\1" + REDACTED, text)
    return text


def redact_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row's values with every string among them redacted (the run store's writes)."""
    return tuple(redact(a) if isinstance(a, str) else a for a in args)


class RedactingStream:
    """A text stream that redacts what is written to it and passes everything else to the stream it wraps."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text) if isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def redacting_streams() -> Iterator[None]:
    """sys.stdout and sys.stderr redacted while the block runs (once: nested blocks add nothing)."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
