"""Recording the agent benchmarks: blocks of bench/README.md's "## Agent loop", and the plot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from bench.agent_suite import Outcome, details, table

__all__ = ["SUITE_PLOT", "plot_suite", "real_text", "record_block", "suite_text"]

BENCH = Path(__file__).resolve().parent
README = BENCH / "README.md"
SECTION = "## Agent loop"
SUITE_PLOT = BENCH / "agent_suite_cost.png"


def record_block(name: str, text: str) -> None:
    """Replace the block between ``<!-- name -->`` and ``<!-- /name -->`` in bench/README.md;
    a new block goes right under the "## Agent loop" heading."""
    content = README.read_text()
    opening, closing = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{opening}\n{text.strip()}\n{closing}"
    start = content.find(opening)
    if start >= 0:
        end = content.index(closing, start) + len(closing)
        content = content[:start] + block + content[end:]
    else:
        heading = content.find(SECTION + "\n")
        if heading < 0:
            content = content.rstrip() + f"\n\n{SECTION}\n\n{block}\n"
        else:
            at = heading + len(SECTION) + 1
            content = content[:at] + "\n" + block + "\n" + content[at:]
    README.write_text(content)


def plot_suite(outcomes: list[Outcome], scale: float = 1.2) -> None:
    """Input cost per call at one token scale: the coding shape and the chat-door loop."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = sorted({o.shape for o in outcomes}, key=lambda s: not s.startswith("coding"))
    figure, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.5), squeeze=False)
    for axis, shape in zip(axes[0], shapes, strict=True):
        for o in outcomes:
            if o.shape != shape or o.scale != scale:
                continue
            costs = o.figures.costs
            label = f"{o.mode} ({o.ratio:.2f}x, prefix kept {o.figures.kept:.0%})"
            axis.plot(range(1, len(costs) + 1), [c / 1000 for c in costs], label=label)
            if o.mode == "contextgate":
                rebased = [n for n, _ in o.rebases]
                axis.scatter(
                    rebased, [costs[n - 1] / 1000 for n in rebased], marker="x", color="red",
                    label="rebase", zorder=3,
                )  # fmt: skip
        axis.set_xlabel("call")
        axis.set_ylabel("cache-weighted input cost (k token-equivalents)")
        axis.set_title(f"{shape}, upstream counts {scale:.2f}x")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(SUITE_PLOT, dpi=100)


INTRO = """\
`.venv/bin/python -m bench.agent_loop --suite real --record` (bench/agent_suite.py, ~15
minutes). For each upstream token scale (the provider's prompt tokens per contextgate token:
1.0, 1.2 and 1.35, as Claude's tokenizer runs against tiktoken; `FakeUpstream(token_scale=)`),
a fresh fake upstream and a fresh contextgate (SQLite: the learned ratio starts from nothing):

- **coding agent** (bench/agent_coding.py): one user turn, a ~24k-token system prompt and 12
  tools (~28k tokens), then 40 `Read` calls, each appending an assistant message (signed
  thinking + `tool_use`) and a user message (its `tool_result`, 3k-8k tokens), the whole history
  resent every call with Claude Code's marks (system, newest message); `/v1/messages` through
  litellm's anthropic provider to the fake's validating Anthropic `/v1/messages`, thinking on,
  `context.max_input_tokens` 100,000; against the same session sent to the fake directly (it
  reaches ~255k tokens);
- **chat-door loop, memory on**: the loop of the earlier record below at 64k (30 steps, two
  calls each) with a `user` and every memory feature at its default (compaction, periodic
  summaries, periodic extraction, message recall); against pass-through.

Measured on the bodies the fake received (bench/agent_measure.py): cost cache-weighted (the
longest prefix of whole messages equal to the previous prompt, system and tools included, at
0.1x, the rest at 1.25x, in the provider's tokens) against direct / pass-through; prefix kept
(the previous prompt, `cache_control` marks aside and a one-text-block content read as its
string, is the start of this one); thinking (calls that carried `thinking` / calls that asked);
prompts over the budget by the provider's count; broken tool pairs; refusals (bodies the fake's
Anthropic check refuses, and errors the client got); rebases (`cache_stats.rebased` in
contextgate's request log, after the first call). Goals: chat loop <= 0.6x and >= 85% kept,
coding shape <= 0.7x and >= 85%, thinking 100%, 0 over budget, 0 broken pairs, 0 refusals."""


def suite_text(outcomes: list[Outcome]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"### Real agents' shapes (issue 27)\n\n{INTRO}\n\nRecorded {when}.\n\n"
        f"{table(outcomes)}\n\nWhere the prefix broke, and why contextgate rebased:\n\n"
        f"{details(outcomes)}\n\n![input cost per call]({SUITE_PLOT.name})"
    )


REAL_INTRO = """\
`.venv/bin/python -m bench.real_agents --record` (bench/real_agents.py, bench/real_codex.py,
~10 minutes): **real Claude Code** 2.1.197 (`claude -p`, thinking on, only the `Read` tool)
reads 40 files of 3k-8k tokens in one task, the fake's Anthropic `/v1/messages` scripted to
call `Read` on each file in turn (token scale 1.2); once talking to the fake directly, once
through contextgate (litellm's anthropic provider, the model's `max_input_tokens` set so that
the budget is 100k after Claude Code's `max_tokens` and the margin). **Codex CLI** 0.169
(`codex exec`) does the same with `cat` through its `exec_command` tool on `/v1/responses`
(contextgate answers it from the fake's chat completions, `CONTEXTGATE_RESPONSES_STORE_FALSE=manage`
since Codex sends `store: false`) at 100k and 40k: Codex cuts each command's output to ~2.3k
tokens, so its 40 reads reach only ~94k. The fake serves no Responses API, so Codex's direct
bill is its own requests, recorded on the way in (bench/recorder.py). Same measures as above."""


def real_text(outcomes: list[Outcome], results: dict[str, Any]) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    finished = orjson.dumps(
        {agent: {k: v for k, v in r.items() if k != "tail"} for agent, r in results.items()}
    ).decode()
    return (
        f"### Real agents (issue 27)\n\n{REAL_INTRO}\n\nRecorded {when}.\n\n"
        f"{table(outcomes)}\n\n{details(outcomes)}\n\nThe agents' own results: `{finished}`"
    )
