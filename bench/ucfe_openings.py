"""UCFE: does the user simulator open as the user, or answer as an assistant? (by hand, not in the tests)

For N multi-turn items, the simulator's opening message under each `user_opening` style (official: its
system prompt alone; cue: prompts.OPENING_CUE as a user turn), with the official decoding of that call
(temperature 0.1, seed 123). An opening counts as assistant-voiced when it starts the way a helper does
("Sure", "Hello! I'm here to help", "Hello! How can I help", "I'd be happy", "Certainly", ...) -- a rough
rule; read the printed openings too.

    .venv/bin/python bench/ucfe_openings.py --model "embedded:1.5b" --task Financial_Knowledge_Consulting -n 20
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time

from benchlib import DATA_DIR

from finharness.backends import from_spec
from finharness.benchmarks.ucfe.data import load_items, resolve_bench_file
from finharness.benchmarks.ucfe.dialogue import SimulationSettings, user_system_prompt
from finharness.benchmarks.ucfe.prompts import OPENING_CUE, USER_OPENINGS
from finharness.core.types import GenerateParams, GenerateRequest, Message

HELPER_OPENING = re.compile(r"^\W*(sure|certainly|of course|absolutely|(hello|hi)\W*(i'?m (here|just an ai)|how can i)|"
                            r"i'?d be happy|i'?ll start|i can help|how can i (help|assist)|here is|here's)",
                            re.IGNORECASE)


def opening_messages(system: str, style: str, cue: str = OPENING_CUE) -> tuple[Message, ...]:
    return (Message("system", system),) + ((Message("user", cue),) if style == "cue" else ())


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded:1.5b")
    parser.add_argument("--task", default="Financial_Knowledge_Consulting")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--cue", default=OPENING_CUE, help="Try another cue text (default: prompts.OPENING_CUE).")
    parser.add_argument("--styles", default=",".join(USER_OPENINGS))
    args = parser.parse_args()
    items = load_items(resolve_bench_file(DATA_DIR), [args.task])[: args.n]
    settings = SimulationSettings()
    params = GenerateParams(max_tokens=args.max_tokens, temperature=settings.user_first_temperature,
                            seed=settings.seed)
    backend = from_spec(args.model)
    styles = [s for s in args.styles.split(",") if s]
    helper: dict[str, int] = {style: 0 for style in styles}
    started = time.perf_counter()
    try:
        for item in items:
            for style in styles:
                messages = opening_messages(user_system_prompt(item), style, args.cue)
                reply = await backend.generate(GenerateRequest(messages, params))
                text = reply.text.strip()
                voiced = bool(HELPER_OPENING.match(text))
                helper[style] += voiced
                print(f"{item.sample_id:40} {style:8} {'ASSISTANT' if voiced else 'user?':9} "
                      f"{text[:110].replace(chr(10), ' ')}")
    finally:
        await backend.aclose()
    for style, count in helper.items():
        print(f"{style}: {count} of {len(items)} openings assistant-voiced")
    print(f"{len(styles) * len(items)} calls, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    asyncio.run(main())
