"""Every `finharness` command of README.md and docs/ runs as printed (issue 24 item 7): extracted from the pages'
code blocks (tests/e2e/doc_commands.py says how), run page by page in page order, each page in a folder of its
own (so `ucfe judge` finds the two runs before it, `report` and `compare` the runs they name), and each must exit
as its page says (0 unless the page says it stops) with no traceback.

What is changed, for every command alike (Workspace.substitute and Workspace.spec; the stand-ins: stand_ins.py):

- model specs (`--model`, `-m`, `--judge`, `--user-model`): `openai:M[@URL]` -> the same model on a local
  OpenAI-compatible server (tests/servers/fault_server.py, healthy), or on the reasoning-model stand-in
  (tests/servers/provider_stubs.py) when the spec asks for a reasoning form; `openai-completions:M@URL` -> the
  vLLM-shaped completions stand-in (tests/servers/completions_stub.py, ToyModel); `anthropic:M` -> the local
  server's Messages route; `embedded`, `embedded:1.5b` on a page about the embedded model (Page.embedded) stay
  embedded (the 1.5B runs as the 0.5B outside the `model15` marker); every other spec (embedded elsewhere,
  `vllm:`, `hf:`) -> the fake backend named after it (`fake?name=SPEC`), the judge's answering with a rubric
  verdict FinTradeBench reads and a `[[1]]` UCFE reads; `finharness demo` (the embedded model by default) is
  given that fake;
- data paths (`../shared/data`, `/data`, `~/.cache/finharness/data`) -> the page's data root, a folder that
  reads as the shared data (/work/shared/data: each dataset a link) and takes what a pull writes; it is also
  $FINHARNESS_DATA_DIR, the default data root;
- sizes: `finharness run` gets `--limit 2` where it has no size, `--limit N` / `--sample N` become 2 and
  `-o per_category=N` 1 (3 FinTradeBench questions: a paired comparison needs at least 2 items); a suite
  (`quick`, `standard`, `full`) runs as a copy of its file whose rows are cut to 1 item each;
- `--port` -> a free port; pulls go to local stand-ins of the Hub and GitHub's raw host
  (tests/servers/data_hosts.py; HF_ENDPOINT, FINHARNESS_GITHUB_RAW), which serve kensho/bizbench's files in the
  official layout and every registered GitHub file from the shared data.

Placeholders (SPEC, RUN_DIR..., FILE, DATA...) are filled from PLACEHOLDERS and each page's own table. Runs a page
names but another page makes (report.md's runs/ftb-rag, the rater app's RUN_A) are copied from that page's folder
(Page.needs), the other page run first. Commands that cannot run here are in SKIPPED, with the reason; lines of
other programs (`make`, `vllm serve`, bench scripts) in OTHER_PROGRAMS. The count test holds found = run + skipped.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlencode

import pytest

from finharness.suite.spec import bundled, bundled_suite_toml

from ..conftest import REPO
from .conftest import DOCS_SUMMARY
from .doc_commands import DocCommand, all_commands, expand_synopsis, replace_placeholders
from .stand_ins import StandIns, exam_view, invoke, shared_view

TINY = "2"
"""Items of every `finharness run` (two: `compare` needs a pair)."""

SPEC_OPTIONS = frozenset({"--model", "-m", "--judge", "--user-model"})
SPEC = re.compile(r"^(embedded|llamacpp|openai|openai-completions|anthropic|vllm|hf|fake|replay)(:|\?|$)")
REASONING_OPTIONS = frozenset({"reasoning_effort", "max_completion_tokens", "omit", "thinking_budget"})
DATA_PATHS = ("../shared/data", "~/.cache/finharness/data", "/data")
"""Where the pages put the data root; each becomes the page's data root."""
PLACEHOLDERS: Mapping[str, str] = {
    "DATA": "{root}", "DATA_DIR": "{root}", "DIR": "{root}", "DATA_ROOT": "{exam_root}", "ROOT": "{exam_root}",
    "EXAM": "{exam_root}/cfinbench", "URL": "http://127.0.0.1:8000/v1", "NAME": "ucfe", "N": TINY,
    "SPEC": "embedded:1.5b", "T1,T2": "Financial_Knowledge_Consulting",
    "FILE": "{root}/fintradebench/history_xlsx/NVDA-history.xlsx",
}
"""Placeholders of every page: a data root (one holding a CFinBench-layout exam where the page means CFinBench's
questions), the docs' own example server (then the model-spec rule applies), the dataset `ucfe`, a size, a judge,
UCFE's task, a price file."""


