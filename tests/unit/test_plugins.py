"""Tasks and backends from outside the package (issue 20, item 6; src/finharness/plugins.py): a task as
`FILE.py:Class`, tasks and backends by entry point (groups `finharness.tasks`, `finharness.backends`),
the built-ins through the same door, `finharness list` saying where each came from, and the run key
covering code the harness does not ship.

Entry points are tested without installing anything: a temporary folder on sys.path holds a module and
a `*.dist-info` with METADATA and entry_points.txt, which importlib.metadata finds like an installed
distribution."""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends import from_spec
from finharness.backends.fake import FakeBackend
from finharness.benchmarks.registry import (
    SOURCE_KEY,
    available_tasks,
    build_task,
    resolve_task,
    task_class,
)
from finharness.core.backend import SpecError
from finharness.core.hashing import content_key
from finharness.core.results import RunConfig
from finharness.core.runner import run_task
from finharness.core.store import RunStore
from finharness.plugins import PluginError, split_file_spec

TASK_FILE = '''\
from dataclasses import dataclass

from finharness.core.task import Task
from finharness.core.types import Message, Sample, Score


class Helper:
    pass


@dataclass(frozen=True)
class TinyOptions:
    reply_words: int = 1
    """Words of reply."""


class TinyTask(Task):
    name = "tiny"
    description = "two questions"
    Options = TinyOptions

    def load(self, data_dir):
        return [Sample(id=f"t/{i}", input={"q": f"question {i}"}, target="A") for i in range(2)]

    async def solve(self, sample, models):
        return (await models.model.chat([Message("user", sample.input["q"])])).text

    def score(self, sample, prediction):
        return Score(value=float("A" in prediction))
'''


