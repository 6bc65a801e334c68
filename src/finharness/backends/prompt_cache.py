"""Prompt caching: where the Anthropic backend puts its `cache_control` breakpoints, and what a provider's prompt cache
would give a sequence of requests (the dry run's estimate).

Anthropic caches a prompt's prefix up to a block marked `cache_control` (at most 4 marks; tools, then the system
prompt, then the messages, in that order), when the prefix holds at least the model's minimum (1,024 tokens for most
models; `min_cache_tokens`). A later request that starts with the same prefix reads it at a tenth of the input price,
and writing it costs 1.25 times the input price. The API looks for an earlier entry at each block boundary up to 20
blocks before a mark. `breakpoints` marks:

- the system prompt (with the tools), shared by every item of a task;
- in a request with earlier turns (a dialogue, or few-shot examples given as turns), the message before the last
  one (the history, which the next item or the next turn shares) and the last message (the dialogue so far, which
  its next turn starts with);

each only where the prefix up to it is estimated (model.estimate_tokens) to reach the minimum, so a short prompt is
never written at the dearer rate for nothing. OpenAI caches by itself: every prefix of 1,024 tokens or more, in
steps of 128 tokens, read at its cached rate (no write charge).

`PrefixCache` replays either rule over the requests of a plan, in plan order, each cache entry kept for the whole run
(a real cache forgets after 5 minutes unused, and in a batch requests processed together may miss each other's
entries): what it gives is an estimate, and the plan says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Sequence

from ..core.model import estimate_tokens

ANTHROPIC_MIN_CACHE_TOKENS = 1024
"""The shortest prefix most Claude models cache (Sonnet, Opus 4 and 4.1)."""

ANTHROPIC_MIN_BY_MODEL: tuple[tuple[str, int], ...] = (
    ("claude-haiku-4-5", 4096), ("claude-opus-4-5", 4096), ("claude-3-5-haiku", 2048), ("claude-3-haiku", 2048))
"""Model-name prefixes whose minimum differs (Anthropic's prompt-caching page); the first that matches wins."""

OPENAI_MIN_CACHE_TOKENS = 1024
"""OpenAI caches prompts of 1,024 tokens and more..."""

OPENAI_CACHE_STEP = 128
"""... in steps of 128 tokens."""

LOOKBACK_BLOCKS = 20
"""How many block boundaries before a breakpoint Anthropic checks for an earlier cache entry."""

MAX_BREAKPOINTS = 4
"""Anthropic's limit of cache_control marks per request."""


def min_cache_tokens(model: str) -> int:
    """The shortest prefix (tokens) the Claude model `model` caches."""
    for prefix, tokens in ANTHROPIC_MIN_BY_MODEL:
        if model.startswith(prefix):
            return tokens
    return ANTHROPIC_MIN_CACHE_TOKENS


def block_tokens(content: object) -> int:
    """Estimated tokens of one message's content as the API receives it (text, or a list of blocks), 4 for the
    message itself (model.ESTIMATE_RULE)."""
    if isinstance(content, str):
        return estimate_tokens(content) + 4
    total = 4
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict):
            for key in ("text", "content", "input"):
                value = block.get(key)
                if isinstance(value, str):
                    total += estimate_tokens(value)
                elif value is not None:
                    total += estimate_tokens(str(value))
    return total


@dataclass(frozen=True)
class Breakpoints:
    """Where a request is marked for caching."""

    system: bool = False
    """The system prompt (with the tools before it) is marked."""

    messages: tuple[int, ...] = ()
    """Indexes of the messages (as sent, system apart) whose last block is marked."""


def breakpoints(system_tokens: int, messages: Sequence[dict], minimum: int) -> Breakpoints:
    """Where to mark a Messages request (module docstring): `system_tokens` the estimated tokens of the tools and the
    system prompt, `messages` the turns as sent, `minimum` the model's shortest cached prefix."""
    system = system_tokens >= minimum
    cumulative, total = [], system_tokens
    for message in messages:
        total += block_tokens(message.get("content"))
        cumulative.append(total)
    marked: list[int] = []
    earlier_turns = any(m.get("role") == "assistant" for m in messages[:-1])
    if earlier_turns and len(messages) >= 2:
        for i in (len(messages) - 2, len(messages) - 1):
            if cumulative[i] >= minimum:
                marked.append(i)
    budget = MAX_BREAKPOINTS - int(system)
    return Breakpoints(system, tuple(marked[-budget:]) if budget > 0 else ())


def with_cache_control(message: dict) -> dict:
    """`message` with its last content block marked `cache_control: ephemeral` (a text content becomes one text
    block, which the API reads the same)."""
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content or []]
    if not blocks:
        return message
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return {**message, "content": blocks}


# -- the dry run's estimate ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    """One piece of a prompt as the cache sees it: the system prompt, or one message."""

    text: str
    """Its text (what two requests must share for the cache to serve it)."""

    tokens: int
    """Its estimated tokens."""

    marked: bool = False
    """A breakpoint ends here (Anthropic)."""


