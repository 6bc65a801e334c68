"""Tasks declared in a TOML file (benchmarks/from_data): the worked examples of docs/examples run through the CLI
on the fake model with the scores their data implies, every kind scores as documented, mistakes in a file are one
`error:` line naming the key, the file's sha256 is in the run key, and a TOML task is a suite row."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.from_data.spec import FileError, read_task_file
from finharness.benchmarks.registry import resolve_task
from finharness.core.types import Sample
from tests.fakes import fake_models

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finharness", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def results(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text(encoding="utf-8"))


def test_the_page_shows_the_example_task_file_whole():
    page = (REPO / "docs" / "write-a-task.md").read_text(encoding="utf-8")
    assert (EXAMPLES / "my_exam.toml").read_text(encoding="utf-8") in re.findall(r"```toml\n(.*?)```", page, re.S)


def test_the_exam_example_runs_with_the_share_its_answers_imply_and_resumes(tmp_path):
    questions = [json.loads(line) for line in (EXAMPLES / "my_exam.jsonl").read_text(encoding="utf-8").splitlines()]
    out = tmp_path / "run"
    args = ("run", str(EXAMPLES / "my_exam.toml"), "--data-dir", str(EXAMPLES), "--model", "fake?reply=Answer: B",
            "--out", str(out), "-q")
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    got = results(out)
    assert got["task"] == "my_exam"
    assert got["metrics"]["accuracy"]["value"] == pytest.approx(sum(q["answer"] == "B" for q in questions) / len(questions))
    assert set(got["groups"]["category"]) == {q["topic"] for q in questions}
    assert cli(*args).returncode == 0 and results(out)["counts"]["calls"] == 0  # resumed: every call stored


def test_editing_the_task_file_starts_a_new_run(tmp_path):
    copy = tmp_path / "exam.toml"
    shutil.copy(EXAMPLES / "my_exam.toml", copy)
    keys = []
    for max_tokens in ("32", "33"):
        copy.write_text(copy.read_text(encoding="utf-8").replace("max_tokens = 32", f"max_tokens = {max_tokens}")
                        .replace("max_tokens = 33", f"max_tokens = {max_tokens}"), encoding="utf-8")
        done = cli("run", str(copy), "--data-dir", str(EXAMPLES), "--model", "fake", "--out", str(tmp_path / "r"), "-q")
        assert done.returncode == 0, done.stderr
        keys.append(results(tmp_path / "r")["run_key"])
    assert keys[0] != keys[1]


def test_the_numeric_example_reads_finance_numbers_and_weighs_its_categories(tmp_path):
    out = tmp_path / "ratios"
    done = cli("run", str(EXAMPLES / "ratios.toml"), "--data-dir", str(EXAMPLES), "--model",
               "fake?reply=So the ratio is 1.5x. The answer is 1.50.", "--out", str(out), "-q")
    assert done.returncode == 0, done.stderr
    got = results(out)
    assert got["metrics"]["accuracy"]["n"] == 5  # the test split only (the dev row is the few-shot example)
    assert got["metrics"]["accuracy"]["value"] == pytest.approx(0.2)  # only the current ratio is 1.5
    # industrials (3 rows, one right) weigh 2, banks and retail 1: (2/3 * 1/3 + 0 + 0) / 4 ... as the file says
    by_sector = {k: v["accuracy"]["value"] for k, v in got["groups"]["category"].items()}
    assert by_sector == {"banks": 0.0, "industrials": pytest.approx(1 / 3), "retail": 0.0}
    assert got["metrics"]["weighted_macro.accuracy"]["value"] == pytest.approx((2 * (1 / 3)) / 4)
    first = json.loads((out / "samples.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert [m["role"] for m in first["prompt"]] == ["system", "user", "assistant", "user"]  # one few-shot example
    assert first["prompt"][2]["content"] == "The answer is 35."  # [prompt] answer over the CSV's own text


def test_a_few_shot_reply_is_the_record_s_answer_as_written_unless_a_template_says_otherwise(tmp_path):
    plain = write(tmp_path, BASE.replace('path = "ratios.csv"', 'path = "ratios.csv"\nsplit = "test"\n'
                                         'fewshot_split = "dev"').replace("[prompt]", "[prompt]\nfewshot = 1"))
    templated = write(tmp_path, plain.read_text(encoding="utf-8").replace(
        "fewshot = 1", 'fewshot = 1\nanswer = "{{ answer }} percent, as {{ question[:7] }} says"'), "templated.toml")
    replies = []
    for path in (plain, templated):
        task = resolve_task(str(path)).make({})
        samples = task.load(EXAMPLES)
        replies.append(task.messages(samples[0])[1].content)
    assert replies == ["35", "35 percent, as Revenue says"]  # the CSV's '35', not the parsed 35.0


def test_the_open_example_is_graded_by_the_judge(tmp_path):
    done = cli("run", str(EXAMPLES / "memo.toml"), "--data-dir", str(EXAMPLES), "--model", "fake?reply=an answer",
               "--judge", "fake?name=j&reply=Grade: 3", "--out", str(tmp_path / "memo"), "-q")
    assert done.returncode == 0, done.stderr
    got = results(tmp_path / "memo")
    assert got["metrics"]["accuracy"]["value"] == 0.0 and got["metrics"]["grade"]["value"] == pytest.approx(0.6)
    needs = cli("run", str(EXAMPLES / "memo.toml"), "--data-dir", str(EXAMPLES), "--model", "fake",
                "--out", str(tmp_path / "nojudge"), "-q")
    assert needs.returncode == 2 and "judge" in needs.stderr


def write(tmp_path: Path, text: str, name: str = "task.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


BASE = '''name = "t"
kind = "numeric"
[data]
path = "ratios.csv"
[fields]
question = "question"
answer = "answer"
[prompt]
template = "{{ question }}"
'''


@pytest.mark.parametrize("change, names", [
    (lambda t: t.replace('kind = "numeric"', 'kind = "essay"'), "kind"),
    (lambda t: t.replace("[prompt]", "[prompt]\ntemperature = 1"), "[prompt]: unknown key 'temperature'"),
    (lambda t: t.replace('answer = "answer"\n', ""), "[fields] answer"),
    (lambda t: t.replace("{{ question }}", "{{ questoin }}"), "[prompt] template"),
    (lambda t: t + "[scoring]\ntolerance = 2\n", "[scoring] tolerance"),
    (lambda t: t + "[scoring]\nmethod = \"ll\"\n", "[scoring] method"),
    (lambda t: t.replace('path = "ratios.csv"', 'hub = "me/data"\nfile = "x.parquet"\nrevision = "main"'),
     "[data] revision"),
    (lambda t: t.replace('[prompt]', '[prompt]\nfewshot = 2'), "[prompt] fewshot"),
    (lambda t: t.replace('name = "t"', 'name = "1 bad"'), "name"),
    (lambda t: t.replace("[prompt]", '[prompt]\nanswer = "{{ answer }}"'), "[prompt] answer: is the few-shot"),
    (lambda t: t.replace('path = "ratios.csv"', 'path = "ratios.csv"\nfewshot_split = "dev"').replace(
        "[prompt]", '[prompt]\nfewshot = 1\nanswer = "{{ reply }}"'), "[prompt] answer: uses {{ reply }}"),
    (lambda t: t + "[weights]\nbanks = 2\n", "[weights]"),
])
def test_a_mistake_is_one_error_line_naming_the_key(tmp_path, change, names):
    path = write(tmp_path, change(BASE))
    with pytest.raises(FileError) as info:
        read_task_file(path)
    assert names in str(info.value) and str(path) in str(info.value)
    done = cli("run", str(path), "--data-dir", str(EXAMPLES), "--model", "fake")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:") and names in lines[0]


def test_a_record_without_a_field_names_the_data_file_and_line(tmp_path):
    path = write(tmp_path, BASE.replace('question = "question"', 'question = "prompt"'))
    done = cli("run", str(path), "--data-dir", str(EXAMPLES), "--model", "fake")
    assert done.returncode == 2 and "ratios.csv:2" in done.stderr and "'prompt'" in done.stderr


def _task(tmp_path: Path, text: str, **options):
    ref = resolve_task(str(write(tmp_path, text)))
    return ref.make(options)


def test_multiple_choice_by_log_likelihood_and_answers_given_as_text(tmp_path):
    (tmp_path / "q.jsonl").write_text(json.dumps({"q": "2+2?", "opts": ["3", "4", "5"], "gold": "4"}) + "\n",
                                      encoding="utf-8")
    task = _task(tmp_path, '''name = "mc"
kind = "multiple_choice"
[data]
path = "q.jsonl"
[fields]
question = "q"
options = "opts"
answer = "gold"
[prompt]
template = "{{ question }}\\n{{ options }}"
[scoring]
method = "ll"
''')
    (sample,) = task.load(tmp_path)
    assert sample.target == "B"  # the option's text, read as its letter
    request = task.ll_request(sample)
    assert request.context == "2+2?\nA. 3\nB. 4\nC. 5\nAnswer:" and request.continuations == (" A", " B", " C")
    fake = FakeBackend(logprob=lambda context, continuation: 0.0 if continuation == " B" else -5.0, name="ll")
    import asyncio

    prediction = asyncio.run(task.solve(sample, fake_models(tmp_path, model=fake)))
    assert task.score(sample, prediction).value == 1.0


def test_span_and_code_kinds(tmp_path):
    span = _task(tmp_path, BASE.replace('kind = "numeric"', 'kind = "span"') + '[scoring]\nmatch = "f1"\n')
    sample = Sample("s", {"question": "?"}, "the net interest margin")
    assert span.score(sample, "Net interest margin.").value == 1.0
    assert span.score(sample, "interest margin").value == pytest.approx(0.8)
    code = _task(tmp_path, BASE.replace('kind = "numeric"', 'kind = "code"'))
    target = Sample("c", {"question": "?"}, 0.35)
    good = {"reply": "```python\n(1200 - 780) / 1200\n```", "run": {"rule": "fenced", "status": "ok", "value": 0.35}}
    assert code.score(target, good).value == 1.0
    assert code.score(target, {"reply": "no code", "run": {"rule": "unparseable"}}).parsed is False


def test_numeric_scale_and_percent(tmp_path):
    millions = _task(tmp_path, BASE + '[scoring]\nscale = "million"\n')
    assert millions.score(Sample("n", {"question": "?"}, 1577.0), "It was $1.577 billion.").value == 1.0
    percent = _task(tmp_path, BASE + "[scoring]\npercent = true\n")
    assert percent.score(Sample("p", {"question": "?"}, 22.22), "The margin is 0.2222.").value == 1.0


def test_a_task_file_is_a_suite_row(tmp_path):
    suite = write(tmp_path, f'''name = "mine"
[[task]]
id = "exam"
benchmark = "Mine"
task = "{EXAMPLES / 'my_exam.toml'}"
label = "my exam"
''', "suite.toml")
    done = cli("suite", str(suite), "--model", "fake?reply=Answer: B", "--data-dir", str(EXAMPLES),
               "--out", str(tmp_path / "out"), "-q")
    assert done.returncode == 0, done.stderr
    assert "my exam" in done.stdout and "accuracy" in done.stdout


def test_without_data_dir_the_file_beside_the_task_is_found_and_a_missing_one_names_both_places(tmp_path):
    """The data root (here an empty $FINHARNESS_DATA_DIR) is looked in first, then the task file's folder."""
    import os

    shutil.copy(EXAMPLES / "ratios.csv", tmp_path / "ratios.csv")
    (tmp_path / "ratios.toml").write_text((EXAMPLES / "ratios.toml").read_text(encoding="utf-8"), encoding="utf-8")
    empty_root = tmp_path / "root"
    empty_root.mkdir()
    env = {**os.environ, "FINHARNESS_DATA_DIR": str(empty_root)}
    run = subprocess.run([sys.executable, "-m", "finharness", "run", "ratios.toml", "--model", "fake", "--out",
                          str(tmp_path / "run"), "-q"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env=env)
    assert run.returncode == 0, run.stderr
    assert results(tmp_path / "run")["metrics"]["accuracy"]["n"] > 0
    (tmp_path / "ratios.csv").unlink()
    missing = subprocess.run([sys.executable, "-m", "finharness", "run", "ratios.toml", "--model", "fake", "--out",
                              str(tmp_path / "run2")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                             env=env)
    assert missing.returncode == 2
    assert str(empty_root / "ratios.csv") in missing.stderr and str(tmp_path / "ratios.csv") in missing.stderr


@pytest.mark.parametrize("name, delimiter", [("ratios.tsv", "\t"), ("ratios.csv", ";")])
def test_a_tsv_and_a_semicolon_csv_read_as_the_comma_csv(tmp_path, name, delimiter):
    """A .tsv is tab-separated; a .csv whose header has more semicolons than commas (a spreadsheet saved in a
    locale with the decimal comma) is semicolon-separated; both give the records the comma file gives, BOM and all."""
    import csv

    with open(EXAMPLES / "ratios.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    data = tmp_path / "data"
    data.mkdir()
    with open(data / name, "w", encoding="utf-8-sig", newline="") as f:
        csv.writer(f, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    task = write(tmp_path, BASE.replace('path = "ratios.csv"', f'path = "{name}"').replace(
        'question = "question"', 'id = "id"\nquestion = "question"'))
    read = resolve_task(str(task)).make({}).load(data)
    expected = resolve_task(str(write(tmp_path, BASE.replace('question = "question"', 'id = "id"\nquestion = "question"'),
                                      "comma.toml"))).make({}).load(EXAMPLES)
    assert [(s.id, s.input, s.target) for s in read] == [(s.id, s.input, s.target) for s in expected]
    assert len(read) == len(rows) - 1 and read[1].input["question"].startswith("Current assets are $4,500 million")
