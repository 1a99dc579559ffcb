"""report.md (the paper's table layouts) and the result it is made from (every number and record); `output`
writes both, with the figures."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evident.context import EvidentContext
from evident.eval.ablation import AblationCell, sweep
from evident.eval.dataset import EvalQuery
from evident.eval.runner import EvalRun
from evident.eval.semantic import SemanticRun, score_run
from evident.eval.stats import Estimate, ZTest
from evident.eval.summary import compare, method_metrics


class EvalResult(BaseModel):
    dataset: str
    queries: int
    answerable: int
    settings: dict[str, Any]
    metrics: dict[str, dict[str, Estimate]]
    tests: list[ZTest]
    skipped: dict[str, str] = Field(default_factory=dict)
    not_configured: dict[str, str] = Field(default_factory=dict)
    semantic: str = Field("", description='"semantic metrics: on (model id), …" or "semantic metrics: off (reason)"')
    ablation: list[AblationCell] = Field(default_factory=list)
    experiments: list[str] = Field(default_factory=list, description="LangSmith experiments of this run")
    records: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)

    @classmethod
    def build(cls, dataset: str, queries: Sequence[EvalQuery], run: EvalRun, ctx: EvidentContext,
              *, ablation: bool = False, semantic: SemanticRun | None = None) -> EvalResult:
        """The result of `run`. `semantic`: SemMax/SemRecall already scored (`score_run`); when None they are
        scored here with the run's embeddings (absent, with the reason, when those are off)."""
        ran = {m: rows for m, rows in run.rows.items() if m not in run.skipped}
        sem = semantic if semantic is not None else score_run(ran, ctx)
        metrics = {m: {**method_metrics(rows, ctx.ngram_n, ctx.threshold), **sem.metrics(m)} for m, rows in ran.items()}
        judged = any("judge_entailed" in v for v in metrics.values())
        cells = sweep(run.rows["evident"], drift=ctx.drift, bridge=ctx.bridge) if ablation and "evident" in metrics \
            else []
        # Per-query scores go into each record of results.json (none when off or scored over other rows).
        scores = {m: got if len(got := sem.scores.get(m, [])) == len(rows) else [None] * len(rows)
                  for m, rows in ran.items()}
        records = {
            m: [{"query": r.query.query, "standalone_query": r.retrieval.standalone_query or r.query.query,
                 "reference_answer": r.query.answer, "retrieved": r.retrieval.urls,
                 **r.record.model_dump(mode="json"), **({"semantic": s.model_dump()} if s is not None else {})}
                for r, s in zip(rows, scores[m], strict=True)]
            for m, rows in ran.items()
        }
        absent = {} if sem.on else {"semantic metrics": sem.status}
        return cls(
            dataset=dataset, queries=len(queries), answerable=sum(q.is_answerable for q in queries),
            settings={"mode": ctx.resolved_mode, "model": ctx.model, "ngram_n": ctx.ngram_n,
                      "threshold": ctx.threshold, "top_n": ctx.top_n, "k": ctx.k},
            metrics=metrics, tests=compare(metrics), skipped=dict(run.skipped),
            not_configured={**absent, **({} if judged else {"judge": "not run (pass --judge with a model)"})},
            semantic=sem.note(), ablation=cells, records=records,
        )

    def public(self, *, ablation: bool = False) -> dict[str, Any]:
        """The stable `--json` object of DESIGN §4."""
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "queries": self.queries,
            "methods": {m: {k: e.public() for k, e in v.items()} for m, v in self.metrics.items()},
            "tests": [t.model_dump() for t in self.tests],
        }
        if ablation:
            out["ablation"] = [_cell_public(c) for c in self.ablation]
        return out


def _cell_public(c: AblationCell) -> dict[str, Any]:
    return {"n": c.n, "t": c.t, **{k: getattr(c, k).public() for k in
                                   ("retention", "hallucination_pre_filter", "hallucination_post_filter", "cov_at_10")}}


# -- markdown ---------------------------------------------------------------------------------------


def _fmt(e: Estimate | None, scale: float, digits: int, unit: str) -> str:
    if e is None or e.value is None:
        return "–"
    shown = f"{scale * e.value:.{digits}f}{unit}"
    if e.ci_low is None or e.ci_high is None:
        return shown
    return f"{shown} [{scale * e.ci_low:.{digits}f}, {scale * e.ci_high:.{digits}f}]"


def pct(e: Estimate | None, digits: int = 1) -> str:
    """A rate as "12.3% [9.1, 16.0]" (percent, 95% CI), or "–"."""
    return _fmt(e, 100.0, digits, "%")


