"""FinTradeBench (fintradebench-anonymous/PaperSubmission): questions that need company fundamentals
and trading signals, answered without retrieval, with retrieval, or with precomputed contexts, graded
by an LLM judge on the release's rubric.

Data: DATA/fintradebench/FinTradeBench_Golden_Seed_150.csv (150 questions: F, T, FT x 50), SEC_Filings/,
history_xlsx/, fundamentals/; nasdaq100_ohlcv/ for scaled questions (see questions.py for the
category, ticker and as-of rules). Sample ids: the question_id ('F12', 'FT3', scaled 'F12-v2').

Per sample (solve): the context of the mode, one answer per TELeR level, self-selection of the best
answer by the model itself, then one rubric judgment by the judge (roles: model, judge).

Options (`--mode`, `-o KEY=VALUE`):
  mode          'norag' (default) | 'rag' | 'ideal'
                norag: no evidence, levels L1-L4 of the release's RAG pipeline (they carry none);
                rag:   point-in-time retrieval (finharness.retrieval.Retriever) for each resolved ticker at
                       the question's as-of date, shown to L5 and L6 as the release's 'MARKET DATA' context;
                ideal: precomputed signal and fundamental contexts for the question's window (ideal.py) in
                       every level, the release's ideal-RAG prompt set.
  levels        comma list of L1..L6 and 'bare' (the question alone). Default = the release's choice per
                pipeline: rag L1-L6 (run_snowflake_rag_pipeline.py); ideal L1-L6 + bare
                (generate_benchmark_responses.py also offers its 'No RAG' answer to self-selection);
                norag L1-L4 (the release's evidence-free levels; L5/L6 need evidence and are refused).
  select        true (default): the model picks its best candidate (prompts.py); false: exactly one level
                must be given and its answer is judged.
  selection     'official' (default): the release's self-selection prompt (prompt ids, L3's given as the
                example, which small models copy); 'neutral' (ours): 'Candidate N' labels in an order
                shuffled per question and model, every label listed, none as an example (prompts.py).
  per_category  N: only the first N questions of each category in natural id order (F1, F2, ... F10), e.g.
                10 -> 30 questions; default all.
  questions     a question CSV instead of the seed file (e.g. from `finharness fintradebench scale`).
  max_tokens    answer budget per level (default 1024; the release allows 4,096-8,192).
  judge_context 'ideal' (default, ours): the judge sees the ideal contexts of the question as its
                'Source Context'; 'none': empty contexts, as the release's judge gets from the seed file
                (which has no context columns).
  fundamentals  'filings' (default, point-in-time) | 'official' -- the fundamentals of ideal contexts.
  budget_tokens retrieval budget over all tickers of a question (default 2000), split evenly; cut by a
                third (up to 3 times) while the longest prompt does not fit the model's window.
  dense         'auto' (default) | 'on' | 'off' -- the retriever's dense track.

Scores: value = correctness / 5 (headline 'accuracy'); values 'accuracy.<F|T|FT>' (the sample's category
only), 'reasoning', 'trading_signals', 'fundamentals' (each / 5), 'f1.official', 'f1.proper',
'precision.proper', 'recall.proper'. A judge reply without a usable verdict after three attempts leaves
the sample unscored (value None, parsed False) and is counted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.metrics import mean_metrics
from ...core.options import parse_task_options
from ...core.task import Aggregate, DataNeeds, Models, SampleRecord, Task
from ...core.types import GenerateParams, Message, Sample, Score
from ...data.registry import resolve_data_dir
from ...util import natural_key
from .fitting import cut_text, fit_prompt
from .ideal import MarketData
from .indicators import f1_official, f1_proper, named_indicators
from .judge import JUDGE_ATTEMPTS, Verdict, example_scores, fitted_judge_messages, judge_answer, rubric_copy_note
from .prompts import (
    BARE,
    EVIDENCE_LEVELS,
    IDEAL_SELECTION_TEMPERATURE,
    LEVELS,
    SELECTION_STYLES,
    Candidate,
    example_copy_note,
    prompt_ids,
    read_selection,
    render,
    selection_example,
    selection_turn,
)
from .questions import CATEGORIES, GROUPS, SEED_FILE, Question, read_questions, summarise

MODES: tuple[str, ...] = ("norag", "rag", "ideal")

DEFAULT_LEVELS: dict[str, tuple[str, ...]] = {
    "norag": ("L1", "L2", "L3", "L4"),
    "rag": LEVELS,
    "ideal": (*LEVELS, BARE),
}
"""The release's candidate sets per pipeline (norag: its evidence-free levels)."""

