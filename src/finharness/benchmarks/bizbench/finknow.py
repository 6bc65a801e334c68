"""FinKnow (BizBench): financial-knowledge multiple choice, here on public CFA Level I questions.

Data (DATA_DIR/cfa_cpa, 3 options each):
  fineval       CFA_essay/FinEval_CFA_Easy.data.json: 1,032 items; `text` = 'Q:{question},CHOICES: A: {a},B:
                {b},C: {c}', answer = `answer` upper-cased (4 items write it in lower case, and 3 of those
                disagree with the `gold` index; the letter is kept -- it is the right answer where checked --
                and the disagreement is counted in Aggregate.extra). Ids 'fineval-cfa-easy/N' (N from 0).
  ideafinbench  IDEAFinBench/cfa_l1/{split}/SUBJECT_{split}.csv (id,question,A,B,C,D,answer; D empty),
                split 'val' (1,220, default) or 'dev' (50). Ids 'ideafinbench/cfa_l1/SPLIT/SUBJECT/ID'.
  -o parquet=PATH  the official BizBench FinKnow rows instead (ids 'bizbench/SPLIT/finknow/N').
`source` = 'all' (default: both) | 'fineval' | 'ideafinbench'.

Methods:
  ll   (default; the paper) zero-shot log-likelihood of each answer after the question rendered as the
       pipeline renders it plus 'Answer:' -- 'Question: {q}\\nA. {a}\\nB. {b}\\nC. {c}\\nAnswer:' --
       continuation ' A' / ' B' / ' C' (`continuation=letter`, default) or ' {option text}'
       (`continuation=text`, which also reports `ll_norm`, the log-likelihood per character).
       The prediction is {"choice", "logprobs", "continuation_tokens"}.
  gen  the pipeline: finknow.json's system message and one-shot sample, answered '[[LETTER]]'.
       official = `brace_extract` (exactly one [[…]] whose content is a letter A-D); robust = one or
       several [[X]] that agree, else the choice cascade of extract/choices.py (answer cues, a bare
       letter, option text). The prediction is the raw reply.
  letters  the gen prompt (system message, one-shot sample), at most 16 new tokens with top logprobs; the
       probabilities of the option letters where the reply writes its answer (after '[[' or 'Answer:')
       choose (benchmarks/mc_methods.py). Score.values 'letters'.
  auto     ll, else letters, else gen -- the best the backend offers (recorded in extra.methods).
  all      every method the backend offers on the same items; headline = the first of ll/letters/gen, each
       method's metrics under its prefix (`gen.accuracy`, `gen.robust`...), `agreement.M1~M2`, `kappa.M1~M2`.
Headline `accuracy`: 'll' for ll, the `extract` mode for gen; every mode is in Score.values.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.metrics import grouped, mean_metrics
from ...core.task import Aggregate, DataNeeds, Models, SampleRecord, Task
from ...core.types import GenerateParams, LoglikelihoodRequest, Message, Sample, Score
from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.io import read_csv_rows, read_json
from ...data.registry import resolve_data_dir
from ...extract.choices import UNPARSEABLE, extract_choice
from ...extract.numbers import read_official
from ..mc_methods import (
    METHOD_CHOICES,
    METHOD_DIRECTIONS,
    NO_POSITION,
    is_multi,
    is_multi_method,
    ll_choice,
    score_methods,
    solve_choice,
    summarise_methods,
)
from .prompts import (
    LETTERS,
    PROMPTS_DATASET,
    OfficialPrompt,
    config_with_prompt,
    load_prompt_file,
    multiple_choice_string_format,
    prompts_dir,
)
from .scoring import rule_counts

SOURCES = ("all", "fineval", "ideafinbench")
METHODS = METHOD_CHOICES
CONTINUATIONS = ("letter", "text")

FINEVAL_FILE = Path("cfa_cpa") / "CFA_essay" / "FinEval_CFA_Easy.data.json"
IDEAFINBENCH_DIR = Path("cfa_cpa") / "IDEAFinBench" / "cfa_l1"
_FINEVAL_TEXT = re.compile(r"^Q:(?P<question>.*),CHOICES: A: (?P<A>.*),B: (?P<B>.*),C: (?P<C>.*)$", re.DOTALL)
_BRACKET_LETTER = re.compile(r"\[\[\s*\(?([A-D])\)?\s*\]\]")


@dataclass(frozen=True)
class FinKnowOptions:
    """Everything that changes FinKnow's requests or scores."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {
        "method": METHODS, "source": SOURCES, "split": ("val", "dev"), "extract": ("official", "robust"),
        "continuation": CONTINUATIONS}

    method: str = "ll"
    """'ll' (the paper), 'gen' (the pipeline), 'letters', 'auto' or 'all' (benchmarks/mc_methods.py)."""

    source: str = "all"
    """Which question files: 'fineval' (FinEval CFA-Easy), 'ideafinbench' (IDEAFinBench CFA L1) or 'all'."""

    split: str = "val"
    """IDEAFinBench split: 'val' or 'dev' (FinEval CFA-Easy has one split)."""

    extract: str = "official"
    """gen: reading of the headline ('official' or 'robust')."""

    continuation: str = "letter"
    """ll: score the option letter, or the option text (which also reports `ll_norm`, per character)."""

    max_tokens: int = 512
    """gen: generation budget."""

    parquet: str | None = None
    """The official BizBench parquet, instead of the CFA files."""

    prompts: str | None = None
    """gen: folder of the official prompt files."""



