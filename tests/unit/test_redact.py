"""The one redaction step (finharness/redact.py): what it takes out, what it leaves, and that it keeps up with the
environment."""

from __future__ import annotations

import io
import json
import sys

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