SELECTION_MAX_TOKENS = 32
"""Self-selection replies are one prompt id."""
SELECTION_CUT_STAGE: tuple[str, ...] = (*LEVELS, BARE)
"""What is cut when a self-selection prompt does not fit the model's window (fitting.py): the candidates'
answers, to equal shares."""
CUT_ROLES: Mapping[str, str] = {"judge": "judge", "selection": "model"}
"""Prompts that may be cut to fit (fitting.py) -> the role whose window they must fit."""
FIT_POLICY = "fit"
"""The truncation policy named in a sample's trace when a prompt was cut by fitting.py."""
FIT_ATTEMPTS = 4
"""Retrievals per rag question at most: the budget, then up to three cuts by a third (fitted_rag_context)."""


@dataclass(frozen=True)
class FinTradeOptions:
    """Everything that changes FinTradeBench's requests or scores (the task's part of the run key)."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {
        "mode": MODES, "levels": (*LEVELS, BARE), "selection": SELECTION_STYLES, "judge_context": ("ideal", "none"),
        "fundamentals": ("filings", "official"), "dense": ("auto", "on", "off"), "judge_scores": ("official", "expected")}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("per_category", "max_tokens", "budget_tokens")

    mode: str = "norag"
    """'norag', 'rag' or 'ideal'."""
    levels: tuple[str, ...] = ()
    """TELeR levels generated (empty = the mode's default)."""
    select: bool = True
    """Self-selection among the levels' answers."""
    selection: str = "official"
    """Self-selection prompt style: 'official' or 'neutral' (prompts.SELECTION_STYLES)."""
    per_category: int | None = None
    """First N questions per category (natural id order)."""
    questions: str | None = None
    """Question CSV instead of the seed file."""
    max_tokens: int = 1024
    """Answer budget per level."""
    judge_context: str = "ideal"
    """'ideal' or 'none'."""
    fundamentals: str = "filings"
    """'filings' or 'official' (ideal contexts)."""
    budget_tokens: int = 2000
    """Retrieval budget per question."""
    dense: str = "auto"
    """Retriever dense track: 'auto', 'on', 'off'."""
    judge_scores: str = "official"
    """'official' (the 1-5 integers the judge wrote) or 'expected' (ours: Σ s·P(s) over the digits at the token
    where the judge wrote each score; needs a judge with next-token logprobs; unread fields fall back and are
    counted in `expected_coverage`)."""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "FinTradeOptions":
        parsed = parse_task_options(cls, options, "fintradebench",
                                    choices={k: v for k, v in cls.CHOICES.items() if k != "levels"})
        levels = parsed.levels or DEFAULT_LEVELS[parsed.mode]
        bad = [x for x in levels if x not in (*LEVELS, BARE)]
        if bad:
            raise ValueError(f"fintradebench: levels {bad} unknown; choose from {', '.join((*LEVELS, BARE))}")
        if parsed.mode == "norag" and EVIDENCE_LEVELS & set(levels):
            raise ValueError("fintradebench: levels L5 and L6 cite retrieved evidence; mode norag takes L1-L4 "
                             "and 'bare' (use --mode rag or ideal for L5/L6)")
        if not parsed.select and len(levels) != 1:
            raise ValueError("fintradebench: select=false judges one answer; give exactly one level "
                             "(e.g. -o levels=L3 -o select=false)")
        return replace(parsed, levels=levels)


class FinTradeBenchTask(Task):
    """FinTradeBench: fundamentals (F), trading-signal (T) and hybrid (FT) questions, judged on a rubric."""

    name: ClassVar[str] = "fintradebench"
    headline: ClassVar[str | None] = "accuracy"
    metric_docs: ClassVar[Mapping[str, str]] = {
        "accuracy": "the headline: the judge's correctness / 5",
        "accuracy.F|T|FT": "per category: fundamentals, trading signals, both",
        "reasoning / trading_signals / fundamentals": "the rubric's other dimensions, each / 5",
        "f1.official": "golden-indicator F1 by the release's rule (precision 1 whenever the judge found any)",
        "f1.proper / precision.proper / recall.proper": "the indicators the answer names against the golden set",
        "expected_coverage": "judge_scores=expected: the share of rubric fields read from the judge's probabilities",
    }
    description: ClassVar[str] = ("FinTradeBench: 150 seed questions on fundamentals and trading signals, No-RAG / "
                                  "RAG / ideal contexts, TELeR prompts with self-selection, rubric LLM judge")
    roles: ClassVar[tuple[str, ...]] = ("model", "judge")

    Options = FinTradeOptions

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        scaled = bool(getattr(settings, "questions", None))
        at_load = ("nasdaq100-ohlcv",) if scaled else ("fintradebench-seed",)  # scaled questions name NASDAQ-100 members
        later = ("fintradebench-history", "fintradebench-sec-filings")  # prices; fundamentals from the filings
        if getattr(settings, "fundamentals", None) == "official":
            later += ("fintradebench-fundamentals",)
        return DataNeeds(at_load, later)

    def __init__(self, settings: FinTradeOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        self.data_dir: Path | None = None
        self._market: MarketData | None = None
        self._retriever: Any = None
        self._summary: Any = None

    # --- loading --------------------------------------------------------------------------------

    def load(self, data_dir: Path | None) -> list[Sample]:
        root = resolve_data_dir(data_dir)
        self.data_dir = root
        self._market = MarketData(root, self.settings.fundamentals)  # type: ignore[arg-type]
        path = Path(self.settings.questions) if self.settings.questions else root / SEED_FILE
        questions = read_questions(path, self._market.tickers_with_prices())
        questions.sort(key=lambda q: (CATEGORIES.index(q.category), natural_key(q.id)))
        if self.settings.per_category is not None:
            taken: Counter[str] = Counter()
            kept = []
            for q in questions:
                if taken[q.category] < self.settings.per_category:
                    kept.append(q)
                    taken[q.category] += 1
            questions = kept
        self._summary = summarise(questions)
        return [self._sample(q, path) for q in questions]

    @staticmethod
    def _sample(q: Question, path: Path) -> Sample:
        inputs = {"question": q.text, "golden": list(q.golden), "gold_answer": q.gold_answer,
                  "tickers": list(q.tickers.tickers), "group": q.tickers.group, "as_of": q.date.as_of.isoformat(),
                  "window_start": q.date.window_start.isoformat()}
        metadata = {"category": q.category, "question_type": q.category, "scope": q.tickers.scope,
                    "tickers": list(q.tickers.tickers), "unmapped": list(q.tickers.unmapped),
                    "as_of": q.date.as_of.isoformat(), "date_rule": q.date.rule, "date_label": q.date.label,
                    "source": f"{path}:{q.line}", "source_id": q.source_id}
        return Sample(id=q.id, input=inputs, target=list(q.golden), metadata=metadata)

    # --- contexts -----------------------------------------------------------------------------------

    def _market_data(self) -> MarketData:
        if self._market is None:
            self._market = MarketData(resolve_data_dir(self.data_dir),
                                      self.settings.fundamentals)  # type: ignore[arg-type]
        return self._market

    def _context_tickers(self, sample: Sample) -> tuple[tuple[str, ...], bool]:
        inputs = sample.input
        group = GROUPS.get(inputs["group"]) if inputs.get("group") else None
        return self._market_data().context_tickers(inputs["tickers"], group, dt.date.fromisoformat(inputs["as_of"]))

    def retriever(self) -> Any:
        """The point-in-time Retriever over the data root (built once)."""
        if self._retriever is None:
            from ...retrieval import RetrievalConfig, Retriever

            self._retriever = Retriever(resolve_data_dir(self.data_dir),
                                        RetrievalConfig(budget_tokens=self.settings.budget_tokens,
                                                        dense=self.settings.dense))  # type: ignore[arg-type]
        return self._retriever

    async def rag_context(self, sample: Sample, budget_tokens: int | None = None) -> tuple[str, dict[str, Any]]:
        """Evidence for L5/L6: each resolved ticker's retrieval at the as-of date, joined as the release does;
        the budget (default: the budget_tokens option) is split evenly over the tickers with data."""
        as_of = dt.date.fromisoformat(sample.input["as_of"])
        tickers, fallback = self._context_tickers(sample)
        market = self._market_data()
        usable = [t for t in tickers if market.has_filings(t) and market.price_file(t) is not None
                  and market.price_file(t).name.endswith("-history.xlsx")]  # type: ignore[union-attr]
        retriever = self.retriever()
        budget = self.settings.budget_tokens if budget_tokens is None else budget_tokens
        per_ticker = budget // max(len(usable), 1)
        texts, items = [], []
        for ticker in usable:
            result = await retriever.aretrieve(sample.input["question"], ticker, as_of, budget_tokens=per_ticker)
            for item in result.items:
                if item.date > as_of.isoformat():  # the retriever checks too; never hand the future to a model
                    raise RuntimeError(f"point-in-time violation: {item.source} dated {item.date} > {as_of}")
                texts.append(item.text)
                items.append({"ticker": ticker, "track": item.track, "source": item.source, "date": item.date,
                              "tokens": item.tokens, "truncated": item.truncated})
        info = {"tickers": list(tickers), "retrieved_for": usable, "fallback": fallback, "budget_tokens": budget,
                "no_data": [t for t in tickers if t not in usable], "items": items, "as_of": as_of.isoformat()}
        return "\n".join(texts), info

    async def fitted_rag_context(self, sample: Sample, model: Any) -> tuple[str, dict[str, Any]]:
        """rag_context, its budget cut by a third until the longest level's prompt fits the model's window.

        The budget counts approximate tokens (retrieval/chunking.py); a model's tokenizer can need far
        more for the same text (Qwen splits numbers digit by digit: price tables run about 2x), so a
        2,000-token budget can overflow a 4,096-token window. Each cut is noted in the sample's trace."""
        budget = self.settings.budget_tokens
        question = sample.input["question"]
        for _ in range(FIT_ATTEMPTS - 1):
            context, info = await self.rag_context(sample, budget)
            longest = max((render("rag", level, question, context=context) for level in self.settings.levels), key=len)
            if model.fits((Message("user", longest),), self.settings.max_tokens) is not False:
                return context, info
            budget = budget * 2 // 3
            model.note("retrieval-budget-cut", f"the prompt did not fit the model's window; budget now {budget}")
        return await self.rag_context(sample, budget)  # if still too long, the call fails as prompt-too-long

    def ideal_context(self, sample: Sample) -> tuple[str, str, dict[str, Any]]:
        tickers, fallback = self._context_tickers(sample)
        context = self._market_data().context(tickers, dt.date.fromisoformat(sample.input["window_start"]),
                                              dt.date.fromisoformat(sample.input["as_of"]))
        info = {"tickers": list(context.tickers), "fallback": fallback, "no_data": list(context.missing),
                "last_date": context.last_date, "as_of": sample.input["as_of"]}
        return context.trading, context.fundamental, info

    # --- solving ------------------------------------------------------------------------------------

    @property
    def generate_params(self) -> GenerateParams:
        """Greedy, as the release (temperature 0)."""
        return GenerateParams(max_tokens=self.settings.max_tokens, temperature=0.0)

    async def self_select(self, sample: Sample, model: Any, candidates: Sequence[Candidate]
                          ) -> tuple[Candidate, dict[str, Any]]:
        """The model's pick among its candidates, in the `selection` style; the record says how it was read
        and the levels in the order shown."""
        mode, question = self.settings.mode, sample.input["question"]
        params = GenerateParams(max_tokens=SELECTION_MAX_TOKENS,
                                temperature=IDEAL_SELECTION_TEMPERATURE if mode == "ideal" else 0.0)
        style = self.settings.selection
        order_key = f"{sample.id}|{model.spec}"
        _, order = selection_turn(mode, question, candidates, style, order_key)

        def render(limits: Mapping[str, int | None]) -> tuple[Message, ...]:
            shown = [replace(c, response=cut_text(c.response, limits[c.level])) for c in candidates]
            return (Message("user", selection_turn(mode, question, shown, style, order_key)[0]),)

        messages, cuts = fit_prompt(render, {c.level: len(c.response) for c in candidates}, (SELECTION_CUT_STAGE,),
                                    lambda m: model.fits(m, params.max_tokens))
        if cuts:
            model.note_truncation(FIT_POLICY, f"self-selection prompt cut to fit the model's window: {cuts}")
        reply = await model.chat(messages, params)
        index, rule = read_selection(mode, reply.text, candidates, style, order)
        record = {"rule": rule, "reply": reply.text, "style": style, "shown": [candidates[i].level for i in order]}
        return candidates[index], record | ({"prompt_cut": cuts} if cuts else {})

    async def solve(self, sample: Sample, models: Models) -> dict[str, Any]:
        mode, question = self.settings.mode, sample.input["question"]
        context, trading, fundamental = "", "", ""
        info: dict[str, Any] = {}
        if mode == "rag":
            context, info = await self.fitted_rag_context(sample, models.model)
        ideal = None
        if mode == "ideal" or self.settings.judge_context == "ideal":
            ideal = await asyncio.to_thread(self.ideal_context, sample)
        if mode == "ideal" and ideal is not None:
            trading, fundamental, info = ideal
        ids = prompt_ids(mode)
        model = models.model

        async def answer(level: str) -> Candidate:
            prompt = render(mode, level, question, context=context, trading_context=trading,
                            fundamental_context=fundamental)
            response = await model.chat((Message("user", prompt),), self.generate_params)
            return Candidate(level, ids[level], response.text)

        candidates = list(await asyncio.gather(*(answer(level) for level in self.settings.levels)))
        chosen, selection = candidates[0], {"rule": "single-level", "reply": None}
        if self.settings.select and len(candidates) > 1:
            chosen, selection = await self.self_select(sample, model, candidates)
        judge_trading, judge_fundamental = ("", "") if ideal is None else ideal[:2]
        judge = models["judge"]
        messages, cuts = fitted_judge_messages(judge, question=question, golden=sample.input["golden"],
                                               gold_answer=sample.input["gold_answer"], answer=chosen.response,
                                               model=model.spec, mode=mode, trading_context=judge_trading,
                                               fundamental_context=judge_fundamental)
        if cuts:
            judge.note_truncation(FIT_POLICY, f"judge prompt cut to fit the judge's window: {cuts}")
        judgment = await judge_answer(judge, messages, expected=self.settings.judge_scores == "expected")
        return {"answer": chosen.response, "level": chosen.level, "prompt_id": chosen.prompt_id,
                "selection": selection,
                "candidates": [{"level": c.level, "prompt_id": c.prompt_id, "response": c.response}
                               for c in candidates],
                "judge": judgment.to_json(), "context": info} | ({"judge_prompt_cut": cuts} if cuts else {})

    # --- scoring ------------------------------------------------------------------------------------

    def score(self, sample: Sample, prediction: Any) -> Score:
        golden = sample.input["golden"]
        if isinstance(prediction, str):
            prediction = {"answer": prediction}
        if not isinstance(prediction, Mapping):
            return Score(None, {}, None, "unparseable", False, "prediction is not a FinTradeBench answer")
        answer = str(prediction.get("answer") or "")
        named = named_indicators(answer)
        proper = f1_proper(named, golden)
        values: dict[str, float] = {"f1.proper": proper.f1, "precision.proper": proper.precision,
                                    "recall.proper": proper.recall}
        judge = prediction.get("judge") or {}
        if not judge.get("verdict"):
            return Score(None, values, {"named_indicators": list(named)}, "not-judged", False,
                         "no judge verdict in the prediction (FinTradeBench is scored by the judge during the run)")
        verdict = Verdict.from_json(judge["verdict"])
        extracted = {"named_indicators": list(named), "level": prediction.get("level"),
                     "judge_attempts": judge.get("attempts", 1), **verdict.to_json()}
        if not verdict.parsed:
            return Score(None, values, extracted, "unparseable", False, f"judge: {verdict.error}")
        official = f1_official(verdict.found_count, verdict.total_golden)
        scores: dict[str, float] = dict(verdict.scores)
        if self.settings.judge_scores == "expected":
            # expected scores where read, the written integers elsewhere; the share read is a metric of its own
            read = {k: v for k, v in (judge.get("expected") or {}).items() if k in scores}
            values["expected_coverage"] = len(read) / len(scores)
            scores.update(read)
        correctness = scores["correctness"] / 5
        values[f"accuracy.{sample.metadata['category']}"] = correctness
        values["f1.official"] = official.f1
        for key, name in (("reasoning", "reasoning"), ("trading_signals", "trading_signals"),
                          ("fundamentals", "fundamentals")):
            if key in scores:
                values[name] = scores[key] / 5
        return Score(correctness, values, extracted, f"judge-json:attempt-{judge.get('attempts', 1)}", True)

    # --- aggregation ------------------------------------------------------------------------------

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None]
        metrics = mean_metrics([r.score for r in scored], headline="accuracy")
        groups = {
            "category": {c: mean_metrics([r.score for r in scored if r.metadata.get("category") == c], "accuracy")
                         for c in CATEGORIES if any(r.metadata.get("category") == c for r in scored)},
            "level": {lvl: mean_metrics([r.score for r in scored if (r.prediction or {}).get("level") == lvl],
                                        "accuracy")
                      for lvl in sorted({(r.prediction or {}).get("level") for r in scored} - {None})},
        }
        unparseable = [r.id for r in scored if not r.score.parsed]
        attempts = Counter(int((r.score.extracted or {}).get("judge_attempts", 1)) for r in scored
                           if isinstance(r.score.extracted, Mapping))
        missing = Counter(m for r in scored if isinstance(r.score.extracted, Mapping)
                          for m in (r.score.extracted.get("missing") or ()))
        selection = Counter(((r.prediction or {}).get("selection") or {}).get("rule") for r in scored)
        no_data = sum(1 for r in scored if ((r.prediction or {}).get("context") or {}).get("no_data"))
        fallback = sum(1 for r in scored if ((r.prediction or {}).get("context") or {}).get("fallback"))
        notes = [f"mode {self.settings.mode}; levels {','.join(self.settings.levels)}; self-selection "
                 f"{self.settings.selection if self.settings.select else 'off'}; accuracy = judge correctness / 5 "
                 "(x100 for the paper's %)",
                 "f1.official: the release's rule (precision 1 whenever the judge found any indicator); "
                 "f1.proper: indicators the answer names against the golden set"]
        if unparseable:
            notes.append(f"{len(unparseable)} sample(s) unscored: the judge gave no usable verdict in "
                         f"{JUDGE_ATTEMPTS} attempts ({', '.join(unparseable[:10])})")
        example = example_scores()
        parsed = [r for r in scored if r.score.parsed and isinstance(r.score.extracted, Mapping)]
        echoes = sum(1 for r in parsed if r.score.extracted.get("scores") == example)
        if copied := rubric_copy_note(echoes, len(parsed)):
            notes.append(copied)
        over = [r.id for r in parsed if int(r.score.extracted.get("found_count") or 0)
                > int(r.score.extracted.get("total_golden") or 1)]
        if over:
            notes.append(f"{len(over)} verdict(s) count more indicators found than the golden total they state "
                         f"({', '.join(over[:10])}): the release's rule then gives recall and f1.official above 1, "
                         "kept as the release computes it; f1.proper is bounded")
        retried = sum(n for a, n in attempts.items() if a > 1)
        if retried:
            notes.append(f"{retried} judgment(s) needed a retry (a new call with sample_index 1 or 2)")
        if missing:
            notes.append("judge verdicts missing fields: " + ", ".join(f"{k} {v}" for k, v in missing.most_common()))
        if selection.get("fallback-first"):
            named = "label" if self.settings.selection == "neutral" else "prompt id"
            notes.append(f"{selection['fallback-first']} self-selection reply(ies) named no {named}; the first "
                         "candidate shown was taken (the release's rule)")
        example_id, example_level = selection_example(self.settings.mode)
        selected = [r for r in scored if ((r.prediction or {}).get("selection") or {}).get("rule")
                    not in (None, "single-level", "fallback-first")
                    and ((r.prediction or {}).get("selection") or {}).get("style", "official") == "official"]
        copies = sum(1 for r in selected if (r.prediction or {}).get("level") == example_level)
        if copied := example_copy_note(copies, len(selected), example_id, example_level):
            notes.append(copied)
        if no_data:
            notes.append(f"{no_data} sample(s) name a ticker without data in the corpus (context says so)")
        if fallback:
            notes.append(f"{fallback} sample(s) name no company; the release's fallback leaders (or the named "
                         "group) with data were used")
        prompt_cuts = prompt_cut_counts(scored)
        for role, counted in prompt_cuts.items():
            if counted["samples"]:
                fields = ", ".join(f"{name} {n}" for name, n in counted["fields"].items())
                notes.append(f"{counted['samples']} {role} prompt(s) did not fit the {CUT_ROLES[role]}'s context "
                             f"window and were cut to fit (fields cut: {fields}; policy in fitting.py and the "
                             "FinTradeBench page)")
        if self._summary is not None and self._summary.unresolved:
            notes.append(f"{len(self._summary.unresolved)} question(s) with no resolvable company or universe: "
                         + ", ".join(self._summary.unresolved))
        extra = {"options": asdict(self.settings), "selection_rules": dict(selection),
                 "selection_example": {"prompt_id": example_id, "picked": copies, "of": len(selected)},
                 "judge_attempts": {str(k): v for k, v in sorted(attempts.items())},
                 "judge_missing_fields": dict(missing), "unparseable": unparseable,
                 "judge_example_scores": {"verdicts": echoes, "of": len(parsed), "scores": example},
                 "judge_found_over_total": over, "prompt_cuts": prompt_cuts,
                 "resolution": None if self._summary is None else asdict(self._summary)}
        return Aggregate(metrics=metrics, groups=groups, notes=notes, extra=extra)


def prompt_cut_counts(records: Sequence[SampleRecord]) -> dict[str, dict[str, Any]]:
    """Per prompt ('judge', 'selection'): the samples whose prompt was cut to fit, and how often each field was."""
    out: dict[str, dict[str, Any]] = {}
    for role in CUT_ROLES:
        cuts = [cut for r in records if (cut := _prompt_cut(r.prediction, role))]
        fields = Counter(name for cut in cuts for name in cut)
        out[role] = {"samples": len(cuts), "fields": dict(sorted(fields.items()))}
    return out


def _prompt_cut(prediction: Any, role: str) -> Mapping[str, Any] | None:
    if not isinstance(prediction, Mapping):
        return None
    if role == "judge":
        return prediction.get("judge_prompt_cut")
    return (prediction.get("selection") or {}).get("prompt_cut")
