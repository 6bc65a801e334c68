"""BizBench's numeric tasks (Krumdick et al. 2024, arXiv 2311.06602): program synthesis scored by running
the model's program, and quantity extraction scored by number match.

  task          items from                                                     answer
  codetatqa     TAT-QA arithmetic questions over the table (tatqa.py)           a program (or [[number]])
  tatqa-e       TAT-QA span answers that are a number in the context            [[number]]
  secnum        SEC-Num built from inline-XBRL filings (secnum.py)              [[number]]
  fincode       official parquet only                                           a program
  codefinqa     official parquet only                                           a program
  convfinqa-e   official parquet only                                           [[number]]
(FinKnow: finknow.py; FormulaEval: formulaeval/.) Prompts, reading and matching: prompts.py and
scoring.py; every mode is computed for every sample and the headline `accuracy` follows `extract`.

Where the items come from (first that applies):
  -o items=FILE.jsonl     a file written by `finharness data build tatqa|secnum` (or by hand, same columns)
  -o parquet=PATH         the official kensho/bizbench parquet (file or folder)
  DATA_DIR                codetatqa / tatqa-e: built on the fly from DATA_DIR/tatqa (TAT-QA dev, test_gold);
                          secnum: built from DATA_DIR/fintradebench/SEC_Filings, cached under the
                          finharness cache (`secnum-<fingerprint>.jsonl`; the fingerprint covers the
                          filings and the builder's source, so a change rebuilds);
                          fincode / codefinqa / convfinqa-e: DATA_DIR/bizbench/**/{train,test}-*.parquet;
                          when DATA_DIR has none, the `bizbench` dataset (kensho/bizbench at its pinned
                          commit) is pulled into it first, with `bizbench-prompts` if its prompts are
                          missing too (said on stderr; `finharness run --no-pull` forbids it).

Sample ids: the TAT-QA question uid (codetatqa, tatqa-e), 'secnum/TICKER/ACCESSION/ELEMENT' (secnum),
'bizbench/SPLIT/TASK/N' (rows of the official parquet).

Options (-o KEY=VALUE; --split and --extract also work):
  split       'test' (default; TAT-QA test_gold) | 'dev' (TAT-QA) | 'train' (SEC-Num, parquet)
  extract     'official' (default) | 'robust': which reading the headline uses
  style       'code' (default for codetatqa, codefinqa, fincode) | 'cot': the pipeline's prompt creator
  max_tokens  generation budget (default 512; the pipeline's HF default is 256). Greedy decoding.
  items, parquet, prompts (folder of the official prompt files), prompt_file (override the file)
  pool_size   sandbox workers of each kind (default 2)
  sandbox     'auto' (default) | 'bwrap' | 'kernel' | 'unsafe': the isolation of model-written programs;
              without kernel-enforced isolation a run refuses to start unless 'unsafe' (docs/sandbox.md)

Predictions are the raw model replies (str), so `finharness score` works on replies made elsewhere.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.metrics import grouped, mean_metrics
from ...core.options import OptionInfo, check_choice, describe_options, parse_task_options
from ...core.task import Aggregate, DataNeeds, Models, SampleRecord, Task
from ...core.types import GenerateParams, Message, Sample, Score
from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.registry import resolve_data_dir
from ...extract.code import CodeExtraction
from .data import BizBenchItem, read_items_jsonl, write_items_jsonl
from .prompts import (
    PROMPTS_DATASET,
    OfficialPrompt,
    config_with_prompt,
    load_prompt_file,
    prompt_file_name,
    prompts_dir,
)
from .scoring import (
    EXTRACTION_MODES,
    SANDBOX_CHOICES,
    VALUE_KEYS,
    Answer,
    ProgramJob,
    ProgramRunner,
    failure_classes,
    final_outcome,
    gold_scale,
    match_values,
    read_answer,
    rule_counts,
)

SPLITS = ("test", "dev", "train")

_USES_DF = re.compile(r"\bdf\b")


@dataclass(frozen=True)
class BizBenchOptions:
    """Everything that changes a BizBench task's requests or scores (the task's part of the run key)."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {"split": SPLITS, "extract": EXTRACTION_MODES,
                                                      "style": ("code", "cot"), "sandbox": SANDBOX_CHOICES}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("max_tokens", "pool_size")

    split: str = "test"
    """The split (each task's own: `finharness list TASK` names them)."""

    extract: str = "official"
    """'official' or 'robust': the reading the headline `accuracy` uses; every mode is reported beside it."""

    style: str = "code"
    """'code' or 'cot' prompt file (only tasks whose official files differ by style take it)."""

    max_tokens: int = 512
    """Generation budget per reply (greedy)."""

    items: str | None = None
    """A JSONL of items written by `finharness data build`, instead of building or reading the parquet."""

    parquet: str | None = None
    """The official parquet (file or folder)."""

    prompts: str | None = None
    """Folder of the official prompt files (default DATA_DIR/bizbench/prompts)."""

    prompt_file: str | None = None
    """A prompt file name in that folder, instead of the task's own."""

    pool_size: int = 2
    """Sandbox workers of each kind."""

    sandbox: str = "auto"
    """Isolation of model-written programs (scoring.SANDBOX_CHOICES); recorded in extra.sandbox, not in the run
    key: it decides whether and where programs run, not what they compute."""

    @classmethod
    def parse(cls, task: str, options: Mapping[str, Any], *, takes_style: bool) -> "BizBenchOptions":
        """Options as the CLI passes them; a bad or unknown one names the allowed values."""
        return parse_task_options(cls, options, task, exclude=() if takes_style else ("style",))

    def run_key(self, takes_style: bool) -> dict[str, Any]:
        """The options that change requests or scores (pool_size and sandbox do not)."""
        key = {k: v for k, v in asdict(self).items() if k not in ("pool_size", "sandbox")}
        if not takes_style:
            key.pop("style")
        return key


