"""Log-likelihood with KV reuse vs naive recomputation, on 3-choice CFA items (run by hand).

    python bench/ll_reuse.py [--model embedded] [--items 20] [--naive-items N] [--context-tokens 500]

Each item of FinEval_CFA_Easy becomes one LoglikelihoodRequest whose context is a finance
passage (padding to about --context-tokens tokens) + the question, scored two ways:

- the backend (`LlamaCppBackend.loglikelihood`): the shared context evaluated once, KV cache
  reused across choices and across consecutive items;
- naive: for every choice, a cleared cache and context + choice evaluated from scratch.

Two continuation styles: the option letters (' A', one token each) and the option texts
(' A: maturity.', several tokens). Prints a table of evaluated tokens, differences and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import log_softmax

from finharness.backends import embedded, llamacpp
from finharness.core.types import GenerateParams, GenerateRequest, LoglikelihoodRequest, messages

DATA = Path(os.environ.get("FINHARNESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))
ITEMS_FILE = DATA / "cfa_cpa" / "CFA_essay" / "FinEval_CFA_Easy.data.json"

PASSAGE = (
    "Fixed-income analysts decompose a bond's yield into a real risk-free rate, an expected "
    "inflation premium, and premiums for default risk, liquidity and maturity. The nominal "
    "risk-free rate combines the real rate with expected inflation, while the spread of a "
    "corporate bond over a government bond of the same maturity compensates investors for "
    "default and liquidity risk. Duration measures a bond's price sensitivity to a parallel "
    "shift in yields, and convexity corrects for the curvature of the price-yield relation. "
    "In equity valuation, the dividend discount model values a share as the present value of "
    "expected dividends, and the free cash flow to equity model discounts cash available to "
    "shareholders after capital expenditure and net borrowing. The weighted average cost of "
    "capital blends the after-tax cost of debt with the cost of equity estimated from the "
    "capital asset pricing model, in which beta scales the market risk premium. Portfolio "
    "managers diversify to remove unsystematic risk, and the Sharpe ratio compares excess "
    "return with total volatility. Under IFRS and US GAAP, revenue is recognised when control "
    "of goods or services passes to the customer, inventories are carried at the lower of cost "
    "and net realisable value, and financial statement analysts adjust reported figures for "
    "off-balance-sheet leases and non-recurring items before computing ratios such as return "
    "on equity, which the DuPont analysis splits into margin, turnover and leverage. ")

CHOICE_TEXT = re.compile(r"CHOICES:\s*A:\s*(?P<A>.*?),\s*B:\s*(?P<B>.*?),\s*C:\s*(?P<C>.*?)\s*(?:Answer:)?\s*$",
                         re.S)


def build_requests(backend: llamacpp.LlamaCppBackend, n_items: int, context_tokens: int
                   ) -> dict[str, list[LoglikelihoodRequest]]:
    items = json.loads(ITEMS_FILE.read_text())
    padding = PASSAGE
    while backend.count_tokens(padding) < context_tokens:
        padding += PASSAGE
    requests: dict[str, list[LoglikelihoodRequest]] = {"letters": [], "option texts": []}
    for item in items:
        match = CHOICE_TEXT.search(item["query"])
        if match is None:
            continue
        # Trim the padding so that passage + question is about context_tokens long.
        question_tokens = backend.count_tokens(item["query"])
        words = padding.split(" ")
        while backend.count_tokens(" ".join(words)) + question_tokens > context_tokens:
            words = words[: -max(1, len(words) // 50)]
        context = " ".join(words) + "\n\n" + item["query"]
        requests["letters"].append(LoglikelihoodRequest(context, (" A", " B", " C")))
        requests["option texts"].append(LoglikelihoodRequest(
            context, tuple(f" {letter}: {match[letter]}" for letter in "ABC")))
        if len(requests["letters"]) == n_items:
            break
    return requests


def naive_logprobs(backend: llamacpp.LlamaCppBackend, request: LoglikelihoodRequest) -> list[float]:
    """Each choice from scratch: a cleared cache, context + choice evaluated in one go."""
    llm = backend._scoring_model()
    context, continuations = backend.encode_request(request.context, request.continuations)
    sums = []
    for tokens in continuations:
        llm.reset()
        llm.eval(context + tokens)
        rows = llm.scores[len(context) - 1: len(context) - 1 + len(tokens)].astype(np.float64)
        sums.append(float(log_softmax(rows, axis=-1)[np.arange(len(tokens)), tokens].sum()))
    llm.reset()
    return sums


async def measure(backend: llamacpp.LlamaCppBackend, requests: list[LoglikelihoodRequest],
                  naive_items: int) -> dict[str, float]:
    backend._scoring_model().reset()  # start cold: the first item shows the within-item saving
    started = time.perf_counter()
    responses = [await backend.loglikelihood(r) for r in requests]
    reuse_s = time.perf_counter() - started

    checked = requests[:naive_items]
    started = time.perf_counter()
    naive = [naive_logprobs(backend, r) for r in checked]
    naive_s = time.perf_counter() - started

    def needed(r) -> int:
        return r.context_tokens + sum(r.continuation_tokens)

    diffs = [abs(a - b) for r, n in zip(responses, naive) for a, b in zip(r.logprobs, n)]
    flips = sum(int(np.argmax(r.logprobs)) != int(np.argmax(n)) for r, n in zip(responses, naive))
    return {
        "items (naive-checked)": f"{len(requests)} ({len(checked)})",
        "context tokens (mean)": np.mean([r.context_tokens for r in responses]),
        "choice tokens (mean per item)": np.mean([sum(r.continuation_tokens) for r in responses]),
        "evaluated/(ctx+choices), item 1": responses[0].tokens_evaluated / needed(responses[0]),
        "evaluated/(ctx+choices), all": sum(r.tokens_evaluated for r in responses)
                                        / sum(needed(r) for r in responses),
        "naive evaluated/(ctx+choices)": sum(len(r.continuation_tokens) * r.context_tokens
                                             + sum(r.continuation_tokens) for r in responses)
                                         / sum(needed(r) for r in responses),
        "max |diff| vs naive (nats)": max(diffs),
        "answer differs (share)": flips / len(checked),
        "reuse s/item (all)": reuse_s / len(requests),
        "naive s/item": naive_s / len(checked),
    }


async def generation_speed(backend: llamacpp.LlamaCppBackend, max_tokens: int = 64) -> tuple[float, int]:
    request = GenerateRequest(messages(("user", "Explain in three sentences what a bond's duration measures.")),
                              GenerateParams(max_tokens=max_tokens, temperature=0.0))
    await backend.generate(request)  # warm up: load the model, fill the prompt cache
    started = time.perf_counter()
    response = await backend.generate(GenerateRequest(
        messages(("user", "In two sentences, what is the Sharpe ratio?")), request.params))
    return response.completion_tokens / (time.perf_counter() - started), response.completion_tokens


def _cell(value: object) -> str:
    return value if isinstance(value, str) else f"{value:.4g}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded?n_ctx=2048", help="embedded[:0.5b|:1.5b] or llamacpp:PATH")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--context-tokens", type=int, default=500)
    parser.add_argument("--naive-items", type=int, default=None,
                        help="check only the first N items against naive recomputation (it is slow)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    spec = f"{args.model}{'&' if '?' in args.model else '?'}threads={args.threads}"
    make = llamacpp.from_spec if spec.startswith("llamacpp:") else embedded.from_spec
    backend = make(spec)
    requests = build_requests(backend, args.items, args.context_tokens)
    print(f"model {spec}, {ITEMS_FILE.name}")
    naive_items = args.naive_items or args.items
    rows = {style: await measure(backend, reqs, naive_items) for style, reqs in requests.items()}
    names = list(next(iter(rows.values())))
    print(f"{'':34}" + "".join(f"{style:>16}" for style in rows))
    for name in names:
        print(f"{name:34}" + "".join(f"{_cell(row[name]):>16}" for row in rows.values()))
    tokens_per_s, n = await generation_speed(backend)
    print(f"generation: {tokens_per_s:.1f} tokens/s ({n} tokens, temperature 0, short chat prompt)")
    await backend.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
