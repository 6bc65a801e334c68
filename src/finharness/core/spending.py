"""What calls cost, and a budget that stops a run before the call that would cross it.

Prices are USD per million tokens, input and output, by model: a full model spec (`openai:gpt-4o@URL`) or the
model's name within it (`gpt-4o`); a backend with no price costs nothing (a local model). A `Spending` is shared by
every handle of a run or a suite (all roles, all tasks, all models): before each call that is not in the store it
reserves the call's worst case (its prompt tokens, counted with the model's tokenizer where the backend has one,
else 4 characters a token, plus max_tokens and any thinking budget) and refuses the call when that would take the
spent tokens or cost past the budget; once one call is refused, every later one is too, so a run stops cleanly with
everything committed. After a call its real tokens and cost are charged and the reservation released.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

BUDGET_KIND = "budget"
"""The failure kind of a call the budget refused (CallFailed.kind): a rerun with a higher budget resumes."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    """Per million prompt tokens."""

    output: float
    """Per million completion tokens (thinking tokens included, as providers bill them)."""

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def parse_price(text: str) -> tuple[str, Price]:
    """`MODEL=IN/OUT` (the `--price` form, USD per million tokens) -> (model, Price); a ValueError says the form."""
    model, sep, numbers = text.rpartition("=")
    parts = numbers.split("/")
    try:
        if not sep or not model or len(parts) != 2:
            raise ValueError
        price = Price(float(parts[0]), float(parts[1]))
    except ValueError:
        raise ValueError(f"--price {text!r}: expected MODEL=IN/OUT, USD per million input and output tokens, "
                         "e.g. --price gpt-4o=2.5/10") from None
    if not all(math.isfinite(v) and v >= 0 for v in (price.input, price.output)):
        raise ValueError(f"--price {text!r}: prices are non-negative numbers")
    return model, price


def model_name(spec: str) -> str:
    """The model a spec names, without scheme, base URL and options: `openai:gpt-4o@http://h/v1?x=1` -> `gpt-4o`."""
    rest = spec.split("?", 1)[0]
    rest = rest.split(":", 1)[1] if ":" in rest else rest
    return rest.split("@", 1)[0]


def price_for(prices: Mapping[str, Price], spec: str) -> Price | None:
    """The price of a backend's calls: by its full spec, else by the model's name; None: unpriced (free)."""
    return prices.get(spec) or prices.get(model_name(spec))


@dataclass
class Spending:
    """Tokens and cost spent by the calls made (not those served from the store), against an optional budget."""

    prices: Mapping[str, Price] = field(default_factory=dict)
    """Price by model spec or name (price_for)."""

    max_tokens: int | None = None
    """Budget in tokens, every role's prompt and completion tokens together (None: no token budget)."""

    max_cost: float | None = None
    """Budget in USD (None: none); needs prices to mean anything."""

    tokens: int = 0
    """Tokens charged so far."""

    cost: float = 0.0
    """USD charged so far."""

    calls: int = 0
    """Calls charged so far."""

    refused: int = 0
    """Calls the budget refused."""

    reached: str | None = None
    """Why the budget stopped the run (None: it has not)."""

    by_spec: dict[str, dict[str, Any]] = field(default_factory=dict)
    """spec -> {"calls", "prompt_tokens", "completion_tokens", "cost_usd"} charged so far."""

    _reserved_tokens: int = 0
    _reserved_cost: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def limited(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None

    def admit(self, spec: str, prompt_tokens: int, completion_ceiling: int) -> str | None:
        """Reserve a call's worst case; None when it fits the budget, else why it was refused (and from then on
        every call is). A call admitted must be charged or released."""
        price = price_for(self.prices, spec)
        cost = price.cost(prompt_tokens, completion_ceiling) if price else 0.0
        tokens = prompt_tokens + completion_ceiling
        with self._lock:
            if self.reached is None:
                if self.max_tokens is not None and self.tokens + self._reserved_tokens + tokens > self.max_tokens:
                    held = f" and {self._reserved_tokens:,} held for calls in flight" if self._reserved_tokens else ""
                    self.reached = (f"the token budget of {self.max_tokens:,} (spent {self.tokens:,}{held} when the "
                                    f"next call could take up to {tokens:,} more)")
                elif self.max_cost is not None and self.cost + self._reserved_cost + cost > self.max_cost:
                    held = f" and ${self._reserved_cost:.4f} held for calls in flight" if self._reserved_cost else ""
                    self.reached = (f"the cost budget of ${self.max_cost:.4f} (spent ${self.cost:.4f}{held} when the "
                                    f"next call could cost up to ${cost:.4f} more)")
            if self.reached is not None:
                self.refused += 1
                return f"budget reached: {self.reached}"
            self._reserved_tokens += tokens
            self._reserved_cost += cost
            return None

    def release(self, spec: str, prompt_tokens: int, completion_ceiling: int) -> None:
        """Give back an admitted call's reservation (it failed: nothing was charged)."""
        price = price_for(self.prices, spec)
        with self._lock:
            self._reserved_tokens -= prompt_tokens + completion_ceiling
            self._reserved_cost -= price.cost(prompt_tokens, completion_ceiling) if price else 0.0

    def charge(self, spec: str, prompt_tokens: int, completion_tokens: int, *, reserved: tuple[int, int] | None = None
               ) -> float | None:
        """Charge a call made: its real tokens and their cost (returned; None: the model is unpriced);
        `reserved`: the (prompt, ceiling) it was admitted with."""
        price = price_for(self.prices, spec)
        cost = price.cost(prompt_tokens, completion_tokens) if price else 0.0
        if reserved is not None:
            self.release(spec, *reserved)
        with self._lock:
            self.tokens += prompt_tokens + completion_tokens
            self.cost += cost
            self.calls += 1
            mine = self.by_spec.setdefault(spec, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                  "cost_usd": 0.0 if price else None})
            mine["calls"] += 1
            mine["prompt_tokens"] += prompt_tokens
            mine["completion_tokens"] += completion_tokens
            if price:
                mine["cost_usd"] += cost
        return cost if price else None
