"""The same evaluation as a LangSmith experiment per method (`langsmith.evaluate`), when configured.

The questions become a LangSmith dataset (one per distinct question set, reused by later runs);
each method is an experiment whose target replays the answers this run recorded (no second model
call), scored per question by the harness's own measures and summarised by its aggregate rates.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import langsmith
from langsmith.evaluation import EvaluationResult

from evident.eval import metrics as m
from evident.eval.dataset import EvalQuery
from evident.eval.store import settings_hash
from evident.eval.summary import Row
from evident.settings import environment_value

if TYPE_CHECKING:
    from langsmith.evaluation import EvaluationResults
    from langsmith.schemas import Example, Run


def configured() -> bool:
    return bool(environment_value("LANGSMITH_API_KEY") or environment_value("LANGCHAIN_API_KEY"))


def query_scores(row: Row) -> dict[str, float]:
    """The per-question measures (1/0 or a fraction); a measure that does not apply is absent."""
    rec, q = row.record, row.query
    cited = rec.cited_urls
    out: dict[str, float] = {"hallucination": float(m.hallucinated(cited, row.retrieval.urls))}
    if q.is_answerable:
        out["false_abstention"] = float(rec.outcome == "insufficient")
    else:
        out["correct_abstention"] = float(rec.outcome == "insufficient")
    if q.is_answerable and q.gold:
        out["groundedness"] = float(m.grounded(cited, q.gold))
        first = m.first_citation_gold(cited, q.gold)
        if first is not None:
            out["first_citation_precision"] = float(first)
        hits, total = m.cited_url_hits(cited, q.gold)
        if total:
            out["cited_url_precision"] = hits / total
        out["retrieval_recall_at_1"] = float(m.retrieval_hit(row.retrieval.urls, q.gold, 1))
        out["retrieval_recall_at_3"] = float(m.retrieval_hit(row.retrieval.urls, q.gold, 3))
        if q.gold_evidence:
            quotes = [f.quote or f.sentence for f in rec.facts]
            out["evidence_recall"] = float(m.evidence_found(quotes, q.gold_evidence))
    cov = m.coverage(rec.facts, row.documents, 10)
    if cov is not None:
        out["anscov_at_10"], out["docfocus_at_10"] = cov
    return out


def example_inputs(q: EvalQuery) -> dict[str, Any]:
    """A question as a LangSmith example's inputs: its id and text, and a follow-up's earlier messages."""
    inputs: dict[str, Any] = {"id": q.id, "query": q.query}
    if q.history:
        inputs["history"] = [{"role": m.role, "content": m.content} for m in q.history]
    return inputs


def run_experiments(dataset: str, rows_by_method: dict[str, Sequence[Row]], aggregates: dict[str, dict[str, Any]],
                    settings: dict[str, Any]) -> list[str]:
    """One experiment per method; returns their names. Its console chatter goes to stderr."""
    client = langsmith.Client()
    first = next(iter(rows_by_method.values()))
    questions = [r.query for r in first]
    inputs = [example_inputs(q) for q in questions]
    name = f"evident-eval {os.path.basename(dataset)} {settings_hash([list(i.values()) for i in inputs])[:8]}"
    if not client.has_dataset(dataset_name=name):
        ds = client.create_dataset(name, description=f"Questions of {dataset} (evident eval)")
        client.create_examples(dataset_id=ds.id, examples=[
            {"inputs": asked,
             "reference_outputs": {"gold_urls": sorted(q.gold), "gold_evidence": q.gold_evidence,
                                   "answerable": q.is_answerable}}
            for q, asked in zip(questions, inputs, strict=True)
        ])
    names: list[str] = []
    for method, rows in rows_by_method.items():
        by_id = {r.query.id: r for r in rows}

        def recorded_answer(inputs: dict[str, Any], by_id: dict[str, Row] = by_id) -> dict[str, Any]:
            rec = by_id[inputs["id"]].record
            return {"answer": rec.answer, "outcome": rec.outcome, "cited_urls": rec.cited_urls}

        def per_question(run: Any, example: Any, by_id: dict[str, Row] = by_id) -> dict[str, Any]:
            scores = query_scores(by_id[example.inputs["id"]])
            return {"results": [{"key": k, "score": v} for k, v in scores.items()]}

        def summary(runs: Sequence[Run], examples: Sequence[Example], method: str = method) -> EvaluationResults:
            return {"results": [EvaluationResult(key=k, score=e.value) for k, e in aggregates[method].items()
                                if e.value is not None and not k.startswith("latency_")]}

        with contextlib.redirect_stdout(sys.stderr):
            result = langsmith.evaluate(
                recorded_answer, data=name, evaluators=[per_question], summary_evaluators=[summary],
                experiment_prefix=f"evident-eval-{method}", metadata={"method": method, **settings},
                client=client, max_concurrency=0, blocking=True,
            )
        names.append(result.experiment_name)
    client.flush()
    return names
