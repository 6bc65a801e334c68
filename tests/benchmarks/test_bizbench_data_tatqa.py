"""CodeTAT-QA and TAT-QA(E) built from TAT-QA: tables, gold programs, and the real counts."""

from __future__ import annotations

import math

import pytest

from finharness.benchmarks.bizbench.tatqa import (
    ProgramError,
    build_codetatqa,
    build_tatqa_e,
    document_context,
    evaluate_gold_program,
    gold_program,
    markdown_table,
    parse_cell,
    reproduces,
    table_frame,
    tatqa_file,
)
from finharness.extract.numbers import parse_number

SALES = [["", "", "Years Ended September 30,", ""],
         ["", "2019", "2018", "2017"],
         ["Fixed Price", "$  1,452.4", "$  1,146.2", "$  1,036.9"],
         ["Other", "44.1", "56.7", "70.8"],
         ["Total sales", "$1,496.5", "$1,202.9", "$1,107.7"]]

REGIONS = [["", "2019", "2018"],
           ["Americas:", "", ""],
           ["United States", "614", "668"],
           ["Other", "(12)", "—"],
           ["EMEA:", "", ""],
           ["Other", "12%", "-"]]


@pytest.mark.parametrize("text, expected", [
    ("$ 1,234", 1234.0), ("(12)", -12.0), ("12%", 12.0), ("−1", -1.0), ("$(5,625)", -5625.0), ("(66)%", -66.0),
    ("—", None), ("-", None), ("", None), ("NM", None), ("1:1", "1:1"),
])
def test_parse_cell(text, expected):
    assert parse_cell(text) == expected


def test_table_frame_names_rows_and_columns():
    table = table_frame(SALES)
    assert list(table.frame.columns) == ["2019", "2018", "2017"]  # the spanning title names no column
    assert table.header_rows == 2
    assert table.frame.loc["Total sales", "2019"] == 1496.5
    assert table.cells[("Fixed Price", "2018")] == "$  1,146.2"


def test_table_frame_flattens_sections_into_repeated_labels():
    table = table_frame(REGIONS)
    assert list(table.frame.index) == ["United States", "Americas: Other", "EMEA: Other"]
    assert table.frame.loc["Americas: Other", "2019"] == -12.0
    assert math.isnan(table.frame.loc["Americas: Other", "2018"])
    assert ("EMEA: Other", "2019") in table.percent_cells


def test_gold_program_reads_cells_by_name():
    table = table_frame(SALES)
    program = gold_program("(44.1-56.7)/56.7", table, "What is the percentage change in Other in 2019 from 2018?",
                           times_100=True)
    assert program.code.splitlines() == ["other_2019 = df.loc['Other', '2019']",
                                         "other_2018 = df.loc['Other', '2018']",
                                         "(other_2019 - other_2018) / other_2018 * 100"]
    assert evaluate_gold_program(program.code, table.frame) == pytest.approx(-22.2222, abs=1e-3)


def test_gold_program_constants_signs_and_percent_literals():
    table = table_frame(REGIONS)
    average = gold_program("(614 + 668) / 2", table)
    assert "/ 2" in average.code and len(average.cells) == 2
    negative = gold_program("-12 - 0", table, "Americas other")  # '(12)' in the table, '-12' in the derivation
    assert evaluate_gold_program(negative.code, table.frame) == -12.0
    assert "-" not in negative.code.splitlines()[0]
    accounting = gold_program("614 + (12)", table)  # TAT-QA writes negatives as '(12)'
    assert evaluate_gold_program(accounting.code, table.frame) == 602.0
    percent = gold_program("(12% - 0) * 100", table)  # '12%' in a derivation is 0.12
    assert evaluate_gold_program(percent.code, table.frame) == pytest.approx(12.0)
    with pytest.raises(ProgramError) as info:
        gold_program("614 + 999", table)
    assert info.value.reason == "number_not_in_table"
    with pytest.raises(ProgramError) as info:
        gold_program("2019: 614", table)
    assert info.value.reason == "not_arithmetic"


