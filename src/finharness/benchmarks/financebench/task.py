"""`financebench`: FinanceBench's open sample (150 questions over 84 filings) in the paper's configurations and an
agentic one, graded correct / incorrect / refusal as the paper's human reviewers graded.

Data: DATA/financebench/ (the release's layout, data.py), pulled on first use. Sample ids: the financebench_id.

Modes (`-o mode=MODE`; the paper's eval_mode in brackets; prompts in prompts.py, exact):
  closed-book          [closedBook] the question alone.
  oracle               [oracle] the question, then the full pages of its evidence.
  oracle-reverse       [oracle_reverse] the evidence pages first, then the question.
  in-context           [inContext] the question, then the whole filing (every page, as PyMuPDF reads it).
  in-context-reverse   [inContext_reverse] the whole filing first.
                       A filing and its prompt that do not fit the model's window fail as `does not fit` (the
                       sample's error names the tokens); `fit=cut` cuts the filing's end instead, as the release
                       cut it to its models' windows (105k/95k tokens), and counts the cut.
  single-store         [singleStore] the `top_k` chunks of the question's own filing that retrieval ranks first,
                       in LangChain's RetrievalQA 'stuff' chat prompt.
  shared-store         [sharedStore] the same over one store of every cited filing here.
  agent                (finharness) no evidence given: the model works with tools over every cited filing here
                       (search, list documents, read a page, a calculator, Python in the sandbox) in a bounded
                       episode (agents/loop.py); its final reply is the answer.
Modes that read filings run the questions whose filing the data root holds; the notes name the absent ones.

Grading (`grader`): 'rules' (no model: refusal phrases, finance-aware number matching, yes/no stance, and a
fallback for the rest) or 'judge' (the same rules where they are sure, a rubric judge for the rest; role judge).
See grading.py and docs/benchmarks/financebench.md for what each was measured to agree with the human labels.
`answers=FILE` grades answers made elsewhere (the release's results/*.jsonl layout: financebench_id,
model_answer) instead of asking a model: `finharness score financebench --predictions FILE` uses it.

Scores: value 1 for a correct answer (headline `accuracy`); values `incorrect` and `refusal` (shares); in agent
mode `agent.steps`, `agent.tool_calls`, `agent.tool_errors`, `agent.parse_failures`, `agent.read_untagged`,
`agent.gave_up`, `agent.tokens` per episode and `agent.calls.TOOL` per tool. Groups: question_type, question_reasoning, numeric.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ...core.backend import CallFailed
from ...core.metrics import grouped, mean_metrics
from ...core.task import Aggregate, DataNeeds, Models, SampleRecord, Task
from ...core.types import GenerateParams, Message, Sample, Score
from ...data.errors import DataError
from ...data.io import iter_jsonl
from ...data.registry import resolve_data_dir
from . import prompts
from .data import Question, absent_documents, cited_documents, ensure_data, pdf_path, questions_path, read_questions
from .grading import Grade, combine, grade_rules, is_numeric_question, judge_messages, read_judge_verdict

MODES: tuple[str, ...] = ("closed-book", "oracle", "oracle-reverse", "in-context", "in-context-reverse",
                          "single-store", "shared-store", "agent")
PAPER_MODES: Mapping[str, str] = {
    "closed-book": "closedBook", "oracle": "oracle", "oracle-reverse": "oracle_reverse", "in-context": "inContext",
    "in-context-reverse": "inContext_reverse", "single-store": "singleStore", "shared-store": "sharedStore"}
"""finharness's mode names -> the release's eval_mode (the agent has none)."""
FILING_MODES = frozenset({"in-context", "in-context-reverse", "single-store", "shared-store", "agent"})
"""Modes that read the PDFs (and so run only the questions whose filing is here)."""
GRADERS = ("rules", "judge")
FIT_POLICIES = ("refuse", "cut")


@dataclass(frozen=True)
class FinanceBenchOptions:
    """Everything that changes FinanceBench's requests or grades (the task's part of the run key)."""

    CHOICES: ClassVar[Mapping[str, Sequence[Any]]] = {"mode": MODES, "grader": GRADERS, "fit": FIT_POLICIES,
                                                      "dense": ("auto", "on", "off"), "calls": ("strict", "lenient")}
    AT_LEAST_ONE: ClassVar[tuple[str, ...]] = ("max_tokens", "top_k", "max_steps", "max_tool_errors")

    mode: str = "closed-book"
    """The configuration: closed-book, oracle, oracle-reverse, in-context, in-context-reverse, single-store,
    shared-store (the paper's) or agent (finharness's)."""
    grader: str = "rules"
    """'rules' (no model) or 'judge' (rules where sure, the judge role for the rest)."""
    max_tokens: int = 2048
    """The answer's token budget (the release's 2,048); in agent mode, each step's."""
    fit: str = "refuse"
    """In-context modes, a filing that does not fit the window: 'refuse' (the sample fails, `does not fit`) or
    'cut' (its end is cut to fit, as the release cut it; counted as a truncation)."""
    top_k: int = 4
    """Store modes: chunks retrieved (LangChain's retriever default, which the release kept)."""
    dense: str = "auto"
    """Store and agent search: 'on' adds MiniLM vectors to BM25 (first use embeds every filing once, cached),
    'off' is BM25 only, 'auto' is on where the encoder loads."""
    max_steps: int = 12
    """Agent: model calls per episode at most."""
    max_episode_tokens: int = 120_000
    """Agent: prompt + completion tokens per episode at most."""
    max_seconds: float = 900.0
    """Agent: model and tool time per episode at most (the model's time as recorded, so a resumed episode stops
    where the first one would have)."""
    max_tool_errors: int = 3
    """Agent: failed tool calls (an error, unreadable arguments, an unknown tool) before the episode gives up."""
    calls: str = "strict"
    """Agent: 'strict' (a call written without its `<tool_call>` tags is a parse failure, answered with what was
    wrong) or 'lenient' (still counted as a parse failure, but its calls are run: what the model can do with tools
    apart from the format)."""
    answers: str | None = None
    """A JSONL of answers made elsewhere (financebench_id, model_answer): grade them, ask no model."""


