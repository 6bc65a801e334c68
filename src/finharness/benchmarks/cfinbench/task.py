"""CFinBench (Nie et al. 2024, arXiv 2407.02301): the official evaluation, the seed's metric, and
extraction you can audit. Runs any exam in the same layout (e.g. CPA converted from IDEAFinBench).

Data layout: `ROOT/{dev,val,test}/{single_choice,multi_choice,judgment}/{CAT}.jsonl`, one object
per line: `text`, `OptionList` (single/multi), `Answer` ('B', 'ACD', '正确'/'错误'), optional
`explanation`. `dev` is the few-shot pool, `val` is scored, `test` may lack answers (then nothing
is scored and the Aggregate says so). Category names: ROOT/categories.json, CFinBench's own
mapping, else the file stem (see categories.py).

Sample ids: `SPLIT/TYPE/CAT/LINE`, LINE = the 0-based physical line of the item in its file
(the official loader reads one object per line; with no blank lines it is the item index).

Options (CLI keyword arguments):
  split      'val' (default) | 'dev' | 'test'
  shots      0 (default) | 3 -- 3-shot uses dev items 0, 1, 2 of the same category and type
  method     'gen' (default) | 'll' -- 'll' is the official PPL config: single choice only -- | 'letters'
             (the gen prompt; the option letters' probabilities at the answer position) | 'auto' (the
             best the backend offers: ll, else letters, else gen) | 'all' (every method it offers on
             the same items, with agreement and κ between them): see benchmarks/mc_methods.py. Every
             method but gen is single choice only; ll, auto and all are 0-shot.
  extract    'official' (default, the headline reproduces the paper) | 'robust'; both are always
             computed and reported (the other one under its name as prefix)
  truncate   'paper-2048' (default: right-truncate prompts over 2048 tokens, as the paper) | 'none'
  types      comma-separated subset of single_choice,multi_choice,judgment (default: all; 'll': single)
  max_tokens generation budget (default 256). Decoding is greedy (temperature 0, top_p 1); the paper
             reports "greedy decoding" with temperature 1.0 and top_p 1.0 in its configs.

Predictions: for `gen`, the raw model reply (str). For `ll`, a dict
`{"choice": "B", "logprobs": {"A": -1.2, ...}, "continuation_tokens": {...}}`; `score` reads its
"choice". A bare letter string works for both (as in `finharness score` JSONL files). For letters,
auto and all: `{"method": ..., "methods": {M: prediction of M}}` (mc_methods.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.metrics import Metric
from ...core.options import parse_task_options
from ...core.task import Aggregate, DataNeeds, Models, SampleRecord, Task
from ...core.types import GenerateParams, LoglikelihoodRequest, Message, Sample, Score
from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.io import iter_jsonl
from ...data.registry import cache_dir, resolve_data_dir
from ...extract.choices import UNPARSEABLE, parse_options
from ...stats import mean_ci
from ...util import natural_key
from ..mc_methods import (
    METHOD_CHOICES,
    METHOD_DIRECTIONS,
    is_multi,
    is_multi_method,
    ll_choice,
    score_methods,
    solve_choice,
    summarise_methods,
)
from .categories import QUESTION_TYPES, Category, load_category_names, resolve_category
from .extraction import EXTRACTION_MODES, Reading, official_postprocess, read_gold, read_reply
from .prompts import (
    SHOTS,
    TRUNCATION_POLICIES,
    loglikelihood_context,
    loglikelihood_continuation,
    question_text,
    right_truncate,
    three_shot_prompt,
    zero_shot_prompt,
)
from .scoring import SCORING_MODES, ScoredItem, present_types, renormalised_weights, score_answer, summarise, value_key

SPLITS: tuple[str, ...] = ("dev", "val", "test")
"""Official splits: dev = few-shot pool, val = scored, test = may lack answers."""

METHODS: tuple[str, ...] = METHOD_CHOICES
"""Generation, the official log-likelihood (PPL) method for single choice, option-letter probabilities,
the best the backend offers, or all of them (benchmarks/mc_methods.py)."""

STANDIN_CPA = "standin:cpa"
"""`-o exam=standin:cpa`: IDEAFinBench's CPA exams (DATA_ROOT/cfa_cpa/IDEAFinBench) converted into this layout on
the fly and cached: a stand-in where CFinBench's own questions are absent, named as such in every output."""
LAYOUT_HINT = ("an exam folder holds {dev,val,test}/{single_choice,multi_choice,judgment}/{CAT}.jsonl; CFinBench's "
               "questions have no public copy: put yours in DATA_ROOT/cfinbench/ or pass -o exam=FOLDER, or run "
               "the CPA stand-in converted from IDEAFinBench with -o exam=" + STANDIN_CPA)
