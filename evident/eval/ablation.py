"""App. G: sweep the alignment's n-gram size and threshold over recorded extraction outputs.

No model is called: the extraction output each query produced (its passages as the extractor gave
them) is aligned again against the same retrieved documents with every (n, t).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from evident.alignment import align
from evident.alignment.models import SourceDocument
from evident.eval.metrics import filtering_counts
from evident.eval.stats import Estimate, rate
from evident.eval.summary import Row

NS = (3, 4, 5, 6, 8)
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


class AblationCell(BaseModel):
    n: int
    t: float
    retention: Estimate
    hallucination_pre_filter: Estimate
    hallucination_post_filter: Estimate
    cov_at_10: Estimate


def sweep(rows: Sequence[Row], *, drift: Literal["extended", "paper"] = "extended", bridge: int = 2,
          ns: Sequence[int] = NS, thresholds: Sequence[float] = THRESHOLDS) -> list[AblationCell]:
    recorded = [
        (r.record.passages, [SourceDocument(url=u, content=c) for u, c in r.documents.items()], r.documents)
        for r in rows if r.record.passages
    ]
    cells: list[AblationCell] = []
    for n in ns:
        for t in thresholds:
            tot: Counter[str] = Counter()
            for passages, docs, texts in recorded:
                decisions = align(passages, docs, n=n, threshold=t, drift=drift, bridge=bridge)
                tot.update(filtering_counts([d.model_dump() for d in decisions], texts, n, t))
            cells.append(AblationCell(
                n=n, t=t, retention=rate(tot["retained"], tot["passages"]),
                hallucination_pre_filter=rate(tot["pre_below"], tot["passages"]),
                hallucination_post_filter=rate(tot["post_below"], tot["retained"]),
                cov_at_10=rate(tot["cov10_hits"], tot["cov10_total"]),
            ))
    return cells
