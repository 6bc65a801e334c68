"""The one redaction step (finharness/redact.py): what it takes out (every encoding a server can echo a key in, and
parts of it), what it leaves, that JSON text stays JSON, and that it keeps up with the environment."""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from urllib.parse import quote, quote_plus

import pytest

from finharness import redact as redaction
from finharness.redact import redact, redacting_streams


def test_a_key_variable_set_or_changed_later_is_redacted_from_then_on(monkeypatch: pytest.MonkeyPatch):
    text = "sent sk-first-1234567 then sk-second-7654321"
    monkeypatch.delenv("SOME_SERVICE_API_KEY", raising=False)
    assert redact(text) == text
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "sk-first-1234567")
    assert redact(text) == "sent [redacted $SOME_SERVICE_API_KEY] then sk-second-7654321"
    monkeypatch.setenv("SOME_SERVICE_API_KEY", "sk-second-7654321")
    assert redact(text) == "sent sk-first-1234567 then [redacted $SOME_SERVICE_API_KEY]"


@pytest.mark.parametrize("name,value,redacted", [
    ("HF_TOKEN", "hf_abcdefgh12", True),
    ("GITHUB_TOKEN", "ghp_abcdefgh12", True),
    ("DB_PASSWORD", "correct-horse", True),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIabc", True),
    ("SHORT_TOKEN", "1234567", False),          # shorter than MIN_SECRET_LENGTH: ordinary text
    ("HF_HUB_DISABLE_TOKEN", "1", False),
    ("TOKENIZERS_PARALLELISM", "falsefalse", False),  # the name holds no credential
    ("EDITOR", "vim-editor-x", False),
])
def test_which_variables_hold_secrets(monkeypatch: pytest.MonkeyPatch, name: str, value: str, redacted: bool):
    monkeypatch.setenv(name, value)
    assert (redact(f"x {value} y") == f"x [redacted ${name}] y") is redacted


