"""The demo on each reasoning-provider stub (tests/servers/provider_stubs.py): what the run sent, what it recorded.

    .venv/bin/python bench/provider_stub_runs.py [--out DIR] [--think N]

Per behaviour: the first request bodies' limit and sampling fields (refused ones too), the adaptations
results.json records, the reasoning-token counts, and one sample's answer beside its kept-apart thinking.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finharness.cli import app  # noqa: E402
from tests.servers.provider_stubs import provider_server  # noqa: E402

SPECS = {
    "openai-reasoning": "openai:o-stub@{url}",
    "reasoning-field": "openai:q@{url}?thinking_budget=64",
    "inline-think": "openai:q@{url}?thinking_budget=64",
    "anthropic-thinking": "anthropic:claude-stub@{url}?thinking_budget=1024",
}
SENT_FIELDS = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "thinking")


def sent(body: dict) -> dict:
    return {k: body[k] for k in SENT_FIELDS if k in body}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--think", type=int, default=40, help="words of thinking per reply")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="provider-stubs-"))
    os.environ.setdefault("OPENAI_API_KEY", "sk-stub")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-stub")
    for behaviour, spec in SPECS.items():
        with provider_server(behaviour, think=args.think) as server:
            folder = out / behaviour
            result = CliRunner().invoke(app, ["run", "demo", "--model", spec.format(url=server.base_url),
                                              "--concurrency", "1", "--out", str(folder), "-q"])
            bodies, refusals = list(server.bodies), list(server.refusals)
        print(f"## {behaviour}: {spec.split('@')[0]}  (exit {result.exit_code})")
        if result.exit_code != 0:
            print(result.output)
            continue
        results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        sample = json.loads((folder / "samples.jsonl").read_text(encoding="utf-8").splitlines()[0])
        counts = results["counts"]
        print(f"requests {len(bodies)}, refused {len(refusals)}: " + "; ".join(r[:70] for r in refusals))
        for i, body in enumerate(bodies[:len(refusals) + 1]):
            print(f"  body {i + 1} sent {json.dumps(sent(body), ensure_ascii=False)}")
        print(f"  body {len(bodies)} sent {json.dumps(sent(bodies[-1]), ensure_ascii=False)}")
        for a in results.get("adaptations", []):
            print(f"  adaptation {a['parameter']}: asked {a['asked']!r} sent {a['sent']!r} calls {a['calls']}"
                  f"{' greedy_lost' if a.get('greedy_lost') else ''}")
        print(f"  counts: scored {counts['scored']}, completion {counts['completion_tokens']}, reasoning "
              f"{counts.get('reasoning_tokens')}, thinking_replies {counts.get('thinking_replies')}, "
              f"thinking_truncations {counts.get('thinking_truncations')}")
        print(f"  sample: response {sample['response']!r}, reasoning {(sample.get('reasoning') or '')[:40]!r}..., "
              f"tokens {sample.get('tokens')}")
        print("  notes: " + " | ".join(n[:90] for n in results.get("notes", [])))
    print(f"runs in {out}")


if __name__ == "__main__":
    main()