@dataclass(frozen=True)
class Page:
    """How one page's commands run."""

    embedded: bool = False
    """The page is about the embedded model: its embedded specs stay embedded (the rest become fakes)."""
    placeholders: Mapping[str, str | tuple[str, ...] | list[str]] = field(default_factory=dict)
    """The page's own placeholders (over PLACEHOLDERS); a tuple is several words (`RUN_DIR...`), a list one word
    per occurrence, in turn (`[RUN [RUN]]`)."""
    needs: Mapping[str, tuple[str, "str | StdoutOf"]] = field(default_factory=dict)
    """Path in this page's folder -> (another page, a path in its folder, or StdoutOf the command whose stdout it
    is)."""
    exam_root: bool = False
    """The page's default data root holds a CFinBench-layout exam (its commands read CFinBench's questions)."""
    expect: Mapping[str, Callable[[], int]] = field(default_factory=dict)
    """A fragment of one command's text -> the exit status its page says (default 0). A fragment, not a line
    number: editing the page above the command must not move the expectation off it."""
    prepare: Callable[[Path], None] | None = None
    """Puts in the page's folder what its prose says the reader has (a predictions file, the example task)."""


@dataclass(frozen=True)
class StdoutOf:
    """The stdout of the one command of a page whose text holds `fragment`."""

    fragment: str


def one_command(commands: Sequence[DocCommand], page: str, fragment: str) -> DocCommand:
    """The page's one command holding `fragment` (an assertion error naming the page when none or several do)."""
    found = [c for c in commands if c.page == page and fragment in c.text]
    assert len(found) == 1, f"{page}: {len(found)} commands hold {fragment!r} (the test names one)"
    return found[0]


def sandbox_exit() -> int:
    """sandbox.md: `run bizbench/codetatqa --model fake` runs where kernel isolation exists, else stops (exit 2)."""
    from finharness.sandbox.launch import SandboxUnavailable, resolve_kind

    try:
        resolve_kind("auto")
    except SandboxUnavailable:
        return 2
    return 0


def financebench_pull_exit() -> int:
    """financebench.md: `data pull financebench` fetches every registered file; the stand-in host serves the shared
    copy, which lacks 10 of the cited filings, so there the pull names them and stops (exit 2) after placing the rest."""
    from finharness.data.registry import get
    from tests.conftest import _shared_data_dir

    root = _shared_data_dir() / "financebench"
    return 2 if any(not (root / f.path).is_file() for f in get("financebench").files) else 0


def write_a_task_files(folder: Path) -> None:
    """The example task and its questions where the page's commands name them (`my_exam.py`, DATA_DIR), and the
    predictions file the page describes."""
    for name in ("my_exam.py", "my_exam.jsonl"):
        shutil.copy(REPO / "docs" / "examples" / name, folder / name)
    shutil.copytree(REPO / "docs" / "examples", folder / "docs" / "examples")  # the commands run from the repo root
    ids = [json.loads(line)["id"] for line in (folder / "my_exam.jsonl").read_text(encoding="utf-8").splitlines()]
    (folder / "preds.jsonl").write_text("".join(json.dumps({"id": i, "prediction": "Answer: B"}) + "\n" for i in ids),
                                        encoding="utf-8")


