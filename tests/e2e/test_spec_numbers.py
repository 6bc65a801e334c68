"""Numbers in model specs are finite and in range, or the run is refused (issue 34 item 5): through the command line,
each bad value ends as exit 2 and one `error:` line that names the option, with no traceback and nothing run.

Also the key-shaped mistakes a spec can hold, refused the same way: a key_env whose variable is unset (named), a
key_env that is a key (not shown), userinfo no URL parser reads (not shown), a BASE_URL that is not a URL.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.cli import app

SERVER = "http://127.0.0.1:9/v1"
"""A base URL nothing listens on: every spec below is refused before any call would reach it."""

BAD_NUMBERS = [
    ("fake?latency=nan", "latency"), ("fake?latency=-1", "latency"), ("fake?latency=inf", "latency"),
    ("fake?latency=1e9", "latency"), ("fake?latency=soon", "latency"),
    (f"openai:m@{SERVER}?timeout=nan", "timeout"), (f"openai:m@{SERVER}?timeout=inf", "timeout"),
    (f"openai:m@{SERVER}?timeout=0", "timeout"), (f"openai:m@{SERVER}?timeout=-5", "timeout"),
    (f"openai:m@{SERVER}?timeout=1e9", "timeout"),
    (f"openai:m@{SERVER}?concurrency=0", "concurrency"), (f"openai:m@{SERVER}?concurrency=100000", "concurrency"),
    (f"openai:m@{SERVER}?concurrency=2.5", "concurrency"), (f"openai:m@{SERVER}?concurrency=nan", "concurrency"),
    (f"openai:m@{SERVER}?thinking_budget=-1", "thinking_budget"),
    (f"openai:m@{SERVER}?thinking_budget=99999999999", "thinking_budget"),
    (f"anthropic:m@{SERVER}?thinking_budget=nan", "thinking_budget"), (f"anthropic:m@{SERVER}?timeout=nan", "timeout"),
    (f"openai-completions:m@{SERVER}?timeout=nan", "timeout"),
    ("llamacpp:{gguf}?n_ctx=0", "n_ctx"), ("llamacpp:{gguf}?n_ctx=99999999999", "n_ctx"),
    ("llamacpp:{gguf}?threads=0", "threads"), ("llamacpp:{gguf}?parallel=-1", "parallel"),
    ("llamacpp:{gguf}?parallel=100000", "parallel"), ("llamacpp:{gguf}?n_gpu_layers=-2", "n_gpu_layers"),
    ("llamacpp:{gguf}?n_batch=nan", "n_batch"), ("llamacpp:{gguf}?prompt_cache_mb=-1", "prompt_cache_mb"),
    ("embedded?threads=0", "threads"), ("embedded:1.5b?parallel=1000", "parallel"),
]


def refused(tmp_path: Path, spec: str) -> str:
    """Run the demo with `spec`; assert the refusal (exit 2, one error line, no traceback, no run folder) and
    return the line."""
    result = CliRunner().invoke(app, ["run", "demo", "--model", spec, "--limit", "1", "--out", str(tmp_path / "out"),
                                      "-q"])
    stderr = result.stderr
    assert result.exit_code == 2, (spec, result.exit_code, result.output, repr(result.exception))
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, (spec, stderr)
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    return stderr


@pytest.mark.parametrize("spec, option", BAD_NUMBERS, ids=[spec for spec, _ in BAD_NUMBERS])
def test_a_number_out_of_range_is_one_error_line_naming_the_option(tmp_path: Path, spec: str, option: str):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")  # never loaded: the options are refused first
    line = refused(tmp_path, spec.format(gguf=gguf))
    assert option in line.removeprefix("error: ").split(": ", 1)[1], line  # named in the message, not only the spec


@pytest.mark.parametrize("spec", [f"openai:m@{SERVER}?timeout=0.5&concurrency=1024", "fake?latency=0&name=x",
                                  "fake?latency=3600"])
def test_the_edges_of_each_range_are_taken(spec: str):
    from finharness.backends import from_spec

    assert from_spec(spec).spec == spec


def test_a_key_env_whose_variable_is_unset_is_named_before_any_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("FINHARNESS_NO_SUCH_KEY", raising=False)
    line = refused(tmp_path, f"openai:m@{SERVER}?key_env=FINHARNESS_NO_SUCH_KEY")
    assert "$FINHARNESS_NO_SUCH_KEY is not set" in line


@pytest.mark.parametrize("key", ["sk-live-Abc123Def456", "skAbcdefGhij1234KLmn", "hf_abcdefghijklmnopqrstuvwxyz",
                                 "a3f9c2e71b5d48a0c6e2f1b9d7a4c3e8"])
def test_a_key_given_as_key_env_is_refused_without_showing_it(tmp_path: Path, key: str):
    line = refused(tmp_path, f"openai:m@{SERVER}?key_env={key}&concurrency=2")
    assert "key_env=[redacted]&concurrency=2" in line and "never the key itself" in line
    assert not any(key[i:i + 8] in line for i in range(len(key) - 7))


@pytest.mark.parametrize("name", ["MY_PROVIDER_KEY", "hf_token", "OpenRouterKey", "LLM_KEY_2"])
def test_ordinary_variable_names_are_taken_as_names(monkeypatch: pytest.MonkeyPatch, name: str):
    from finharness.backends import from_spec

    monkeypatch.setenv(name, "a-key-for-the-test-123")
    assert from_spec(f"openai:m@{SERVER}?key_env={name}").remote.api_key == "a-key-for-the-test-123"


@pytest.mark.parametrize("userinfo", ["bob:Sl4sh/Key+Qw=9z", "bob:Qm?Key#Zx9w", "Sl4sh/Key+Qw=9z", "a@b:c/d"])
def test_userinfo_that_does_not_parse_is_refused_without_showing_it(tmp_path: Path, userinfo: str):
    line = refused(tmp_path, f"openai:m@http://{userinfo}@127.0.0.1:9/v1")
    assert "http://[redacted]@127.0.0.1:9/v1" in line and "BASE_URL holds credentials" in line
    secret = userinfo.partition(":")[2] or userinfo
    assert not any(secret[i:i + 4] in line for i in range(len(secret) - 3)), line


@pytest.mark.parametrize("spec, says", [("openai:m@http://127.0.0.1:port/v1", "BASE_URL is not a URL"),
                                        ("openai:m@http:///v1", "BASE_URL names no host")])
def test_a_base_url_that_is_not_a_url_is_one_error_line(tmp_path: Path, spec: str, says: str):
    assert says in refused(tmp_path, spec)
