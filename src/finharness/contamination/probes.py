"""The membership probes' arithmetic: from a text's token log-probabilities (or a chat model's replies) to one
score per probe, higher meaning "more likely seen in training".

Log-likelihood probes (every token of the text scored after the model's document start, no chat template):

- `loss`: the mean token log-probability (Yeom et al. 2018's loss attack; Min-K% at k = 100%).
- `min_k`: the mean of the k = 20% lowest token log-probabilities (Shi et al. 2024, "Min-K% Prob"): a seen text
  has few very unlikely tokens.
- `min_k_pp`: Min-K%++ (Zhang et al. 2024): each token's log p standardised by the mean μ and standard deviation
  σ of log p over the model's whole next-token distribution at that position, (log p(x_t) − μ_t) / σ_t, then
  the mean of the 20% lowest. The local engines (embedded, llamacpp, hf) compute μ and σ from the full
  distribution (LoglikelihoodRequest.per_token); no approximation is made.
- `zlib`: the text's total log-likelihood over its zlib-compressed size in bytes (Carlini et al. 2021's zlib
  ratio, as nats per compressed byte: a text the model finds easier than its compressibility says).
- `reference`: the target model's mean token log-probability minus a reference model's on the same text
  (Carlini et al. 2021's "small model" calibration): the reference is a smaller model of the same family,
  which shares the family's general ability but is taken to have memorised less.

Chat probes (any backend that generates):

- `guided`: guided completion (Golchin & Surdeanu 2024): the model is given the item's first half with the
  benchmark's name and split and asked to continue it exactly; the score is ROUGE-L F1 (longest common
  subsequence of words, CJK characters one word each) of its continuation against the true second half.
- `order`: answer-option order sensitivity: accuracy with the options as published minus the mean accuracy with
  the options rotated and reversed (a model that memorised "the answer is C" loses it when C moves); per item
  it is −1, −½, 0, ½ or 1.
"""

from __future__ import annotations

import math
import re
import zlib
from typing import Sequence

MIN_K_FRACTION = 0.2
"""k of Min-K% and Min-K%++: the share of a text's tokens (the least likely) averaged (the papers' best k)."""

LL_PROBES: tuple[str, ...] = ("loss", "min_k", "min_k_pp", "zlib", "reference")
"""Probes computed from log-likelihoods."""

CHAT_PROBES: tuple[str, ...] = ("guided", "order")
"""Probes computed from generations."""

PROBES: tuple[str, ...] = LL_PROBES + CHAT_PROBES

PROBE_NAMES: dict[str, str] = {
    "loss": "loss (mean log p)", "min_k": "Min-K% (k = 20%)", "min_k_pp": "Min-K%++ (k = 20%)",
    "zlib": "zlib ratio", "reference": "reference-model ratio", "guided": "guided completion (ROUGE-L)",
    "order": "option-order sensitivity"}
"""How each probe is named to people."""


def _lowest_mean(values: Sequence[float], fraction: float) -> float:
    """The mean of the ceil(fraction · n) smallest values (at least one)."""
    if not values:
        return math.nan
    count = max(1, math.ceil(fraction * len(values)))
    return sum(sorted(values)[:count]) / count


def mean_logprob(logprobs: Sequence[float]) -> float:
    """`loss`: the mean token log-probability."""
    return sum(logprobs) / len(logprobs) if logprobs else math.nan


def min_k(logprobs: Sequence[float], fraction: float = MIN_K_FRACTION) -> float:
    """`min_k`: the mean of the lowest `fraction` of the token log-probabilities."""
    return _lowest_mean(list(logprobs), fraction)


def standardised(logprobs: Sequence[float], means: Sequence[float], stds: Sequence[float]) -> list[float]:
    """(log p − μ) / σ per token; a position whose distribution has no spread (σ = 0: one token certain) gives 0."""
    return [(lp - mu) / sd if sd > 0 else 0.0 for lp, mu, sd in zip(logprobs, means, stds)]


def min_k_plus_plus(logprobs: Sequence[float], means: Sequence[float], stds: Sequence[float],
                    fraction: float = MIN_K_FRACTION) -> float:
    """`min_k_pp`: Min-K% over the standardised token scores."""
    return _lowest_mean(standardised(logprobs, means, stds), fraction)


def zlib_bytes(text: str) -> int:
    """The text's size compressed by zlib (level 9), in bytes."""
    return len(zlib.compress(text.encode("utf-8"), 9))


def zlib_ratio(total_logprob: float, text: str) -> float:
    """`zlib`: the total log-likelihood (nats) per byte of the zlib-compressed text."""
    return total_logprob / max(1, zlib_bytes(text))


def reference_ratio(target_mean: float, reference_mean: float) -> float:
    """`reference`: the target's mean token log-probability minus the reference model's."""
    return target_mean - reference_mean


_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased words; each CJK character is a word of its own (the ROUGE convention for Chinese)."""
    return [w.lower() for w in _WORD.findall(text)]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, one row at a time)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 (β = 1) of `candidate` against `reference`, over `words`; 0 when either is empty."""
    c, r = words(candidate), words(reference)
    common = lcs_length(c, r)
    if common == 0:
        return 0.0
    precision, recall = common / len(c), common / len(r)
    return 2 * precision * recall / (precision + recall)


def split_for_guided(text: str, share: float = 0.5) -> tuple[str, str]:
    """(first part, rest): the text cut at the word boundary nearest `share` of its words (at least one word on
    each side where it has two)."""
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    if len(spans) < 2:
        return text, ""
    cut = min(max(1, round(len(spans) * share)), len(spans) - 1)
    at = spans[cut][0]
    return text[:at].rstrip(), text[at:].strip()


def order_sensitivity(original_correct: bool, permuted_correct: Sequence[bool]) -> float:
    """`order`: 1 if correct as published, minus the share correct over the permutations."""
    if not permuted_correct:
        return math.nan
    return float(original_correct) - sum(map(float, permuted_correct)) / len(permuted_correct)


def ll_scores(logprobs: Sequence[float] | None, total: float, tokens: int, text: str,
              means: Sequence[float] | None = None, stds: Sequence[float] | None = None,
              reference_mean: float | None = None) -> dict[str, float | None]:
    """Every log-likelihood probe of one text: its token log-probabilities (None: the backend gives sums only, so
    the Min-K% probes are None), their sum and count, the moments per token (Min-K%++), and the reference model's
    mean token log-probability (None: no reference)."""
    mean = total / tokens if tokens else math.nan
    out: dict[str, float | None] = {"loss": mean, "min_k": None, "min_k_pp": None, "zlib": zlib_ratio(total, text),
                                    "reference": None}
    if logprobs:
        out["min_k"] = min_k(logprobs)
        if means is not None and stds is not None:
            out["min_k_pp"] = min_k_plus_plus(logprobs, means, stds)
    if reference_mean is not None:
        out["reference"] = reference_ratio(mean, reference_mean)
    return out