def test_the_gold_evaluator_refuses_anything_but_arithmetic_and_lookups():
    table = table_frame(SALES)
    for code in ("__import__('os').system('true')\n", "x = df.loc['Other', '2019']\nx.__class__\n",
                 "open('f')\n", "x = 1\nx if x else 2\n"):
        with pytest.raises(ValueError):
            evaluate_gold_program(code, table.frame)


def test_reproduces_within_one_percent_or_at_the_gold_precision():
    assert reproduces(-22.222, -22.22) == "within_1pct"
    assert reproduces(0.0149, 0.01) == "at_precision"
    assert reproduces(0.016, 0.01) is None
    assert reproduces(math.nan, 1.0) is None


def test_context_puts_paragraphs_before_a_markdown_table():
    document = {"table": {"table": SALES}, "paragraphs": [{"order": 2, "text": "B"}, {"order": 1, "text": "A"}]}
    context = document_context(document)
    assert context.startswith("A\nB\n| ")
    assert markdown_table(SALES).splitlines()[1] == "| :--- | :--- | :--- | :--- |"


@pytest.fixture(scope="module")
def tatqa_dir(shared_data):
    return shared_data / "tatqa"


@pytest.mark.parametrize("split, candidates", [("dev", 497), ("test", 471)])
def test_codetatqa_real_counts_and_programs(tatqa_dir, split, candidates):
    build = build_codetatqa(tatqa_file(tatqa_dir, split), split)
    assert build.candidates == candidates  # arithmetic questions answered from the table
    assert len(build.items) + sum(build.dropped.values()) == candidates  # every drop is counted
    assert len(build.items) >= 0.97 * candidates
    assert len({item.id for item in build.items}) == len(build.items)
    frames = {}
    for item in build.items:
        assert item.task == "codetatqa" and item.split == split and item.program
        meta = item.metadata
        key = meta["table_uid"]
        if key not in frames:
            import pandas as pd
            frames[key] = pd.DataFrame(meta["table"]["data"], index=meta["table"]["index"],
                                       columns=meta["table"]["columns"])
        value = evaluate_gold_program(item.program, frames[key])
        assert reproduces(value, float(item.answer)) is not None, item.id
        assert "df.loc[" in item.program
        if meta["scale"]:
            assert item.question.endswith(f"({meta['scale']})")


@pytest.mark.parametrize("split", ["dev", "test"])
def test_tatqa_e_real_counts(tatqa_dir, split):
    build = build_tatqa_e(tatqa_file(tatqa_dir, split), split)
    assert len(build.items) + sum(build.dropped.values()) == build.candidates
    assert 200 <= len(build.items) <= 350
    for item in build.items:
        span = item.metadata["span"]
        assert span in item.context
        reading = parse_number(span)
        assert reading.parsed and reading.value == float(item.answer)


@pytest.mark.slow
def test_gold_programs_give_the_same_value_in_the_sandbox(tatqa_dir):
    """The restricted evaluator and the real sandbox (df passed as an input) agree."""
    import pandas as pd

    from finharness.sandbox import Sandbox

    build = build_codetatqa(tatqa_file(tatqa_dir, "test"), "test")
    with Sandbox(pool_size=1) as sandbox:
        for item in build.items[::25]:
            table = item.metadata["table"]
            frame = pd.DataFrame(table["data"], index=table["index"], columns=table["columns"])
            result = sandbox.run(item.program, inputs={"df": frame})
            assert result.ok, result.message
            assert result.value == pytest.approx(item.metadata["program_value"])


@pytest.mark.slow
def test_cli_builds_both_tasks(tatqa_dir, tmp_path):
    import json

    from typer.testing import CliRunner

    from finharness.benchmarks.bizbench.data import read_items_jsonl
    from finharness.cli import app

    result = CliRunner().invoke(app, ["data", "build", "tatqa", "--tatqa", str(tatqa_dir), "--out-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    summary = {(row["task"], row["split"]): row for row in json.loads(result.output)}
    items = read_items_jsonl(tmp_path / "codetatqa.jsonl")
    assert len(items) == summary[("codetatqa", "dev")]["kept"] + summary[("codetatqa", "test")]["kept"]
    assert {item.split for item in items} == {"dev", "test"}
    assert len(read_items_jsonl(tmp_path / "tatqa-e.jsonl", tasks=["tatqa-e"])) > 400