class BizBenchNumericTask(Task):
    """The shared machinery of the six numeric BizBench tasks; subclasses say where items come from."""

    name: ClassVar[str]
    metric_docs: ClassVar[Mapping[str, str]] = {
        "accuracy": "the headline: 'official' or 'robust' as the extract option says",
        "official": "the pipeline's reading, within 1% of the gold (the paper)",
        "round5": "the pipeline's reading, round(pred, 5) == round(gold, 5) (FinQA's rule)",
        "scale_aware": "the pipeline's reading, 1%, forgiving a scale slip (millions, a ratio for a percentage)",
        "robust / robust_unscaled / robust_round5": "the robust reading (also \\boxed{}, a bare program, an answer cue) "
                                                    "under the 1% rule with and without scale normalisation, and FinQA's",
    }
    program_task: ClassVar[bool] = False
    """Scored by executing the model's program (codetatqa, codefinqa, fincode)."""
    group_keys: ClassVar[tuple[str, ...]] = ()
    """Metadata keys that break the results down (Aggregate.groups)."""
    own_dataset: ClassVar[str] = "bizbench"
    """The registry dataset its items come from (the parquet release, TAT-QA, the SEC filings)."""
    own_read_later: ClassVar[bool] = False
    """Its own dataset is read after the load (SEC-Num's filings, for the context of each question)."""

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        own = () if getattr(settings, "items", None) or getattr(settings, "parquet", None) else (cls.own_dataset,)
        prompts = () if getattr(settings, "prompts", None) else (PROMPTS_DATASET,)  # read at the first prompt
        at_load, later = ((), (*own, *prompts)) if cls.own_read_later else (own, prompts)
        pulled = (*own, *prompts) if own == ("bizbench",) else ()  # the parquet release comes with its prompts
        return DataNeeds(at_load, later, pulled)
    splits: ClassVar[tuple[str, ...]] = ("test", "train")
    split_help: ClassVar[str] = "'test' or 'train': the official parquet's splits."
    """What `split` means for this task (`finharness list TASK` shows it beside `splits`)."""

    @property
    def short_name(self) -> str:
        """The name without 'bizbench/' ('codetatqa'), as data.DATASET_TASK_NAMES and prompts.PROMPT_FILES know it."""
        return self.name.split("/", 1)[-1]

    Options = BizBenchOptions

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> BizBenchOptions:
        settings = BizBenchOptions.parse(cls.name, options, takes_style=cls.program_task)
        check_choice(cls.name, "split", settings.split, cls.splits)
        return settings

    @classmethod
    def describe_options(cls) -> list[OptionInfo]:
        infos = describe_options(BizBenchOptions, exclude=() if cls.program_task else ("style",))
        return [replace(info, choices=cls.splits, help=cls.split_help) if info.name == "split" else info
                for info in infos]

    def __init__(self, settings: BizBenchOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        self.runner = ProgramRunner(pool_size=self.settings.pool_size, sandbox=self.settings.sandbox)
        if self.program_task:
            self.runner.check(self.name)  # refuse before any model call when programs cannot be isolated
        self._prompt: OfficialPrompt | None = None
        self._data_dir: Path | None = None
        self._source = ""

    # --- items ------------------------------------------------------------------------------------

    def load(self, data_dir: Path | None) -> list[Sample]:
        data_dir = self._data_dir = resolve_data_dir(data_dir)
        items = self.load_items(data_dir)
        if not items:
            raise DataError(f"no {self.name} items for split {self.settings.split!r} in {self._source}",
                            hint="check --split, or the file given with -o items=")
        return [self.sample(item) for item in items]

    def load_items(self, data_dir: Path | None) -> list[BizBenchItem]:
        """-o items=FILE, else -o parquet=PATH, else the task's own source under DATA_DIR."""
        if self.settings.items:
            self._source = self.settings.items
            return [item for item in read_items_jsonl(self.settings.items, tasks=[self.short_name])
                    if item.split == self.settings.split]
        if self.settings.parquet:
            return self._official(Path(self.settings.parquet))
        return self.default_items(data_dir)

    def default_items(self, data_dir: Path | None) -> list[BizBenchItem]:
        """Items when neither `items` nor `parquet` is given: the official parquet under DATA_DIR/bizbench,
        pulled there on first use (with the official prompt files when those are missing too)."""
        from ...data.pull import pull_on_first_use
        from .official import has_official_files

        folder = Path(data_dir) / "bizbench"
        if not has_official_files(folder):
            pull_on_first_use("bizbench", data_dir, needed_by=self.name)
            if self.settings.prompts is None and not (folder / "prompts").is_dir():
                pull_on_first_use(PROMPTS_DATASET, data_dir, needed_by=self.name)
        try:
            return self._official(folder)
        except DataError as err:
            raise DataError(f"{self.name} needs the official BizBench parquet: {err}",
                            hint=self.official_hint()) from None

    def official_hint(self) -> str:
        return ("`finharness data pull bizbench` puts kensho/bizbench into DATA_DIR/bizbench/data/, "
                "or pass -o parquet=PATH")

    def _official(self, path: Path) -> list[BizBenchItem]:
        from .official import load_official

        load = load_official(path, tasks=[self.short_name])
        self._source = ", ".join(str(f) for f in load.files)
        return [item for item in load.items if item.split == self.settings.split]

    def key_options(self, settings: BizBenchOptions) -> dict[str, Any]:
        return settings.run_key(self.program_task)

    def sample(self, item: BizBenchItem) -> Sample:
        question: dict[str, Any] = {"question": item.question}
        if item.context is not None:
            question["context"] = item.context
        metadata = {key: value for key, value in item.metadata.items()}
        metadata.update(split=item.split, gold_scale=gold_scale(item.question, item.metadata),
                        program=item.program)
        return Sample(id=item.id, input=question, target=item.answer, metadata=metadata)

    # --- prompting ----------------------------------------------------------------------------------

    def prompt(self) -> OfficialPrompt:
        """The official prompt file of this task and style (read once)."""
        if self._prompt is None:
            folder = prompts_dir(self._data_dir, self.settings.prompts)
            self._prompt = load_prompt_file(folder / prompt_file_name(self.short_name, self.settings.style,
                                                                      self.settings.prompt_file))
        return self._prompt

    def messages(self, sample: Sample) -> list[Message]:
        return self.prompt().messages(sample.input)

    def config(self) -> Mapping[str, Any]:
        return config_with_prompt(self.options, self.prompt)

    @property
    def generate_params(self) -> GenerateParams:
        return GenerateParams(max_tokens=self.settings.max_tokens, temperature=0.0, top_p=1.0)

    async def solve(self, sample: Sample, models: Models) -> str:
        response = await models.model.chat(self.messages(sample), self.generate_params)
        if self.program_task or "```" in response.text:
            # run any program now, off the event loop, while other samples wait on the model; score()
            # then finds the result in the runner's memory (and runs it itself when resumed elsewhere)
            await asyncio.to_thread(self.answers, sample, response.text)
        return response.text

    # --- scoring ------------------------------------------------------------------------------------

    def job_for(self, sample: Sample) -> Any:
        """How a program of this sample runs: with its table as `df` when the program names it."""
        def build(code: CodeExtraction) -> ProgramJob:
            inputs = None
            table = sample.metadata.get("table")
            if table and _USES_DF.search(code.code or ""):
                inputs = {"df": table_frame_from_metadata(table)}
            return ProgramJob(code=code.code or "", value_mode=code.value_mode, inputs=inputs, cache_key=sample.id)
        return build

    def answers(self, sample: Sample, reply: str) -> dict[str, Answer]:
        job_for = self.job_for(sample)
        return {mode: read_answer(reply, mode, self.runner.run, job_for) for mode in EXTRACTION_MODES}

    def score(self, sample: Sample, prediction: Any) -> Score:
        reply = "" if prediction is None else str(prediction)
        answers = self.answers(sample, reply)
        headline = answers[self.settings.extract]
        parsed = headline.reading.rule != "unparseable"  # a program that was read but failed is not unparseable
        extracted: dict[str, Any] = {}
        for mode, answer in answers.items():
            extracted[mode] = answer.reading.value
            extracted[f"{mode}_rule"] = answer.reading.rule
        gold = _gold_float(sample.target)
        if gold is None:
            for mode, answer in answers.items():
                extracted[f"{mode}_outcome"] = answer.outcome.label
            return Score(None, {}, extracted, headline.reading.rule, parsed, "no numeric gold answer")
        values = match_values(answers, gold, sample.metadata.get("gold_scale", ""))
        notes = []
        for mode, answer in answers.items():
            outcome = final_outcome(answer, bool(values[mode]))
            extracted[f"{mode}_outcome"] = outcome.label
            if outcome.message and outcome.kind not in ("number", "ok"):
                notes.append(f"{mode}: {outcome.label}: {outcome.message}")
        return Score(values[self.settings.extract], values, extracted, headline.reading.rule, parsed,
                     "; ".join(notes) or None)

    def gold_prediction(self, sample: Sample) -> str:
        """The gold answer as a reply a model could give (the gold program in a block, else [[answer]]),
        for checking that gold answers pass through the same reading and scoring path."""
        program = sample.metadata.get("program")
        if self.program_task and program:
            return f"```python\n{program.rstrip()}\n```"
        return f"[[{sample.target}]]"

    # --- aggregation --------------------------------------------------------------------------------

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None and r.score.value is not None]
        extracted = [r.score.extracted for r in records if r.score is not None]
        groups = {key: grouped((str(r.metadata.get(key) or "none"), r.score) for r in scored)
                  for key in self.group_keys}
        unparseable = Counter()
        for entry in extracted:
            for mode in EXTRACTION_MODES:
                unparseable[mode] += (entry or {}).get(f"{mode}_rule") == "unparseable"
        notes = [f"headline 'accuracy' = '{self.settings.extract}' (reading '{VALUE_KEYS[self.settings.extract][0]}', "
                 "within 1% of the gold); every other mode is reported under its own name"]
        unscored = sum(1 for r in records if r.score is not None and r.score.value is None)
        if unscored:
            notes.append(f"{unscored} samples have no numeric gold and are not scored")
        if self._prompt is not None and self._prompt.resolution:
            notes.append(f"prompt {self._prompt.name}: {self._prompt.resolution}")
        extra = {
            "failure_classes": failure_classes(extracted),
            "rules": rule_counts(extracted),
            "unparseable": dict(unparseable),
            "value_keys": {key: {"reading": r, "rule": c, "scale_aware": m == "robust"}
                           for key, (r, c, m) in VALUE_KEYS.items()},
            "prompt_file": None if self._prompt is None else self._prompt.name,
            "source": self._source,
            "sandbox": self.runner.record(),
            "options": self.settings.run_key(self.program_task),
        }
        return Aggregate(metrics=mean_metrics([r.score for r in scored]), groups=groups, notes=notes, extra=extra)

    def close(self) -> None:
        """Stop the sandbox (the runner or CLI should call this when the task is done)."""
        self.runner.close()