GUESSED_CORRECT_FLAG = 0.05
"""A run whose share of 'correct' grades that are the rules' guesses reaches this is flagged: its accuracy rests
that much on word overlap (measured against the human labels the guesses agree 0.73, the sure rules 0.97; on a
small model's invented answers far less)."""


def guess_flags(scored: Sequence[SampleRecord]) -> list[str]:
    """The flag of a run whose accuracy rests on guessed grades (GUESSED_CORRECT_FLAG), else none."""
    guessed = sum(1 for r in scored if r.score.value == 1.0 and not r.score.values.get("sure_correct", 1.0))
    if not scored or guessed / len(scored) < GUESSED_CORRECT_FLAG:
        return []
    sure = sum(1 for r in scored if r.score.values.get("sure_correct")) / len(scored)
    return [f"guessed grades: {guessed} of {len(scored)} 'correct' grades are the rules' guesses (sure_correct "
            f"{sure:.1%}); a judge decides them: -o grader=judge --judge SPEC"]


class FinanceBenchTask(Task):
    name = "financebench"
    description = "FinanceBench open sample: 150 questions over whole filings, the paper's configurations + agent"
    headline = "accuracy"
    Options = FinanceBenchOptions

    @classmethod
    def data_needs(cls, settings: Any) -> DataNeeds:
        answers = ("financebench-results",) if getattr(settings, "answers", None) else ()
        return DataNeeds(("financebench", *answers), pulled=("financebench",))
    roles: ClassVar[tuple[str, ...]] = ("model",)
    predictions_option: ClassVar[str | None] = "answers"
    metric_directions: ClassVar[Mapping[str, str]] = {"incorrect": "lower", "refusal": "lower", "guessed": "info",
                                                      "agent.*": "info"}
    metric_docs: ClassVar[Mapping[str, str]] = {
        "accuracy": "share of questions answered correctly (the paper's human grading reproduced by the grader)",
        "incorrect": "share answered wrongly", "refusal": "share refused or not answered (a give-up counts here)",
        "sure_correct": "share graded correct by a rule that is sure of it (or the judge): the accuracy's lower bound "
                        "when the rules guessed",
        "guessed": "share of grades the rules only guessed (open answers by word overlap, yes/no without the gold's "
                   "figures or names): a judge decides them (-o grader=judge --judge SPEC)",
        "agent.steps, agent.tool_calls, agent.tool_errors, agent.parse_failures, agent.gave_up, agent.tokens":
            "agent mode: per episode (means with intervals)",
        "agent.calls.*": "agent mode: calls of each tool per episode"}

    def __init__(self, settings: FinanceBenchOptions | None = None, /, **options: Any) -> None:
        super().__init__(settings, **options)
        s = self.settings
        roles: tuple[str, ...] = () if s.answers else ("model",)
        self.roles = (*roles, "judge") if s.grader == "judge" else roles
        self._data_dir: Path | None = None
        self._questions: dict[str, Question] = {}
        self._absent: list[str] = []
        self._answers: dict[str, str] = {}
        self._stores: dict[str, Any] = {}
        self._store_lock = threading.Lock()
        self._agent_tools: Any = None

    def key_options(self, settings: FinanceBenchOptions) -> dict[str, Any]:
        key = {"mode": settings.mode, "grader": settings.grader, "max_tokens": settings.max_tokens}
        if settings.mode in ("in-context", "in-context-reverse"):
            key["fit"] = settings.fit
        if settings.mode in FILING_MODES:
            from .filings import reader_name

            key["pdf_reader"] = reader_name()
        if settings.mode in ("single-store", "shared-store", "agent"):
            key.update(top_k=settings.top_k, dense=settings.dense)
        if settings.mode == "agent":
            key.update(max_steps=settings.max_steps, max_episode_tokens=settings.max_episode_tokens,
                       max_seconds=settings.max_seconds, max_tool_errors=settings.max_tool_errors)
            if settings.calls != "strict":
                key["calls"] = settings.calls
        if settings.answers:
            key["answers"] = str(Path(settings.answers).resolve())
        return key

    # --- data ---------------------------------------------------------------------------------------

    def load(self, data_dir: Path | None) -> list[Sample]:
        root = resolve_data_dir(data_dir)
        ensure_data(root, self.name)
        self._data_dir = root
        questions = read_questions(root)
        self._questions = {q.id: q for q in questions}
        if self.settings.mode in FILING_MODES and not self.settings.answers:
            self._absent = absent_documents(root, questions)
            questions = [q for q in questions if q.doc_name not in self._absent]
        if self.settings.answers:
            self._answers = read_answers(Path(self.settings.answers), set(self._questions))
            questions = [q for q in questions if q.id in self._answers]
        path = questions_path(root)
        return [Sample(id=q.id, input={"question": q.question, "doc_name": q.doc_name}, target=q.answer,
                       metadata={"question_type": q.question_type, "question_reasoning": q.question_reasoning,
                                 "numeric": is_numeric_question(q.answer, q.question_type), "company": q.company,
                                 "doc_name": q.doc_name, "path": str(path), "line": q.line})
                for q in questions]

    def question(self, sample: Sample) -> Question:
        return self._questions[sample.id]

    # --- solving ------------------------------------------------------------------------------------

    @property
    def params(self) -> GenerateParams:
        return GenerateParams(max_tokens=self.settings.max_tokens)

    async def solve(self, sample: Sample, models: Models) -> Any:
        q = self.question(sample)
        extra: dict[str, Any] = {}
        if self.settings.answers:
            answer: str | None = self._answers[sample.id]
        elif self.settings.mode == "agent":
            episode = await self._agent_episode(q, models.model)
            answer, extra["episode"] = episode.answer, episode.to_json()
        else:
            messages, extra = await self._messages(q, models.model)
            answer = (await models.model.chat(messages, self.params)).text
        prediction: dict[str, Any] = {"answer": answer, **extra}
        if self.settings.grader == "judge":
            rules = grade_rules(q.question, q.answer, answer or "", question_type=q.question_type)
            if rules.decided:
                prediction["judge"] = None  # the rules were sure: no judge call
            else:
                reply = await models["judge"].chat(judge_messages(q.question, q.answer, answer or ""),
                                                   GenerateParams(max_tokens=judge_max_tokens()))
                prediction["judge"] = reply.text
        return prediction

    async def _messages(self, q: Question, model: Any) -> tuple[tuple[Message, ...], dict[str, Any]]:
        mode = self.settings.mode
        if mode == "closed-book":
            return prompts.single_prompt(mode, q.question), {}
        if mode in ("oracle", "oracle-reverse"):
            context = prompts.EVIDENCE_SEPARATOR.join(e.full_page for e in q.evidence)
            return prompts.single_prompt(mode, q.question, context), {}
        if mode in ("in-context", "in-context-reverse"):
            from .filings import whole_text

            filing = await asyncio.to_thread(whole_text, pdf_path(self._root, q.doc_name))
            return await asyncio.to_thread(self._fitted_filing, mode, q, filing, model)
        found = await asyncio.to_thread(self._retrieve, mode, q)
        retrieved = [{"doc": f.passage.doc, "page": f.passage.page, "score": round(f.score, 6)} for f in found]
        return prompts.stuff_messages(q.question, [f.passage.text for f in found]), {"retrieved": retrieved}

    @property
    def _root(self) -> Path:
        assert self._data_dir is not None, "load() runs before solve()"
        return self._data_dir

    def _fitted_filing(self, mode: str, q: Question, filing: str, model: Any
                       ) -> tuple[tuple[Message, ...], dict[str, Any]]:
        """The in-context prompt with the whole filing, or with its end cut to fit (fit=cut); a prompt that does
        not fit under fit=refuse fails the sample as `does not fit`, naming its size."""
        messages = prompts.single_prompt(mode, q.question, filing)
        fits = model.fits(messages, self.params.max_tokens)
        if fits in (True, None):  # None: the window is unknown (an API): the server decides
            return messages, {}
        tokens = model.count_tokens(messages[0].content)
        size = f"{tokens:,} tokens" if tokens is not None else f"{len(messages[0].content):,} characters"
        if self.settings.fit == "refuse":
            raise CallFailed(f"does not fit: the filing {q.doc_name} in the {mode} prompt is {size}, more than the "
                             f"model's window holds with {self.params.max_tokens} answer tokens (-o fit=cut cuts the "
                             "filing's end to fit, as the release did)", attempts=0, kind="prompt-too-long")
        lo, hi = 0, len(filing)
        while lo < hi:  # the longest start of the filing that fits
            mid = (lo + hi + 1) // 2
            if model.fits(prompts.single_prompt(mode, q.question, filing[:mid]), self.params.max_tokens):
                lo = mid
            else:
                hi = mid - 1
        model.note_truncation("fit", f"{q.doc_name}: filing cut from {len(filing):,} to {lo:,} characters")
        return prompts.single_prompt(mode, q.question, filing[:lo]), {"filing_chars": [lo, len(filing)]}

    def store(self, scope: str) -> Any:
        """The passage index of one filing (scope = its doc_name) or of every cited filing here ('shared'),
        built on first use (cached on disk by the retrieval module)."""
        from ...data.registry import sha256_file
        from ...retrieval.passages import Document, build_passage_index
        from .filings import read_pages

        with self._store_lock:
            index = self._stores.get(scope)
            if index is None:
                names = ([n for n in cited_documents(list(self._questions.values())) if n not in self._absent]
                         if scope == "shared" else [scope])
                documents = [Document(n, sha256_file(pdf_path(self._root, n)), read_pages(pdf_path(self._root, n)))
                             for n in names]
                index = build_passage_index(documents, encoder=self.encoder(),
                                            label="FinanceBench filings" if scope == "shared" else scope)
                self._stores[scope] = index
            return index

    def encoder(self) -> Any:
        """The dense encoder the dense option asks for (None: BM25 only)."""
        if self.settings.dense == "off":
            return None
        if not hasattr(self, "_encoder"):
            from ...retrieval.dense import DenseUnavailable, default_encoder

            try:
                self._encoder = default_encoder()
            except DenseUnavailable as err:
                if self.settings.dense == "on":
                    raise DataError(f"dense retrieval was asked for (-o dense=on) and cannot run: {err}") from None
                self._encoder = None
        return self._encoder

    def _retrieve(self, mode: str, q: Question) -> list[Any]:
        index = self.store(q.doc_name if mode == "single-store" else "shared")
        return index.search(q.question, k=self.settings.top_k, encoder=self.encoder())

    async def _agent_episode(self, q: Question, model: Any) -> Any:
        from ...agents import AgentLimits, run_episode
        from .tools import filing_tools

        if self._agent_tools is None:
            self._agent_tools = filing_tools(self)
        s = self.settings
        limits = AgentLimits(max_steps=s.max_steps, max_tokens=s.max_episode_tokens, max_seconds=s.max_seconds,
                             max_tool_errors=s.max_tool_errors)
        return await run_episode(model, prompts.agent_messages(q.question), self._agent_tools, limits, self.params,
                                 lenient=s.calls == "lenient")

    # --- grading ------------------------------------------------------------------------------------

    def grade(self, sample: Sample, prediction: Any) -> Grade:
        """The grade of a prediction: the rules, or the rules combined with the stored judge reply."""
        q = self.question(sample)
        answer = prediction.get("answer") if isinstance(prediction, Mapping) else prediction
        rules = grade_rules(q.question, q.answer, answer or "", question_type=q.question_type)
        if self.settings.grader == "judge" and isinstance(prediction, Mapping) and prediction.get("judge") is not None:
            return combine(rules, read_judge_verdict(prediction["judge"]))
        if self.settings.grader == "judge":
            return combine(rules, None)
        return rules

    def score(self, sample: Sample, prediction: Any) -> Score:
        grade = self.grade(sample, prediction)
        values = {"incorrect": float(grade.label == "incorrect"), "refusal": float(grade.label == "refusal"),
                  "sure_correct": float(grade.label == "correct" and grade.decided), "guessed": float(not grade.decided)}
        episode = prediction.get("episode") if isinstance(prediction, Mapping) else None
        if episode:
            values.update(episode_values(episode))
        return Score(value=float(grade.label == "correct"), values=values, extracted=grade.label, rule=grade.rule,
                     parsed=True, explanation=grade.detail)

    def prediction_row(self, record: SampleRecord) -> dict[str, Any]:
        """One row of `finharness score`'s JSON: the release's id and the grade."""
        score = record.score
        return {"financebench_id": record.id, "grade": None if score is None else score.extracted,
                "rule": None if score is None else score.rule}

    def read_prediction(self, obj: Mapping[str, Any]) -> tuple[str, Any] | None:
        """A line of a predictions file in the release's layout (financebench_id, model_answer); None: not it."""
        if "financebench_id" in obj and "model_answer" in obj:
            return str(obj["financebench_id"]), "" if obj["model_answer"] is None else str(obj["model_answer"])
        return None

    def aggregate(self, samples: Sequence[Sample], records: Sequence[SampleRecord]) -> Aggregate:
        scored = [r for r in records if r.score is not None]
        metrics = mean_metrics([r.score for r in scored], counts=[k for r in scored for k in r.score.values
                                                                  if k.startswith("agent.") and k != "agent.gave_up"])
        groups = {name: grouped(((str(r.metadata.get(name)), r.score) for r in scored))
                  for name in ("question_type", "question_reasoning", "numeric")}
        notes = []
        if self._absent:
            left_out = sum(1 for q in self._questions.values() if q.doc_name in self._absent)
            notes.append(f"{len(self._absent)} cited filings are not in the data root, so {left_out} questions on them "
                         f"are left out: {', '.join(self._absent)} (`finharness data pull financebench` fetches them)")
        refused = sum(1 for r in records if r.failed and "does not fit" in r.failed)
        if refused:
            notes.append(f"{refused} of {len(records)} questions do not fit the model's window in {self.settings.mode} "
                         "mode and are failed, not graded (-o fit=cut cuts the filing instead, as the release did)")
        grades = Counter(r.score.extracted for r in scored)
        rules = Counter(r.score.rule for r in scored)
        notes.append(f"grader {self.settings.grader}: " + ", ".join(f"{k} {v}" for k, v in sorted(grades.items()))
                     + " (by rule: " + ", ".join(f"{k} {v}" for k, v in rules.most_common()) + ")")
        extra: dict[str, Any] = {"grades": dict(grades), "rules": dict(rules), "absent_documents": self._absent,
                                 "paper_mode": PAPER_MODES.get(self.settings.mode)}
        if self.settings.mode == "agent":
            extra["agent"] = agent_summary(r.prediction for r in scored)
        return Aggregate(metrics=metrics, groups=groups, notes=notes, extra=extra, flags=guess_flags(scored))

    def plan_notes(self) -> list[str]:
        if self.settings.mode != "agent":
            return []
        return [f"agent episodes are planned at their step limit ({self.settings.max_steps} calls each, each prompt "
                "growing by a stand-in reply): a bound, a run stops at the first answer"]

    def close(self) -> None:
        if self._agent_tools is not None:
            for tool in self._agent_tools:
                getattr(tool, "close", lambda: None)()


