"""The report's figures (matplotlib, headless Agg backend): metric bars with 95% intervals per
method, the abstention trade-off, and the ablation heat map."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evident.eval.report import EvalResult

BAR_METRICS = ("hallucination", "groundedness", "first_citation_precision", "cited_url_precision", "evidence_recall",
               "false_abstention", "correct_abstention", "retrieval_recall_at_3")


def _pyplot() -> Any:
    # start-up time: matplotlib (~0.3 s) loads only when figures are drawn; pyplot after the backend is chosen
    import matplotlib

    matplotlib.use("Agg", force=True)
    # start-up time, as above; and pyplot must load after matplotlib.use picks the backend
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    plt = _pyplot()
    for ax in fig.axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _name(result: EvalResult) -> str:
    path = Path(result.dataset)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def _err(value: float, low: float | None, high: float | None) -> tuple[float, float]:
    return (value - low if low is not None else 0.0, high - value if high is not None else 0.0)


Axis = tuple[str, tuple[float, float]]  # label, limits


def _frame(ax: Any, title: str, *, y: Axis, x: Axis | None = None) -> None:
    ax.set_title(title)
    ax.set_ylabel(y[0])
    ax.set_ylim(*y[1])
    if x is not None:
        ax.set_xlabel(x[0])
        ax.set_xlim(*x[1])


def metric_bars(result: EvalResult, path: Path) -> Path:
    plt = _pyplot()
    methods = list(result.metrics)
    names = [n for n in BAR_METRICS if any(n in result.metrics[m] for m in methods)]
    width = 0.8 / max(1, len(methods))
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for i, m in enumerate(methods):
        xs, ys, errs = [], [], []
        for j, n in enumerate(names):
            e = result.metrics[m].get(n)
            if e is None or e.value is None:
                continue
            xs.append(j + (i - (len(methods) - 1) / 2) * width)
            ys.append(e.value)
            errs.append(_err(e.value, e.ci_low, e.ci_high))
        ax.bar(xs, ys, width, label=m, yerr=list(zip(*errs, strict=True)) if errs else None, capsize=2)
    ax.set_xticks(range(len(names)), [n.replace("_", "\n", 1) for n in names], fontsize=8)
    _frame(ax, f"{_name(result)}: {result.queries} questions", y=("rate (95% Wilson CI)", (0, 1.05)))
    return _save(fig, path)


def abstention_tradeoff(result: EvalResult, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 4.2))
    for m, v in result.metrics.items():
        fa, ca = v.get("false_abstention"), v.get("correct_abstention")
        if fa is None or ca is None or fa.value is None or ca.value is None:
            continue
        ax.errorbar([fa.value], [ca.value], xerr=[[x] for x in _err(fa.value, fa.ci_low, fa.ci_high)],
                    yerr=[[y] for y in _err(ca.value, ca.ci_low, ca.ci_high)], fmt="o", capsize=3, label=m)
    _frame(ax, f"Abstention trade-off ({_name(result)})", y=("correct abstention (unanswerable) ↑", (-0.02, 1.02)),
           x=("false abstention (answerable) ↓", (-0.02, 1.02)))
    return _save(fig, path)


def ablation_heatmap(result: EvalResult, path: Path) -> Path:
    plt = _pyplot()
    ns = sorted({c.n for c in result.ablation})
    ts = sorted({c.t for c in result.ablation})
    panels = (("retention", "retention ↑"), ("hallucination_pre_filter", "% below t before filtering"),
              ("hallucination_post_filter", "% below t after filtering"))
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 3.8))
    fig.suptitle(f"Alignment ablation over recorded extractions ({_name(result)})", fontsize=10)
    for ax, (field, title) in zip(axes, panels, strict=True):
        grid = [[None] * len(ts) for _ in ns]
        for c in result.ablation:
            grid[ns.index(c.n)][ts.index(c.t)] = getattr(c, field).value
        values = [[float("nan") if x is None else x for x in row] for row in grid]
        im = ax.imshow(values, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for i, row in enumerate(values):
            for j, x in enumerate(row):
                ax.text(j, i, "–" if x != x else f"{x:.2f}", ha="center", va="center", fontsize=7,
                        color="k" if x == x and x > 0.6 else "w")  # readable on viridis' light end
        ax.set_xticks(range(len(ts)), [f"{t:.1f}" for t in ts])
        ax.set_yticks(range(len(ns)), [str(n) for n in ns])
        ax.set_xlabel("threshold t")
        ax.set_ylabel("n-gram size n")
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    return _save(fig, path)


def write_plots(result: EvalResult, folder: Path, prefix: str = "") -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {
        "metrics": metric_bars(result, folder / f"{prefix}metrics.png"),
        "abstention": abstention_tradeoff(result, folder / f"{prefix}abstention.png"),
    }
    if result.ablation:
        out["ablation"] = ablation_heatmap(result, folder / f"{prefix}ablation.png")
    return out