@dataclass
class CacheFigures:
    """What a cache gave some requests (estimated tokens)."""

    prompt_tokens: int = 0
    """All their prompt tokens (estimated)."""

    cached_tokens: int = 0
    """Of them, read from the cache."""

    written_tokens: int = 0
    """Of them, written to the cache (Anthropic)."""

    def add(self, prompt: int, cached: int, written: int) -> None:
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.written_tokens += written


def _chain(blocks: Sequence[Block]) -> list[str]:
    """The hash of every prefix of `blocks` (prefix i: blocks[0..i])."""
    out, h = [], hashlib.sha256()
    for block in blocks:
        h.update(block.text.encode("utf-8", "surrogatepass"))
        h.update(b"\x00\x1e")
        out.append(h.copy().hexdigest()[:32])
    return out


def _common_chars(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share (binary search on slices: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class PrefixCache:
    """One provider's prompt cache for one model, replayed over requests (module docstring). style: 'automatic'
    (OpenAI: any prefix of `minimum` tokens or more, in steps of `step`) or 'breakpoints' (Anthropic: the marked
    prefixes only, read back at any block boundary up to LOOKBACK_BLOCKS before a mark)."""

    style: str
    minimum: int
    step: int = OPENAI_CACHE_STEP
    _seen: dict[str, str] = field(default_factory=dict)
    """automatic: prefix hash -> the text of the block that followed it last (for a partial match inside it)."""
    _written: set[str] = field(default_factory=set)
    """breakpoints: the prefixes written."""

    def see(self, blocks: Sequence[Block]) -> tuple[int, int]:
        """(estimated tokens read from the cache, written to it) by a request of these blocks; the cache then holds
        what the request leaves in it."""
        hashes = _chain(blocks)
        cumulative, total = [], 0
        for block in blocks:
            total += block.tokens
            cumulative.append(total)
        if self.style == "automatic":
            return self._automatic(blocks, hashes, cumulative), 0
        return self._breakpoints(blocks, hashes, cumulative)

    def _automatic(self, blocks: Sequence[Block], hashes: list[str], cumulative: list[int]) -> int:
        shared, i = 0, 0
        while i < len(blocks) and hashes[i] in self._seen:
            shared = cumulative[i]
            i += 1
        if i < len(blocks):  # the first block not shared whole: the part of it the last request with this prefix shared
            before = hashes[i - 1] if i else ""
            other = self._seen.get(before)
            if other is not None and blocks[i].text:
                chars = _common_chars(blocks[i].text, other)
                shared += blocks[i].tokens * chars // max(1, len(blocks[i].text))
        for j, block in enumerate(blocks):
            self._seen[hashes[j - 1] if j else ""] = block.text
            self._seen.setdefault(hashes[j], "")
        if shared < self.minimum:
            return 0
        return min(shared, cumulative[-1] if cumulative else 0) // self.step * self.step

    def _breakpoints(self, blocks: Sequence[Block], hashes: list[str], cumulative: list[int]) -> tuple[int, int]:
        marks = [i for i, b in enumerate(blocks) if b.marked]
        if not marks:
            return 0, 0
        last = marks[-1]
        cached = 0
        for i in range(last, max(-1, last - LOOKBACK_BLOCKS - 1), -1):
            if hashes[i] in self._written:
                cached = cumulative[i]
                break
        written = 0
        if cumulative[last] >= self.minimum and cumulative[last] > cached:
            written = cumulative[last] - cached
        for i in marks:
            if cumulative[i] >= self.minimum:
                self._written.add(hashes[i])
        return cached, written


def openai_blocks(messages: Sequence[object], tools: Sequence[object] = ()) -> list[Block]:
    """A chat request as OpenAI's cache sees it: the tools, then each message (its role and content)."""
    import json

    blocks = [Block(json.dumps(tools, ensure_ascii=False, sort_keys=True), estimate_tokens(str(tools)))] if tools else []
    for m in messages:
        content = getattr(m, "content", "")
        blocks.append(Block(f"{getattr(m, 'role', '')}\x00{content}", estimate_tokens(content) + 4))
    return blocks


def anthropic_blocks(body: dict) -> list[Block]:
    """A Messages body (with its cache_control marks) as Anthropic's cache sees it: the tools, the system prompt, each
    message; a block is marked where the body marks it."""
    import json

    def marked(content: object) -> bool:
        return isinstance(content, list) and bool(content) and isinstance(content[-1], dict) \
            and "cache_control" in content[-1]

    blocks = []
    if body.get("tools"):
        text = json.dumps(body["tools"], ensure_ascii=False, sort_keys=True)
        blocks.append(Block(text, block_tokens(text)))
    system = body.get("system")
    if system:
        blocks.append(Block(json.dumps(system, ensure_ascii=False, sort_keys=True), block_tokens(system),
                            marked(system)))
    for m in body.get("messages", ()):
        content = m.get("content")
        plain = [dict((k, v) for k, v in b.items() if k != "cache_control") for b in content] \
            if isinstance(content, list) else content
        blocks.append(Block(f"{m.get('role')}\x00" + json.dumps(plain, ensure_ascii=False, sort_keys=True),
                            block_tokens(content), marked(content)))
    return blocks