def judge_max_tokens() -> int:
    from .grading import JUDGE_MAX_TOKENS

    return JUDGE_MAX_TOKENS


def read_answers(path: Path, known: set[str]) -> dict[str, str]:
    """financebench_id -> model_answer of an answers file (the release's results layout)."""
    answers: dict[str, str] = {}
    for line, obj in iter_jsonl(path):
        if "financebench_id" not in obj or "model_answer" not in obj:
            raise DataError('each line needs "financebench_id" and "model_answer" (the release\'s results layout)',
                            path=path, line=line)
        qid = str(obj["financebench_id"])
        if qid not in known:
            raise DataError(f"financebench_id {qid!r} is not a question of the open sample", path=path, line=line)
        if qid in answers:
            raise DataError(f"duplicate financebench_id {qid!r}", path=path, line=line)
        answers[qid] = "" if obj["model_answer"] is None else str(obj["model_answer"])
    return answers


def episode_values(episode: Mapping[str, Any]) -> dict[str, float]:
    """An episode's per-sample numbers (Score.values)."""
    summary = episode.get("summary", {})
    values = {f"agent.{k}": float(summary.get(k, 0)) for k in
              ("steps", "tool_calls", "tool_errors", "parse_failures", "read_untagged", "tokens")}
    values["agent.gave_up"] = float(bool(summary.get("gave_up")))
    for tool, count in (summary.get("calls_by_tool") or {}).items():
        values[f"agent.calls.{tool}"] = float(count)
    return values


def agent_summary(predictions: Any) -> dict[str, Any]:
    """Over a run's episodes: how they stopped, and tool calls by tool."""
    stops: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for prediction in predictions:
        episode = prediction.get("episode") if isinstance(prediction, Mapping) else None
        if not episode:
            continue
        stops[episode.get("stop", "?")] += 1
        calls.update(episode.get("summary", {}).get("calls_by_tool") or {})
    return {"stops": dict(stops), "calls_by_tool": dict(calls)}