@pytest.fixture
def forget_modules():
    """Modules a test imports from its temporary folders are dropped afterwards (each test writes its own)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("finharness_file_", "acme_", "other_")):
            del sys.modules[name]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def fake_distribution(root: Path, name: str, version: str, entry_points: dict[str, dict[str, str]],
                      modules: dict[str, str] | None = None) -> Path:
    """A distribution importlib.metadata sees once `root` is on sys.path (monkeypatch.syspath_prepend)."""
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    write(info / "METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    write(info / "entry_points.txt", "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n" for group, eps in entry_points.items()))
    for module, text in (modules or {}).items():
        write(root / f"{module}.py", text)
    return root


# --- a task from a file ---------------------------------------------------------------------------------------

def test_a_file_task_resolves_with_its_source_and_content_hash(tmp_path, forget_modules):
    path = write(tmp_path / "tiny_task.py", TASK_FILE)
    ref = resolve_task(f"{path}:TinyTask")
    assert ref.cls.__name__ == "TinyTask" and ref.name == ref.label == "tiny"
    assert ref.source.kind == "file" and str(ref.source) == str(path)
    assert ref.fingerprint == {"file_sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "attr": "TinyTask"}
    assert ref.locator == f"{path.resolve()}:TinyTask"
    # without a class: the one Task subclass the file defines (Helper and the imported Task do not count)
    assert resolve_task(str(path)).cls is ref.cls
    task = build_task(ref, {"reply_words": 2})
    assert task.run_config() == {"reply_words": 2, SOURCE_KEY: dict(ref.fingerprint)}
    factory = pickle.loads(pickle.dumps(ref.factory({"reply_words": 2})))  # as a Ray worker gets it
    assert factory().run_config() == task.run_config()  # the worker's run key is the driver's


def test_the_run_key_follows_the_file_content_not_its_path(tmp_path, forget_modules):
    first = write(tmp_path / "a" / "tiny_task.py", TASK_FILE)
    moved = write(tmp_path / "b" / "elsewhere.py", TASK_FILE)
    edited = write(tmp_path / "c" / "tiny_task.py", TASK_FILE + "\n# a comment changes the code's fingerprint\n")

    def key(path: Path) -> str:
        task = build_task(resolve_task(f"{path}:TinyTask"), {})
        return content_key(RunConfig(task=task.name, task_config=dict(task.run_config()), models={}).to_json())

    assert key(first) == key(moved)
    assert key(first) != key(edited)


def test_a_file_task_runs_and_resumes(tmp_path, forget_modules):
    path = write(tmp_path / "tiny_task.py", TASK_FILE)
    task = build_task(resolve_task(f"{path}:TinyTask"), {})
    store = RunStore(tmp_path / "store.sqlite")
    try:
        first = asyncio.run(run_task(task, {"model": FakeBackend(reply="A")}, store, out_dir=None))
        again = asyncio.run(run_task(task, {"model": FakeBackend(reply="A")}, store, out_dir=None))
    finally:
        store.close()
    assert first.results["metrics"]["accuracy"]["value"] == 1.0 and first.counters.calls == 2
    assert again.results["run_key"] == first.results["run_key"] and again.counters.calls == 0
    assert first.results["config"]["task_config"][SOURCE_KEY]["attr"] == "TinyTask"


def test_a_class_without_a_name_is_named_after_itself(tmp_path, forget_modules):
    path = write(tmp_path / "nameless.py", TASK_FILE.replace('    name = "tiny"\n', ""))
    assert resolve_task(f"{path}:TinyTask").name == "TinyTask"


@pytest.mark.parametrize("spec,expected", [
    ("my_task.py:MyTask", (Path("my_task.py"), "MyTask")),
    ("dir/my_task.py", (Path("dir/my_task.py"), None)),
    (r"C:\tasks\my_task.py:MyTask", (Path(r"C:\tasks\my_task.py"), "MyTask")),
    ("bizbench/finknow", (Path("bizbench/finknow"), None)),
])
def test_file_specs_split_on_the_last_colon(spec, expected):
    assert split_file_spec(spec) == expected


def test_file_errors_name_the_file_and_what_is_wrong(tmp_path, forget_modules):
    with pytest.raises(PluginError, match=r"nope\.py: no such file"):
        resolve_task(f"{tmp_path / 'nope.py'}:X")
    path = write(tmp_path / "tiny_task.py", TASK_FILE)
    with pytest.raises(PluginError, match=r"tiny_task\.py: no 'Missing' in this file; its Task classes: TinyTask"):
        resolve_task(f"{path}:Missing")
    with pytest.raises(PluginError, match=r"tiny_task\.py:Helper is not a subclass of finharness\.core\.task\.Task"):
        resolve_task(f"{path}:Helper")
    two = write(tmp_path / "two.py", TASK_FILE + "\n\nclass Other(TinyTask):\n    name = 'other'\n")
    with pytest.raises(PluginError, match=r"two\.py: say which class to use, as .*two\.py:CLASS \(it defines Other, TinyTask\)"):
        resolve_task(str(two))
    broken = write(tmp_path / "broken.py", "import json\n\nVALUE = json.loads('{not json')\n")
    with pytest.raises(PluginError, match=r"broken\.py:3: JSONDecodeError while loading the file"):
        resolve_task(f"{broken}:X")
    syntax = write(tmp_path / "syntax.py", "x = 1\ndef f(:\n")
    with pytest.raises(PluginError, match=r"syntax\.py:2: SyntaxError"):
        resolve_task(f"{syntax}:X")


def test_the_cli_runs_a_file_task_and_reports_its_errors(tmp_path, forget_modules, monkeypatch):
    from finharness.cli import app

    path = write(tmp_path / "tiny_task.py", TASK_FILE)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", f"{path}:TinyTask", "demo", "--model", "fake?reply=A", "-q"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "tiny_demo__fake_reply_A" / "tiny" / "results.json").exists()
    result = CliRunner().invoke(app, ["run", f"{path}:Missing", "--model", "fake", "-q"])
    assert result.exit_code == 2 and "no 'Missing' in this file" in result.output
    result = CliRunner().invoke(app, ["run", "nosuchtask", "--model", "fake", "-q"])
    assert result.exit_code == 2 and "unknown task 'nosuchtask'" in result.output and "file.py" not in result.output


# --- entry points ---------------------------------------------------------------------------------------------

ACME = TASK_FILE.replace('name = "tiny"', 'name = "acme/tiny"') + '''

def make_backend(spec):
    from finharness.backends.fake import FakeBackend

    return FakeBackend(spec, reply="Answer: A", name="acme:" + spec)
'''


def test_an_entry_point_task_and_backend(tmp_path, monkeypatch, forget_modules):
    root = fake_distribution(tmp_path, "acme-evals", "1.2", {
        "finharness.tasks": {"acme-tiny": "acme_tasks:TinyTask"},
        "finharness.backends": {"acme": "acme_tasks:make_backend"}}, {"acme_tasks": ACME})
    monkeypatch.syspath_prepend(str(root))
    ref = resolve_task("acme-tiny")
    assert ref.name == "acme/tiny" and ref.label == "acme-tiny" and ref.locator == "acme-tiny"
    assert str(ref.source) == "entry point (acme-evals 1.2)"
    assert ref.fingerprint == {"entry_point": "acme_tasks:TinyTask", "distribution": "acme-evals 1.2",
                               "module_sha256": hashlib.sha256((root / "acme_tasks.py").read_bytes()).hexdigest()}
    assert build_task(ref, {}).run_config()[SOURCE_KEY] == ref.fingerprint
    backend = from_spec("acme?temperature=0")
    assert isinstance(backend, FakeBackend) and backend.identity()["name"] == "acme:acme?temperature=0"
    with pytest.raises(SpecError, match=r"scheme 'nosuch' is not one of acme, anthropic, embedded"):
        from_spec("nosuch:model")


def test_built_ins_win_and_duplicates_and_broken_entry_points_are_named(tmp_path, monkeypatch, forget_modules):
    one = fake_distribution(tmp_path / "one", "acme-one", "1.0", {
        "finharness.tasks": {"demo": "acme_one:TinyTask", "twice": "acme_one:TinyTask",
                             "broken": "acme_missing_module:Task"},
        "finharness.backends": {"fake": "acme_one:make_backend"}}, {"acme_one": ACME})
    two = fake_distribution(tmp_path / "two", "other-two", "2.0", {"finharness.tasks": {"twice": "other_two:TinyTask"}},
                            {"other_two": ACME})
    monkeypatch.syspath_prepend(str(one))
    monkeypatch.syspath_prepend(str(two))
    assert resolve_task("demo").source.kind == "built-in" and resolve_task("demo").fingerprint is None
    assert type(from_spec("fake")) is FakeBackend and from_spec("fake").identity()["name"] == "fake"
    with pytest.raises(PluginError, match=r"'twice' is given by several .*acme-one 1\.0.*other-two 2\.0"):
        resolve_task("twice")
    with pytest.raises(PluginError, match=r"'broken' \(entry point \(acme-one 1\.0\), acme_missing_module:Task\) "
                                          r"cannot be loaded: ModuleNotFoundError"):
        resolve_task("broken")
    unused = {(p.name, p.source.detail): why for p, why in available_tasks()}
    assert unused[("demo", "")] is None and unused[("demo", "acme-one 1.0")].startswith("shadowed")
    assert unused[("twice", "acme-one 1.0")].startswith("ambiguous")


def test_list_shows_where_each_task_and_backend_comes_from(tmp_path, monkeypatch, forget_modules):
    from finharness.cli import app

    root = fake_distribution(tmp_path, "acme-evals", "1.2", {
        "finharness.tasks": {"acme-tiny": "acme_tasks:TinyTask", "broken": "acme_missing_module:Task"},
        "finharness.backends": {"acme": "acme_tasks:make_backend"}}, {"acme_tasks": ACME})
    monkeypatch.syspath_prepend(str(root))
    result = CliRunner().invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    tasks = {t["name"]: t for t in listing["tasks"]}
    assert tasks["demo"]["source"] == "built-in" and tasks["demo"]["roles"] == ["model"]
    assert tasks["acme-tiny"] == {"name": "acme-tiny", "source": "entry point (acme-evals 1.2)",
                                  "target": "acme_tasks:TinyTask", "description": "two questions", "roles": ["model"]}
    assert tasks["broken"]["error"].startswith("cannot be loaded")  # listed, not fatal
    assert listing["backends"]["fake"]["source"] == "built-in"
    assert listing["backends"]["acme"] == {"source": "entry point (acme-evals 1.2)", "target": "acme_tasks:make_backend"}
    text = CliRunner().invoke(app, ["list"]).stdout
    assert any(line.split()[:4] == ["acme-tiny", "entry", "point", "(acme-evals"] for line in text.splitlines())
    assert any(line.split()[:2] == ["demo", "built-in"] for line in text.splitlines())


def test_the_built_in_registry_goes_through_the_same_door(monkeypatch):
    from finharness.benchmarks import registry

    monkeypatch.setitem(registry.TASKS, "demo-again", "finharness.benchmarks.demo.task:DemoTask")
    ref = resolve_task("demo-again")
    assert ref.cls is task_class("demo") and str(ref.source) == "built-in" and ref.fingerprint is None
    assert build_task(ref, {}).config() == {"max_tokens": 64}  # a built-in's run key is as before
    with pytest.raises(KeyError, match="unknown task 'nope'"):
        task_class("nope")


def test_unknown_file_like_names_are_not_mistaken_for_files():
    with pytest.raises(KeyError, match=r"or a file as path/to/task\.py:ClassName"):
        resolve_task("my_task:MyTask")



ROUTED = '''
from dataclasses import dataclass

from finharness.backends.spec_options import run_only


@dataclass(frozen=True)
class SpecOptions:
    region: str = "eu"
    """Where the model runs (it answers differently in each)."""
    pool: int = run_only(4)
    """Connections kept open."""


def make_backend(spec):
    from finharness.backends.fake import FakeBackend

    return FakeBackend(spec, reply="Answer: A")
'''


def test_an_installed_backends_run_only_options_leave_its_model_name(tmp_path, monkeypatch, forget_modules):
    """model_name drops what a backend's own declaration marks run-only, and keeps what it does not; a scheme no
    backend provides is named as the built-ins would (their run-only options dropped)."""
    from finharness.backends import model_name

    root = fake_distribution(tmp_path, "acme-routed", "0.1", {
        "finharness.backends": {"acme-routed": "acme_routed:make_backend"}}, {"acme_routed": ROUTED})
    monkeypatch.syspath_prepend(str(root))
    assert model_name("acme-routed:m?region=us&pool=8") == "acme-routed:m?region=us"
    assert model_name("acme-routed:m?pool=8") == "acme-routed:m"
    assert model_name("acme-routed:m?parallel=2") == "acme-routed:m?parallel=2"  # not one of its options
    assert model_name("gone:m?parallel=2&concurrency=3&region=us") == "gone:m?region=us"