def parse_fineval_text(text: str) -> tuple[str, list[str]] | None:
    """'Q:…,CHOICES: A: …,B: …,C: …' -> (question, [a, b, c]); None when it does not have that shape."""
    match = _FINEVAL_TEXT.match(text.strip())
    if not match:
        return None
    return match.group("question").strip(), [match.group(letter).strip() for letter in "ABC"]


def load_fineval(root: Path) -> tuple[list[Sample], int]:
    """FinEval CFA-Easy items, and how many disagree between `answer` and `gold`."""
    path = root / FINEVAL_FILE
    if not path.is_file():
        raise DataError("file not found", path=path, hint=pull_hint(path))
    rows = read_json(path)
    if not isinstance(rows, list):
        raise DataError("expected a JSON list of {query, answer, text, choices, gold}", path=path)
    samples, disagreements = [], 0
    for index, row in enumerate(rows):
        parsed = parse_fineval_text(str(row.get("text", "")))
        answer = str(row.get("answer", "")).strip().upper()
        if parsed is None or answer not in "ABC" or not answer:
            raise DataError(f"item {index}: text is not 'Q:…,CHOICES: A: …,B: …,C: …' or answer is not A-C",
                            path=path, line=index + 1)
        gold_index = row.get("gold")
        conflict = isinstance(gold_index, int) and "ABC"[gold_index] != answer
        disagreements += conflict
        question, options = parsed
        samples.append(Sample(id=f"fineval-cfa-easy/{index}", input={"question": question, "options": options},
                              target=answer, metadata={"source": "fineval", "subject": "cfa_l1",
                                                       "path": str(path), "index": index,
                                                       "gold_index_conflict": conflict}))
    return samples, disagreements


def load_ideafinbench(root: Path, split: str) -> list[Sample]:
    folder = root / IDEAFINBENCH_DIR / split
    files = sorted(folder.glob(f"*_{split}.csv"))
    if not files:
        raise DataError(f"no *_{split}.csv files", path=folder,
                        hint=f"{pull_hint(folder)}; expected DATA_DIR/cfa_cpa/IDEAFinBench/cfa_l1/{{dev,val}}/"
                        "SUBJECT_SPLIT.csv")
    samples = []
    for path in files:
        subject = path.name[: -len(f"_{split}.csv")]
        for line, row in read_csv_rows(path, required=("id", "question", "A", "B", "C", "answer")):
            options = [row[letter].strip() for letter in "ABCD" if (row.get(letter) or "").strip()]
            answer = (row["answer"] or "").strip().upper()
            if answer not in LETTERS[: len(options)] or not answer:
                raise DataError(f"answer {row['answer']!r} is not one of the {len(options)} options", path=path,
                                line=line)
            samples.append(Sample(id=f"ideafinbench/cfa_l1/{split}/{subject}/{row['id']}",
                                  input={"question": row["question"].strip(), "options": options}, target=answer,
                                  metadata={"source": "ideafinbench", "subject": subject, "path": str(path),
                                            "line": line}))
    return samples


