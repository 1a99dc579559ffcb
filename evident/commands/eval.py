"""`evident eval`: the paper's metrics for EvidenT and its baselines on a question file."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evident.commands.common import fail, print_json, safe_text, warn
from evident.context import EvidentContext
from evident.eval import extra, langsmith_run
from evident.eval.dataset import DatasetError, load_dataset
from evident.eval.judge import Judge
from evident.eval.methods import METHODS
from evident.eval.plots import write_plots
from evident.eval.report import EvalResult, ablation_table, markdown, num
from evident.eval.runner import evaluate
from evident.eval.semantic import score_run
from evident.settings import ConfigError

DEFAULT_LLM_JOBS = 4
KEY_METRICS = (
    "hallucination", "groundedness", "first_citation_precision", "cited_url_precision", "evidence_recall",
    "false_abstention", "correct_abstention", "anscov_at_10", "retrieval_recall_at_1", "retrieval_recall_at_3",
)
# Shown after the key metrics when the run's embeddings are on (absent, with the reason, when off).
SEMANTIC_METRICS = {"sem_max": "sem_max (SemMax)", "sem_recall": "sem_recall (SemRecall)"}


def write_reports(result: EvalResult, out: Path) -> dict[str, Path]:
    """report.md, results.json and the PNG figures under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    images = write_plots(result, out)
    (out / "report.md").write_text(markdown(result, {k: p.name for k, p in images.items()}), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=1),
                                      encoding="utf-8")
    return {"report": out / "report.md", "results": out / "results.json", **images}


def parse_methods(values: list[str]) -> list[str]:
    chosen: list[str] = []
    for value in values or ["all"]:
        for name in (v.strip().lower() for v in value.split(",")):
            if name == "all":
                chosen.extend(METHODS)
            elif name in METHODS:
                chosen.append(name)
            elif name:
                fail("eval", f"unknown method {name!r}: choose from {', '.join(METHODS)} or all")
    # EvidenT first: it is what every test compares against.
    return sorted(dict.fromkeys(chosen), key=lambda m: METHODS.index(m))


def run(
    *,
    dataset: Path,
    corpus: list[Path] | None,
    config: Path | None,
    methods: list[str],
    limit: int | None,
    out: Path | None,
    json_out: bool,
    ablation: bool,
    judge: bool,
    jobs: int | None = None,
    progress: bool = True,
) -> int:
    logging.basicConfig(level=logging.WARNING, format="evident: warning: %(message)s")
    if (missing := extra.problem()) is not None:
        fail("eval", missing)
    chosen = parse_methods(methods)
    if limit is not None and limit < 1:
        fail("eval", "--limit must be at least 1")
    if jobs is not None and jobs < 1:
        fail("eval", "--jobs must be at least 1")
    if ablation and "evident" not in chosen:
        fail("eval", "--ablation sweeps EvidenT's recorded extractions: include --method evident")
    for path in corpus or []:
        if not path.exists():
            fail("eval", f"{path}: corpus path does not exist")
    try:
        queries = load_dataset(dataset, limit)
    except DatasetError as exc:
        fail("eval", str(exc))
    try:
        ctx = EvidentContext.from_env(config, corpus=[str(p) for p in corpus] if corpus else None)
    except ConfigError as exc:
        fail("eval", str(exc))
    if not corpus and config is None and not ctx.corpus and not ctx.sources:
        fail("eval", "no documents to search: pass --corpus PATH (repeatable) or --config evident.toml")

    judge_fn = None
    if judge:
        if ctx.resolved_mode != "llm":
            fail("eval", "--judge needs a model: set EVIDENT_MODEL (or [model] in evident.toml)")
        judge_fn = Judge(ctx)
    try:
        # A model's answers are waited for, not computed: overlap them. Offline work is CPU-bound.
        workers = jobs or (DEFAULT_LLM_JOBS if ctx.resolved_mode == "llm" else 1)
        done = evaluate(queries, ctx, chosen, out / "cache" if out else None, progress=progress, judge=judge_fn,
                        jobs=workers)
    except ConfigError as exc:
        fail("eval", str(exc))
    semantic = _score_semantic(done, ctx, progress)
    result = EvalResult.build(str(dataset), queries, done, ctx, ablation=ablation, semantic=semantic)
    for method, reason in result.skipped.items():
        warn("eval", f"{method} skipped: {reason}")
    if langsmith_run.configured():
        try:
            names = langsmith_run.run_experiments(str(dataset), {m: done.rows[m] for m in result.metrics},
                                                  result.metrics, result.settings)
        except Exception as exc:  # the measurements stand without the upload
            warn("eval", f"LangSmith experiment not recorded: {type(exc).__name__}: {exc}")
        else:
            result.experiments = names
    if out is not None:
        write_reports(result, out)
    if json_out:
        print_json(result.public(ablation=ablation))
    else:
        _print_human(result, out)
    return 0


def _score_semantic(done: Any, ctx: Any, progress: bool) -> Any:
    """SemMax/SemRecall of every method that ran (docs/evaluation.md), with a progress bar on stderr:
    embedding the cited pages' windows takes seconds to minutes on a CPU."""
    rows = {m: r for m, r in done.rows.items() if m not in done.skipped}
    bar = Progress(TextColumn("[bold]semantic metrics[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=Console(stderr=True), disable=not progress)
    with bar:
        task = bar.add_task("", total=sum(len(r) for r in rows.values()))

        def advance(method: str) -> None:
            bar.update(task, advance=1, description=method)

        return score_run(rows, ctx, on_query=advance)


def _print_human(result: Any, out: Path | None) -> None:
    def shown(text: str) -> str:  # dataset and method names come from files: neither markup nor controls
        return escape(safe_text(text))

    console = Console(highlight=False, soft_wrap=True)
    table = Table(title=f"{shown(str(result.dataset))}: {result.queries} questions (95% CI)")
    table.add_column("metric", no_wrap=True)
    for method in result.metrics:
        table.add_column(shown(method))
    baselines = [t.baseline for t in result.tests if t.metric == "groundedness"]
    for b in baselines:
        table.add_column(f"p vs {shown(b)}")
    p_of = {(t.metric, t.baseline): t.p for t in result.tests}
    semantic = [n for n in SEMANTIC_METRICS if any(n in v for v in result.metrics.values())]
    for name in (*KEY_METRICS, *semantic):
        ps = [p_of.get((name, b)) for b in baselines]
        table.add_row(SEMANTIC_METRICS.get(name, name), *(num(result.metrics[m].get(name)) for m in result.metrics),
                      *("–" if p is None else f"{p:.3g}{'*' if p < 0.05 else ''}" for p in ps))
    console.print(table)
    for method, reason in result.skipped.items():
        console.print(f"[dim]{shown(method)}: skipped ({shown(reason)})[/]")
    if result.semantic:  # on (model id, time, failures) or off (reason): said either way
        console.print(safe_text(result.semantic), markup=False, style="dim")
    if result.ablation:
        console.print(safe_text(ablation_table(result.ablation)), markup=False)
    if out is not None:
        console.print(safe_text(f"report: {out / 'report.md'}  results: {out / 'results.json'}"), markup=False)
