"""Anthropic Messages API.

Spec: `anthropic:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS]`
(BASE_URL default https://api.anthropic.com/v1; key from $ANTHROPIC_API_KEY).
Plain httpx, no SDK, so the harness's single retry layer sees every retry.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.backend import BaseBackend, Capabilities
from ..core.types import GenerateRequest, GenerateResponse
from .http_common import LoopBoundClient, RemoteError, RemoteSpec, bad_response, parse_remote_spec, post_json, warn_once

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"

FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
"""Anthropic stop_reason -> the harness's finish_reason; others (refusal, tool_use...) pass through."""


class AnthropicBackend(BaseBackend):
    """A model behind POST {base_url}/messages."""

    def __init__(self, spec: str, remote: RemoteSpec):
        self.spec = spec
        self.remote = remote
        self.capabilities = Capabilities(
            generate=True, loglikelihood=False, next_token_logprobs=False,
            max_concurrency=remote.concurrency, penalties=False, seed=False)
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if remote.api_key:
            headers["x-api-key"] = remote.api_key
        self._client = LoopBoundClient(remote, headers)
        self._warned: set[str] = set()

    def identity(self) -> Mapping[str, Any]:
        return {"api": "anthropic", "model": self.remote.model, "base_url": self.remote.base_url,
                "anthropic_version": ANTHROPIC_VERSION}

    def payload(self, request: GenerateRequest) -> dict[str, Any]:
        """The JSON body of one Messages call: system turns go to the top-level `system` field."""
        params = request.params
        if params.top_logprobs:
            raise RemoteError(f"{self.spec}: the Anthropic API returns no logprobs "
                              "(check capabilities.next_token_logprobs before asking)",
                              kind="unsupported", retryable=False)
        if params.frequency_penalty or params.presence_penalty:
            warn_once(self._warned, "penalties", f"{self.spec}: Anthropic has no frequency/presence "
                      "penalties; they are ignored (capabilities.penalties is False)")
        if params.seed is not None:
            warn_once(self._warned, "seed", f"{self.spec}: Anthropic has no sampling seed; it is "
                      "ignored (capabilities.seed is False)")
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.remote.model,
            "max_tokens": params.max_tokens,
            "messages": [{"role": m.role, "content": m.content}
                         for m in request.messages if m.role != "system"],
            "temperature": params.temperature,
        }
        if system:
            body["system"] = system
        # Newer Claude models refuse temperature and top_p together: send top_p only when it matters.
        if params.top_p < 1.0:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        return body

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        what = f"POST {self.remote.base_url}/messages (model {self.remote.model})"
        body = await post_json(self._client.get(), "/messages", self.payload(request), what)
        content = body.get("content")
        stop_reason = body.get("stop_reason")
        if not isinstance(content, list):
            raise bad_response(what, f"no content list in {str(body)[:120]}")
        text = "".join(block.get("text", "") for block in content
                       if isinstance(block, dict) and block.get("type") == "text")
        # An empty answer is real only when the server says why it stopped.
        if not text and not stop_reason:
            raise bad_response(what, f"empty content and no stop_reason in {str(body)[:120]}")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return GenerateResponse(
            text=text,
            finish_reason=FINISH_REASONS.get(stop_reason, str(stop_reason or "unknown")),
            prompt_tokens=int(usage.get("input_tokens") or 0),
            completion_tokens=int(usage.get("output_tokens") or 0),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def from_spec(spec: str) -> AnthropicBackend:
    """`anthropic:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS]`."""
    remote = parse_remote_spec(spec, scheme="anthropic", default_base_url=DEFAULT_BASE_URL,
                               default_key_env="ANTHROPIC_API_KEY")
    return AnthropicBackend(spec, remote)