def ll_context(sample: Sample) -> str:
    """The zero-shot log-likelihood context: the pipeline's question rendering, then 'Answer:'."""
    return multiple_choice_string_format(sample.input["question"], sample.input["options"]) + "\nAnswer:"


class FinKnowTask(Task):
    """FinKnow: CFA Level I multiple choice by answer log-likelihood (the paper) or generation (the pipeline)."""

    name: ClassVar[str] = "bizbench/finknow"
    description: ClassVar[str] = ("BizBench FinKnow on public CFA L1 questions (FinEval CFA-Easy, IDEAFinBench): "
                                  "log-likelihood (paper) or [[LETTER]] generation (pipeline)")
    metric_directions: ClassVar[Mapping[str, str]] = METHOD_DIRECTIONS
    metric_docs: ClassVar[Mapping[str, str]] = {
        "accuracy": "share of questions answered right (ll: the most likely option; gen: the extract mode's reading)",
        "official / robust": "gen: each reading of the [[LETTER]] reply",
        "ll_norm": "ll with continuation=text: the option of highest log-likelihood per character",
        "M.*, agreement.*, kappa.*": "with method all: each method's metrics, and how often methods agree"}

    Options = FinKnowOptions

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        source = getattr(settings, "source", "all")
        files = {"fineval": ("cfa-essay",), "ideafinbench": ("ideafinbench",)}.get(source, ("cfa-essay", "ideafinbench"))
        return DataNeeds(files, () if getattr(settings, "prompts", None) else (PROMPTS_DATASET,))

    def __init__(self, settings: FinKnowOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        self._data_dir: Path | None = None
        self._prompt: OfficialPrompt | None = None
        self.gold_conflicts = 0

    def load(self, data_dir: Path | None) -> list[Sample]:
        data_dir = self._data_dir = resolve_data_dir(data_dir)
        if self.settings.parquet:
            from .official import load_official

            load = load_official(self.settings.parquet, tasks=["finknow"])
            return [Sample(id=item.id, input={"question": item.question, "options": list(item.options or ())},
                           target=item.answer.strip().upper(), metadata={"source": "bizbench", "subject": "finknow"})
                    for item in load.items if item.options]
        root = data_dir
        samples: list[Sample] = []
        if self.settings.source in ("all", "fineval"):
            fineval, self.gold_conflicts = load_fineval(root)
            samples += fineval
        if self.settings.source in ("all", "ideafinbench"):
            samples += load_ideafinbench(root, self.settings.split)
        return samples

    # --- solving ---------------------------------------------------------------------------------------

    def config(self) -> Mapping[str, Any]:
        return config_with_prompt(self.options, self.prompt)

    def prompt(self) -> OfficialPrompt:
        if self._prompt is None:
            self._prompt = load_prompt_file(prompts_dir(self._data_dir, self.settings.prompts) / "finknow.json")
        return self._prompt

    def messages(self, sample: Sample) -> list[Message]:
        return self.prompt().messages(sample.input)

    def continuations(self, sample: Sample) -> tuple[str, ...]:
        if self.settings.continuation == "text":
            return tuple(" " + option for option in sample.input["options"])
        return tuple(" " + LETTERS[i] for i in range(len(sample.input["options"])))

    @property
    def generate_params(self) -> GenerateParams:
        return GenerateParams(max_tokens=self.settings.max_tokens, temperature=0.0, top_p=1.0)

    async def solve(self, sample: Sample, models: Models) -> Any:
        model = models.model

        return await solve_choice(self.settings.method, model, messages=lambda: self.messages(sample),
                                  params=self.generate_params, letters=LETTERS[: len(sample.input["options"])],
                                  loglikelihood=lambda: self._solve_ll(sample, models))

    async def _solve_ll(self, sample: Sample, models: Models) -> dict[str, Any]:
        continuations = self.continuations(sample)
        response = await models.model.loglikelihood(LoglikelihoodRequest(ll_context(sample), continuations))
        letters = LETTERS[: len(continuations)]
        prediction = {**ll_choice(letters, response.logprobs),
                      "continuation_tokens": dict(zip(letters, response.continuation_tokens))}
        if self.settings.continuation == "text":
            norm = [lp / max(1, len(c)) for lp, c in zip(response.logprobs, continuations)]
            prediction["choice_norm"] = letters[max(range(len(letters)), key=lambda i: norm[i])]
        return prediction

    # --- scoring ----------------------------------------------------------------------------------------

    @staticmethod
    def read_official(reply: str, letters: str) -> tuple[str | None, str]:
        """`brace_extract`: exactly one [[…]] holding a letter (its index, as upstream) -> the letter."""
        reading = read_official(reply)
        if reading.rule == "official_letter" and reading.span is not None:
            letter = LETTERS[int(reading.value)]  # type: ignore[arg-type]
            if letter in letters:
                return letter, reading.rule
        return None, UNPARSEABLE

    @staticmethod
    def read_robust(reply: str, options: Sequence[str]) -> tuple[str | None, str]:
        letters = LETTERS[: len(options)]
        found = {letter for letter in _BRACKET_LETTER.findall(reply.rsplit("</think>", 1)[-1]) if letter in letters}
        if len(found) == 1:
            return found.pop(), "brackets"
        if len(found) > 1:
            return None, UNPARSEABLE
        choice = extract_choice(reply, {LETTERS[i]: text for i, text in enumerate(options)})
        return choice.answer, choice.rule

    def score(self, sample: Sample, prediction: Any) -> Score:
        gold = sample.target
        if is_multi(prediction):
            return score_methods(prediction, lambda _m, p: self.score(sample, p), self._choice, value_name="accuracy")
        if isinstance(prediction, Mapping) and prediction.get("rule") in ("letters", NO_POSITION):
            choice = prediction.get("choice")
            return Score(float(choice == gold), {"letters": float(choice == gold)},
                         {"choice": choice, "probs": prediction.get("probs")}, prediction["rule"], bool(choice))
        if isinstance(prediction, Mapping):  # ll
            choice = prediction.get("choice")
            values = {"ll": float(choice == gold)}
            if "choice_norm" in prediction:
                values["ll_norm"] = float(prediction["choice_norm"] == gold)
            return Score(values["ll"], values, {"choice": choice, "logprobs": prediction.get("logprobs")},
                         "loglikelihood" if choice else UNPARSEABLE, bool(choice))
        reply = "" if prediction is None else str(prediction)
        options = sample.input["options"]
        readings = {"official": self.read_official(reply, LETTERS[: len(options)]),
                    "robust": self.read_robust(reply, options)}
        values = {mode: float(answer == gold) for mode, (answer, _) in readings.items()}
        extracted = {mode: answer for mode, (answer, _) in readings.items()}
        extracted.update({f"{mode}_rule": rule for mode, (_, rule) in readings.items()})
        answer, rule = readings[self.settings.extract]
        return Score(values[self.settings.extract], values, extracted, rule, answer is not None)

    def _choice(self, method: str, score: Score) -> str | None:
        """The option a method chose, for agreement: ll / letters their choice, gen the headline reading."""
        extracted = score.extracted or {}
        return extracted.get(self.settings.extract if method == "gen" else "choice") or None

    def gold_prediction(self, sample: Sample) -> Any:
        """A prediction that states the gold (for the same-path check): [[X]] or an ll choice."""
        if self.settings.method == "gen":
            return f"The answer is [[{sample.target}]]"
        return {"choice": sample.target, "logprobs": {}}

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None and r.score.value is not None]
        rules = rule_counts(record.score.extracted for record in scored)
        groups = {key: grouped((str(r.metadata.get(key, "none")), r.score) for r in scored)
                  for key in ("source", "subject")}
        notes = []
        if self.settings.method == "ll":
            notes.append(f"zero-shot option log-likelihood ({self.settings.continuation} continuations); "
                         "extraction modes do not apply")
        if self.gold_conflicts:
            notes.append(f"{self.gold_conflicts} FinEval CFA-Easy items give an `answer` letter that disagrees "
                         "with their `gold` index; the letter is used")
        extra = {"options": asdict(self.settings), "rules": rules, "gold_conflicts": self.gold_conflicts,
                 "unparseable": {m: counts.get(UNPARSEABLE, 0) for m, counts in rules.items()}}
        metrics = mean_metrics([r.score for r in scored])
        if is_multi_method(self.settings.method):
            agreement, extra["methods"], method_notes = summarise_methods(self.settings.method, scored)
            metrics.update(agreement)
            notes += method_notes
        return Aggregate(metrics=metrics, groups=groups, notes=notes, extra=extra)
