"""Run directories for the rater-app tests: synthetic UCFE-style dialogues and a plain Q&A run.

Each answer states a visible quality number ("Quality: N/9"), so a test playing the rater can
decide from what the page shows, never from the model's name; model names appear nowhere in the
content, so finding one in a page can only be a leak.
"""

from __future__ import annotations

import json
from pathlib import Path

MODELS = ("secret-model-alpha", "secret-model-beta", "secret-model-gamma")
ITEMS = ("Analyst/0", "Analyst/1", "Credit_Risk_Evaluation/4")
QUALITY = {  # model -> quality shown in its answer, per item
    "secret-model-alpha": (7, 6, 9),
    "secret-model-beta": (4, 6, 8),
    "secret-model-gamma": (2, 3, 1),
}


def quality_of(text: str) -> int:
    """Read back the quality number a synthetic answer states."""
    return int(text.split("Quality: ", 1)[1].split("/", 1)[0])


def write_dialogue_run(root: Path, model: str) -> Path:
    """A `finharness run ucfe`-shaped directory for `model` (results.json + samples.jsonl)."""
    run = root / model.replace("secret-model-", "run-")
    run.mkdir(parents=True, exist_ok=True)
    (run / "results.json").write_text(json.dumps({"task": "ucfe", "model": model}), encoding="utf-8")
    lines = []
    for index, sid in enumerate(ITEMS):
        task, item_id = sid.split("/")
        quality = QUALITY[model][index]
        dialogue = [
            {"role": "user", "content": f"I run a small fund. Is the {task.replace('_', ' ')} of item {item_id} "
                                        "sound? <script>alert('x')</script>"},
            {"role": "assistant", "content": f"Here is my assessment of the cash-flow ratios.\nQuality: {quality}/9"},
            {"role": "user", "content": "Thanks. Consultation Ended"},
        ]
        lines.append({"id": sid, "prompt": None, "response": None,
                      "prediction": {"dialogue": dialogue, "rounds": 1, "ended_by_simulator": True},
                      "metadata": {"task": task, "item_id": int(item_id), "setting": "multi_turn"}})
    (run / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return run


def write_qa_run(root: Path, model: str, answers: dict[str, str], task: str = "fintradebench") -> Path:
    """A question-answer run: prompt messages in the trace, the answer text in `response`."""
    run = root / f"qa-{model.replace('secret-model-', '')}"
    run.mkdir(parents=True, exist_ok=True)
    (run / "results.json").write_text(json.dumps({"task": task, "model": model}), encoding="utf-8")
    lines = [{"id": sid, "prompt": [{"role": "system", "content": "You are a financial analyst."},
                                    {"role": "user", "content": f"Question {sid}: what drove NVDA's margin?"}],
              "response": text, "prediction": text, "metadata": {}} for sid, text in answers.items()]
    lines.append({"id": "failed-1", "prompt": None, "response": None, "prediction": None, "failed": "http: 500",
                  "metadata": {}})
    (run / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return run