PAGES: Mapping[str, Page] = {
    "README.md": Page(),
    "docs/backends.md": Page(embedded=True),
    "docs/benchmarks/bizbench.md": Page(),
    "docs/benchmarks/cfinbench.md": Page(),
    "docs/benchmarks/fintradebench.md": Page(),
    "docs/benchmarks/financebench.md": Page(expect={"data pull financebench": financebench_pull_exit}),
    "docs/benchmarks/ucfe.md": Page(placeholders={"RUN_A": "runs/ucfe-0.5b", "RUN_B": "runs/ucfe-1.5b"}),
    "docs/contamination.md": Page(),
    "docs/data.md": Page(),
    "docs/engine.md": Page(placeholders={"M": "model"}),
    "docs/plan.md": Page(exam_root=True, placeholders={"RUN": ["runs/norag", "runs/rag"], "D": "0.1", "S": "0.5",
                                                        "W=N,...": "0.5=10,0.5=10", "R": "0.5", "KEY": "reasoning"},
                         needs={"runs/norag": ("README.md", "runs/norag"), "runs/rag": ("README.md", "runs/rag")}),
    "docs/rater-app.md": Page(placeholders={"RUN_A": "runs/ucfe-a", "RUN_B": "runs/ucfe-b", "RUN": "runs/norag"},
                              needs={"runs/ucfe-a": ("README.md", "runs/ucfe-a"),
                                     "runs/ucfe-b": ("README.md", "runs/ucfe-b"),
                                     "runs/norag": ("README.md", "runs/norag"),
                                     "matches.jsonl": ("README.md", "matches.jsonl")}),
    "docs/report.md": Page(placeholders={"RUN_DIR...": ("runs/demo", "runs/demo-1.5b")},
                           needs={"runs/demo": ("docs/engine.md", "runs/demo"),
                                  "runs/demo-1.5b": ("docs/backends.md", "runs/demo-1.5b"),
                                  "runs/ftb-norag": ("docs/benchmarks/fintradebench.md", "runs/ftb-norag"),
                                  "runs/ftb-rag": ("docs/benchmarks/fintradebench.md", "runs/ftb-rag"),
                                  "runs/quick": ("docs/suite.md", "runs/quick"),
                                  "M.jsonl": ("README.md", "matches.jsonl"),
                                  "R.json": ("README.md", StdoutOf("rate matches.jsonl --method bt --by task --json"))}),
    "docs/sandbox.md": Page(expect={"run bizbench/codetatqa --model fake": sandbox_exit}),
    "docs/suite.md": Page(),
    "docs/write-a-task.md": Page(placeholders={"DATA_DIR": "."}, prepare=write_a_task_files),
}
"""Every page with a `finharness` command (a new page needs a line here: the count test says so)."""

SKIPPED: Mapping[tuple[str, str], str] = {
    ("README.md", "--executor ray --address auto"):
        "--executor ray --address auto joins a running Ray cluster, and none runs here; "
        "tests/unit/test_executor_ray.py runs the executor on a local one",
    ("docs/scale-out.md", "--executor ray --address auto"): "the same command as the README's (a running Ray cluster)",
}
"""`finharness` commands that do not run here, by (PAGE, a fragment of the command), with the reason: a fragment
rather than a line number, so that editing a page above the command does not move it out of the list."""


def skip_reason(command: DocCommand) -> str | None:
    """Why `command` is not run here (its SKIPPED entry), or None."""
    return next((why for (page, fragment), why in SKIPPED.items()
                 if command.page == page and fragment in command.text), None)


OTHER_PROGRAMS: Mapping[str, str] = {
    "make demo": "the set-up this test runs after (its last step, `finharness demo`, is README.md:76)",
    "make test": "the test suite this test is part of",
    "make test-all": "the test suite with the slow and model15 tests",
    "make bench": "performance scripts, by hand only (docs/performance.md)",
    ".ci/run": "CI: make test with every skip a failure",
    "llama-server": "an outside server; the command after it runs against a local stand-in",
    "vllm": "an outside server (vllm serve); the command after it runs against a local stand-in",
    "pytest": "the reliability suite, part of make test",
    "python bench/": "a performance script, by hand only (tests/unit/test_ci_coverage.py runs a small version)",
    "python docs/examples/evaluate.py": "the Python API's example script (tests/unit/test_api.py runs it on a fake)",
    ".venv/bin/python bench/run_all.py --only": "performance measurements, by hand only",
    ".venv/bin/python bench/hf_vs_embedded.py": "a performance comparison, by hand only",
    ".venv/bin/python bench/financebench_grader.py": "FinanceBench's grade-check figures with the design / held-out "
                                                     "split, by hand (`financebench grade-check`, which runs, is the "
                                                     "same without the split)",
}
"""Lines of other programs, by how they start, and why the test does not run them (--help of bench/run_all.py
below is run)."""

