"""The harness's official prompts, text for text, against the official code of each release.

The release scripts lie in ../shared/data/{fintradebench,ucfe,cfinbench}/release/ (see ../shared/data/README.md).
They import cloud SDKs, so they are never imported: `ast` reads them, and a small interpreter below evaluates
only their string-building code (constants, f-strings, `+`, `.format`, `.join`, dict and list literals and
comprehensions, and the few statements around them), so each comparison is with the string the release itself
would build -- not with a copy of it. A change on either side fails a test here.

Compared:
- FinTradeBench: the six TELeR templates of both pipelines (generate_benchmark_responses.py: ideal RAG;
  run_snowflake_rag_pipeline.py: standard RAG), their prompt ids and order, the prompts as each pipeline
  renders them (including the 'No RAG' bare question and the 'MARKET DATA:' context prefix), both
  self-selection prompts with their candidate lists, the selection temperature, the judge's system prompt and
  full user message of evaluate_rag_pipeline.py (candidate block, 4,000-character cut, mode labels), and the 18
  golden prompts of tests/golden/fintradebench_prompts.json.
- UCFE: the follow-up templates of run_ckpt.py, the round they switch at, the message built from them, the end
  marker and the round limit; the judge prompt of eval_elo.py as its own code builds it for real items
  (position swap included), through the harness's official judging mode; the sampling settings of
  user_simulator.py.
- CFinBench: `_p` of every type, category and config (zero- and few-shot), the category mapping, the zero- and
  few-shot generation prompts and the zero-shot PPL strings as OpenCompass assembles them.

Not compared, because the harness has no counterpart: evaluate_llm_as_judge.py's LLM_AS_JUDGE_PROMPT_TEMPLATE
and SYSTEM_PROMPT, and generate_benchmark_responses.py's AUDITOR_PROMPT_TEMPLATE (the harness's numerical audit is
deterministic, construction/audit.py), and the few-shot PPL config of CFinBench (the harness's 'll' method is 0-shot).
Two drifts this found were fixed in the harness: CFinBench's few-shot example separator and the zero-shot PPL
string's literal backslash-n.
"""

from __future__ import annotations

import ast
import asyncio
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.cfinbench.categories import OFFICIAL_CATEGORIES
from finharness.benchmarks.cfinbench.prompts import (
    ANSWER_CUE,
    EXAMPLE_ANSWER_CUE,
    SHOTS,
    instruction,
    loglikelihood_context,
    loglikelihood_continuation,
    official_loglikelihood_string,
    three_shot_prompt,
    zero_shot_prompt,
)
from finharness.benchmarks.fintradebench import judge as ftb_judge
from finharness.benchmarks.fintradebench import prompts as ftb
from finharness.benchmarks.ucfe import prompts as ucfe
from finharness.benchmarks.ucfe.data import load_dialogues, load_items
from finharness.benchmarks.ucfe.dialogue import SimulationSettings
from finharness.benchmarks.ucfe.judge import JudgeSettings, PairJudge

from ..fakes import fake_models

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


# --- reading the release: ast and a string-only interpreter ---------------------------------------------------

class Unsupported(Exception):
    """The interpreter met code it does not evaluate (an API call, I/O, ...)."""


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


_BUILTINS: Mapping[str, Callable[..., Any]] = {
    "str": str, "len": len, "enumerate": enumerate, "zip": zip, "range": range, "list": list,
    "print": lambda *args, **kwargs: None,
}
_METHODS: Mapping[type, frozenset[str]] = {
    str: frozenset({"format", "join", "strip", "replace", "split", "lower", "startswith"}),
    dict: frozenset({"get", "items", "keys", "values"}),
    list: frozenset({"append"}),
}
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Gt: lambda a, b: a > b,
            ast.GtE: lambda a, b: a >= b, ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
            ast.In: lambda a, b: a in b}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Mod: lambda a, b: a % b, ast.Sub: lambda a, b: a - b}