def num(e: Estimate | None, digits: int = 3) -> str:
    """A value as "0.123 [0.091, 0.160]" (95% CI), or "–"."""
    return _fmt(e, 1.0, digits, "")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


GROUNDEDNESS = ("hallucination", "groundedness", "first_citation_precision", "cited_url_precision", "evidence_recall")
WHEN_RETRIEVED = ("groundedness_when_retrieved", "evidence_recall_when_retrieved")
ABSTENTION = ("false_abstention", "correct_abstention", "errors")
RETRIEVAL = ("retrieval_recall_at_1", "retrieval_recall_at_3", "retrieval_recall_at_top_n")
COVERAGE = ("anscov", "docfocus", *(f"{k}_at_{n}" for n in (2, 3, 5, 10) for k in ("anscov", "docfocus")))
SEMANTIC = ("sem_max", "sem_recall")
INTRINSIC = ("passage_hallucination", "url_drift", "partial_hallucination")
FILTERING = ("alignment_kept", "alignment_truncated", "alignment_relinked", "alignment_corrected",
             "alignment_dropped", "retention", "hallucination_pre_filter", "hallucination_post_filter", "cov_at_10")
LOWER_IS_BETTER = {"hallucination", "false_abstention", "errors", "passage_hallucination", "url_drift",
                   "partial_hallucination", "alignment_dropped", "hallucination_pre_filter",
                   "hallucination_post_filter"}


HIGHER_IS_BETTER = {"groundedness", "first_citation_precision", "cited_url_precision", "evidence_recall",
                    *WHEN_RETRIEVED,
                    "correct_abstention", "retention", "cov_at_10", *RETRIEVAL, *SEMANTIC,
                    *(n for n in COVERAGE if "anscov" in n)}


def _label(name: str) -> str:
    return name + (" ↓" if name in LOWER_IS_BETTER else " ↑" if name in HIGHER_IS_BETTER else "")


def _significant(result: EvalResult, metric: str) -> bool:
    """The paper's star: EvidenT differs from every baseline at p < 0.05."""
    tests = [t for t in result.tests if t.metric == metric]
    baselines = [m for m in result.metrics if m != "evident" and metric in result.metrics[m]]
    return bool(tests) and len(tests) == len(baselines) and all(t.p < 0.05 for t in tests)


def method_table(result: EvalResult, names: Sequence[str], fmt: Any = None, only_with: str | None = None) -> str:
    """One row per method, one column per metric (the paper's layout); `*`: p < 0.05 against every baseline."""
    fmt = fmt or pct
    methods = [m for m in result.metrics if only_with is None or only_with in result.metrics[m]]
    shown = [n for n in names if any(n in result.metrics[m] for m in methods)]
    rows = []
    for m in methods:
        cells = []
        for n in shown:
            cell = fmt(result.metrics[m].get(n))
            cells.append(cell + ("*" if m == "evident" and cell != "–" and _significant(result, n) else ""))
        rows.append([m, *cells])
    return _table(["method", *(_label(n) for n in shown)], rows)


def ztest_table(result: EvalResult) -> str:
    """Every two-proportion z-test: one row per metric, one column per baseline."""
    baselines = list(dict.fromkeys(t.baseline for t in result.tests))
    by = {(t.metric, t.baseline): t for t in result.tests}
    metrics = list(dict.fromkeys(t.metric for t in result.tests))
    rows = [[n, *(f"z = {by[(n, b)].z:.2f}, p = {by[(n, b)].p:.2g}" + ("*" if by[(n, b)].p < 0.05 else "")
                  if (n, b) in by else "–" for b in baselines)] for n in metrics]
    return _table(["metric", *(f"evident vs {b}" for b in baselines)], rows)


def ablation_table(cells: Sequence[AblationCell]) -> str:
    """Table 7's layout: one row per (n, t)."""
    rows = [[str(c.n), f"{c.t:.1f}", num(c.retention, 3), pct(c.hallucination_pre_filter),
             pct(c.hallucination_post_filter), num(c.cov_at_10, 3)] for c in cells]
    header = ["n", "t", "retention ↑", "% halluc. pre-filter ↓", "% halluc. post-filter ↓", "Cov@10 ↑"]
    return _table(header, rows)


def latency_table(result: EvalResult) -> str:
    rows = []
    for m, v in result.metrics.items():
        for name, e in v.items():
            if name.startswith("latency_") and name.endswith("_p50_ms"):
                node = name[len("latency_"):-len("_p50_ms")]
                p95 = v.get(f"latency_{node}_p95_ms")
                rows.append([m, node, num(e, 1), num(p95, 1), str(e.n)])
    return _table(["method", "node", "p50 ms [95% CI]", "p95 ms [95% CI]", "n"], rows)


