"""Recording the agent benchmarks: blocks of bench/README.md's "## Agent loop", and the plot."""

from __future__ import annotations

import time
from pathlib import Path

from bench.agent_suite import Outcome, details, table

__all__ = ["SUITE_PLOT", "plot_suite", "record_block", "suite_text"]

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


def suite_text(outcomes: list[Outcome], intro: str, reading: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"### Real agents' shapes (issue 27)\n\n{intro}\n\nRecorded {when}.\n\n"
        f"{table(outcomes)}\n\nWhere the prefix broke, and why contextgate rebased:\n\n"
        f"{details(outcomes)}\n\n![input cost per call]({SUITE_PLOT.name})\n\n{reading}"
    )
