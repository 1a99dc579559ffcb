"""report.md's tables: the paper's layout (methods as rows), the significance star, the z-test table."""

from __future__ import annotations

from evident.eval.report import EvalResult, markdown, method_table, pct, ztest_table
from evident.eval.stats import rate
from evident.eval.summary import compare


def _result(evident_hits: int, direct_hits: int, ges_hits: int) -> EvalResult:
    metrics = {
        "evident": {"groundedness": rate(evident_hits, 100), "hallucination": rate(0, 100)},
        "direct": {"groundedness": rate(direct_hits, 100), "hallucination": rate(20, 100)},
        "ges": {"groundedness": rate(ges_hits, 100), "hallucination": rate(15, 100)},
    }
    return EvalResult(dataset="q.jsonl", queries=100, answerable=100, settings={
        "mode": "llm", "model": "m", "ngram_n": 5, "threshold": 0.7, "top_n": 8}, metrics=metrics,
        tests=compare(metrics))


def test_star_needs_significance_against_every_baseline() -> None:
    table = method_table(_result(80, 50, 52), ["groundedness"])
    assert "| evident | 80.0% [71.1, 86.7]* |" in table
    assert "| direct | 50.0% [40.4, 59.6] |" in table
    # Against ges alone the difference is not significant (80 vs 75): no star.
    table = method_table(_result(80, 50, 75), ["groundedness"])
    assert "| evident | 80.0% [71.1, 86.7] |" in table


def test_z_test_table_and_sections() -> None:
    result = _result(80, 50, 52)
    table = ztest_table(result)
    assert table.splitlines()[0] == "| metric | evident vs direct | evident vs ges |"
    # 0/100 vs 20/100: pooled 0.1, SE = sqrt(0.1 * 0.9 * 0.02) = 0.042426, z = -0.2 / SE = -4.714, p = 2.4e-06
    assert "| hallucination | z = -4.71, p = 2.4e-06* |" in table
    report = markdown(result)
    assert report.startswith("# Evaluation of q.jsonl")
    assert "| method | hallucination ↓ | groundedness ↑ |" in report
    assert pct(rate(1, 3)) == "33.3% [6.1, 79.2]"
