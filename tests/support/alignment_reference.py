"""A plain implementation of the paper's alignment rule, for the differential tests and benchmarks/alignment.py.

Every passage re-tokenises its cited document and, at overlap 0, every other document, with no
index and no cache: the cost model the paper's description implies. Not part of the package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evident.alignment.overlap import ngrams
from evident.alignment.overlap import overlap_tokens as _overlap
from evident.alignment.tokenize import words


def align_reference(
    passages: Sequence[Mapping[str, Any]], documents: Sequence[Mapping[str, Any]], *, n: int = 5,
    threshold: float = 0.7,
) -> list[dict[str, Any]]:
    """Decisions as dicts `{passage_id, action, url, overlap, text}` following §3.3 literally."""
    texts = {d["url"]: d.get("content", d.get("text", "")) for d in documents}
    out: list[dict[str, Any]] = []
    for p in passages:
        ptoks = words(p["content"])
        ov = _overlap(ptoks, words(texts.get(p["url"], "")), n) if p["url"] in texts else 0.0
        action, url, text = "dropped", p["url"], ""
        if ov > threshold:
            action, text = "kept", p["content"]
        elif ov > 0:
            dtoks = words(texts[p["url"]])
            grams = ngrams(dtoks, n)
            keep = [False] * len(ptoks)
            for i in range(len(ptoks) - n + 1):
                if grams[tuple(ptoks[i : i + n])]:
                    keep[i : i + n] = [True] * n
            action, text = "truncated", " ".join(t for t, k in zip(ptoks, keep, strict=True) if k)
        else:
            for u, dtext in texts.items():
                if u != p["url"] and _overlap(ptoks, words(dtext), n) > threshold:
                    action, url, text = "relinked", u, p["content"]
                    break
        out.append({"passage_id": p["passage_id"], "action": action, "url": url, "overlap": ov,
                    "text": text})
    return out
