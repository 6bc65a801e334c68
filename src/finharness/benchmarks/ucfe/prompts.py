"""UCFE's prompt texts, reproduced from the official code (TobyYang7/UCFE-Benchmark @ b81f1a2).

Sources (read, not copied wholesale):
- `utils/user_simulator.py`: GPTPerson formats `role_prompt` only when it holds `{information}` or
  `{needs}`; GPTTest formats `model_prompt` with whichever of the two it holds.
- `run_ckpt.py` (test_gpt): zero-shot tasks send the formatted `model_prompt` as the user turn (it is
  also the system prompt); multi-turn tasks hand each assistant reply to the simulator as
  f"{res}\\n\\n{prompt_template}", the template being a triple-quoted string indented inside the
  loop (28 spaces), asking to continue before round 3 and to reply `<Consultation Ended>` from round 3.
- `eval_elo.py`: a dialogue is `" ".join(turn["content"] for turn in dialogue)`, stripped; the judge
  prompt is `evaluation_prompt.format(information=, needs=, dialogue1=, dialogue2=,
  evaluation_hints=)`, stripped, sent as the only (user) message.
"""

from __future__ import annotations

from typing import Mapping, Sequence

END_MARKER = "Consultation Ended"
"""The simulator ends the dialogue by writing this (run_ckpt.py: `if "Consultation Ended" in query`)."""

_TEMPLATE_INDENT = " " * 28
"""The follow-up templates are triple-quoted strings whose lines sit 28 spaces deep in run_ckpt.py."""


def _indented_block(*lines: str) -> str:
    """A triple-quoted block as Python stores it: a newline, each line indented, the closing indent."""
    return "\n" + "".join(f"{_TEMPLATE_INDENT}{line}\n" for line in lines) + _TEMPLATE_INDENT


FOLLOW_UP_CONTINUE = _indented_block(
    "The information above is the AI assistant's response.",
    "Please reply based on your role setting and needs.",
    "If you have any further questions or need additional clarification, feel free to continue asking.",
)
"""Appended to the assistant's reply in rounds 1 and 2."""

FOLLOW_UP_END = _indented_block(
    "The information above is the AI assistant's response.",
    "Please reply based on your role setting and needs.",
    "If your question has been satisfactorily answered, or you have no more questions, please reply with "
    "<Consultation Ended>.",
)
"""Appended to the assistant's reply from round 3 on."""

END_INSTRUCTION_FROM_ROUND = 3
"""run_ckpt.py: `if round >= 3` switches to FOLLOW_UP_END."""

USER_OPENINGS: tuple[str, ...] = ("official", "cue")
"""How the simulator's opening message is asked for: 'official' (its system prompt alone, run_ckpt.py) or 'cue'
(ours: plus OPENING_CUE as a user turn)."""

OPENING_CUE = ("You are the user described above, not the AI assistant. Write the first message you send to the AI "
               'assistant, asking for what you need in the first person (start with "Hi, I").')
"""Ours. With the system prompt alone a small chat model continues as an assistant and answers the request it
should make (the 1.5B simulator: 20 of 20 openings); this turn says whose message comes next and how it starts
(a softer cue without the first-person start left the 1.5B a helper in 20 of 20: bench/ucfe_openings.py)."""

ROLE_LABELS: Mapping[str, str] = {"user": "User", "assistant": "AI Assistant"}
"""Labels of the role-labelled rendering (ours, both-orders mode)."""


def fill_placeholders(template: str, information: str, needs: str) -> str:
    """Format `{information}` / `{needs}` only when the template holds one, as the official classes do.

    A template with neither is left untouched (so literal braces in it survive, as officially)."""
    present = {name: value for name, value in (("information", information), ("needs", needs))
               if "{" + name + "}" in template}
    return template.format(**present) if present else template


def follow_up_message(assistant_reply: str, round_number: int) -> str:
    """What the simulator receives after the assistant's reply in round `round_number` (1-based)."""
    template = FOLLOW_UP_END if round_number >= END_INSTRUCTION_FROM_ROUND else FOLLOW_UP_CONTINUE
    return f"{assistant_reply}\n\n{template}"


def ends_dialogue(user_message: str) -> bool:
    """The simulator's message ends the consultation (substring test, as officially)."""
    return END_MARKER in user_message


def render_official(turns: Sequence[Mapping[str, str]]) -> str:
    """eval_elo.py: the turns' contents joined by single spaces, no role labels, stripped."""
    return " ".join(turn["content"] for turn in turns).strip()


def render_labelled(turns: Sequence[Mapping[str, str]]) -> str:
    """Ours: one block per turn, `User:` / `AI Assistant:` labels, blank lines between turns."""
    return "\n\n".join(f"{ROLE_LABELS[turn['role']]}: {turn['content'].strip()}" for turn in turns)


def judge_prompt(evaluation_prompt: str, *, information: str, needs: str, evaluation_hints: str,
                 dialogue1: str, dialogue2: str) -> str:
    """The judge's only message: the item's evaluation_prompt filled in, stripped (eval_elo.py)."""
    return evaluation_prompt.format(information=information, needs=needs, dialogue1=dialogue1,
                                    dialogue2=dialogue2, evaluation_hints=evaluation_hints).strip()
