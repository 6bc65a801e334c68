"""Where UCFE's datasets come from: one Spec per dataset (data/source_spec.py says each field), read by
tools/make_sources.py, which hashes a local copy of the official data into sources.json beside this file (the
entries `finharness data` lists and pulls). Never imported at run time."""

from __future__ import annotations

from ...data.source_spec import UNCONFIRMED, Rule, Spec

DATASETS: tuple[Spec, ...] = (
    Spec(
        name="ucfe",
        description="UCFE: 17 user-centred financial tasks, 330 items, with the official run settings.",
        repository="TobyYang7/UCFE-Benchmark", commit="6f6e54f", licence="Apache-2.0",
        layout="UCFE_bench.json: {task: [{role_prompt, model_prompt, information, needs, evaluation_prompt, "
               "evaluation_hints, id}]}; tasks starting with 0_ are single-turn; config/*.json: run settings "
               "(keys empty)",
        local_dir="ucfe/", include=r"UCFE_bench\.json|config/.*|LICENSE\.txt",
        rules=(Rule(r"UCFE_bench\.json|config/.*", r"\g<0>"),
               Rule(r"LICENSE\.txt", r"\g<0>", UNCONFIRMED)),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",
               "LICENSE.txt is not in the index of the repository"),
    ),

    Spec(
        name="ucfe-gpt4o-dialogues",
        description="The released GPT-4o dialogues for all 330 UCFE items.",
        repository="TobyYang7/UCFE-Benchmark", commit="6f6e54f", licence="Apache-2.0",
        layout="log/DATE_TIME_gpt-4o_eng.json: {task: [{the UCFE_bench.json fields, dialogue: [{role: 用户|AI助手, "
               "content}], dialogue_round, model, total_tokens}]}",
        local_dir="ucfe/", include=r"log/.*",
        rules=(Rule(r"log/.*", r"\g<0>"),),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
    ),

    Spec(
        name="ucfe-release",
        description="UCFE's official code that holds its prompts and rating (follow-up templates, judge, Elo).",
        repository="TobyYang7/UCFE-Benchmark", commit="6f6e54f", licence="Apache-2.0",
        layout="run_ckpt.py (simulation loop, follow-up templates), eval_elo.py (judge call, Elo), "
               "user_simulator.py; read as data by the prompt regression tests, never imported",
        local_dir="ucfe/", include=r"release/.*",
        rules=(Rule(r"release/(run_ckpt|eval_elo)\.py", r"\1.py"),
               Rule(r"release/user_simulator\.py", r"utils/user_simulator.py")),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
    ),
)