RUN_OTHERS = (".venv/bin/python bench/run_all.py --help",)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_suite(name: str, folder: Path) -> Path:
    """A copy of bundled suite `name` (same name, rows, options) whose rows take 1 item each."""
    raw = tomllib.loads(bundled_suite_toml(name))
    for row in raw["task"]:
        options = dict(row.get("options", {}))
        if "per_category" in options or row.get("task") == "fintradebench":
            options["per_category"] = 1
            row.pop("sample", None), row.pop("limit", None)
        elif "sample" in row:
            row["sample"] = 1
        else:
            row["limit"] = 1
        if options:
            row["options"] = options
    path = folder / f"{name}.toml"
    path.write_text(toml_text(raw), encoding="utf-8")
    return path


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml_value, value)) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def toml_text(raw: Mapping[str, Any]) -> str:
    """A suite's TOML: top-level keys, tables, then the [[task]] rows (what suite files hold)."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in raw.items() if not isinstance(v, (dict, list))]
    for key, table in raw.items():
        if isinstance(table, dict):
            lines += ["", f"[{key}]", *(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items())]
    for row in raw.get("task", []):
        lines += ["", "[[task]]", *(f"{k} = {_toml_value(v)}" for k, v in row.items())]
    return "\n".join(lines) + "\n"


# --- substitution and running ---------------------------------------------------------------------------------


@dataclass
class Workspace:
    """One page's folder, data roots and fills."""

    page: str
    plan: Page
    folder: Path
    root: Path
    exam_root: Path
    stand_ins: StandIns
    keep_15b: bool = False
    port: int = field(default_factory=free_port)

    def placeholders(self) -> dict[str, str | tuple[str, ...] | list[str]]:
        fills = {"root": str(self.root), "exam_root": str(self.exam_root)}
        table: dict[str, str | tuple[str, ...] | list[str]] = {k: v.format(**fills) for k, v in PLACEHOLDERS.items()}
        table.update(self.plan.placeholders)
        return table

    def spec(self, spec: str, role: str) -> str:
        base, _, query = spec.partition("?")
        scheme = base.split(":", 1)[0]
        options = dict(p.split("=", 1) if "=" in p else (p, "") for p in query.split("&") if p)
        tail = f"?{query}" if query else ""
        if scheme in ("openai", "openai-completions", "anthropic"):
            model = base.split(":", 1)[1].partition("@")[0]
            url = (self.stand_ins.completions if scheme == "openai-completions" else
                   self.stand_ins.reasoning if REASONING_OPTIONS & set(options) else self.stand_ins.openai)
            return f"{scheme}:{model}@{url}{tail}"
        if scheme in ("fake", "replay"):
            return spec
        if scheme == "embedded" and self.plan.embedded:
            return spec if self.keep_15b else f"embedded{tail}"
        fake = {"name": spec} | ({"script": str(self.stand_ins.judge_script)} if role == "--judge" else {})
        return "fake?" + urlencode(fake)

    def substitute(self, command: DocCommand) -> list[str]:
        """The words after `finharness`, as this test runs them (SUBSTITUTIONS in the module docstring)."""
        table = self.placeholders()
        turns = {k: iter(v) for k, v in table.items() if isinstance(v, list)}
        words: list[str] = []
        for word in expand_synopsis(command.words)[1:]:
            whole = table.get(word)
            if isinstance(whole, tuple):
                words += whole
                continue
            if word in turns:
                words.append(next(turns[word]))
                continue
            words.append(replace_placeholders(word, {k: v for k, v in table.items() if isinstance(v, str)}))
        out: list[str] = []
        for index, word in enumerate(words):
            before = words[index - 1] if index else ""
            if before in SPEC_OPTIONS and SPEC.match(word):
                word = self.spec(word, before)
            for path in DATA_PATHS:
                if word == path or word.startswith(path + "/"):
                    word = str(self.root) + word[len(path):]
            if before == "--port":
                word = str(self.port)
            out.append(word)
        if out[:1] == ["suite"] and len(out) > 1 and out[1] in bundled():
            folder = self.stand_ins.tmp / "suites"
            path = folder / f"{out[1]}.toml"
            out[1] = str(path if path.exists() else tiny_suite(out[1], folder))
        if out[:1] == ["run"]:
            out = self._tiny_run(out)
        if out[:1] == ["demo"] and "--model" not in out and not self.plan.embedded:
            out += ["--model", self.spec("embedded", "--model")]
        return out

    @staticmethod
    def _tiny_run(words: list[str]) -> list[str]:
        sized = False
        for index, word in enumerate(words):
            before = words[index - 1] if index else ""
            if before in ("--limit", "--sample"):
                words[index], sized = TINY, True
            elif before in ("-o", "--option") and word.startswith("per_category="):
                words[index], sized = "per_category=1", True
        return words if sized else [*words, "--limit", TINY]


