"""Model-spec query options."""

import pytest

from finharness.backends.spec_options import model_name


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