def test_a_key_read_under_any_name_is_redacted_once_noted(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(redaction, "_noted", {})  # forgotten again after the test
    monkeypatch.setenv("LLM", "plain-name-key-42")
    assert redact("plain-name-key-42") == "plain-name-key-42"
    redaction.note_secret("plain-name-key-42", "LLM")
    assert redact("key plain-name-key-42.") == "key [redacted $LLM]."


def test_json_text_stays_json_and_an_escaped_secret_is_found_too(monkeypatch: pytest.MonkeyPatch):
    secret = 'pa"ss\\wörd-123'
    monkeypatch.setenv("ODD_PASSWORD", secret)
    for text in (json.dumps({"reply": f"it is {secret}"}), json.dumps({"reply": f"it is {secret}"}, ensure_ascii=False)):
        out = redact(text)
        assert json.loads(out) == {"reply": "it is [redacted $ODD_PASSWORD]"}


@pytest.mark.parametrize("text,expected", [
    ("http://bob:s3cret@host:8080/v1", "http://[redacted]@host:8080/v1"),
    ("see https://tok@h/x and http://h/y", "see https://[redacted]@h/x and http://h/y"),
    ("openai:m@http://127.0.0.1:8000/v1?concurrency=4", "openai:m@http://127.0.0.1:8000/v1?concurrency=4"),
    ("openai:m@http://h/v1?key_env=MY_KEY&api_key=abc123", "openai:m@http://h/v1?key_env=MY_KEY&api_key=[redacted]"),
    ("u?token=abc;PASSWORD=def&x=1", "u?token=[redacted];PASSWORD=[redacted]&x=1"),
    ("x = 3; key = value; monkey=1", "x = 3; key = value; monkey=1"),
])
def test_url_userinfo_and_credential_parameters(text: str, expected: str):
    assert redact(text) == expected


def test_the_streams_are_redacted_inside_the_block_and_restored_after(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stream-9876543")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with redacting_streams():
        with redacting_streams():  # nested: wrapped once
            print("the key sk-stream-9876543")
        print("err sk-stream-9876543", file=sys.stderr)
        assert sys.stdout is not out and sys.stdout.isatty() is False  # wrapped; its attributes are the stream's
    assert sys.stdout is out and sys.stderr is err
    assert out.getvalue() == "the key [redacted $OPENAI_API_KEY]\n"
    assert err.getvalue() == "err [redacted $OPENAI_API_KEY]\n"


PLANTED = "sk-proj-Ab3/dE+f9Gh=iJkLmNoP7qRsTuV"
"""A key with the characters percent-encoding, base64 and JSON treat apart (`/`, `+`, `=`)."""


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("echo", [
    PLANTED, quote(PLANTED, safe=""), quote(PLANTED), quote_plus(PLANTED),
    re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quote(PLANTED, safe="")),
    b64(PLANTED), b64(PLANTED).rstrip("="), base64.urlsafe_b64encode(PLANTED.encode()).decode(),
    json.dumps(PLANTED)[1:-1].replace("/", "\\/"),
    PLANTED[10:22], PLANTED[-8:], b64(PLANTED)[:18], quote(PLANTED, safe="")[:24],  # in part, cut short
], ids=["raw", "quote-safe-none", "quote", "quote_plus", "lower-hex", "base64", "base64-unpadded", "base64-urlsafe",
        "json-slash", "part", "last-8", "base64-cut", "percent-cut"])
def test_every_encoding_and_part_of_a_key_is_redacted(monkeypatch: pytest.MonkeyPatch, echo: str):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    assert redact(f"you sent <{echo}>.") == "you sent <[redacted $OPENAI_API_KEY]>."


@pytest.mark.parametrize("before", ["user:", "bob:", "Bearer ", "x", "xy", ""])
def test_a_key_inside_a_longer_base64_text_is_found_at_every_alignment(monkeypatch: pytest.MonkeyPatch, before: str):
    """base64(before + key + after): the characters that depend on the key alone are taken out, at each of the three
    offsets the key can stand at; at most one character on each side (a few bits of it) is left."""
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    encoded = b64(before + PLANTED + "!")
    out = redact(f"Authorization: Basic {encoded}")
    assert "[redacted $OPENAI_API_KEY]" in out
    kept = out.removeprefix("Authorization: Basic ").split("[redacted $OPENAI_API_KEY]")
    assert len(kept[0]) <= -(-8 * len(before) // 6) + 1 and len(kept[1]) <= 4


@pytest.mark.parametrize("text", [
    "sk-proj-Ab3/ is the start of every project key",  # the public prefix and 4 of the key's own characters
    "a run of 7: iJkLmNo here",  # shorter than WINDOW
    "c2stcHJvai0= is base64('sk-proj-')",  # what the prefix alone encodes to
])
def test_what_is_not_enough_of_a_key_is_left(monkeypatch: pytest.MonkeyPatch, text: str):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    assert redact(text) == text


def test_a_word_or_a_number_of_a_password_stays_in_the_text_but_the_password_goes(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DB_PASSWORD", "password20240101")
    text = "the password field; dated 20240101; it was password20240101"
    assert redact(text) == "the password field; dated 20240101; it was [redacted $DB_PASSWORD]"


def test_partial_runs_keep_json_text_json_whatever_escapes_stand_next_to_them(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ODD_API_KEY", 'Q9x"W2\\e3Rt5Yu7Io9Pa1Sd')
    cases = ['Q9x"W2\\e3Rt5Yu7Io9', 'pre\\"W2\\e3Rt5Yu7Io9Pa1Sd', '\\e3Rt5Yu7Io9Pa1Sd', 'é3Rt5Yu7Io9Pa1Sd\n',
             'x\\e3Rt5Yu7Io9Pa1', 'e3Rt5Yu7Io9Pa1Sd\u00e9', '\\\\e3Rt5Yu7Io9Pa1Sd']
    for case in cases:
        for ascii_only in (True, False):
            text = json.dumps({"reply": case, "n": 1}, ensure_ascii=ascii_only)
            out = redact(text)
            assert json.loads(out)["n"] == 1, (case, out)
            assert "Rt5Yu7Io" not in out and "[redacted $ODD_API_KEY]" in out, (case, out)


def test_a_long_text_is_searched_as_a_short_one_is(monkeypatch: pytest.MonkeyPatch):
    """Texts from NUMPY_FROM bytes on are searched with numpy: the same runs, found at any place and alignment."""
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    pieces = [PLANTED[9:30], quote(PLANTED, safe=""), b64("u:" + PLANTED)]
    for pad in range(4):
        short = " | ".join(pieces)
        long = "é" * pad + "x" * redaction.NUMPY_FROM + short + "ü" * 500
        assert redact(long) == "é" * pad + "x" * redaction.NUMPY_FROM + redact(short) + "ü" * 500
        assert PLANTED[12:20] not in redact(long)


def test_no_secret_no_change_and_the_search_is_made_once_per_set_of_keys(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    redact("x")
    index = redaction._index
    text = "ordinary text " * 200
    assert redact(text) == text and redaction._index is index
    monkeypatch.setenv("OTHER_API_KEY", "another-key-9c8b7a6d")
    assert redact("another-key-9c8b7a6d") == "[redacted $OTHER_API_KEY]" and redaction._index is not index
