"""From per-query records to each method's metrics with intervals, and EvidenT-vs-baseline tests.

Denominators (documented in docs/evaluation.md):
- hallucination: every answer (an abstention cites nothing, so it scores 0);
- groundedness, cited-URL and first-citation precision, evidence recall, false abstention: the
  answerable questions (first-citation precision: those whose answer cites something; cited-URL
  precision pools the distinct cited URLs); correct abstention: the unanswerable ones;
- traceability (AnsCov/DocFocus): answers that cite something; answer length: non-abstentions;
- alignment rates: all extracted passages of the method; retrieval recall: answerable questions.
A failed query (`error`) is left out of every denominator and counted in `errors`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evident.eval import metrics as m
from evident.eval.dataset import EvalQuery
from evident.eval.records import MethodRecord, RetrievalRecord
from evident.eval.stats import Estimate, ZTest, mean, quantile, rate, two_proportion_z
from evident.nodes.names import RETRIEVE

RETRIEVAL_KS = {"retrieval_recall_at_1": 1, "retrieval_recall_at_3": 3, "retrieval_recall_at_top_n": None}
UNTESTED = set(RETRIEVAL_KS) | {"errors"}  # the same for every method, or not a quality measure


@dataclass
class Row:
    """One query as a method saw it: the question, its retrieval and the method's record."""

    query: EvalQuery
    retrieval: RetrievalRecord
    record: MethodRecord
    documents: Mapping[str, str]  # url -> text of the retrieved documents


def _tally(pairs: Sequence[bool]) -> Estimate:
    return rate(sum(pairs), len(pairs))


def method_metrics(rows: Sequence[Row], ngram_n: int, threshold: float) -> dict[str, Estimate]:
    out: dict[str, Estimate] = {}
    ok = [r for r in rows if r.record.outcome != "error"]
    out["errors"] = rate(len(rows) - len(ok), len(rows))
    answerable = [r for r in ok if r.query.is_answerable and r.query.gold]
    cited = {id(r): r.record.cited_urls for r in ok}

    out["hallucination"] = _tally([m.hallucinated(cited[id(r)], r.retrieval.urls) for r in ok])
    out["groundedness"] = _tally([m.grounded(cited[id(r)], r.query.gold) for r in answerable])
    firsts = [m.first_citation_gold(cited[id(r)], r.query.gold) for r in answerable]
    out["first_citation_precision"] = _tally([f for f in firsts if f is not None])
    hits = [m.cited_url_hits(cited[id(r)], r.query.gold) for r in answerable]
    out["cited_url_precision"] = rate(sum(h for h, _ in hits), sum(t for _, t in hits))
    out["evidence_recall"] = _tally([
        m.evidence_found([f.quote or f.sentence for f in r.record.facts], r.query.gold_evidence)
        for r in answerable if r.query.gold_evidence
    ])
    # Told apart from retrieval failures: the same measures over questions whose gold page was retrieved.
    found = [r for r in answerable if m.retrieval_hit(r.retrieval.urls, r.query.gold, None)]
    out["groundedness_when_retrieved"] = _tally([m.grounded(cited[id(r)], r.query.gold) for r in found])
    out["evidence_recall_when_retrieved"] = _tally([
        m.evidence_found([f.quote or f.sentence for f in r.record.facts], r.query.gold_evidence)
        for r in found if r.query.gold_evidence
    ])
    out["false_abstention"] = _tally([r.record.outcome == "insufficient" for r in ok if r.query.is_answerable])
    out["correct_abstention"] = _tally([r.record.outcome == "insufficient" for r in ok if not r.query.is_answerable])
    for name, k in RETRIEVAL_KS.items():
        out[name] = _tally([m.retrieval_hit(r.retrieval.urls, r.query.gold, k) for r in rows
                            if r.query.is_answerable and r.query.gold])

    for n in (1, *m.ANSCOV_NS):
        scores = [s for r in ok if (s := m.coverage(r.record.facts, r.documents, n)) is not None]
        suffix = "" if n == 1 else f"_at_{n}"
        out[f"anscov{suffix}"] = mean([s[0] for s in scores], bounds=(0.0, 1.0))
        out[f"docfocus{suffix}"] = mean([s[1] for s in scores], bounds=(0.0, 1.0))

    spoken = [m.answer_length(r.record.answer) for r in ok if r.record.outcome == "answered"]
    out["answer_sentences"] = mean([float(s) for s, _ in spoken])
    out["answer_words"] = mean([float(w) for _, w in spoken])

    if any(r.record.alignment for r in ok):
        out.update(alignment_metrics(ok, ngram_n, threshold))

    labels = [label for r in ok for label in r.record.judge]
    if labels:
        out["judge_entailed"] = rate(sum(lab == "Yes" for lab in labels), len(labels))
        out["judge_partial"] = rate(sum(lab == "Partial" for lab in labels), len(labels))

    nodes = sorted({k for r in ok for k in r.record.timings_ms if k != RETRIEVE})
    for node in [RETRIEVE, *nodes, "total"]:
        values = [_latency(r, node) for r in ok]
        present = [v for v in values if v is not None]
        if present:
            out[f"latency_{node}_p50_ms"] = quantile(present, 0.5)
            out[f"latency_{node}_p95_ms"] = quantile(present, 0.95)
    return out


def _latency(r: Row, node: str) -> float | None:
    # Retrieval ran once, outside the method: its time is the shared retrieval's.
    if node == RETRIEVE:
        return r.retrieval.latency_ms
    if node == "total":
        return r.retrieval.latency_ms + sum(v for k, v in r.record.timings_ms.items() if k != RETRIEVE)
    return r.record.timings_ms.get(node)


def alignment_metrics(rows: Sequence[Row], ngram_n: int, threshold: float) -> dict[str, Estimate]:
    """App. F and G: the alignment's decisions over every extracted passage."""
    counts = dict.fromkeys(m.ALIGNMENT_ACTIONS, 0)
    filt: Counter[str] = Counter()
    for r in rows:
        for action, c in m.action_counts(r.record.alignment).items():
            counts[action] = counts.get(action, 0) + c
        filt.update(m.filtering_counts(r.record.alignment, r.documents, ngram_n, threshold))
    total = filt["passages"]
    out = {f"alignment_{a}": rate(c, total) for a, c in counts.items()}
    out["url_drift"] = rate(counts["relinked"], total)
    out["partial_hallucination"] = rate(counts["truncated"] + counts["corrected"], total)
    out["passage_hallucination"] = rate(counts["dropped"], total)
    out["retention"] = rate(filt["retained"], total)
    out["hallucination_pre_filter"] = rate(filt["pre_below"], total)
    out["hallucination_post_filter"] = rate(filt["post_below"], filt["retained"])
    out["cov_at_10"] = rate(filt["cov10_hits"], filt["cov10_total"])
    return out


def compare(metrics: Mapping[str, Mapping[str, Estimate]], method: str = "evident") -> list[ZTest]:
    """Two-proportion z-tests of `method` against every other method, on every shared rate."""
    ours = metrics.get(method)
    if not ours:
        return []
    tests: list[ZTest] = []
    for baseline, theirs in metrics.items():
        if baseline == method:
            continue
        for name, a in ours.items():
            b = theirs.get(name)
            if b is None or a.kind != "rate" or b.kind != "rate" or name in UNTESTED:
                continue
            result = two_proportion_z(a.hits or 0, a.n, b.hits or 0, b.n)
            if result is not None:
                tests.append(ZTest(metric=name, method=method, baseline=baseline, z=result[0], p=result[1]))
    return tests
