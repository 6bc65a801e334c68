"""UCFE prompt texts against the official code's strings and the released GPT-4o log; data loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finharness.benchmarks.ucfe.data import load_dialogues, load_items, resolve_bench_file
from finharness.benchmarks.ucfe.dialogue import model_system_prompt, user_system_prompt
from finharness.benchmarks.ucfe.prompts import (
    FOLLOW_UP_CONTINUE,
    FOLLOW_UP_END,
    ends_dialogue,
    fill_placeholders,
    follow_up_message,
    judge_prompt,
    render_labelled,
    render_official,
)
from finharness.data.errors import DataError

LOG = "ucfe/log/20241005_143552_gpt-4o_eng.json"
INDENT = " " * 28  # run_ckpt.py: the template lines sit inside `if round >= 3:` in the round loop


@pytest.fixture(scope="module")
def items(shared_data: Path):
    return load_items(resolve_bench_file(shared_data))


@pytest.fixture(scope="module")
def gpt4o(shared_data: Path):
    return load_dialogues(shared_data / LOG)


def test_follow_up_templates_are_the_official_triple_quoted_strings():
    # Typed out literally from run_ckpt.py (test_gpt), not built the way prompts.py builds them.
    assert FOLLOW_UP_CONTINUE == (
        "\n" + INDENT + "The information above is the AI assistant's response.\n"
        + INDENT + "Please reply based on your role setting and needs.\n"
        + INDENT + "If you have any further questions or need additional clarification, feel free to continue asking.\n"
        + INDENT)
    assert FOLLOW_UP_END == (
        "\n" + INDENT + "The information above is the AI assistant's response.\n"
        + INDENT + "Please reply based on your role setting and needs.\n"
        + INDENT + "If your question has been satisfactorily answered, or you have no more questions, please reply "
                   "with <Consultation Ended>.\n"
        + INDENT)


@pytest.mark.parametrize("round_number,template", [(1, FOLLOW_UP_CONTINUE), (2, FOLLOW_UP_CONTINUE),
                                                   (3, FOLLOW_UP_END), (9, FOLLOW_UP_END)])
def test_follow_up_message_switches_at_round_three(round_number, template):
    assert follow_up_message("  the reply ", round_number) == "  the reply \n\n" + template


def test_end_marker_is_a_substring_test():
    assert ends_dialogue("<Consultation Ended>")
    assert ends_dialogue("Thanks, that helps. <Consultation Ended>")
    assert not ends_dialogue("consultation ended")  # case-sensitive, as `in` is officially


def test_placeholders_are_filled_only_when_present():
    assert fill_placeholders("info {information}; needs {needs}", "I", "N") == "info I; needs N"
    assert fill_placeholders("needs only {needs}", "I", "N") == "needs only N"
    # a template with neither placeholder is not passed through str.format: literal braces survive
    assert fill_placeholders("a {{literal}} brace", "I", "N") == "a {{literal}} brace"


def test_items_load_with_ids_and_settings(items):
    assert len(items) == 330
    assert sum(i.zero_shot for i in items) == 80
    assert len({i.task for i in items}) == 17
    assert items[0].sample_id == "Analyst/1"


def test_zero_shot_user_turn_is_the_official_one_for_every_zero_shot_item(items, gpt4o):
    zero = [i for i in items if i.zero_shot]
    for item in zero:
        stored = gpt4o.dialogues[item.sample_id]
        assert stored.rounds == 1
        assert stored.turns[0] == {"role": "user", "content": model_system_prompt(item)}


def test_role_prompt_is_formatted_with_information_and_needs(items):
    item = next(i for i in items if "{information}" in i.role_prompt)
    prompt = user_system_prompt(item)
    assert item.information in prompt and item.needs in prompt and "{needs}" not in prompt


def test_official_rendering_joins_contents_with_spaces(gpt4o):
    turns = gpt4o.dialogues["Analyst/1"].turns
    rendered = render_official(turns)
    assert rendered == " ".join(t["content"] for t in turns).strip()
    assert "AI Assistant:" not in rendered and rendered.endswith("<Consultation Ended>")


def test_labelled_rendering_marks_each_turn():
    text = render_labelled([{"role": "user", "content": "Q? "}, {"role": "assistant", "content": " A."}])
    assert text == "User: Q?\n\nAI Assistant: A."


def test_judge_prompt_fills_the_items_template(items, gpt4o):
    item = items[0]
    prompt = judge_prompt(item.evaluation_prompt, information=item.information, needs=item.needs,
                          evaluation_hints=item.evaluation_hints, dialogue1="DIALOGUE-ONE", dialogue2="DIALOGUE-TWO")
    assert prompt == item.evaluation_prompt.format(information=item.information, needs=item.needs,
                                                   dialogue1="DIALOGUE-ONE", dialogue2="DIALOGUE-TWO",
                                                   evaluation_hints=item.evaluation_hints).strip()
    assert prompt.index("DIALOGUE-ONE") < prompt.index("DIALOGUE-TWO")
    assert f"### The user's needs are: {item.needs}." in prompt
    assert prompt.startswith("## Please act as a fair judge")  # stripped
    assert prompt.endswith("[AI Assistant 2 Dialogue End]")


def test_gpt4o_log_reads_as_a_named_source(gpt4o):
    assert gpt4o.name == "gpt-4o"
    assert len(gpt4o.dialogues) == 330
    first = gpt4o.dialogues["Analyst/1"]
    assert first.rounds == 3 and [t["role"] for t in first.turns][:2] == ["user", "assistant"]


def test_unknown_task_key_names_the_file(shared_data):
    with pytest.raises(DataError, match=r"UCFE_bench.json.*unknown UCFE task\(s\) \['Nope'\]"):
        load_items(resolve_bench_file(shared_data), ["Nope"])


def test_missing_data_says_where_to_get_it(tmp_path):
    with pytest.raises(DataError, match="data pull ucfe"):
        resolve_bench_file(tmp_path)


def test_bad_item_names_file_task_and_field(tmp_path):
    path = tmp_path / "UCFE_bench.json"
    path.write_text(json.dumps({"Analyst": [{"id": 1, "role_prompt": ""}]}), encoding="utf-8")
    with pytest.raises(DataError, match=r"UCFE_bench.json: task 'Analyst', item 0: missing field"):
        load_items(path)


def test_bad_dialogue_turn_names_the_line(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps({"id": "Analyst/1", "prediction": {"dialogue": [{"role": "bot", "content": "x"}]}})
                    + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"samples.jsonl:1: sample Analyst/1: bad turn"):
        load_dialogues(path)