@dataclass
class Outcome:
    """What one command did."""

    command: DocCommand
    argv: list[str]
    exit_code: int
    expected: int
    output: str
    stdout: str
    traceback: str | None

    @property
    def passed(self) -> bool:
        return self.exit_code == self.expected and self.traceback is None

    def describe(self) -> str:
        ran = "finharness " + shlex.join(self.argv)
        why = f"exit {self.exit_code}, expected {self.expected}" if self.exit_code != self.expected else "a traceback"
        return f"{self.command}\n  ran: {ran}\n  {why}\n  output (tail): {(self.traceback or self.output)[-3000:]}"


def serve_and_rate(argv: list[str], cwd: Path, port: int, token: str) -> tuple[int, str, str | None]:
    """`finharness ui` serving (a process of its own), then the rater's part: alice signs in with her token and
    gives every pair in her queue a verdict and every rubric item scores, over the app's own routes; then Ctrl-C."""
    import signal

    import httpx

    process = subprocess.Popen([sys.executable, "-m", "finharness", *argv], cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=10, trust_env=False) as client:
            queue = _wait_for(client, process)
            assert queue["items"], "the page's load-pairs and load-rubric queued nothing for alice"
            for item in queue["items"]:
                if item["kind"] == "pair":
                    sent = client.post(f"/item/{item['id']}/verdict", data={"choice": "1"})
                else:
                    sent = client.post(f"/item/{item['id']}/rubric", data={k: "3" for k in RUBRIC_KEYS()})
                assert sent.status_code == 303, sent.text  # stored: on to the item's page
    finally:
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    tb = output if "Traceback (most recent call last)" in output else None
    return process.returncode, output, tb


def RUBRIC_KEYS() -> list[str]:  # noqa: N802 (read as a constant)
    from finharness.ui.storage import RUBRIC_DIMENSIONS

    return [key for key, _, _ in RUBRIC_DIMENSIONS]


def _wait_for(client, process) -> dict:
    """The rater's queue once the app answers (the process announces the port before uvicorn binds it)."""
    import time

    import httpx

    deadline = time.monotonic() + 120
    while True:
        try:
            response = client.get("/api/queue")
            response.raise_for_status()
            return response.json()
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"`finharness ui` did not serve (exit {process.poll()})") from None
            time.sleep(0.2)  # nothing to await: uvicorn binds the port after the command's last line


class Pages:
    """Runs pages once each (the pages they need first) and keeps what every command did."""

    def __init__(self, stand_ins: StandIns, keep_15b: bool = False):
        self.stand_ins = stand_ins
        self.keep_15b = keep_15b
        self.commands = all_commands(REPO)
        self.done: dict[str, tuple[Workspace, list[Outcome]]] = {}

    def of(self, page: str) -> list[DocCommand]:
        return [c for c in self.commands if c.page == page and c.is_finharness and skip_reason(c) is None]

    def run(self, page: str) -> list[Outcome]:
        if page in self.done:
            return self.done[page][1]
        plan = PAGES[page]
        slug = re.sub(r"[^A-Za-z0-9]+", "-", page) + ("-1.5b" if self.keep_15b else "")
        folder = self.stand_ins.tmp / slug
        folder.mkdir()
        exam_root = exam_view(folder / "exam-data")
        root = exam_root if plan.exam_root else shared_view(folder / "data")
        workspace = Workspace(page, plan, folder / "work", root, exam_root, self.stand_ins, self.keep_15b)
        workspace.folder.mkdir()
        if plan.prepare:
            plan.prepare(workspace.folder)
        for path, (other, source) in plan.needs.items():
            self._bring(workspace.folder / path, other, source)
        outcomes: list[Outcome] = []
        with pytest.MonkeyPatch.context() as env:
            env.setenv("FINHARNESS_DATA_DIR", str(root))
            for command in self.of(page):
                outcomes.append(self._run_one(workspace, command, outcomes))
        self.done[page] = (workspace, outcomes)
        return outcomes

    def _bring(self, target: Path, page: str, source: "str | StdoutOf") -> None:
        self.run(page)
        workspace, outcomes = self.done[page]
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, StdoutOf):
            command = one_command(self.commands, page, source.fragment)
            (made,) = [o for o in outcomes if o.command == command]
            target.write_text(made.stdout, encoding="utf-8")
        elif (workspace.folder / source).is_dir():
            shutil.copytree(workspace.folder / source, target)
        else:
            shutil.copy(workspace.folder / source, target)

    def _run_one(self, workspace: Workspace, command: DocCommand, before: list[Outcome]) -> Outcome:
        argv = workspace.substitute(command)
        expected = next((exit_status() for fragment, exit_status in workspace.plan.expect.items()
                         if one_command(self.commands, command.page, fragment) == command), 0)
        if argv[:1] == ["ui"] and "--port" in argv and argv[1:2] == ["--store"]:  # serves until stopped
            added = [o for o in before if o.argv[:2] == ["ui", "add-rater"]]
            token = added[-1].stdout.strip().splitlines()[-1] if added else ""
            code, output, tb = serve_and_rate(argv, workspace.folder, workspace.port, token)
            return Outcome(command, argv, code, expected, output, output, tb)
        code, output, stdout, tb = invoke(argv, workspace.folder)
        return Outcome(command, argv, code, expected, output, stdout, tb)


