"""UCFE: user-centred financial dialogues with a simulated user, compared in pairs by an LLM judge.

The task lives in `.task` (UCFETask), dialogue simulation in `.dialogue`, official prompt texts in
`.prompts`, pairwise judging in `.judge` and its command in `.cli`; nothing is imported here so that
the CLI starts fast.
"""