class Release:
    """One release file, parsed; evaluates its string-building code (never imports or executes the module)."""

    def __init__(self, path: Path, stubs: Mapping[str, Callable[..., Any]] | None = None) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.stubs = dict(stubs or {})
        self.functions = {node.name: node for node in ast.walk(self.tree) if isinstance(node, ast.FunctionDef)}
        self.constants: dict[str, Any] = {}
        for node in self.tree.body:  # module-level assignments that are plain data
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    self.constants[node.targets[0].id] = self.ev(node.value, dict(self.constants))
                except (Unsupported, KeyError, TypeError, AttributeError, IndexError):
                    pass

    # expressions
    def ev(self, node: ast.AST, env: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in self.constants:
                return self.constants[node.id]
            raise Unsupported(f"name {node.id}")
        if isinstance(node, ast.JoinedStr):
            return "".join(self.ev(value, env) for value in node.values)
        if isinstance(node, ast.FormattedValue):
            value = self.ev(node.value, env)
            value = {-1: value, ord("s"): str(value), ord("r"): repr(value), ord("a"): ascii(value)}[node.conversion]
            return format(value, self.ev(node.format_spec, env) if node.format_spec else "")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](self.ev(node.left, env), self.ev(node.right, env))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return _COMPARE[type(node.ops[0])](self.ev(node.left, env), self.ev(node.comparators[0], env))
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {self.ev(k, env): self.ev(v, env) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.List):
            return [self.ev(item, env) for item in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.ev(item, env) for item in node.elts)
        if isinstance(node, ast.Subscript):
            return self.ev(node.value, env)[self.ev(node.slice, env)]
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if part is None else self.ev(part, env) for part in parts))
        if isinstance(node, (ast.ListComp, ast.DictComp)) and len(node.generators) == 1:
            return self._comprehension(node, env)
        if isinstance(node, ast.Call):
            return self._call(node, env)
        raise Unsupported(ast.dump(node)[:120])

    def _comprehension(self, node: ast.ListComp | ast.DictComp, env: dict[str, Any]) -> Any:
        generator = node.generators[0]
        items = []
        for value in self.ev(generator.iter, env):
            inner = dict(env)
            self._bind(generator.target, value, inner)
            if all(self.ev(condition, inner) for condition in generator.ifs):
                items.append((self.ev(node.key, inner), self.ev(node.value, inner)) if isinstance(node, ast.DictComp)
                             else self.ev(node.elt, inner))
        return dict(items) if isinstance(node, ast.DictComp) else items

    def _call(self, node: ast.Call, env: dict[str, Any]) -> Any:
        args = [self.ev(arg, env) for arg in node.args]
        kwargs = {kw.arg: self.ev(kw.value, env) for kw in node.keywords if kw.arg is not None}
        if isinstance(node.func, ast.Attribute):
            obj = self.ev(node.func.value, env)
            if node.func.attr not in _METHODS.get(type(obj), ()):
                raise Unsupported(f"method {type(obj).__name__}.{node.func.attr}")
            return getattr(obj, node.func.attr)(*args, **kwargs)
        if isinstance(node.func, ast.Name):
            name = node.func.id
            if name in self.stubs:
                return self.stubs[name](*args, **kwargs)
            if name in self.functions:
                return self.call(name, *args)
            if name in _BUILTINS:
                return _BUILTINS[name](*args, **kwargs)
        raise Unsupported(f"call {ast.unparse(node.func)}")

    # statements
    def _bind(self, target: ast.AST, value: Any, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = list(value)
            if len(values) != len(target.elts):
                raise Unsupported("unpacking length")
            for element, item in zip(target.elts, values):
                self._bind(element, item, env)
        else:
            raise Unsupported(f"target {ast.dump(target)[:60]}")

    def execute(self, statements: list[ast.stmt], env: dict[str, Any]) -> None:
        for statement in statements:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                self._bind(statement.targets[0], self.ev(statement.value, env), env)
            elif isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                env[statement.target.id] = _BINOPS[type(statement.op)](env[statement.target.id],
                                                                       self.ev(statement.value, env))
            elif isinstance(statement, ast.If):
                self.execute(statement.body if self.ev(statement.test, env) else statement.orelse, env)
            elif isinstance(statement, ast.For):
                for value in self.ev(statement.iter, env):
                    self._bind(statement.target, value, env)
                    self.execute(statement.body, env)
            elif isinstance(statement, ast.Expr):
                if not isinstance(statement.value, ast.Constant):  # a docstring is skipped
                    self.ev(statement.value, env)
            elif isinstance(statement, ast.Return):
                raise _Return(None if statement.value is None else self.ev(statement.value, env))
            elif not isinstance(statement, ast.Pass):
                raise Unsupported(type(statement).__name__)

    def call(self, name: str, *args: Any) -> Any:
        """Interpret a release function on positional arguments (defaults of the rest)."""
        func = self.functions[name]
        params = func.args.args
        env: dict[str, Any] = {}
        defaults = dict(zip([p.arg for p in params][len(params) - len(func.args.defaults):], func.args.defaults))
        for index, param in enumerate(params):
            env[param.arg] = args[index] if index < len(args) else self.ev(defaults[param.arg], {})
        try:
            self.execute(func.body, env)
        except _Return as returned:
            return returned.value
        return None

    def run_until_unsupported(self, name: str, env: dict[str, Any]) -> dict[str, Any]:
        """Run a function's statements in `env` until the first one the interpreter does not evaluate."""
        for statement in self.functions[name].body:
            try:
                self.execute([statement], env)
            except Unsupported:
                break
        return env

    # lookups
    def assignment(self, function: str | None, target: str) -> ast.expr:
        """The value of the only `target = ...` in `function` (None: anywhere in the file)."""
        scope = self.tree if function is None else self.functions[function]
        found = [node.value for node in ast.walk(scope)
                 if isinstance(node, ast.Assign) and len(node.targets) == 1
                 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == target]
        assert len(found) == 1, f"{self.path.name}:{function}: {len(found)} assignments to {target}"
        return found[0]

    def evaluate_assignments(self, function: str, targets: list[str], env: dict[str, Any]) -> dict[str, Any]:
        for target in targets:
            env[target] = self.ev(self.assignment(function, target), env)
        return env

    def calls(self, function: str, callee: str) -> list[ast.Call]:
        return [node for node in ast.walk(self.functions[function]) if isinstance(node, ast.Call)
                and ast.unparse(node.func).split(".")[-1] == callee]


@lru_cache(maxsize=None)
def _release(path: Path) -> Release:
    return Release(path)


@pytest.fixture(scope="module")
def ftb_release(shared_data) -> Callable[[str], Release]:
    return lambda name: _release(shared_data / "fintradebench" / "release" / name)


GBR = "generate_benchmark_responses.py"
SNOWFLAKE = "run_snowflake_rag_pipeline.py"
JUDGE = "evaluate_rag_pipeline.py"

QUESTION = "As of August 2025, is {Apple} a good buy given its RSI and Return on Equity?"
"""Braces in the question check that neither side formats the question twice."""


def release_ideal_prompt(gbr: Release, level: str, question: str, trading: str, fundamental: str) -> str:
    """process_question_model_pair: context_str, then `template.format(...)` for the level's template."""
    if level == ftb.BARE:
        return question  # run_generation_task(model, q_text, project_id): the 'No RAG' candidate
    env = {"q_text": question, "trading_context_str": trading, "fundamental_context_str": fundamental,
           "template": gbr.constants["PROMPTS_TO_EVALUATE"][ftb.IDEAL_PROMPT_IDS[level]]}
    return gbr.evaluate_assignments("process_question_model_pair", ["context_str", "rag_prompt"], env)["rag_prompt"]


def release_rag_prompt(snowflake: Release, level: str, question: str, combined_text: str) -> str:
    """process_single_question_snowflake: full_context_str, then `template.format(...)`."""
    env = {"query": question, "combined_text": combined_text,
           "template": snowflake.constants["PROMPTS_TO_EVALUATE"][ftb.RETRIEVAL_PROMPT_IDS[level]]}
    return snowflake.evaluate_assignments("process_single_question_snowflake", ["full_context_str", "user_prompt"],
                                          env)["user_prompt"]


# --- FinTradeBench: TELeR templates ----------------------------------------------------------------------------

def test_ideal_teler_templates_are_the_release_text(ftb_release):
    official = ftb_release(GBR).constants["PROMPTS_TO_EVALUATE"]
    assert list(official) == [ftb.IDEAL_PROMPT_IDS[level] for level in ftb.LEVELS]  # ids and order
    for level in ftb.LEVELS:
        assert ftb.IDEAL_PROMPTS[level] == official[ftb.IDEAL_PROMPT_IDS[level]], level


def test_retrieval_teler_templates_are_the_release_text(ftb_release):
    official = ftb_release(SNOWFLAKE).constants["PROMPTS_TO_EVALUATE"]
    assert list(official) == [ftb.RETRIEVAL_PROMPT_IDS[level] for level in ftb.LEVELS]
    for level in ftb.LEVELS:
        assert ftb.RETRIEVAL_PROMPTS[level] == official[ftb.RETRIEVAL_PROMPT_IDS[level]], level
    # norag takes L1-L4: none of them has a place for the retrieved evidence
    assert all("{context_str}" not in official[ftb.RETRIEVAL_PROMPT_IDS[level]]
               for level in ftb.LEVELS if level not in ftb.EVIDENCE_LEVELS)
    assert all("{context_str}" in official[ftb.RETRIEVAL_PROMPT_IDS[level]] for level in ftb.EVIDENCE_LEVELS)


@pytest.mark.parametrize("level", ftb.LEVELS + (ftb.BARE,))
def test_ideal_prompts_render_as_the_release_renders_them(ftb_release, level):
    trading, fundamental = "[AAPL] Trading signals\n- RSI=55.1", "[AAPL] Fundamentals\n  * F_Return on Equity: 1.5"
    assert ftb.render("ideal", level, QUESTION, trading_context=trading, fundamental_context=fundamental) == \
        release_ideal_prompt(ftb_release(GBR), level, QUESTION, trading, fundamental)


def test_the_bare_candidate_is_the_question_alone(ftb_release):
    gbr = ftb_release(GBR)
    generations = gbr.calls("process_question_model_pair", "run_generation_task")
    bare = [call for call in generations if ast.unparse(call.args[1]) == "q_text"]
    assert len(bare) == 1, "the release sends the question alone once (the 'No RAG' candidate)"
    no_rag = [node for node in ast.walk(gbr.functions["process_question_model_pair"]) if isinstance(node, ast.Dict)
              and any(isinstance(k, ast.Constant) and k.value == "prompt_id" for k in node.keys)
              and any(isinstance(v, ast.Constant) and v.value == ftb.IDEAL_PROMPT_IDS[ftb.BARE] for v in node.values)]
    assert len(no_rag) == 1
    assert ftb.render("ideal", ftb.BARE, QUESTION) == QUESTION == ftb.render("norag", ftb.BARE, QUESTION)


@pytest.mark.parametrize("level", ftb.LEVELS)
def test_retrieval_prompts_render_as_the_release_renders_them(ftb_release, level):
    evidence = "AAPL:SEC:2025-08-01 Net sales rose 10%.\nAAPL:PRICE:2025-08-29 close 232.14"
    assert ftb.render("rag", level, QUESTION, context=evidence) == \
        release_rag_prompt(ftb_release(SNOWFLAKE), level, QUESTION, evidence)
    assert ftb.RAG_CONTEXT_PREFIX == ftb_release(SNOWFLAKE).ev(
        ftb_release(SNOWFLAKE).assignment("process_single_question_snowflake", "full_context_str").left, {})
    if level not in ftb.EVIDENCE_LEVELS:  # norag: the same text, whatever was retrieved
        assert ftb.render("norag", level, QUESTION) == release_rag_prompt(ftb_release(SNOWFLAKE), level, QUESTION, "")


# --- FinTradeBench: self-selection ------------------------------------------------------------------------------

def _candidates(mode: str) -> list[ftb.Candidate]:
    ids = ftb.prompt_ids(mode)
    levels = list(ftb.LEVELS) + ([ftb.BARE] if mode == "ideal" else [])
    return [ftb.Candidate(level, ids[level], f"Answer {{{level}}}\nwith two lines") for level in levels]


def test_ideal_self_selection_prompt_is_the_release_prompt(ftb_release):
    gbr = ftb_release(GBR)
    assert ftb.IDEAL_SELECTION_PROMPT == gbr.constants["SELF_SELECTION_PROMPT_TEMPLATE"]
    candidates = _candidates("ideal")
    env = {"question": QUESTION, "candidates": [{"prompt_id": c.prompt_id, "response": c.response} for c in candidates]}
    gbr.evaluate_assignments("run_self_selection_task", ["candidate_answers_str", "selection_prompt"], env)
    assert ftb.selection_prompt("ideal", QUESTION, candidates) == env["selection_prompt"]
    (call,) = gbr.calls("run_self_selection_task", "get_model_response_universal")
    temperature = next(kw.value for kw in call.keywords if kw.arg == "temperature")
    assert ftb.IDEAL_SELECTION_TEMPERATURE == gbr.ev(temperature, {})


def test_retrieval_self_selection_prompt_is_the_release_prompt(ftb_release):
    snowflake = ftb_release(SNOWFLAKE)
    assert ftb.RETRIEVAL_SELECTION_PROMPT == snowflake.constants["SELF_SELECTION_PROMPT"]
    candidates = _candidates("rag")
    env = {"query": QUESTION, "candidates": [{"prompt_id": c.prompt_id, "response": c.response} for c in candidates]}
    snowflake.evaluate_assignments("process_single_question_snowflake", ["cand_str", "select_prompt"], env)
    for mode in ("rag", "norag"):
        assert ftb.selection_prompt(mode, QUESTION, candidates) == env["select_prompt"]


def test_the_selection_example_id_is_the_release_example():
    """The neutral style (ours) starts from these prompts; what it replaces must be in the release text."""
    assert ftb.selection_example("ideal") == ("TELER_L3_Step_By_Step", "L3")
    assert ftb.selection_example("rag") == ("L3_Step_By_Step", "L3")


# --- FinTradeBench: the golden prompt snapshots ----------------------------------------------------------------

GOLDEN_FTB = json.loads((GOLDEN / "fintradebench_prompts.json").read_text(encoding="utf-8"))["cases"]


def test_all_18_golden_prompts_are_tied_to_the_release():
    assert len(GOLDEN_FTB) == 18
    assert sorted((c["mode"], c["level"]) for c in GOLDEN_FTB) == sorted(
        [("norag", lv) for lv in ("L1", "L2", "L3", "L4", "bare")] + [("rag", lv) for lv in ftb.LEVELS]
        + [("ideal", lv) for lv in ftb.LEVELS + ("bare",)])


@pytest.mark.parametrize("case", GOLDEN_FTB, ids=lambda c: f"{c['mode']}-{c['level']}")
def test_golden_prompt_is_what_the_release_builds(ftb_release, case):
    if case["mode"] == "ideal" or case["level"] == ftb.BARE:
        official = release_ideal_prompt(ftb_release(GBR), case["level"], case["question"], case["trading_context"],
                                        case["fundamental_context"])
    else:  # rag, and norag (L1-L4 of the same pipeline, which carry no evidence)
        official = release_rag_prompt(ftb_release(SNOWFLAKE), case["level"], case["question"], case["context"])
    assert case["prompt"] == official


# --- FinTradeBench: the judge of evaluate_rag_pipeline.py ------------------------------------------------------

def _release_judge_prompt(judge: Release, *, question: str, golden: str, gold_answer: str, answer: str, model: str,
                          mode_label: str, trading: str, fundamental: str) -> str:
    """process_batch for a batch of one candidate, run by the interpreter up to the API call."""
    env = {"question_id": "Q1", "client": None,
           "gt_data": {"golden_indicators": golden, "gold_answer": gold_answer, "trading_context": trading,
                       "fun_context": fundamental},
           "batch_rows": [{"final_answer": answer, "model": model, "mode": mode_label, "question": question}]}
    return judge.run_until_unsupported("process_batch", env)["prompt"]


@pytest.mark.parametrize("answer_length", [200, 5000])
def test_judge_messages_are_the_release_messages(ftb_release, answer_length):
    judge = ftb_release(JUDGE)
    assert ftb_judge.JUDGE_SYSTEM_PROMPT == judge.constants["SYSTEM_PROMPT"]
    assert ftb_judge.JUDGE_PROMPT == judge.constants["BATCH_JUDGE_PROMPT"]
    answer = ("Apple {looks} fairly valued. " * 200)[:answer_length]
    system, user = ftb_judge.judge_messages(question=QUESTION, golden=["RSI", "Return on Equity"],
                                            gold_answer="Neutral.", answer=answer, model="qwen2.5", mode="rag",
                                            trading_context="RSI=55", fundamental_context="ROE=1.5")
    assert (system.role, system.content) == ("system", judge.constants["SYSTEM_PROMPT"])
    assert user.role == "user"
    assert user.content == _release_judge_prompt(judge, question=QUESTION, golden="RSI|Return on Equity",
                                                 gold_answer="Neutral.", answer=answer, model="qwen2.5",
                                                 mode_label="RAG", trading="RSI=55", fundamental="ROE=1.5")
    assert ("...[TRUNCATED]" in user.content) == (answer_length > ftb_judge.ANSWER_CHARS)


def test_judge_mode_labels_are_the_release_labels(ftb_release):
    loads = ftb_release(JUDGE).calls("main", "load_candidate_files")
    labels = {call.args[1].value for call in loads}
    assert labels == {"RAG", "Non_RAG"}
    assert (ftb_judge.MODE_LABELS["rag"], ftb_judge.MODE_LABELS["norag"]) == ("RAG", "Non_RAG")


# --- UCFE -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ucfe_release(shared_data) -> Path:
    return shared_data / "ucfe" / "release"


def _round_switch(run_ckpt: Release) -> ast.If:
    (switch,) = [node for node in ast.walk(run_ckpt.functions["test_gpt"]) if isinstance(node, ast.If)
                 and any(isinstance(t, ast.Name) and t.id == "prompt_template"
                         for s in node.body if isinstance(s, ast.Assign) for t in s.targets)]
    return switch


def test_ucfe_follow_up_templates_are_the_release_text(ucfe_release):
    run_ckpt = _release(ucfe_release / "run_ckpt.py")
    switch = _round_switch(run_ckpt)
    assert ast.unparse(switch.test) == f"round >= {ucfe.END_INSTRUCTION_FROM_ROUND}"
    (late,), (early,) = switch.body, switch.orelse
    assert ucfe.FOLLOW_UP_END == run_ckpt.ev(late.value, {})
    assert ucfe.FOLLOW_UP_CONTINUE == run_ckpt.ev(early.value, {})
    reply = "Here is {my} analysis."
    for round_number in (1, 2, 3, 9):
        env = {"res": reply, "round": round_number}
        run_ckpt.execute([switch], env)
        official = run_ckpt.ev(run_ckpt.assignment("test_gpt", "combined_response"), env)
        assert ucfe.follow_up_message(reply, round_number) == official, round_number


def test_ucfe_end_marker_and_round_limit_are_the_release_ones(ucfe_release):
    run_ckpt = _release(ucfe_release / "run_ckpt.py")
    (check,) = [node for node in ast.walk(run_ckpt.functions["test_gpt"]) if isinstance(node, ast.Compare)
                and isinstance(node.ops[0], ast.In) and ast.unparse(node.comparators[0]) == "query"]
    assert check.left.value == ucfe.END_MARKER
    turn_num = run_ckpt.ev(run_ckpt.assignment("test_gpt", "turn_num"), {})
    (loop,) = [node for node in ast.walk(run_ckpt.functions["test_gpt"]) if isinstance(node, ast.For)
               and ast.unparse(node.target) == "round"]
    assert len(run_ckpt.ev(loop.iter, {"turn_num": turn_num})) == SimulationSettings().max_rounds


def test_ucfe_sampling_settings_are_the_release_ones(ucfe_release):
    simulator = _release(ucfe_release / "user_simulator.py")

    classes = {c.name: c for c in simulator.tree.body if isinstance(c, ast.ClassDef)}

    def parameters(cls: str) -> dict[str, str]:
        (node,) = [n.value for n in ast.walk(classes[cls])
                   if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "parameters"]
        return {k.value: ast.unparse(v) for k, v in zip(node.keys, node.values)}

    person, test = parameters("GPTPerson"), parameters("GPTTest")
    settings = SimulationSettings()
    assert float(test["temperature"]) == settings.model_temperature
    assert int(person["seed"]) == int(test["seed"]) == settings.seed
    assert float(person["frequency_penalty"]) == float(test["frequency_penalty"]) == settings.frequency_penalty
    assert float(person["presence_penalty"]) == float(test["presence_penalty"]) == settings.presence_penalty
    # GPTPerson: temperature 0.7 unless given; initial_response asks 0.1
    assert person["temperature"] == "temperature"
    (default,) = [n for n in ast.walk(classes["GPTPerson"]) if isinstance(n, ast.IfExp)]
    assert float(ast.unparse(default.orelse)) == settings.user_temperature
    (first,) = simulator.calls("initial_response", "call_api_timelimit")
    assert float(ast.unparse(first.keywords[0].value)) == settings.user_first_temperature


def _release_judge_prompts(eval_elo_path: Path, item_raw: dict, task: str, target: list, base: list) -> list[str]:
    """eval_elo.py's evaluate_two_models for one item, run by the interpreter: the prompts it sends the judge."""
    sent: list[str] = []
    eval_elo = Release(eval_elo_path, stubs={
        "response": lambda message: sent.append(message) or "[[1]]",
        "compute_score": lambda *args: ((1000.0, 1000.0), [0, 0, 0])})
    env = {"target_model_result": {task: [{"dialogue": target}]}, "base_model_result": {task: [{"dialogue": base}]},
           "datasource": {task: [item_raw]}, "previous_elo_scores": {}, "win_loss_record": {},
           "target_model_name": "target", "base_model_name": "base", "process_count": 1, "win_loss_path": ""}
    eval_elo.run_until_unsupported("evaluate_two_models", env)  # stops at the process pool
    for task_data in env["task_data_list"]:
        eval_elo.call("evaluate_task", task_data)
    return sent


@pytest.mark.parametrize("task", ["Analyst", "0_股价预测"])
def test_ucfe_official_judge_prompt_is_what_eval_elo_sends(ucfe_release, shared_data, task, tmp_path):
    bench = shared_data / "ucfe" / "UCFE_bench.json"
    raw = json.loads(bench.read_text(encoding="utf-8"))[task]
    items = {item.item_id: item for item in load_items(bench, [task])}
    log_path = shared_data / "ucfe" / "log" / "20241005_143552_gpt-4o_eng.json"
    released = load_dialogues(log_path)  # the harness reads the log its way, the release side reads the raw JSON
    log = {obj["id"]: obj["dialogue"] for obj in json.loads(log_path.read_text("utf-8"))[task]}
    checked = set()
    for item_raw in raw[:4]:  # ids of both parities
        item = items[item_raw["id"]]
        target_turns = log[item.item_id]  # RUN_A, eval_elo's target: the released GPT-4o dialogue
        base_turns = [{"role": "用户", "content": " A {short} question. "}, {"role": "AI助手", "content": "A reply. "}]
        official = _release_judge_prompts(ucfe_release / "eval_elo.py", item_raw, task, target_turns, base_turns)
        stored_a = released.dialogues[item.sample_id]
        stored_b = type(stored_a)(tuple({"role": "user" if t["role"] == "用户" else "assistant", "content": t["content"]}
                                        for t in base_turns), 1)
        judge = fake_models(tmp_path / str(item.item_id), judge=FakeBackend(name="judge", reply="[[1]]"))["judge"]
        pair = PairJudge(judge, JudgeSettings(mode="official"), name_a="target", name_b="base")
        asyncio.run(pair.judge_item(item, stored_a, stored_b))
        sent = [request.messages for request in judge.backend.requests]
        assert all(len(m) == 1 and m[0].role == "user" for m in sent), item.sample_id
        assert [m[0].content for m in sent] == official, item.sample_id
        checked.add(item.item_id % 2)
    assert checked == {0, 1}


# --- CFinBench --------------------------------------------------------------------------------------------------

CONFIGS = {  # file -> (shots, method)
    "zero_shot/cfinbench_gen_5775b0.py": (0, "gen"), "zero_shot/cfinbench_gen_fce092.py": (0, "gen"),
    "zero_shot/cfinbench_ppl_a33d20.py": (0, "ppl"), "few_shot/cfinbench_gen_4f637b.py": (3, "gen"),
    "few_shot/cfinbench_gen_83b0e7.py": (3, "gen"), "few_shot/cfinbench_ppl_303a7b.py": (3, "ppl"),
}
QUESTION_ZH = "下列{说法}正确的是（ ）。\nA. 甲\nB. 乙\nC. 丙\nD. 丁"
EXAMPLES = [("例一（ ）。\nA. 一\nB. 二\nC. 三\nD. 四", "B"), ("例二（ ）。\nA. 一\nB. 二\nC. 三\nD. 四", "A"),
            ("例三（ ）。\nA. 一\nB. 二\nC. 三\nD. 四", "C")]


@pytest.fixture(scope="module")
def cfin_config(shared_data) -> Callable[[str], Release]:
    root = shared_data / "cfinbench" / "release" / "configs" / "datasets" / "CFinBench"
    return lambda name: _release(root / name)


def _keyword(config: Release, owner: str, name: str) -> ast.expr:
    """The `name=` argument of the `dict(...)` passed as `owner=` (e.g. prompt_template -> template)."""
    found = [kw.value for node in ast.walk(config.tree) if isinstance(node, ast.keyword) and node.arg == owner
             and isinstance(node.value, ast.Call) for kw in node.value.keywords if kw.arg == name]
    assert len(found) == 1, f"{config.path.name}: {owner}.{name}"
    return found[0]


def _human_prompt(config: Release) -> ast.expr:
    (found,) = [kw.value for node in ast.walk(config.tree) if isinstance(node, ast.Call)
                and any(k.arg == "role" and getattr(k.value, "value", None) == "HUMAN" for k in node.keywords)
                for kw in node.keywords if kw.arg == "prompt"]
    return found


def _official_p(config: Release, question_type_zh: str, category: str) -> str:
    """`_p = prompts[_type].format(mapping[_split])`, evaluated from the config's own loop."""
    return config.ev(config.assignment(None, "_p"), {"_type": question_type_zh, "_split": category})


def _types(config: Release) -> list[tuple[str, str, list[str]]]:
    """(type in Chinese, folder name, categories) of every question type the config evaluates."""
    zh2en = config.constants["zh2en"]
    return [(zh, zh2en[zh], categories) for zh, categories in config.constants["splits_with_type"].items()]


def _safe_format(template: str, **fields: str) -> str:
    """OpenCompass's safe_format: replace each `{key}` given, leave every other brace alone."""
    for key, value in fields.items():
        template = template.replace("{" + key + "}", value)
    return template


def test_cfinbench_configs_cover_every_type_and_shot(cfin_config):
    seen = {(shots, method, en) for name, (shots, method) in CONFIGS.items() for _, en, _ in _types(cfin_config(name))}
    assert seen == {(s, "gen", t) for s in (0, 3) for t in ("single_choice", "multi_choice", "judgment")} | {
        (0, "ppl", "single_choice"), (3, "ppl", "single_choice")}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cfinbench_category_names_are_the_release_mapping(cfin_config, name):
    mapping = cfin_config(name).constants["mapping"]
    assert mapping == {cid: zh for cid, (zh, _) in OFFICIAL_CATEGORIES.items()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cfinbench_p_templates_are_the_release_text(cfin_config, name):
    """`_p` for every type and all 43 categories, zero-shot and few-shot (the few-shot note's place included)."""
    config = cfin_config(name)
    shots, _ = CONFIGS[name]
    compared = 0
    for zh, en, categories in _types(config):
        assert len(categories) == 43
        for category in categories:
            official = _official_p(config, zh, category)
            assert instruction(en, OFFICIAL_CATEGORIES[category][0], few_shot=shots > 0) == official, (en, category)
            compared += 1
    assert compared == 43 * len(_types(config))


@pytest.mark.parametrize("name", [n for n, (s, m) in CONFIGS.items() if (s, m) == (0, "gen")])
def test_cfinbench_zero_shot_prompt_is_the_release_prompt(cfin_config, name):
    config = cfin_config(name)
    for zh, en, categories in _types(config):
        for category in categories:
            _p = _official_p(config, zh, category)
            official = _safe_format(config.ev(_human_prompt(config), {"_p": _p}), text=QUESTION_ZH)
            assert zero_shot_prompt(en, OFFICIAL_CATEGORIES[category][0], QUESTION_ZH) == official, (en, category)


@pytest.mark.parametrize("name", [n for n, (s, m) in CONFIGS.items() if (s, m) == (3, "gen")])
def test_cfinbench_few_shot_templates_are_the_release_templates(cfin_config, name):
    """The pieces: the example template, the prompt template around the examples, and dev items 0, 1, 2."""
    config = cfin_config(name)
    assert config.ev(_keyword(config, "ice_template", "template"), {}) == "{text}" + EXAMPLE_ANSWER_CUE + "{Answer}"
    assert config.ev(_keyword(config, "prompt_template", "template"), {"_p": "<P>"}) == \
        "<P>\n</E>\n{text}" + ANSWER_CUE + "{Answer}"
    assert config.ev(_keyword(config, "prompt_template", "ice_token"), {}) == "</E>"
    assert config.ev(_keyword(config, "retriever", "fix_id_list"), {}) == list(range(SHOTS))


def _opencompass_few_shot(config: Release, _p: str, question: str, examples: list[tuple[str, str]]) -> str:
    """How OpenCompass (the CFinBench-Eval fork @ 9364f1b) assembles a FixKRetriever + GenInferencer prompt:
    BaseRetriever.generate_ice joins the examples, each `ice_template` filled by safe_format, with
    ice_separator '\\n' and appends ice_eos_token '\\n' (FixKRetriever's defaults); PromptTemplate.generate_item
    puts that in place of '</E>' and fills the item, with the output column {Answer} replaced by ''."""
    ice_template = config.ev(_keyword(config, "ice_template", "template"), {})
    ice = "\n".join(_safe_format(ice_template, text=text, Answer=answer) for text, answer in examples) + "\n"
    template = config.ev(_keyword(config, "prompt_template", "template"), {"_p": _p})
    return _safe_format(template.replace("</E>", ice), text=question, Answer="")


@pytest.mark.parametrize("name", [n for n, (s, m) in CONFIGS.items() if (s, m) == (3, "gen")])
def test_cfinbench_few_shot_prompt_is_the_release_prompt(cfin_config, name):
    config = cfin_config(name)
    for zh, en, categories in _types(config):
        category = categories[0]
        official = _opencompass_few_shot(config, _official_p(config, zh, category), QUESTION_ZH, EXAMPLES)
        assert three_shot_prompt(en, OFFICIAL_CATEGORIES[category][0], QUESTION_ZH, EXAMPLES) == official


def _official_ppl(config: Release, _p: str, question: str) -> dict[str, str]:
    """cfinbench_ppl_a33d20.py: `text1 = '{text}\\n答案: '`, template {X: rf'{_p}\\n{text1}{X}'}, item filled."""
    env = {"_p": _p, "text1": config.ev(config.assignment(None, "text1"), {})}
    templates = config.ev(_keyword(config, "prompt_template", "template"), env)
    return {letter: _safe_format(template, text=question) for letter, template in templates.items()}


def test_cfinbench_zero_shot_ppl_template_is_raw(cfin_config):
    """What the release's PPL template is: a raw f-string, so '\\n' after `_p` stays two characters."""
    config = cfin_config("zero_shot/cfinbench_ppl_a33d20.py")
    official = _official_ppl(config, "<P>", "<Q>")
    assert official == {x: "<P>\\n<Q>\n答案: " + x for x in "ABCD"}


def test_cfinbench_zero_shot_ppl_strings_are_the_release_strings(cfin_config):
    config = cfin_config("zero_shot/cfinbench_ppl_a33d20.py")
    for zh, en, categories in _types(config):
        for category in categories:
            name_zh = OFFICIAL_CATEGORIES[category][0]
            official = _official_ppl(config, _official_p(config, zh, category), QUESTION_ZH)
            for letter, text in official.items():
                assert official_loglikelihood_string(en, name_zh, QUESTION_ZH, letter) == text
                assert loglikelihood_context(en, name_zh, QUESTION_ZH) + loglikelihood_continuation(letter) == text