def markdown(result: EvalResult, images: dict[str, str] | None = None, heading: str = "#") -> str:
    """The report: the paper's tables, each rate with its 95% Wilson interval, p-values of two-proportion
    z-tests of EvidenT against each baseline (* p < 0.05)."""
    h = heading
    methods = list(result.metrics)
    out = [
        f"{h} Evaluation of {Path(result.dataset).name}",
        "",
        f"{result.queries} questions ({result.answerable} answerable, {result.queries - result.answerable} "
        f"unanswerable); mode {result.settings['mode']}"
        + (f", model {result.settings['model']}" if result.settings.get("model") else "")
        + f"; n = {result.settings['ngram_n']}, t = {result.settings['threshold']}, top_n = {result.settings['top_n']}."
        + " Rates in percent with 95% Wilson intervals; means with 95% t intervals; * on EvidenT's value: it"
        " differs from every baseline at p < 0.05 (two-proportion z-test, as in the paper's Table 2), better or"
        " worse: the z-test table gives the sign.",
        "",
    ]
    reasons: dict[str, list[str]] = {}
    for m, r in result.skipped.items():
        reasons.setdefault(r, []).append(m)
    for r, ms in reasons.items():
        out += [f"Not run: {', '.join(f'**{m}**' for m in ms)} ({r}).", ""]
    if result.experiments:
        out += [f"LangSmith experiments: {', '.join(result.experiments)}.", ""]
    out += [f"{h}# Groundedness (Table 2 layout, §6.1)", "", method_table(result, GROUNDEDNESS), ""]
    if images and "metrics" in images:
        out += [f"![metrics]({images['metrics']})", ""]
    out += [f"{h}# Abstention", "", method_table(result, ABSTENTION), ""]
    if images and "abstention" in images:
        out += [f"![abstention]({images['abstention']})", ""]
    if methods:
        first = methods[0]
        out += [f"{h}# Retrieval (shared by all methods)", "",
                _table([_label(n) for n in RETRIEVAL], [[pct(result.metrics[first].get(n)) for n in RETRIEVAL]]), "",
                "Over the answerable questions whose gold page was retrieved (an answer failure, not a retrieval "
                "failure):", "", method_table(result, WHEN_RETRIEVED), ""]
    out += [f"{h}# Traceability: AnsCov and DocFocus (Table 3 layout, §6.2)", "",
            method_table(result, COVERAGE, fmt=num), ""]
    if any(n in result.metrics[m] for m in methods for n in SEMANTIC):
        out += [f"{h}# Semantic matching: SemMax and SemRecall (Table 4 layout, §6.2.3)", "",
                "Cosine of the configured embeddings (a bi-encoder, not the paper's cross-encoder) between windows "
                "of 256 words, stride 50, of the cited facts and of the cited documents; means over the answers "
                "that cite something, with 95% t intervals.", "", method_table(result, SEMANTIC, fmt=num), "",
                result.semantic + ".", ""]
    out += [f"{h}# Answer length", "",
            method_table(result, ("answer_sentences", "answer_words"), fmt=lambda e: num(e, 2)), ""]
    if any("retention" in result.metrics[m] for m in methods):
        out += [f"{h}# Alignment, intrinsic (Table 5 layout, App. F)", "",
                "Rates over every extracted passage: hallucinated = dropped (no support in any retrieved page), "
                "drift = relinked to another retrieved page, partially hallucinated = truncated or corrected.", "",
                method_table(result, INTRINSIC, only_with="retention"), "",
                method_table(result, FILTERING, only_with="retention"), ""]
    if any(k.startswith("judge_") for m in methods for k in result.metrics[m]):
        out += [f"{h}# LLM-as-judge (App. D.3)", "", method_table(result, ("judge_entailed", "judge_partial")), ""]
    if result.tests:
        out += [f"{h}# Two-proportion z-tests", "",
                "EvidenT against each other method on every rate they share; z > 0: EvidenT's rate is higher "
                "(* p < 0.05).", "", ztest_table(result), ""]
    if result.ablation:
        out += [f"{h}# Ablation over n and t (Table 7 layout, App. G)", "",
                "Recorded extraction outputs re-aligned with every (n, t); no model call. Cov@10 is measured on "
                "the retained quotes (no answer is regenerated).", "", ablation_table(result.ablation), ""]
        if images and "ablation" in images:
            out += [f"![ablation]({images['ablation']})", ""]
    out += [f"{h}# Latency per node", "", latency_table(result), ""]
    if result.not_configured:
        out += [f"{h}# Not measured", ""] + [f"- {k}: {v}" for k, v in result.not_configured.items()] + [""]
    return "\n".join(out)