@pytest.fixture(scope="session")
def pages(stand_ins) -> Pages:
    return Pages(stand_ins)


def failures(outcomes: list[Outcome]) -> str:
    return "\n\n".join(o.describe() for o in outcomes if not o.passed)


@pytest.mark.parametrize("page", [pytest.param(p, marks=[pytest.mark.model] if PAGES[p].embedded else [])
                                  for p in sorted(PAGES)])
def test_every_command_of_the_page_runs_as_printed(pages: Pages, page: str):
    outcomes = pages.run(page)
    assert outcomes, f"{page} has no command left to run: drop it from PAGES"
    assert [o for o in outcomes if not o.passed] == [], failures(outcomes)


def test_other_programs_are_named_and_bench_help_runs():
    """Every line of another program is run (RUN_OTHERS) or named in OTHER_PROGRAMS with its reason."""
    others = [c for c in all_commands(REPO) if not c.is_finharness]
    unnamed = [str(c) for c in others if not c.text.startswith(RUN_OTHERS) and not any(
        re.sub(r"^(\S+=\S+\s+)*", "", c.text).startswith(prefix) for prefix in OTHER_PROGRAMS)]
    assert unnamed == [], "name each in OTHER_PROGRAMS (why it does not run here) or RUN_OTHERS"
    for text in RUN_OTHERS:
        assert any(c.text.startswith(text) for c in others), f"{text!r} is no longer in the docs"
        done = subprocess.run(shlex.split(text.replace(".venv/bin/python", sys.executable)), cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_every_command_found_is_run_or_skipped_with_a_reason(pages: Pages, request):
    found = [c for c in pages.commands if c.is_finharness]
    skipped = [c for c in found if skip_reason(c) is not None]
    unmatched = [key for key in SKIPPED if not any(c.page == key[0] and key[1] in c.text for c in found)]
    assert unmatched == [], f"SKIPPED names commands the docs no longer have: {unmatched}"
    for page, plan in PAGES.items():  # every command an expectation or a stdout names is there, once
        for fragment in plan.expect:
            one_command(found, page, fragment)
        for other, source in plan.needs.values():
            if isinstance(source, StdoutOf):
                one_command(found, other, source.fragment)
    unplanned = sorted({c.page for c in found if c not in skipped} - set(PAGES))
    assert unplanned == [], f"pages with commands but no line in PAGES: {unplanned}"
    ran = [o for page in PAGES for o in pages.run(page)]
    assert len(ran) + len(skipped) == len(found)
    passed = sum(o.passed for o in ran)
    per_page = {page: f"{sum(o.passed for o in pages.run(page))}/{len(pages.run(page))}" for page in PAGES}
    summary = (f"docs commands: {len(found)} found, {len(ran)} run, {passed} passed, {len(skipped)} skipped "
               f"({'; '.join(f'{c.where}: {skip_reason(c)}' for c in skipped)}); per page (passed/run): {per_page}")
    request.config.stash[DOCS_SUMMARY] = summary  # printed at the end of the session (tests/e2e/conftest.py)
    for outcome in ran:  # with -s: every command as run
        print(f"{'ok  ' if outcome.passed else 'FAIL'} {outcome.command.where}: finharness {shlex.join(outcome.argv)}")
    assert passed == len(ran), failures(ran)


@pytest.mark.model15
def test_the_embedded_pages_commands_on_the_1_5b_as_printed(stand_ins):
    outcomes = Pages(stand_ins, keep_15b=True).run("docs/backends.md")
    assert [o for o in outcomes if not o.passed] == [], failures(outcomes)