def _gold_float(answer: Any) -> float | None:
    try:
        return float(str(answer).replace(",", ""))
    except (TypeError, ValueError):
        return None


def table_frame_from_metadata(table: Mapping[str, Any]) -> Any:
    """The DataFrame a CodeTAT-QA item stores in metadata['table'] (None cells back to NaN)."""
    import pandas as pd

    data = [[float("nan") if value is None else value for value in row] for row in table["data"]]
    return pd.DataFrame(data, index=table["index"], columns=table["columns"], dtype=object)


# --- the tasks ------------------------------------------------------------------------------------------

class _TatqaTask(BizBenchNumericTask):
    splits = ("test", "dev")
    split_help = "'test' (TAT-QA's test_gold, with answers) or 'dev' (TAT-QA's dev file)."

    def default_items(self, data_dir: Path | None) -> list[BizBenchItem]:
        from .tatqa import build_codetatqa, build_tatqa_e, tatqa_file

        path = tatqa_file(Path(data_dir), self.settings.split)
        self._source = str(path)
        build = build_codetatqa if self.short_name == "codetatqa" else build_tatqa_e
        return build(path, self.settings.split).items


class CodeTatqaTask(_TatqaTask):
    """CodeTAT-QA: arithmetic over a TAT-QA table, answered with a program run in the sandbox."""

    name = "bizbench/codetatqa"
    own_dataset = "tatqa"
    description = "BizBench CodeTAT-QA: program synthesis over TAT-QA tables, scored by running the program"
    program_task = True
    group_keys = ("scale",)