STANDIN_NOTE = ("stand-in: these are IDEAFinBench's CPA exams (Chinese, single and multiple choice, 6 subjects) converted "
                "into CFinBench's layout, not CFinBench's own questions: the scores are not CFinBench scores")
STANDIN_SOURCE = Path("cfa_cpa") / "IDEAFinBench"
"""Where the stand-in's source lies below the data root (`finharness data pull ideafinbench`)."""


def cpa_standin(root: Path) -> Path:
    """IDEAFinBench's CPA exams under `root` converted into CFinBench's layout, once per source content, in the cache
    (`<cache>/standins/cpa-<sha256 of the source files>`); a missing source is a DataError saying how to get it."""
    from .convert import SOURCES, convert_ideafinbench

    source = root / STANDIN_SOURCE
    files = sorted(p for name in SOURCES for p in (source / name).rglob("*") if p.is_file())
    if not files:
        raise DataError("no IDEAFinBench CPA exams (cpa_one/, cpa_multi/) for the CFinBench stand-in", path=source,
                        hint=f"{pull_hint(source)}, or pass --data-dir ROOT holding cfa_cpa/IDEAFinBench/")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    dest = cache_dir() / "standins" / f"cpa-{digest.hexdigest()[:16]}"
    if not (dest / "categories.json").is_file():
        staging = dest.with_name(dest.name + f".tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        convert_ideafinbench(source, staging)
        shutil.rmtree(dest, ignore_errors=True)
        staging.rename(dest)  # whole or not at all: a crashed conversion leaves no half exam
    return dest

TOKENS_UNCOUNTABLE = "tokens-uncountable"
"""Trace event: the truncation policy could not be applied, the backend cannot count tokens."""


@dataclass(frozen=True)
class CFinBenchOptions:
    """Everything that changes CFinBench's requests or scores (the task's part of the run key)."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {
        "split": SPLITS, "shots": (0, SHOTS), "method": METHODS, "extract": EXTRACTION_MODES,
        "truncate": tuple(TRUNCATION_POLICIES), "types": QUESTION_TYPES}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("max_tokens",)

    split: str = "val"
    """The split scored: 'val' (scored), 'dev' (the few-shot pool), 'test' (may lack answers: then nothing is
    scored and the results say so)."""

    shots: int = 0
    """In-context examples: 0, or 3 (dev items 0, 1, 2 of the same category and type)."""

    method: str = "gen"
    """'gen' (generate and extract), 'll' (the most likely option letter: the official PPL config), 'letters'
    (option-letter probabilities at the answer position of the gen prompt's reply), 'auto' (the best the backend
    offers) or 'all' (every method, with agreement and κ); see docs/methods.md. All but gen are single choice;
    ll, auto and all are 0-shot."""

    extract: str = "official"
    """Which extraction the headline uses; both are always computed, the other one reported under its name."""

    truncate: str = "paper-2048"
    """'paper-2048' (right-truncate prompts over 2048 tokens, as the paper) or 'none'."""

    types: tuple[str, ...] = QUESTION_TYPES
    """Question types evaluated (comma list); methods other than gen take single_choice only (their default)."""

    max_tokens: int = 256
    """Generation budget per reply."""

    exam: str | None = None
    """The exam folder (CFinBench's layout: {dev,val,test}/{single_choice,multi_choice,judgment}/{CAT}.jsonl);
    default DATA_ROOT/cfinbench. Any exam in the layout works (`finharness data convert ideafinbench`);
    'standin:cpa' converts IDEAFinBench's CPA exams from the data root on the fly (a stand-in, named so in every
    output). Where the folder is does not enter the run key; its questions do."""

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> "CFinBenchOptions":
        """Options as the CLI passes them (strings allowed); a bad value names the allowed ones."""
        parsed = parse_task_options(cls, options, "cfinbench")
        if options.get("types") is None and parsed.method != "gen":
            parsed = replace(parsed, types=("single_choice",))  # the official ll config is single choice only
        parsed._validate()
        return parsed

    def _validate(self) -> None:
        bad = [t for t in self.types if t not in QUESTION_TYPES]
        if bad or not self.types:
            raise ValueError(f"cfinbench: types={list(self.types)}; choose from {list(QUESTION_TYPES)}")
        if self.method == "ll" and self.types != ("single_choice",):
            raise ValueError("cfinbench: method 'll' is the official log-likelihood config for single choice "
                             "only; use types=single_choice or method=gen")
        if self.method == "ll" and self.shots != 0:
            raise ValueError("cfinbench: the official log-likelihood config is 0-shot; use shots=0")
        if self.method in ("letters", "auto", "all") and self.types != ("single_choice",):
            raise ValueError(f"cfinbench: method {self.method!r} reads option letters: single choice only; use "
                             "types=single_choice or method=gen")
        if self.method in ("auto", "all") and self.shots != 0:
            raise ValueError(f"cfinbench: method {self.method!r} may use the official log-likelihood config, "
                             "which is 0-shot; use shots=0")


@dataclass(frozen=True)
class ExamItem:
    """One question as read from a file in the CFinBench layout."""

    text: str
    """The question (without options)."""

    options: tuple[str, ...]
    """OptionList ('A. …'); empty for judgment."""

    answer: str | None
    """The raw gold Answer; None when the split has none (test)."""


def read_exam_file(path: Path, question_type: str, *, answers_required: bool) -> list[tuple[int, ExamItem]]:
    """(1-based line, item) for every item of one file; bad items raise DataError naming file and line."""
    items = []
    for line, obj in iter_jsonl(path):
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DataError("missing or empty field 'text' (the question)", path=path, line=line)
        options: tuple[str, ...] = ()
        if question_type != "judgment":
            raw = obj.get("OptionList")
            if not isinstance(raw, list) or not raw or not all(isinstance(o, str) for o in raw):
                raise DataError("missing field 'OptionList' (a list of strings like 'A. …')", path=path, line=line)
            options = tuple(raw)
        answer = obj.get("Answer")
        if answer in (None, ""):
            if answers_required:
                raise DataError("missing field 'Answer'", path=path, line=line,
                                hint="dev and val items need a gold answer; only test may lack one")
            answer = None
        elif not isinstance(answer, str) or not official_postprocess(answer, question_type):
            expected = "'正确' or '错误'" if question_type == "judgment" else "option letters such as 'B' or 'ACD'"
            raise DataError(f"Answer {answer!r} is not {expected}", path=path, line=line)
        elif question_type != "judgment":
            letters = set(parse_options(options))
            outside = sorted(set(official_postprocess(answer, question_type)) - letters)
            if outside:
                raise DataError(f"Answer {answer!r} names option(s) {outside} that the OptionList lacks",
                                path=path, line=line)
        items.append((line, ExamItem(text, options, answer)))
    return items


class CFinBenchTask(Task):
    """CFinBench: Chinese financial exams, single / multiple choice and judgment."""

    name: ClassVar[str] = "cfinbench"
    headline: ClassVar[str | None] = "strict.score"
    description: ClassVar[str] = ("CFinBench (arXiv 2407.02301): 43 categories of Chinese financial exams; "
                                  "final = 0.4·single + 0.4·multiple + 0.2·judgment; any exam in its layout")
    metric_docs: ClassVar[Mapping[str, str]] = {
        "strict.score": "the headline: 0.4·single + 0.4·multiple + 0.2·judgment (weights renormalised over the types "
                        "present); multiple choice right iff the letters equal the gold",
        "strict.single|multiple|judgment": "one type's accuracy: the mean over its categories",
        "paper.*": "the same under the paper's rule (multiple choice: 0 if a letter is wrong, else |pred| / |gold|)",
        "opencompass.*": "the same under the official evaluator's (2 for an exact match, 1 when every letter is right)",
        "micro": "strict accuracy over all items, unweighted",
        "unparseable_rate": "share of replies no answer could be read from",
        "robust.* / official.*": "every metric under the other extraction mode, prefixed by its name",
    }
    metric_directions: ClassVar[Mapping[str, str]] = {"unparseable_rate": "lower", "*.unparseable_rate": "lower",
                                                      **METHOD_DIRECTIONS}

    Options = CFinBenchOptions

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        exam = getattr(settings, "exam", None)
        if exam is None:
            return DataNeeds(("cfinbench",))
        return DataNeeds(("ideafinbench",) if str(exam).startswith("standin:") else ())  # a path: the user's own

    def __init__(self, settings: CFinBenchOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        self._categories: dict[str, Category] = {}

    # --- loading ------------------------------------------------------------------------------

    def key_options(self, settings: CFinBenchOptions) -> dict[str, Any]:
        key = asdict(settings)
        if key.pop("exam") == STANDIN_CPA:  # a folder's path is not a result; the stand-in is another exam
            key["exam"] = STANDIN_CPA
        return key

    @property
    def standin(self) -> bool:
        """This run scores the CPA stand-in, not CFinBench's own questions."""
        return self.settings.exam == STANDIN_CPA

    def exam_folder(self, data_dir: Path | None) -> Path:
        """The exam this run reads: -o exam=FOLDER, the CPA stand-in converted into the cache, or DATA_ROOT/cfinbench.
        A data root given in the old meaning (an exam folder as --data-dir) is an error saying what to type."""
        root = resolve_data_dir(data_dir)
        if self.settings.exam == STANDIN_CPA:
            return cpa_standin(root)
        if self.settings.exam is not None:
            return Path(self.settings.exam).expanduser()
        default = root / "cfinbench"
        if not (default / self.settings.split).is_dir() and any((root / s).is_dir() for s in SPLITS):
            raise DataError("this folder is an exam in CFinBench's layout, not a data root: --data-dir names the data "
                            "root of every task (the folder holding cfinbench/, bizbench/, ucfe/...)", path=root,
                            hint=f"run the exam with -o exam={root} (and --data-dir DATA_ROOT for the other tasks)")
        return default

    def load(self, data_dir: Path | None) -> list[Sample]:
        root = self.exam_folder(data_dir)
        split = self.settings.split
        split_dir = root / split
        if not split_dir.is_dir():
            raise DataError(f"no {split!r} split folder", path=split_dir, hint=LAYOUT_HINT)
        declared = load_category_names(root)
        samples: list[Sample] = []
        for question_type in self.settings.types:
            type_dir = split_dir / question_type
            if not type_dir.is_dir():
                continue  # an exam may lack a type (CPA has no judgment); aggregate renormalises
            for path in sorted(type_dir.glob("*.jsonl"), key=lambda p: natural_key(p.stem)):
                category = resolve_category(path.stem, declared)
                self._categories[category.id] = category
                examples = self._examples(root, question_type, category.id) if self.settings.shots else None
                for line, item in read_exam_file(path, question_type, answers_required=split != "test"):
                    samples.append(self._sample(item, question_type, category, path, line, examples))
        if not samples:
            raise DataError(f"no question files for types {list(self.settings.types)}", path=split_dir,
                            hint=LAYOUT_HINT)
        return samples

    def _examples(self, root: Path, question_type: str, category_id: str) -> list[list[str]]:
        """Dev items 0, 1, 2 of the category and type, as [question_text, Answer] pairs."""
        path = root / "dev" / question_type / f"{category_id}.jsonl"
        if not path.exists():
            raise DataError("file not found (3-shot prompts take dev items 0, 1, 2 of the same category and type)",
                            path=path, hint="add the dev file or use shots=0")
        items = read_exam_file(path, question_type, answers_required=True)
        if len(items) < SHOTS:
            raise DataError(f"3-shot needs {SHOTS} dev items, the file has {len(items)}", path=path,
                            hint="add dev items or use shots=0")
        return [[question_text(item.text, item.options), item.answer] for _, item in items[:SHOTS]]

    def _sample(self, item: ExamItem, question_type: str, category: Category, path: Path, line: int,
                examples: list[list[str]] | None) -> Sample:
        split = self.settings.split
        inputs: dict[str, Any] = {"text": item.text, "options": list(item.options), "type": question_type,
                                  "category": category.id, "category_name": category.zh}
        if examples is not None:
            inputs["examples"] = examples
        metadata = {"split": split, "type": question_type, "category": category.id, "category_en": category.en,
                    "group": category.group, "group_name": category.group_name, "source": f"{path}:{line}"}
        return Sample(id=f"{split}/{question_type}/{category.id}/{line - 1}", input=inputs, target=item.answer,
                      metadata=metadata)

    # --- prompting and solving ----------------------------------------------------------------

    def prompt(self, sample: Sample) -> str:
        """The exact text sent: the generation prompt, or the log-likelihood context for 'll'."""
        return self.ll_prompt(sample) if self.settings.method == "ll" else self.gen_prompt(sample)

    def ll_prompt(self, sample: Sample) -> str:
        """The official log-likelihood (PPL) context."""
        inputs = sample.input
        return loglikelihood_context(inputs["type"], inputs["category_name"],
                                     question_text(inputs["text"], inputs["options"]))

    def gen_prompt(self, sample: Sample) -> str:
        """The official generation prompt (0- or 3-shot); 'letters' sends it too."""
        inputs = sample.input
        question = question_text(inputs["text"], inputs["options"])
        if self.settings.shots:
            examples = [tuple(pair) for pair in inputs["examples"]]
            return three_shot_prompt(inputs["type"], inputs["category_name"], question, examples)
        return zero_shot_prompt(inputs["type"], inputs["category_name"], question)

    @property
    def generate_params(self) -> GenerateParams:
        """Greedy decoding, as the paper's runs."""
        return GenerateParams(max_tokens=self.settings.max_tokens, temperature=0.0, top_p=1.0)

    def _truncate(self, text: str, model: Any) -> str:
        """Apply the named truncation policy; a cut is recorded through note_truncation."""
        policy = TRUNCATION_POLICIES[self.settings.truncate]
        if policy.max_prompt_tokens is None:
            return text
        cut = right_truncate(text, policy.max_prompt_tokens, model.count_tokens)
        if cut is None:
            model.note(TOKENS_UNCOUNTABLE, f"policy {policy.name} not applied: the backend cannot count tokens")
            return text
        if cut != text:
            model.note_truncation(policy.name, f"prompt cut to its first {policy.max_prompt_tokens} tokens "
                                               f"({len(text)} -> {len(cut)} characters)")
        return cut

    async def solve(self, sample: Sample, models: Models) -> Any:
        model = models.model

        return await solve_choice(
            self.settings.method, model,
            messages=lambda: (Message("user", self._truncate(self.gen_prompt(sample), model)),),
            params=self.generate_params, letters=sorted(parse_options(sample.input["options"])),
            loglikelihood=lambda: self._solve_ll(sample, model, self._truncate(self.ll_prompt(sample), model)))

    async def _solve_ll(self, sample: Sample, model: Any, prompt: str) -> dict[str, Any]:
        letters = sorted(parse_options(sample.input["options"]))
        request = LoglikelihoodRequest(prompt, tuple(loglikelihood_continuation(x) for x in letters))
        response = await model.loglikelihood(request)
        # the official PPL inferencer takes the lowest perplexity; with one shared context and
        # equally long continuations that is the highest continuation log-likelihood (first on ties)
        return {**ll_choice(letters, response.logprobs),
                "continuation_tokens": dict(zip(letters, response.continuation_tokens))}

    # --- scoring --------------------------------------------------------------------------------

    def read(self, sample: Sample, prediction: Any) -> dict[str, Reading]:
        """The prediction under both extraction modes."""
        if isinstance(prediction, Mapping):
            choice = str(prediction.get("choice") or "")
            rule = str(prediction.get("rule") or "loglikelihood")
            return {mode: Reading(choice, rule if choice else UNPARSEABLE) for mode in EXTRACTION_MODES}
        reply = "" if prediction is None else str(prediction)
        return {mode: read_reply(reply, sample.input["type"], sample.input["options"], mode)
                for mode in EXTRACTION_MODES}

    def score(self, sample: Sample, prediction: Any) -> Score:
        if is_multi(prediction):
            return score_methods(prediction, lambda _m, p: self.score(sample, p),
                                 lambda _m, s: (s.extracted or {}).get(self.settings.extract) or None)
        question_type = sample.input["type"]
        readings = self.read(sample, prediction)
        headline = readings[self.settings.extract]
        extracted = {mode: readings[mode].answer for mode in EXTRACTION_MODES}
        extracted["robust_rule"] = readings["robust"].rule
        if sample.target is None:
            return Score(None, {}, extracted, headline.rule, headline.parsed, "no gold answer in this split")
        values = {}
        for mode in EXTRACTION_MODES:
            gold = read_gold(sample.target, question_type, mode)
            for scoring in SCORING_MODES:
                values[value_key(mode, scoring)] = score_answer(readings[mode].answer, gold, question_type, scoring)
        return Score(values[value_key(self.settings.extract, "strict")], values, extracted, headline.rule,
                     headline.parsed)

    # --- aggregation ------------------------------------------------------------------------------

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        by_id = {sample.id: sample for sample in samples}
        headline = self.settings.extract
        scored: list[tuple[Sample, ScoredItem]] = []
        rules: Counter[str] = Counter()
        failed = unscored = truncated = 0
        uncountable = any(record.events(TOKENS_UNCOUNTABLE) for record in records)
        for record in records:
            sample = by_id.get(record.id)
            if sample is None:
                continue  # not part of this load (e.g. --limit changed)
            if record.failed or record.score is None:
                failed += 1
                continue
            truncated += record.prompt_truncated
            extracted = record.score.extracted or {}
            rules[extracted.get("robust_rule", record.score.rule or UNPARSEABLE)] += 1
            if record.score.value is None:
                unscored += 1
                continue
            scored.append((sample, ScoredItem(sample.input["type"], sample.input["category"], record.score.values,
                                              {mode: bool(extracted.get(mode)) for mode in EXTRACTION_MODES})))
        items = [item for _, item in scored]
        multi = is_multi_method(self.settings.method)

        groupings = {"category": lambda s: s.input["category"], "type": lambda s: s.input["type"],
                     "group": lambda s: s.metadata["group"]}
        groups = {}
        for grouping, key_of in groupings.items():
            buckets: dict[str, list[ScoredItem]] = {}
            for sample, item in scored:
                buckets.setdefault(key_of(sample), []).append(item)
            groups[grouping] = {key: summarise(bucket, headline)
                                for key, bucket in sorted(buckets.items(), key=lambda kv: natural_key(kv[0]))}

        types = present_types(items)
        notes = self._notes(items, types, failed, unscored, truncated, uncountable)
        metrics = summarise(items, headline)
        methods_extra = None
        if multi:
            # agreement needs no gold: it counts every item on which two methods both chose an option
            agreement, methods_extra, method_notes = summarise_methods(self.settings.method, records)
            metrics.update(self._method_metrics(scored, records, methods_extra["ran"], headline))
            metrics.update(agreement)
            notes += method_notes
        extra = {
            "headline": f"{headline} extraction, strict scoring: 'strict.score'",
            "weights": renormalised_weights(types),
            "counts": {"records": len(records), "scored": len(items), "failed": failed, "unscored": unscored,
                       "truncated": truncated,
                       "unparseable": {m: sum(not i.parsed[m] for i in items) for m in EXTRACTION_MODES}},
            "robust_rules": dict(rules.most_common()),
            "categories": {c.id: {"zh": c.zh, "en": c.en, "group": c.group, "group_name": c.group_name}
                           for c in sorted(self._categories.values(), key=lambda c: natural_key(c.id))},
            "generation": asdict(self.generate_params) if self.settings.method != "ll" else None,
            "options": asdict(self.settings),
        }
        if methods_extra is not None:
            extra["methods"] = methods_extra
        if self.standin:
            extra["exam"] = {"standin": "cpa", "source": "IDEAFinBench cpa_one + cpa_multi (converted on the fly)"}
            notes.insert(0, STANDIN_NOTE)
        return Aggregate(metrics=metrics, groups=groups, notes=notes, extra=extra)

    def _method_metrics(self, scored: Sequence[tuple[Sample, ScoredItem]], records: Sequence[SampleRecord],
                        ran: Sequence[str], headline: str) -> dict[str, Metric]:
        """`METHOD.`-prefixed metrics of every method (when several ran) and letters.no_position."""
        metrics: dict[str, Metric] = {}
        by_id = {record.id: record for record in records}
        if len(ran) > 1:
            for method in ran:
                items = []
                for sample, item in scored:
                    extracted = by_id[sample.id].score.extracted or {}
                    per = (extracted.get("per_method") or {}).get(method) or {}
                    values = {k[len(method) + 1:]: v for k, v in item.values.items() if k.startswith(method + ".")}
                    items.append(ScoredItem(item.question_type, item.category, values,
                                            {mode: bool(per.get(mode)) for mode in EXTRACTION_MODES}))
                metrics.update({f"{method}.{k}": m for k, m in summarise(items, headline).items()})
        if "letters" in ran:
            missing = [item.values.get("letters.no_position", 0.0) for _, item in scored]
            metrics["letters.no_position"] = Metric.of(mean_ci(missing))
        return metrics

    def _notes(self, items: Sequence[ScoredItem], types: Sequence[str], failed: int, unscored: int,
               truncated: int, uncountable: bool) -> list[str]:
        notes = []
        if not items and unscored:
            notes.append(f"split {self.settings.split!r} has no gold answers: predictions were written, "
                         f"nothing could be scored ({unscored} items)")
        elif unscored:
            notes.append(f"{unscored} items have no gold answer and are not scored")
        if items and len(types) < len(QUESTION_TYPES):
            weights = ", ".join(f"{t} {w:.3g}" for t, w in renormalised_weights(types).items())
            notes.append(f"final score weights 0.4/0.4/0.2 (single/multiple/judgment) renormalised over the "
                         f"types present: {weights}")
        if self.settings.method == "ll":
            notes.append("method 'll': single choice by option log-likelihood (the official PPL config); "
                         "extraction modes do not apply")
        if failed:
            notes.append(f"{failed} samples failed (a model call failed for good) and are not scored")
        policy = TRUNCATION_POLICIES[self.settings.truncate]
        if truncated:
            notes.append(f"{truncated} prompts right-truncated to {policy.max_prompt_tokens} tokens "
                         f"(policy {policy.name})")
        if uncountable:
            notes.append(f"truncation policy {policy.name} could not be applied: the backend cannot count tokens")
        return notes
