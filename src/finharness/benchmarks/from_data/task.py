"""The task a TOML file declares (spec.py): records from a file, a prompt template, and one of five kinds of answer.

multiple_choice  method gen (the reply's letter, extract/choices.py), ll (log-likelihood of each option letter
                 after the prompt and its cue) or auto (ll where the backend computes log-likelihoods, else
                 letters, else gen: benchmarks/mc_methods.py); the answer may be the letter, the option's text or
                 its 0-based index
numeric          the finance-aware number reading of extract/numbers.py (scale words, percent, parentheses
                 negatives, currency; the robust cascade, else the reply's only number) matched within `tolerance` (relative, default 1%), with the gold's `scale`
                 ('million': the gold is in millions) and `percent` (the gold is a percentage)
span             the reply against the gold after lower-casing and dropping punctuation and articles: exact
                 match (default) or token F1
code             the reply's Python program (extract/code.py, robust) run in the sandbox; its value matched as a
                 number within `tolerance`
open             a judge (role judge) grades the reply 1-5 against the reference answer and the file's `rubric`;
                 correct at `threshold` (default 4) or more; `grade` = the grade / 5

Metrics: `accuracy` (share correct) with its interval, `unparseable`, `grade` (open) and F1 (span f1), per
`category` group, and with [weights] the weighted macro average `weighted_macro.accuracy`. Sample ids: the `id`
field, else `NAME/LINE`.
"""

from __future__ import annotations

import asyncio
import functools
import re
import string
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.metrics import Metric, grouped, mean_metrics
from ...core.task import Aggregate, Models, SampleRecord, Task
from ...core.types import GenerateParams, LoglikelihoodRequest, Message, Sample, Score
from ...data.errors import DataError
from ...data.io import iter_jsonl, read_csv_rows
from ...extract import UNPARSEABLE
from ...extract.choices import extract_choice
from ...extract.numbers import find_numbers, match_number, parse_number, read_robust
from ...stats.ci import weighted_mean_ci
from ..mc_methods import METHOD_DIRECTIONS, is_multi, ll_choice, score_methods, solve_choice
from .spec import TaskFile

LETTERS = string.ascii_uppercase
ARTICLES = re.compile(r"\b(a|an|the)\b")
GRADE = re.compile(r"grade\s*[:=]?\s*([1-5])\b", re.I)
JUDGE_MAX_TOKENS = 24

JUDGE_SYSTEM = ("You grade an answer to a question against a reference answer and a rubric. Reply with one line: "
                "'Grade: N', N from 1 (wrong) to 5 (fully right).")
JUDGE_USER = ("Rubric: {rubric}\n\nQuestion: {question}\n\nReference answer: {reference}\n\nAnswer to grade: "
              "{answer}\n\nReply with 'Grade: N'.")


