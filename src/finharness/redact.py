"""Secrets never leave the process: the one redaction step every string finharness stores or prints passes.

What counts as a secret:
- the value of every environment variable whose name says it holds a credential (KEY_NAME: `*_API_KEY`,
  `*_TOKEN`, `*_SECRET`, `*_SECRET_KEY`, `*_PASSWORD`: OPENAI_API_KEY, ANTHROPIC_API_KEY, HF_TOKEN...), read at
  each use, so a key set later is covered too;
- every key a backend read from a variable of another name (`?key_env=NAME`: `note_secret`);
- the userinfo of any URL (`http://user:KEY@host/v1` -> `http://[redacted]@host/v1`), and the value of a
  credential-named URL parameter (`?api_key=...`, `&token=...`).

A secret is found in every form a server may echo it back in (`encoded_forms`): as it is; percent-encoded
(`quote(key, safe='')`, `quote`, `quote_plus`, with upper- or lower-case hex); base64, standard and URL-safe, with
and without padding, and inside a longer base64 text at each of the three alignments (so `base64("user:" + key)`,
the HTTP basic-auth header, and `base64("Bearer " + key)` are found too); each of these also with `/` written
`\\/` and as it stands inside JSON text. And in part: a run of WINDOW or more characters of any of these forms
beyond what a well-known prefix alone makes of it (KNOWN_PREFIXES: `sk-`, `sk-ant-api03-`, `hf_`...: public, so
`sk-ant-api03-` alone is not a key), widened to all of the form it matches; a partial run of one kind of character
only (all lower-case letters, all upper-case, all digits) is left, so that a word or a number of a password does not
vanish from every reply.

How a text is searched (`_Index`, made once per set of secrets): every 4-byte piece of every form goes into one
table. A run of WINDOW (8) or more bytes of a form holds a whole 4-byte block of the text at a multiple of 4, so
the text's aligned blocks are looked up in the table (a numpy bitmap for long texts: one pass in C, no Python loop
over the text), and only a block found there is widened, byte by byte, into the run of the form it belongs to. A
run never ends inside a JSON escape and takes the backslash that escapes its first character with it, so JSON text
stays JSON (the replacements hold no quote or backslash).

A value shorter than MIN_SECRET_LENGTH is left alone: no real key is that short, and replacing `1` everywhere
would wreck the text around it. Where the step is applied: the run store's rows (core/store.py), results.json
and samples.jsonl (core/results.py), manifest.json (core/pool.py), the HTML report (report/html.py), and the
terminal: every command's stdout and stderr (log lines and tracebacks included) pass `redacting_streams`
(cli_plugins.py, cli.py).

This module imports nothing from finharness: anything in the package may import it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, TextIO
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
"""What a secret is replaced by (an environment variable's value says which: `[redacted $OPENAI_API_KEY]`)."""

MIN_SECRET_LENGTH = 8
"""Values shorter than this are not treated as secrets."""

KEY_NAME = re.compile(r"(?:^|_)(?:API_?KEY|TOKEN|SECRET|SECRET_KEY|SECRET_ACCESS_KEY|PASSWORD|PASSWD)$", re.I)
"""Names of environment variables whose values are secrets."""

URL_USERINFO = re.compile(r"(://)[^\s/?#@\"'<>\\]+@")
"""The `user:password@` of a URL (kept: the scheme and host)."""

SECRET_PARAMETER = re.compile(r"([?&;](?:api_?key|access_token|token|password|secret|key)=)(?!\[redacted[\] ])"
                              r"[^&;\s\"'<>\\#]+", re.I)
"""A credential passed as a URL parameter (`?api_key=...`); its name is kept, its value replaced (not one already
redacted: `?api_key=[redacted $HF_TOKEN]` stays whole)."""

_PARAMETER_ENDINGS = ("key=", "token=", "password=", "secret=")
"""What every SECRET_PARAMETER name ends with: looked for in the lowered text first (faster than the case-blind
pattern, which then runs only on text that has one)."""

WINDOW = 8
"""A run of a form of a secret this long (beyond its public prefix) in a text counts as the secret: a server that
echoes part of a key. The search needs WINDOW >= 2 * 4 - 1."""

KNOWN_PREFIXES = ("sk-ant-api03-", "sk-ant-admin01-", "sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-", "sk-or-v1-",
                  "sk-", "sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_", "hf_", "ghp_", "gho_",
                  "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xapp-", "gsk_", "pplx-", "r8_",
                  "nvapi-", "tvly-", "AKIA", "ASIA", "AIza")
"""Well-known key prefixes (OpenAI, Anthropic, Hugging Face, GitHub, GitLab, Slack, Stripe, AWS, Google...): public,
so a run of the key that is mostly its prefix does not count as part of it."""

NUMPY_FROM = 1024
"""Texts of this many bytes or more are searched with numpy (one pass in C); shorter ones by a Python loop over
their few blocks, which costs less than numpy's overhead (and a short line printed needs no numpy import)."""

_BITMAP_BITS = 20
"""log2 of the bitmap's size: a few thousand pieces fill ~0.3 % of it, so a 10 KB text meets a handful of false
hits, each a dictionary lookup."""

_URLSAFE = str.maketrans("+/", "-_")
_PERCENT_HEX = re.compile(r"%[0-9A-F]{2}")


def known_prefix(value: str) -> str:
    """The longest well-known key prefix `value` starts with ('' for none)."""
    return max((p for p in KNOWN_PREFIXES if value.startswith(p) and len(value) > len(p)), key=len, default="")


def _forms(value: str) -> dict[str, int]:
    """Every whole form of `value` a server may echo back -> how many of its leading characters depend on the
    value's well-known prefix alone (public)."""
    prefix = known_prefix(value)
    pairs = {(value, prefix)}  # (form, what the prefix alone makes of its start): each step below works character
    for quote_it in (lambda t: quote(t, safe=""), quote, quote_plus):  # by character, so it maps prefix to prefix
        form, public = quote_it(value), quote_it(prefix)
        pairs |= {(form, public), (_lower_hex(form), _lower_hex(public))}
    raw, known = value.encode("utf-8"), len(prefix.encode("utf-8"))
    padded = base64.b64encode(raw).decode("ascii")
    pairs |= {(padded, padded[:8 * known // 6]), (padded.rstrip("="), padded[:8 * known // 6])}
    for offset in range(3):  # the characters of base64(x + value + y) that depend on value alone, len(x) % 3 == offset
        text = base64.b64encode(bytes(offset) + raw).decode("ascii")
        start, end, public = -(-8 * offset // 6), 8 * (offset + len(raw)) // 6, 8 * (offset + known) // 6
        pairs.add((text[start:end], text[start:max(start, public)]))
    pairs |= {(form.translate(_URLSAFE), public.translate(_URLSAFE)) for form, public in pairs}
    pairs |= {(form.replace("/", "\\/"), public.replace("/", "\\/")) for form, public in pairs}  # PHP's json_encode
    pairs |= {(json.dumps(form, ensure_ascii=a)[1:-1], json.dumps(public, ensure_ascii=a)[1:-1])
              for form, public in pairs for a in (True, False)}  # a reply's text is stored and written as JSON
    forms: dict[str, int] = {}
    for form, public in pairs:
        if len(form) >= MIN_SECRET_LENGTH:
            forms[form] = min(forms.get(form, len(public)), len(public))
    return forms


def _lower_hex(text: str) -> str:
    return _PERCENT_HEX.sub(lambda m: m.group().lower(), text)


def encoded_forms(value: str) -> set[str]:
    """Every whole form of `value` a server may echo back (see the module docstring), `value` itself included."""
    return set(_forms(value))


def _kinds(run: bytes) -> int:
    """How many kinds of character `run` mixes (lower-case, upper-case, digits, others)."""
    return (any(97 <= c <= 122 for c in run) + any(65 <= c <= 90 for c in run) + any(48 <= c <= 57 for c in run)
            + any(not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122) for c in run))


@dataclass(frozen=True)
class _Form:
    """One form of a secret, as bytes."""

    data: bytes
    """The form, UTF-8."""

    public: int
    """Its leading bytes that depend on the secret's well-known prefix alone."""

    label: str
    """What replaces the secret (`[redacted $NAME]`)."""


@dataclass
class _Index:
    """Every 4-byte piece of every form of the known secrets, for one pass over a text."""

    forms: list[_Form]
    """Longest secrets' forms first."""

    pieces: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    """A piece (4 bytes read as a little-endian integer) -> (form, offset in it) of each place it stands."""

    _bitmap: Any = None
    """numpy bool array: the pieces' hash slots (made on the first long text)."""

    def __post_init__(self) -> None:
        for number, form in enumerate(self.forms):
            data = form.data
            for offset in range(len(data) - 3):
                self.pieces.setdefault(int.from_bytes(data[offset:offset + 4], "little"), []).append((number, offset))

    def hits(self, data: bytes) -> list[int]:
        """Byte offsets (multiples of 4) of the blocks of `data` that are pieces of a form."""
        count = len(data) // 4
        if len(data) < NUMPY_FROM:
            pieces = self.pieces
            blocks = memoryview(data)[:4 * count].cast("I") if sys.byteorder == "little" else [
                int.from_bytes(data[i:i + 4], "little") for i in range(0, 4 * count, 4)]
            return [4 * i for i, block in enumerate(blocks) if block in pieces]
        import numpy as np

        if self._bitmap is None:
            keys = np.fromiter(self.pieces, dtype=np.uint32, count=len(self.pieces))
            self._bitmap = np.zeros(1 << _BITMAP_BITS, dtype=bool)
            self._bitmap[_slots(np, keys)] = True
        blocks = np.frombuffer(data, dtype="<u4", count=count)
        found = np.flatnonzero(self._bitmap[_slots(np, blocks)])
        if not len(found):
            return []
        return [4 * int(i) for i, block in zip(found.tolist(), blocks[found].tolist()) if block in self.pieces]

    def runs(self, data: bytes) -> list[tuple[int, int, str]]:
        """(start, end, label): the byte ranges of `data` that are a whole form, or a run of WINDOW or more bytes of
        one beyond its public prefix that mixes kinds of characters."""
        found: dict[tuple[int, int], str] = {}
        covered: set[tuple[int, int]] = set()  # (form, data offset - form offset) of a run already widened
        for at in self.hits(data):
            for number, offset in self.pieces[int.from_bytes(data[at:at + 4], "little")]:
                if (number, at - offset) in covered:
                    continue
                form = self.forms[number]
                text = form.data
                start, form_start = at, offset  # widen the match both ways as far as it follows the form
                while start > 0 and form_start > 0 and data[start - 1] == text[form_start - 1]:
                    start, form_start = start - 1, form_start - 1
                end, form_end = at + 4, offset + 4
                while end < len(data) and form_end < len(text) and data[end] == text[form_end]:
                    end, form_end = end + 1, form_end + 1
                covered.add((number, at - offset))
                own = text[max(form_start, form.public):form_end]
                if (form_start == 0 and form_end == len(text)) or (len(own) >= WINDOW and _kinds(own) >= 2):
                    found.setdefault((start, end), form.label)
        return sorted((start, end, label) for (start, end), label in found.items())


def _slots(np: Any, values: Any) -> Any:
    """Hash slots of uint32 values in the bitmap (Fibonacci hashing: the product's top bits)."""
    return (values * np.uint32(0x9E3779B1)) >> np.uint32(32 - _BITMAP_BITS)


@dataclass(frozen=True)
class _Secret:
    """A secret and its forms, made once."""

    value: str
    """The secret."""

    label: str
    """What replaces it (`[redacted $NAME]`)."""

    forms: tuple[_Form, ...]
    """Its forms (_forms), longest first."""


def _compile(value: str, label: str) -> _Secret:
    forms = sorted(_forms(value).items(), key=lambda item: (-len(item[0]), item[0]))
    return _Secret(value, label, tuple(_Form(form.encode("utf-8"), len(form[:public].encode("utf-8")), label)
                                       for form, public in forms))


_compiled: dict[tuple[str, str], _Secret] = {}
"""(secret, label) -> its forms: made once per secret, kept while the process lives."""

_noted: dict[str, str] = {}
"""Secrets read by the harness itself (a key from `?key_env=NAME`) -> the label shown in their place."""

_lock = threading.Lock()
_seen_environ: dict[Any, Any] | None = None
_secrets: tuple[_Secret, ...] = ()
"""The secrets as of `_seen_environ`, longest first."""
_index: _Index | None = None
"""The pieces of `_secrets` (None: there is no secret)."""


def note_secret(value: str | None, name: str) -> None:
    """Redact `value` (a key read from variable `name`) from everything from now on, whatever its name."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _noted[value] = f"[redacted ${name}]"
            _refresh(force=True)


def _refresh(force: bool = False) -> None:
    """Recompute the secrets when the environment changed (the lock is held). os.environ keeps its encoded
    items in `_data`: comparing that dict with the one seen last costs ~1 µs, a scan of the names ~100 µs."""
    global _seen_environ, _secrets, _index
    data = getattr(os.environ, "_data", None)
    if not force and data is not None and data == _seen_environ:
        return
    found = dict(_noted)
    for name, value in os.environ.items():
        if len(value) >= MIN_SECRET_LENGTH and KEY_NAME.search(name):
            found.setdefault(value, f"[redacted ${name}]")
    for pair in found.items():
        if pair not in _compiled:
            _compiled[pair] = _compile(*pair)
    known = tuple(sorted((_compiled[pair] for pair in found.items()), key=lambda s: (-len(s.value), s.value)))
    if known != _secrets or _index is None and known:
        _secrets = known
        _index = _Index([form for secret in known for form in secret.forms]) if known else None
    _seen_environ = dict(data) if data is not None else None


def secrets() -> list[tuple[str, str]]:
    """(secret, its replacement) for every secret known now, longest first."""
    with _lock:
        _refresh()
        return [(s.value, s.label) for s in _secrets]


def redact(text: str) -> str:
    """`text` with every secret (see the module docstring) replaced. Also valid on JSON text: the
    replacements hold no quote or backslash."""
    if not text:
        return text
    with _lock:
        _refresh()
        index = _index
    if index is not None:
        data = text.encode("utf-8", "surrogatepass")
        runs = index.runs(data)
        if runs:
            text = _replace_runs(text, data, runs)
    if "://" in text:
        text = URL_USERINFO.sub(r"\1" + REDACTED + "@", text)
    if "=" in text:
        lowered = text.lower()
        if any(ending in lowered for ending in _PARAMETER_ENDINGS):
            text = SECRET_PARAMETER.sub(r"\1" + REDACTED, text)
    return text


def _replace_runs(text: str, data: bytes, runs: list[tuple[int, int, str]]) -> str:
    """`text` with each run (byte ranges of `data`, its UTF-8) replaced by its label, overlapping runs as one (the
    first's label), each first made whole characters and whole JSON escapes."""
    merged: list[list[Any]] = []
    for start, end, label in runs:  # sorted by start
        while start < end and 0x80 <= data[start] < 0xC0:  # never half a character
            start += 1
        while end < len(data) and 0x80 <= data[end] < 0xC0:
            end -= 1
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, label])
    ascii_only = len(data) == len(text)
    pieces, at = [], 0
    for start, end, label in merged:
        if not ascii_only:
            start, end = len(data[:start].decode("utf-8", "surrogatepass")), len(data[:end].decode("utf-8",
                                                                                                  "surrogatepass"))
        start, end = _whole_escapes(text, max(start, at), end)
        if start < end:
            pieces += [text[at:start], label]
            at = end
    pieces.append(text[at:])
    return "".join(pieces)


_UNICODE_ESCAPE_START = re.compile(r"\\u[0-9a-fA-F]{0,3}$")


def _whole_escapes(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) widened so that no backslash escape of JSON text is cut: the backslash that escapes the first
    character joins it, and an escape begun at the end is taken whole."""
    before = start
    while before > 0 and text[before - 1] == "\\":
        before -= 1
    if (start - before) % 2:
        start -= 1
    tail = end
    while tail > start and text[tail - 1] == "\\":
        tail -= 1
    if (end - tail) % 2 and end < len(text):  # ends on an escaping backslash: its character too
        end += 1
    escape = _UNICODE_ESCAPE_START.search(text, max(start, end - 5), end)
    if escape is not None:
        slashes = escape.start()
        while slashes > start and text[slashes - 1] == "\\":
            slashes -= 1
        if (escape.start() - slashes) % 2 == 0:  # a real \uXXXX, not an escaped backslash before a `u`
            end = min(len(text), escape.start() + 6)
    return start, end


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
