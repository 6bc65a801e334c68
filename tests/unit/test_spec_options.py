"""Model-spec query options."""

import json

import pytest
from typer.testing import CliRunner

from finharness.backends import from_spec, model_name
from finharness.backends.llamacpp import LlamaCppOptions
from finharness.cli import app
from finharness.core.backend import SpecError


@pytest.mark.parametrize("spec, name", [
    ("embedded:1.5b?prompt_cache_mb=2000", "embedded:1.5b"),
    ("embedded:1.5b?n_ctx=8192&prompt_cache_mb=2000", "embedded:1.5b?n_ctx=8192"),
    ("openai:gpt-4o@http://h:8000/v1?key_env=K&concurrency=4&timeout=30", "openai:gpt-4o@http://h:8000/v1"),
    ("llamacpp:/m/x.gguf?threads=2", "llamacpp:/m/x.gguf?threads=2"),
    ("embedded", "embedded"),
    ("embedded?deterministic=1", "embedded"),
])
def test_model_name_leaves_out_options_that_never_change_answers(spec, name):
    assert model_name(spec) == name


# --- the declarations `finharness list --backends` shows are the options the parsers take ---------------------

PARSED_BY_FROM_SPEC = {"openai": "openai:m@http://127.0.0.1:9/v1", "anthropic": "anthropic:m@http://127.0.0.1:9",
                       "openai-completions": "openai-completions:m@http://127.0.0.1:9/v1", "fake": "fake"}


def _listed() -> dict:
    result = CliRunner().invoke(app, ["list", "--backends", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["backends"]


def _unknown_named(spec: str) -> bool:
    try:
        from_spec(spec)
    except SpecError as err:
        return "unknown option" in str(err)
    return False


def test_every_listed_option_is_taken_and_no_other():
    listed = _listed()
    assert {"embedded", "llamacpp", "openai", "anthropic", "hf", "vllm", "fake"} <= set(listed)
    for scheme, base in PARSED_BY_FROM_SPEC.items():
        names = [o["name"] for o in listed[scheme]["options"]]
        assert names, scheme
        for name in names:  # a value the parser may refuse, but never as an unknown option
            assert not _unknown_named(f"{base}?{name}=1"), f"{scheme}: listed {name} is refused as unknown"
        assert _unknown_named(f"{base}?not_an_option=1"), scheme
    batch = {"batch", "batch_poll", "batch_gather", "batch_max_requests"}
    assert batch <= {o["name"] for o in listed["openai"]["options"]}
    assert not batch & {o["name"] for o in listed["fake"]["options"]}
    llama = [o["name"] for o in listed["llamacpp"]["options"]]
    assert llama == [o["name"] for o in listed["embedded"]["options"]] and "deterministic" in llama
    assert LlamaCppOptions.from_query("&".join(f"{n}=1" for n in llama if n not in ("parallel", "prompt_cache_mb")),
                                     spec="s").deterministic == 1
    assert all(o["help"] for entry in listed.values() for o in entry.get("options", ())), "an option without help"
