"""What calls cost, and a budget that stops a run before the call that would cross it.

Prices are USD per million tokens, input and output, by model: a full model spec (`openai:gpt-4o@URL`) or the
model's name within it (`gpt-4o`); a backend with no price costs nothing (a local model). A price may also name the
rate of prompt tokens read from the provider's prompt cache (`cached`), of those written to it (`write`), and the
share of every rate a batch call costs (`batch`); a rate left out is the provider's (PROVIDER_RATES: an `openai:` or
`anthropic:` model's cached reads, cache writes and batch half price): a call is charged its fresh, cached and written prompt tokens
apart, at the batch share when it went through a batch (`Price.cost`), and reserved at its worst (`Price.worst`:
nothing cached, every prompt token at the dearer of input and write). A `Spending` is shared by
every handle of a run or a suite (all roles, all tasks, all models): before each call that is not in the store it
reserves the call's worst case (its prompt tokens, counted with the model's tokenizer where the backend has one,
else 4 characters a token, plus max_tokens and any thinking budget) and refuses the call when that would take the
spent tokens or cost past the budget; once one call is refused, every later one is too, so a run stops cleanly with
everything committed. After a call its real tokens and cost are charged and the reservation released.

A server may report more than a call asked for (a reasoning model or a server that ignores max_tokens): what it
reports is charged, all of it, at once. Its excess over the reservation is then held on top of every later call
of that spec (`margin`), and a call admitted before the excess was known is topped up before it is sent
(`top_up`), so no call is sent past the budget on a reservation known to be short. A reply that takes the spent
tokens or cost past the budget stops the run like a refusal, and the reason says by how much the server reported
more than asked. The budget can therefore be crossed only by the calls already sent when their replies came
back: spent <= budget + the sum, over the calls in flight at the last admission, of what each was charged beyond
its reservation.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

log = logging.getLogger(__name__)

BUDGET_KIND = "budget"
"""The failure kind of a call the budget refused (CallFailed.kind): a rerun with a higher budget resumes."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens, by kind of token, and what a provider's batch interface takes off."""

    input: float
    """Per million fresh prompt tokens (neither read from nor written to a prompt cache)."""

    output: float
    """Per million completion tokens (thinking tokens included, as providers bill them)."""

    cached: float | None = None
    """Per million prompt tokens read from the provider's prompt cache (None: not given; billed as input)."""

    cache_write: float | None = None
    """Per million prompt tokens written to the prompt cache (Anthropic's cache writes; None: billed as input)."""

    batch: float | None = None
    """The share of every rate a call made through the provider's batch interface costs (0.5: half price); None:
    not given, a batch call costs what a live one does."""

    def cost(self, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
             cache_write_tokens: int = 0, batch: bool = False) -> float:
        """USD of a call: its fresh, cached and written prompt tokens and its completion at their rates, times the
        batch share for a batch call."""
        cached = max(0, min(cached_tokens, prompt_tokens))
        written = max(0, min(cache_write_tokens, prompt_tokens - cached))
        fresh = prompt_tokens - cached - written
        usd = (fresh * self.input + cached * self.cached_rate + written * self.write_rate
               + completion_tokens * self.output) / 1e6
        return usd * self.batch_share if batch else usd

    def worst(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float:
        """The most a call can cost: every prompt token at the dearer of input and cache write, nothing cached."""
        usd = (prompt_tokens * max(self.input, self.write_rate) + completion_tokens * self.output) / 1e6
        return usd * self.batch_share if batch else usd

    @property
    def cached_rate(self) -> float:
        return self.input if self.cached is None else self.cached

    @property
    def write_rate(self) -> float:
        return self.input if self.cache_write is None else self.cache_write

    @property
    def batch_share(self) -> float:
        return 1.0 if self.batch is None else self.batch

    def to_json(self) -> dict[str, float | None]:
        return {"input": self.input, "output": self.output, "cached": self.cached, "cache_write": self.cache_write,
                "batch": self.batch}


PRICE_KEYS = {"in": "input", "input": "input", "out": "output", "output": "output", "cached": "cached",
              "write": "cache_write", "cache_write": "cache_write", "batch": "batch"}
"""The names a price's rates go by in `--price MODEL=in:2.5,cached:1.25,write:3.125,out:10,batch:0.5`."""

PRICE_FORMS = ("MODEL=IN/OUT (USD per million input and output tokens, e.g. gpt-4o=2.5/10), or every rate by name: "
               "MODEL=in:2.5,cached:1.25,write:3.125,out:10,batch:0.5 (cached: cache reads, write: cache writes, "
               "batch: the share of the price a batch call costs; IN/OUT may stand first: gpt-4o=2.5/10,batch:0.5)")


def price_from(where: str, rates: Mapping[str, Any]) -> Price:
    """A Price from its rates by name (PRICE_KEYS: in and out needed); a ValueError starting with `where` says what
    is wrong."""
    named: dict[str, float] = {}
    for key, value in rates.items():
        field_name = PRICE_KEYS.get(str(key))
        if field_name is None:
            raise ValueError(f"{where}: unknown rate {key!r}; the rates: in, out, cached, write, batch")
        if field_name in named:
            raise ValueError(f"{where}: rate {key!r} given twice")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where}: rate {key!r} must be a number, not {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{where}: prices are non-negative numbers ({key} {value!r})")
        named[field_name] = float(value)
    missing = [name for name in ("in", "out") if PRICE_KEYS[name] not in named]
    if missing:
        raise ValueError(f"{where}: needs {' and '.join(missing)} (USD per million tokens)")
    if named.get("batch", 0.0) > 1:
        raise ValueError(f"{where}: batch is the share of the price a batch call costs (0.5: half price), at most 1, "
                         f"not {named['batch']:g}")
    return Price(**named)  # type: ignore[arg-type]


def parse_price(text: str) -> tuple[str, Price]:
    """`MODEL=IN/OUT` or `MODEL=in:X,cached:X,write:X,out:X,batch:S` (PRICE_FORMS) -> (model, Price); a ValueError
    says the forms."""
    model, sep, body = text.rpartition("=")
    where = f"--price {text!r}"
    if not sep or not model or not body:
        raise ValueError(f"{where}: expected {PRICE_FORMS}")
    rates: dict[str, Any] = {}
    for i, part in enumerate(p.strip() for p in body.split(",")):
        try:
            if "/" in part and i == 0:
                rate_in, rate_out = part.split("/")
                pairs = [("in", rate_in), ("out", rate_out)]
            else:
                name, colon, value = part.partition(":")
                if not colon:
                    raise ValueError
                pairs = [(name.strip(), value)]
            for name, value in pairs:
                if name in rates:
                    raise ValueError(f"{where}: rate {name!r} given twice")
                rates[name] = float(value)
        except ValueError as err:
            if "given twice" in str(err):
                raise
            raise ValueError(f"{where}: expected {PRICE_FORMS}") from None
    return model, price_from(where, rates)


def model_name(spec: str) -> str:
    """The model a spec names, without scheme, base URL and options: `openai:gpt-4o@http://h/v1?x=1` -> `gpt-4o`."""
    rest = spec.split("?", 1)[0]
    rest = rest.split(":", 1)[1] if ":" in rest else rest
    return rest.split("@", 1)[0]


PROVIDER_RATES: dict[str, dict[str, float]] = {
    "openai": {"cached": 0.5, "batch": 0.5},
    "anthropic": {"cached": 0.1, "cache_write": 1.25, "batch": 0.5},
}
"""What a provider's price list takes off (or puts on) the input rate, by scheme, for the rates a price leaves out:
OpenAI bills cached prompt tokens at half the input rate (gpt-4o; newer models less: give `cached:` for them) and
writes nothing extra; Anthropic reads its cache at a tenth and writes it at 1.25 times the input rate; both sell
batch calls at half price."""


def with_provider_rates(price: Price, spec: str) -> Price:
    """`price` with the rates it leaves out (cached, cache write, batch) taken from its provider's price list
    (PROVIDER_RATES, by the spec's scheme); a rate given is kept, and a spec of another scheme keeps None."""
    rates = PROVIDER_RATES.get(spec.split("?", 1)[0].split(":", 1)[0], {})
    filled = {}
    if price.cached is None and "cached" in rates:
        filled["cached"] = price.input * rates["cached"]
    if price.cache_write is None and "cache_write" in rates:
        filled["cache_write"] = price.input * rates["cache_write"]
    if price.batch is None and "batch" in rates:
        filled["batch"] = rates["batch"]
    return replace(price, **filled) if filled else price


def price_for(prices: Mapping[str, Price], spec: str) -> Price | None:
    """The price of a backend's calls: by its full spec, else by the model's name, with the rates it leaves out from
    its provider's list (with_provider_rates); None: unpriced (free)."""
    found = prices.get(spec) or prices.get(model_name(spec))
    return None if found is None else with_provider_rates(found, spec)


@dataclass(frozen=True)
class Reservation:
    """What one admitted call holds against the budget until it is charged or released."""

    spec: str
    """The backend's spec (its price, its margin)."""

    prompt_tokens: int
    """The call's prompt tokens as counted before it (the model's tokenizer, else an estimate)."""

    completion_tokens: int
    """The most completion tokens the call asks for: max_tokens plus any thinking budget."""

    margin_prompt: int = 0
    """Prompt tokens held on top: the most that an earlier reply of this spec reported beyond the count."""

    margin_completion: int = 0
    """Completion tokens held on top: the most that an earlier reply of this spec reported beyond what it asked."""

    cost: float = 0.0
    """USD held (the price of the tokens held; 0: unpriced)."""

    batch: bool = False
    """The call goes through the provider's batch interface: held at the batch price."""

    @property
    def tokens(self) -> int:
        """Tokens held, margins included."""
        return self.prompt_tokens + self.completion_tokens + self.margin_prompt + self.margin_completion


class BudgetRefused(Exception):
    """A call the budget did not admit; the message says why (`budget reached: ...`)."""


@dataclass
class OverReport:
    """Replies of one spec that reported more tokens than their calls asked for (or than their prompts counted)."""

    calls: int = 0
    """Replies that reported more than their call asked for."""

    excess_tokens: int = 0
    """Tokens charged beyond what those calls asked for (prompt count plus completion ceiling), all together."""

    most_completion: tuple[int, int] = (0, 0)
    """(completion tokens reported, completion tokens asked) of the reply that exceeded its ask the most."""

    most_prompt: tuple[int, int] = (0, 0)
    """(prompt tokens reported, prompt tokens counted before the call) of the reply that exceeded its count most."""

    def describe(self, spec: str) -> str:
        parts = []
        reported, asked = self.most_completion
        if reported > asked:
            parts.append(f"up to {reported:,} completion tokens where a call asked for at most {asked:,} "
                         f"({reported - asked:,} more)")
        reported, counted = self.most_prompt
        if reported > counted:
            parts.append(f"up to {reported:,} prompt tokens where {counted:,} were counted ({reported - counted:,} more)")
        return (f"{spec} reported more than its calls asked for: {self.calls:,} call(s), "
                f"{' and '.join(parts)}; {self.excess_tokens:,} token(s) in all beyond what they asked for")


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

    by_spec: dict[str, dict[str, Any]] = field(default_factory=dict)
    """spec -> {"calls", "prompt_tokens", "completion_tokens", "cost_usd"} charged so far."""

    over_reports: dict[str, OverReport] = field(default_factory=dict)
    """spec -> its replies that reported more than their calls asked for (only while a budget is set)."""

    _stop: str | None = None
    _margins: dict[str, tuple[int, int]] = field(default_factory=dict)
    """spec -> (prompt, completion) tokens its replies reported beyond their reservations, at most."""
    _reserved_tokens: int = 0
    _reserved_cost: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def limited(self) -> bool:
        return self.max_tokens is not None or self.max_cost is not None

    @property
    def reached(self) -> str | None:
        """Why the budget stopped the run (None: it has not), with what servers reported beyond their calls' ask."""
        with self._lock:
            if self._stop is None:
                return None
            parts = [self._stop]
            if self.max_tokens is not None and self.tokens > self.max_tokens:
                parts.append(f"replies of calls already in flight took the spent tokens to {self.tokens:,}, "
                             f"{self.tokens - self.max_tokens:,} past it")
            if self.max_cost is not None and self.cost > self.max_cost:
                parts.append(f"replies of calls already in flight took the cost to ${self.cost:.4f}, "
                             f"${self.cost - self.max_cost:.4f} past it")
            parts.extend(o.describe(spec) for spec, o in sorted(self.over_reports.items()))
            return "; ".join(parts)

    def _price_of(self, spec: str, prompt_tokens: int, completion_tokens: int, batch: bool = False) -> float:
        """The most a call of these tokens can cost (Price.worst: nothing cached, writes at their rate)."""
        price = price_for(self.prices, spec)
        return price.worst(prompt_tokens, completion_tokens, batch=batch) if price else 0.0

    def _fits(self, tokens: int, cost: float, call: str) -> str | None:
        """Why holding `tokens` and `cost` more for `call` would cross the budget (None: it fits); the lock is
        held."""
        if self.max_tokens is not None and self.tokens + self._reserved_tokens + tokens > self.max_tokens:
            held = f" and {self._reserved_tokens:,} held for calls in flight" if self._reserved_tokens else ""
            return (f"the token budget of {self.max_tokens:,} (spent {self.tokens:,}{held} when {call} could take "
                    f"up to {tokens:,} more)")
        if self.max_cost is not None and self.cost + self._reserved_cost + cost > self.max_cost:
            held = f" and ${self._reserved_cost:.4f} held for calls in flight" if self._reserved_cost else ""
            return (f"the cost budget of ${self.max_cost:.4f} (spent ${self.cost:.4f}{held} when {call} could cost "
                    f"up to ${cost:.4f} more)")
        return None

    def _hold(self, extra_tokens: int, extra_cost: float, call: str) -> None:
        """Hold `extra_tokens` and `extra_cost` more for `call` when they fit, else stop (BudgetRefused); the lock
        is held."""
        if self._stop is None:
            self._stop = self._fits(extra_tokens, extra_cost, call)
        if self._stop is not None:
            self.refused += 1
            raise BudgetRefused(f"budget reached: {self._stop}")
        self._reserved_tokens += extra_tokens
        self._reserved_cost += extra_cost

    def admit(self, spec: str, prompt_tokens: int, completion_ceiling: int, *, batch: bool = False) -> Reservation:
        """Reserve a call's worst case (plus the spec's margin) and return what it holds; BudgetRefused when that
        would cross the budget (and from then on every call is refused). A call admitted must be charged or
        released. batch: the call goes through the provider's batch interface, so it is held at the batch price."""
        with self._lock:
            margin_prompt, margin_completion = self._margins.get(spec, (0, 0))
            held = Reservation(spec, prompt_tokens, completion_ceiling, margin_prompt, margin_completion, batch=batch)
            held = replace(held, cost=self._price_of(spec, held.prompt_tokens + margin_prompt,
                                                     held.completion_tokens + margin_completion, batch))
            self._hold(held.tokens, held.cost, "the next call")
            return held

    def top_up(self, held: Reservation) -> Reservation:
        """Before an admitted call is sent: hold the margin its spec learned since it was admitted (a reply of
        the same spec reported more than it asked for); BudgetRefused when that does not fit (the caller still
        releases `held`)."""
        with self._lock:
            margin_prompt, margin_completion = self._margins.get(held.spec, (0, 0))
            if margin_prompt <= held.margin_prompt and margin_completion <= held.margin_completion:
                return held
            grown = replace(held, margin_prompt=max(margin_prompt, held.margin_prompt),
                            margin_completion=max(margin_completion, held.margin_completion))
            grown = replace(grown, cost=self._price_of(held.spec, grown.prompt_tokens + grown.margin_prompt,
                                                       grown.completion_tokens + grown.margin_completion,
                                                       held.batch))
            self._hold(grown.tokens - held.tokens, grown.cost - held.cost,
                       "a call admitted before a reply reported more than asked")
            return grown

    def release(self, held: Reservation) -> None:
        """Give back an admitted call's reservation (it failed: nothing was charged)."""
        with self._lock:
            self._release(held)

    def _release(self, held: Reservation) -> None:
        self._reserved_tokens -= held.tokens
        self._reserved_cost -= held.cost

    def charge(self, spec: str, prompt_tokens: int, completion_tokens: int, *,
               reserved: Reservation | None = None, cached_tokens: int = 0, cache_write_tokens: int = 0,
               batch: bool = False) -> float | None:
        """Charge a call made: its real tokens and their cost (returned; None: the model is unpriced), all of it,
        whatever it reserved (`reserved`: what it was admitted with, released here). Of its prompt tokens,
        `cached_tokens` were read from the provider's prompt cache and `cache_write_tokens` written to it (each at
        its rate); `batch`: made through the batch interface (at the batch share). A reply that reports more than
        its call asked for raises the spec's margin for later calls; one that takes the spent tokens or cost past
        the budget stops the run (`reached`)."""
        price = price_for(self.prices, spec)
        cost = price.cost(prompt_tokens, completion_tokens, cached_tokens=cached_tokens,
                          cache_write_tokens=cache_write_tokens, batch=batch) if price else 0.0
        with self._lock:
            if reserved is not None:
                self._release(reserved)
                self._note_excess(reserved, prompt_tokens, completion_tokens)
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
            if self._stop is None:  # a reply past the budget stops the run as a refusal would (`reached` says how)
                if self.max_tokens is not None and self.tokens > self.max_tokens:
                    self._stop = f"the token budget of {self.max_tokens:,}"
                elif self.max_cost is not None and self.cost > self.max_cost:
                    self._stop = f"the cost budget of ${self.max_cost:.4f}"
        return cost if price else None

    def _note_excess(self, held: Reservation, prompt_tokens: int, completion_tokens: int) -> None:
        """Count a reply that reported more than its call asked for and learn the spec's margin; the lock is held."""
        over_prompt = prompt_tokens - held.prompt_tokens
        over_completion = completion_tokens - held.completion_tokens
        if over_prompt <= 0 and over_completion <= 0:
            return
        report = self.over_reports.setdefault(held.spec, OverReport())
        report.calls += 1
        report.excess_tokens += max(over_prompt, 0) + max(over_completion, 0)
        if over_completion > report.most_completion[0] - report.most_completion[1]:
            report.most_completion = (completion_tokens, held.completion_tokens)
        if over_prompt > report.most_prompt[0] - report.most_prompt[1]:
            report.most_prompt = (prompt_tokens, held.prompt_tokens)
        margin_prompt, margin_completion = self._margins.get(held.spec, (0, 0))
        grown = max(margin_prompt, over_prompt), max(margin_completion, over_completion)
        if grown != (margin_prompt, margin_completion):
            self._margins[held.spec] = grown
            if report.calls == 1:
                log.warning("%s: a reply reported %s; later calls of it hold that much more of the budget",
                            held.spec, _excess_words(prompt_tokens, completion_tokens, held))


def _excess_words(prompt_tokens: int, completion_tokens: int, held: Reservation) -> str:
    parts = []
    if completion_tokens > held.completion_tokens:
        parts.append(f"{completion_tokens:,} completion tokens for a call that asked for at most "
                     f"{held.completion_tokens:,}")
    if prompt_tokens > held.prompt_tokens:
        parts.append(f"{prompt_tokens:,} prompt tokens where {held.prompt_tokens:,} were counted")
    return " and ".join(parts)