class TatqaETask(_TatqaTask):
    """TAT-QA(E): extract a number that appears in the context."""

    name = "bizbench/tatqa-e"
    own_dataset = "tatqa"
    description = "BizBench TAT-QA(E): extract a number from a TAT-QA report (text and table)"
    group_keys = ("scale", "answer_from")


class SecNumTask(BizBenchNumericTask):
    """SEC-Num: the number for a label in a snippet of an SEC filing."""

    name = "bizbench/secnum"
    own_dataset = "fintradebench-sec-filings"
    own_read_later = True
    description = "BizBench SEC-Num: find the number for a label in an SEC filing snippet (built from inline XBRL)"
    split_help = "'test' or 'train': SEC-Num's split by filing (a hash of its accession number)."
    group_keys = ("ticker", "form")

    def default_items(self, data_dir: Path | None) -> list[BizBenchItem]:
        filings = Path(data_dir) / "fintradebench" / "SEC_Filings"
        cache = secnum_cache(filings)
        self._source = str(cache)
        return [item for item in read_items_jsonl(cache, tasks=["secnum"]) if item.split == self.settings.split]


def _fingerprint(filings: Path) -> str:
    from ...markets import xbrl
    from . import secnum

    digest = hashlib.sha256()
    for module in (secnum, xbrl):
        digest.update(Path(module.__file__).read_bytes())
    for path in secnum.filing_paths(filings):
        stat = path.stat()
        digest.update(f"{path.relative_to(filings)}\x00{stat.st_size}\x00{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def secnum_cache(filings: Path) -> Path:
    """Build SEC-Num from the filings once and keep it in the cache (`finharness data build secnum`
    writes the same file format)."""
    from ...data.registry import cache_dir
    from .secnum import build_secnum_detailed

    if not filings.is_dir():
        raise DataError("SEC filings folder not found", path=filings,
                        hint=f"{pull_hint(filings)} (DATA_DIR/fintradebench/SEC_Filings/TICKER/*.htm), or pass "
                             "-o items=FILE (built by `finharness data build secnum`)")
    path = cache_dir() / "bizbench" / f"secnum-{_fingerprint(filings)}.jsonl"
    if not path.exists():
        build = build_secnum_detailed(filings)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        write_items_jsonl(build.items, partial)
        os.replace(partial, path)
    return path


class FinCodeTask(BizBenchNumericTask):
    """FinCode: financial word problems answered with a program (official parquet only)."""

    name = "bizbench/fincode"
    description = "BizBench FinCode: financial word problems solved by a program (official data only)"
    program_task = True


class CodeFinQATask(BizBenchNumericTask):
    """CodeFinQA: FinQA questions answered with a program (official parquet only)."""

    name = "bizbench/codefinqa"
    description = "BizBench CodeFinQA: FinQA questions solved by a program (official data only)"
    program_task = True


class ConvFinQAETask(BizBenchNumericTask):
    """ConvFinQA(E): extract a number from a FinQA document (official parquet only)."""

    name = "bizbench/convfinqa-e"
    description = "BizBench ConvFinQA(E): extract a number from a FinQA report (official data only)"
