"""llama.cpp prompt cache (`?prompt_cache_mb=`) on UCFE-shaped dialogues (run by hand).

    python bench/prompt_cache.py [--model embedded] [--dialogues 2] [--rounds 4] [--max-tokens 48]

One backend plays both roles of several dialogues at once, as a UCFE run with the same model as
user simulator and model under test does: round by round, each dialogue's user turn and then its
assistant turn, the dialogues interleaved. Run twice, without and with the cache, on fresh
backends; prints the prompt tokens llama.cpp evaluated, the wall time and whether every reply
matched.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from finharness.backends import embedded
from finharness.core.types import GenerateParams, GenerateRequest, Message

USER_SYSTEM = ("You are {who}, a member of the public talking to a financial adviser. Ask one short question at "
               "a time about {topic}; when your needs are met, write <Consultation Ended>.")
MODEL_SYSTEM = ("You are a careful financial adviser. Answer the client's questions about {topic} clearly, with "
                "numbers where they help, in at most three sentences.")
PEOPLE = (("a retired teacher", "bond ladders for retirement income"),
          ("a first-time investor", "index funds versus single stocks"),
          ("a small-business owner", "cash-flow planning and short-term credit"),
          ("a young engineer", "paying down a mortgage versus investing"))


def _flip(history: list[Message]) -> list[Message]:
    """The other side's view: the simulator sees the adviser's replies as user turns."""
    swap = {"user": "assistant", "assistant": "user"}
    return [Message(swap.get(m.role, m.role), m.content) for m in history]


async def run(spec: str, dialogues: int, rounds: int, max_tokens: int) -> dict:
    backend = embedded.from_spec(spec)
    llm = backend._generation_model()
    evaluated = [0]
    real_eval = llm.eval

    def counting_eval(tokens):
        evaluated[0] += len(tokens)
        return real_eval(tokens)

    llm.eval = counting_eval
    params = GenerateParams(max_tokens=max_tokens, temperature=0.0)
    talks = [[] for _ in range(dialogues)]
    replies, completion = [], 0
    started = time.perf_counter()
    for _ in range(rounds):
        for d, (who, topic) in enumerate(PEOPLE[:dialogues]):
            for role in ("user", "assistant"):
                if role == "user":
                    msgs = [Message("system", USER_SYSTEM.format(who=who, topic=topic)), *_flip(talks[d])]
                    if len(msgs) == 1:
                        msgs.append(Message("user", "Hello, how can I help you today?"))
                else:
                    msgs = [Message("system", MODEL_SYSTEM.format(topic=topic)), *talks[d]]
                response = await backend.generate(GenerateRequest(tuple(msgs), params))
                talks[d].append(Message(role, response.text))
                replies.append(response.text)
                completion += response.completion_tokens
    wall = time.perf_counter() - started
    await backend.aclose()
    return {"spec": spec, "prompt_tokens_evaluated": evaluated[0] - completion, "wall_s": wall, "replies": replies}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--dialogues", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--cache-mb", type=int, default=3000)
    args = parser.parse_args()
    if not 1 <= args.dialogues <= len(PEOPLE):
        parser.error(f"--dialogues must be 1-{len(PEOPLE)}")
    plain = asyncio.run(run(args.model, args.dialogues, args.rounds, args.max_tokens))
    sep = "&" if "?" in args.model else "?"
    cached = asyncio.run(run(f"{args.model}{sep}prompt_cache_mb={args.cache_mb}", args.dialogues, args.rounds,
                             args.max_tokens))
    print(f"{'spec':55} {'prompt tokens evaluated':>24} {'wall s':>8}")
    for r in (plain, cached):
        print(f"{r['spec']:55} {r['prompt_tokens_evaluated']:>24} {r['wall_s']:>8.1f}")
    same = sum(a == b for a, b in zip(plain["replies"], cached["replies"]))
    print(f"replies identical: {same} of {len(plain['replies'])}; prompt tokens evaluated: "
          f"{cached['prompt_tokens_evaluated'] / max(plain['prompt_tokens_evaluated'], 1):.2f}x; "
          f"wall: {cached['wall_s'] / plain['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
