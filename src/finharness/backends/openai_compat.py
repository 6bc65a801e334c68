"""OpenAI-compatible chat completions: hosted OpenAI, vLLM, SGLang, llama.cpp server...

Spec: `openai:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS]`
(BASE_URL includes the version path, default https://api.openai.com/v1; the key
comes from $OPENAI_API_KEY or the variable named by key_env and may be absent
for local servers). Plain httpx, no SDK: the SDK retries on its own, and the
harness must see and count every retry (finharness.core.retry).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.backend import BaseBackend, Capabilities
from ..core.types import GenerateRequest, GenerateResponse, TokenLogprob
from .http_common import LoopBoundClient, RemoteSpec, bad_response, fetch_json_sync, parse_remote_spec, post_json

DEFAULT_BASE_URL = "https://api.openai.com/v1"

_SERVER_MODEL_FIELDS = ("id", "root", "owned_by", "max_model_len", "meta")
"""Stable fields of a /models entry; 'created' is left out: vLLM stamps it with the current time."""


class OpenAICompatBackend(BaseBackend):
    """A model behind POST {base_url}/chat/completions."""

    def __init__(self, spec: str, remote: RemoteSpec):
        self.spec = spec
        self.remote = remote
        self.capabilities = Capabilities(
            generate=True, loglikelihood=False, next_token_logprobs=True,
            max_concurrency=remote.concurrency, penalties=True, seed=True)
        headers = {"Authorization": f"Bearer {remote.api_key}"} if remote.api_key else {}
        self._headers = headers
        self._client = LoopBoundClient(remote, headers)
        self._server_model: Mapping[str, Any] | None = None
        self._server_model_fetched = False

    def identity(self) -> Mapping[str, Any]:
        return {"api": "openai", "model": self.remote.model, "base_url": self.remote.base_url,
                "server_model": self.server_model()}

    def server_model(self) -> Mapping[str, Any] | None:
        """What GET /models says about the served model (asked once, cached; None if it does not answer).

        A server that serves one model under another name (llama.cpp, vLLM
        --served-model-name) is described by its single entry."""
        if not self._server_model_fetched:
            self._server_model_fetched = True
            listing = fetch_json_sync(f"{self.remote.base_url}/models", self._headers)
            entries = listing.get("data") if isinstance(listing, dict) else None
            if isinstance(entries, list):
                entries = [e for e in entries if isinstance(e, dict)]
                match = [e for e in entries if e.get("id") == self.remote.model]
                entry = match[0] if match else entries[0] if len(entries) == 1 else None
                if entry is not None:
                    self._server_model = {k: entry[k] for k in _SERVER_MODEL_FIELDS if k in entry}
        return self._server_model

    def payload(self, request: GenerateRequest) -> dict[str, Any]:
        """The JSON body of one chat completion."""
        params = request.params
        body: dict[str, Any] = {
            "model": self.remote.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        # Sent only when set: some compatible servers reject fields they do not know.
        if params.frequency_penalty:
            body["frequency_penalty"] = params.frequency_penalty
        if params.presence_penalty:
            body["presence_penalty"] = params.presence_penalty
        if params.top_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = params.top_logprobs
        return body

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        what = f"POST {self.remote.base_url}/chat/completions (model {self.remote.model})"
        body = await post_json(self._client.get(), "/chat/completions", self.payload(request), what)
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad_response(what, f"empty choices in {str(body)[:120]}")
        choice = choices[0]
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content")
        finish_reason = choice.get("finish_reason")
        if text is None and message.get("refusal"):
            text, finish_reason = str(message["refusal"]), "refusal"
        # An empty string is a real (if useless) answer only when the server says why it stopped.
        if not isinstance(text, str) or (not text and not finish_reason):
            raise bad_response(what, f"no message content in choice {str(choice)[:120]}")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        try:
            logprobs = parse_logprobs(choice.get("logprobs")) if request.params.top_logprobs else None
        except (KeyError, TypeError, ValueError) as exc:
            raise bad_response(what, f"malformed logprobs ({exc!r})") from None
        return GenerateResponse(
            text=text,
            finish_reason=str(finish_reason or "unknown"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            logprobs=logprobs,
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def parse_logprobs(raw: Any) -> tuple[TokenLogprob, ...] | None:
    """Chat-style logprobs ({"content": [{token, logprob, top_logprobs}]}) or the legacy
    completions style ({"tokens", "token_logprobs", "top_logprobs"}) some servers still send."""
    if not isinstance(raw, dict):
        return None
    if isinstance(raw.get("content"), list):
        return tuple(
            TokenLogprob(token=t["token"], logprob=float(t["logprob"]),
                         top=tuple((a["token"], float(a["logprob"])) for a in t.get("top_logprobs") or ()))
            for t in raw["content"])
    tokens, values = raw.get("tokens"), raw.get("token_logprobs")
    if isinstance(tokens, list) and isinstance(values, list):
        tops = raw.get("top_logprobs") or [None] * len(tokens)
        return tuple(
            TokenLogprob(token=tok, logprob=float(lp),
                         top=tuple((k, float(v)) for k, v in (top or {}).items()))
            for tok, lp, top in zip(tokens, values, tops))
    return None


def from_spec(spec: str) -> OpenAICompatBackend:
    """`openai:MODEL[@BASE_URL][?key_env=NAME&concurrency=N&timeout=SECONDS]`."""
    remote = parse_remote_spec(spec, scheme="openai", default_base_url=DEFAULT_BASE_URL,
                               default_key_env="OPENAI_API_KEY")
    return OpenAICompatBackend(spec, remote)