@dataclass(frozen=True)
class DataTaskOptions:
    """What `-o` may change of a task file's settings (the file itself is in the run key by its sha256)."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {"method": ("file", "gen", "ll", "auto")}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("max_tokens",)

    method: str = "file"
    """multiple_choice: 'file' (the file's [scoring] method, default gen), or gen, ll or auto instead."""
    max_tokens: int | None = None
    """The answer budget instead of the file's [prompt] max_tokens."""
    sandbox: str = "auto"
    """code: the sandbox's isolation (docs/sandbox.md)."""


def read_records(spec: TaskFile, data_dir: Path | None) -> tuple[Path | str, list[tuple[int, dict[str, Any]]]]:
    """(where the records came from, (line, record) of each)."""
    source = spec.data
    if source.hub is not None:
        return _hub_records(spec)
    given = Path(source.path)  # type: ignore[arg-type]
    # the data root first (--data-dir, $FINHARNESS_DATA_DIR or the default one), then the task file's folder: a
    # run without --data-dir gets the default root, where a file beside the task is not
    bases = [Path(data_dir)] if data_dir is not None else []
    tried = [given] if given.is_absolute() else [(base / given).resolve() for base in (*bases, spec.path.parent)]
    for path in tried:
        if path.is_file():
            return path, _file_records(path)
    raise DataError(f"the data file of task {spec.name} is not there ([data] path = {source.path!r}; looked in "
                    + " and ".join(str(p) for p in tried) + ")", path=tried[0],
                    hint="give --data-dir DIR holding it, or a path relative to the task file")


def _file_records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json"):
        return list(iter_jsonl(path))
    if suffix in (".csv", ".tsv"):
        return read_csv_rows(path, delimiter="\t" if suffix == ".tsv" else "sniff")
    if suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
        return [(i + 1, {k: _plain(v) for k, v in row.items()}) for i, row in enumerate(frame.to_dict("records"))]
    raise DataError(f"a data file must be .jsonl, .csv, .tsv or .parquet, not {suffix or 'no suffix'}", path=path)


def _plain(value: Any) -> Any:
    """A Parquet cell as plain JSON (numpy arrays and scalars to lists and numbers)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _hub_records(spec: TaskFile) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
    source = spec.data
    where = f"{source.hub}@{source.revision[:7]}: {source.file}"  # type: ignore[index]
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.utils import HfHubHTTPError

        local = hf_hub_download(source.hub, source.file, revision=source.revision, repo_type="dataset")  # type: ignore[arg-type]
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise DataError(f"task {spec.name}: {where} cannot be had ({type(err).__name__}: {str(err)[:200]})",
                        hint="check the dataset, revision and file, the network, or HF_HUB_OFFLINE") from None
    return where, _file_records(Path(local))


def _letter(answer: Any, options: Sequence[str]) -> str | None:
    """The gold's letter: given as a letter, as the option's text, or as its 0-based index."""
    text = str(answer).strip()
    if len(text) == 1 and text.upper() in LETTERS[:len(options)]:
        return text.upper()
    if text in options:
        return LETTERS[options.index(text)]
    if text.isdigit() and int(text) < len(options):
        return LETTERS[int(text)]
    return None


def read_number_reply(reply: str) -> Any:
    """The reply's number: BizBench's robust cascade (brackets, \\boxed, an answer cue, a bare number), else the one
    number the reply holds (rule `only_number`); several numbers and no cue stay unparseable, never guessed."""
    reading = read_robust(reply)
    if reading.parsed:
        return reading
    found = find_numbers(reply, "only_number")
    return found[0] if len(found) == 1 else reading


def normalise_span(text: str) -> list[str]:
    """Lower case, no punctuation, no articles, words split on whitespace (SQuAD's normalisation)."""
    lowered = "".join(ch for ch in str(text).lower() if ch not in string.punctuation)
    return ARTICLES.sub(" ", lowered).split()


def span_f1(prediction: str, gold: str) -> float:
    pred, ref = normalise_span(prediction), normalise_span(gold)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or not common:
        return float(pred == ref)
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


@functools.lru_cache(maxsize=64)
def compiled_template(text: str) -> Any:
    """The Jinja2 template of `text`, compiled once: a prompt renders it per sample, and per few-shot example."""
    import jinja2

    return jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True).from_string(text)


class DataTask(Task):
    """The base of every task made from a TOML file (data_task_class makes one subclass per file)."""

    name = "from_data"
    Options = DataTaskOptions
    metric_directions = {**METHOD_DIRECTIONS, "unparseable": "lower"}
    task_file: ClassVar[TaskFile]

    def __init__(self, settings: DataTaskOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        spec = self.task_file
        self.method = spec.scoring.get("method", "gen") if self.settings.method == "file" else self.settings.method
        self.max_tokens = self.settings.max_tokens or spec.max_tokens
        self.roles = ("model", "judge") if spec.kind == "open" else ("model",)
        self._fewshot: list[Sample] = []
        self._sandbox: Any = None
        self._sandbox_lock = threading.Lock()

    def key_options(self, settings: DataTaskOptions) -> dict[str, Any]:
        out: dict[str, Any] = {"method": None if settings.method == "file" else settings.method,
                               "max_tokens": settings.max_tokens}
        if self.task_file.kind == "code":
            out["sandbox"] = settings.sandbox
        return {k: v for k, v in out.items() if v is not None}

    # --- data -----------------------------------------------------------------------------------------------

    def load(self, data_dir: Path | None) -> list[Sample]:
        spec = self.task_file
        where, records = read_records(spec, data_dir)
        split_field = spec.data.split_field
        scored, examples = [], []
        for line, record in records:
            split = record.get(split_field)
            if spec.data.fewshot_split is not None and split == spec.data.fewshot_split:
                examples.append(self._sample(record, line, where))
            elif spec.data.split is None or split == spec.data.split:
                scored.append(self._sample(record, line, where))
        if not scored:
            raise DataError(f"task {spec.name}: no records" + (f" of split {spec.data.split!r} (field "
                            f"{split_field!r})" if spec.data.split else ""), path=where)
        if len(examples) < spec.fewshot:
            raise DataError(f"task {spec.name}: [prompt] fewshot = {spec.fewshot} but split "
                            f"{spec.data.fewshot_split!r} has {len(examples)} records", path=where)
        self._fewshot = examples[:spec.fewshot]
        return scored

    def _field(self, record: Mapping[str, Any], key: str, line: int, where: Any) -> Any:
        name = self.task_file.fields[key]
        if isinstance(name, list):
            missing = [n for n in name if n not in record]
            if missing:
                raise DataError(f"[fields] {key}: the record has no field {missing[0]!r}", path=where, line=line)
            return [record[n] for n in name]
        if name not in record:
            raise DataError(f"[fields] {key}: the record has no field {name!r} (it has: {', '.join(map(str, record))})",
                            path=where, line=line)
        return record[name]

    def _sample(self, record: Mapping[str, Any], line: int, where: Any) -> Sample:
        spec = self.task_file
        inputs = {key: self._field(record, key, line, where) for key in spec.fields
                  if key not in ("id", "answer", "category")}
        target = given = self._field(record, "answer", line, where)
        if spec.kind == "multiple_choice":
            options = inputs["options"]
            if not isinstance(options, list) or not 2 <= len(options) <= len(LETTERS):
                raise DataError(f"[fields] options: {len(options) if isinstance(options, list) else 'not a list of'} "
                                "options (a multiple-choice item needs 2 to 26)", path=where, line=line)
            inputs["options"] = [str(o) for o in options]
            target = _letter(target, inputs["options"])
            if target is None:
                raise DataError(f"[fields] answer: {self._field(record, 'answer', line, where)!r} is neither a letter, "
                                "an option's text nor an option's index", path=where, line=line)
        elif spec.kind in ("numeric", "code"):
            reading = parse_number(str(target))
            if not reading.parsed:
                raise DataError(f"[fields] answer: {target!r} is not a number", path=where, line=line)
            target = reading.value
        sid = str(record[spec.fields["id"]]) if "id" in spec.fields and spec.fields["id"] in record else \
            f"{spec.name}/{line}"
        category = str(record.get(spec.fields["category"], "none")) if "category" in spec.fields else None
        answer_text = target if spec.kind == "multiple_choice" else str(given)
        return Sample(id=sid, input=inputs, target=target,
                      metadata={"path": str(where), "line": line, "answer_text": answer_text,
                                **({"category": category} if category else {})})

    # --- prompts --------------------------------------------------------------------------------------------

    def render(self, sample: Sample, template: str | None = None, **extra: Any) -> str:
        """`template` (the file's user-message template by default) over the sample's fields and `extra`."""
        values = dict(sample.input)
        if "options" in values and self.task_file.kind == "multiple_choice":
            values["options"] = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(values["options"]))
        return compiled_template(template or self.task_file.template).render(**values, **extra)

    def _example_answer(self, sample: Sample) -> str:
        """A few-shot example's reply: the file's [prompt] answer template, else the record's answer as written
        (a CSV's '35', not the parsed 35.0)."""
        default = "Answer: {{ answer }}" if self.task_file.kind == "multiple_choice" else "{{ answer }}"
        return self.render(sample, self.task_file.answer or default, answer=sample.metadata["answer_text"])

    def messages(self, sample: Sample) -> list[Message]:
        turns = [Message("system", self.task_file.system)] if self.task_file.system else []
        for example in self._fewshot:
            turns += [Message("user", self.render(example)), Message("assistant", self._example_answer(example))]
        return [*turns, Message("user", self.render(sample))]

    def ll_request(self, sample: Sample) -> LoglikelihoodRequest:
        shots = "".join(f"{self.render(e)}{self.task_file.cue} {e.target}\n\n" for e in self._fewshot)
        letters = LETTERS[:len(sample.input["options"])]
        return LoglikelihoodRequest(shots + self.render(sample) + self.task_file.cue, tuple(f" {x}" for x in letters))

    # --- solving --------------------------------------------------------------------------------------------

    async def solve(self, sample: Sample, models: Models) -> Any:
        model = models.model
        params = GenerateParams(max_tokens=self.max_tokens)
        kind = self.task_file.kind
        if kind == "multiple_choice":
            letters = list(LETTERS[:len(sample.input["options"])])

            async def loglikelihood() -> Any:
                return ll_choice(letters, (await model.loglikelihood(self.ll_request(sample))).logprobs)

            return await solve_choice(self.method, model, messages=lambda: self.messages(sample), params=params,
                                      letters=letters, loglikelihood=loglikelihood)
        reply = (await model.chat(self.messages(sample), params)).text
        if kind == "code":
            return {"reply": reply, "run": await asyncio.to_thread(self._run_program, reply)}
        if kind == "open":
            verdict = await models["judge"].chat(
                (Message("system", JUDGE_SYSTEM), Message("user", JUDGE_USER.format(
                    rubric=self.task_file.scoring["rubric"], question=self.render(sample),
                    reference=sample.target, answer=reply))), GenerateParams(max_tokens=JUDGE_MAX_TOKENS))
            return {"reply": reply, "verdict": verdict.text}
        return reply

    def _run_program(self, reply: str) -> dict[str, Any]:
        from ...extract.code import extract_code
        from ...sandbox import Sandbox

        program = extract_code(reply)
        if program.code is None:
            return {"rule": program.rule, "detail": program.detail}
        with self._sandbox_lock:
            if self._sandbox is None:
                self._sandbox = Sandbox(pool_size=1, isolation=self.settings.sandbox)  # type: ignore[arg-type]
        result = self._sandbox.run(program.code, mode=program.value_mode)
        return {"rule": program.rule, "status": result.status, "value": result.value,
                "error": f"{result.error_class}: {result.message}" if not result.ok else None}

    # --- scoring --------------------------------------------------------------------------------------------

    def score(self, sample: Sample, prediction: Any) -> Score:
        kind, scoring = self.task_file.kind, self.task_file.scoring
        if kind == "multiple_choice":
            if is_multi(prediction):
                return score_methods(prediction, lambda _m, p: self.score(sample, p), lambda _m, s: s.extracted,
                                     value_name="accuracy")
            if isinstance(prediction, Mapping):  # ll or letters
                choice = prediction.get("choice")
                return Score(value=float(choice == sample.target), values={"unparseable": float(not choice)},
                             extracted=choice, rule=prediction.get("rule", "loglikelihood") if choice else UNPARSEABLE,
                             parsed=bool(choice))
            found = extract_choice(prediction or "", dict(zip(LETTERS, sample.input["options"])))
            return Score(value=float(found.answer == sample.target), values={"unparseable": float(not found.parsed)},
                         extracted=found.answer, rule=found.rule, parsed=found.parsed)
        if kind in ("numeric", "code"):
            if kind == "code":
                run = (prediction or {}).get("run") or {}
                reading = parse_number(str(run.get("value"))) if run.get("status") == "ok" else None
                rule = run.get("rule", UNPARSEABLE) if reading is None or not reading.parsed else run.get("rule")
            else:
                reading = read_number_reply(prediction or "")
                rule = reading.rule
            if reading is None or not reading.parsed:
                return Score(value=0.0, values={"unparseable": 1.0}, extracted=None, rule=rule or UNPARSEABLE,
                             parsed=False)
            scale = "percent" if scoring.get("percent") else scoring.get("scale", "")
            matched = match_number(reading, float(sample.target), gold_scale=scale,
                                   tolerance=float(scoring.get("tolerance", 0.01)))
            return Score(value=float(matched.correct), values={"unparseable": 0.0}, extracted=reading.value,
                         rule=f"{rule}:{matched.rule}")
        if kind == "span":
            f1 = span_f1(prediction or "", str(sample.target))
            exact = float(normalise_span(prediction or "") == normalise_span(str(sample.target)))
            value = f1 if scoring.get("match") == "f1" else exact
            return Score(value=value, values={"exact": exact, "f1": f1}, extracted=prediction, rule=scoring.get("match", "exact"))
        verdict = GRADE.search((prediction or {}).get("verdict") or "")
        if verdict is None:  # no readable grade: counted, never guessed
            return Score(value=None, values={"unparseable": 1.0}, extracted=None, rule=UNPARSEABLE, parsed=False)
        grade = int(verdict.group(1))
        return Score(value=float(grade >= int(scoring.get("threshold", 4))), values={"grade": grade / 5,
                     "unparseable": 0.0}, extracted=grade, rule="judge")

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None]
        metrics = mean_metrics([r.score for r in scored])
        groups: dict[str, Any] = {}
        notes = []
        if "category" in self.task_file.fields:
            groups["category"] = grouped((str(r.metadata.get("category")), r.score) for r in scored)
            if self.task_file.weights:
                weights = {name: self.task_file.weights.get(name, 1.0) for name in groups["category"]}
                total = sum(weights.values()) or 1.0
                parts = [(weights[name] / total, group["accuracy"].estimate())
                         for name, group in groups["category"].items() if group["accuracy"].n]
                metrics["weighted_macro.accuracy"] = Metric.of(weighted_mean_ci(parts))
                notes.append("weighted_macro.accuracy: the category means weighted by the task file's weights table (1 where it names none)")
        return Aggregate(metrics=metrics, groups=groups, notes=notes,
                         extra={"task_file": str(self.task_file.path), "kind": self.task_file.kind})

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


def data_task_class(spec: TaskFile) -> type[DataTask]:
    """The task class of one task file: DataTask with the file's name, description and settings."""
    return type(f"DataTask_{spec.name}", (DataTask,), {"name": spec.name, "task_file": spec,
                                                       "description": spec.description or f"declared in {spec.path}",
                                                       "__module__": __name__})
