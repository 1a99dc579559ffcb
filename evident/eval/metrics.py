"""Per-query measures, as the paper defines them (§6.1, §6.2, App. F, G).

Pure functions over plain values, so each one is checked by hand on small cases.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evident.alignment.overlap import ngrams, overlap_n
from evident.alignment.sentences import split_sentences
from evident.alignment.tokenize import words
from evident.eval.citations import split_references
from evident.eval.records import CitedFact

ANSCOV_NS = (2, 3, 5, 10)
ALIGNMENT_ACTIONS = ("kept", "truncated", "relinked", "corrected", "dropped")
_CITATION_GROUP = re.compile(r"\[[^\]\s]*\]")


def url_key(url: str) -> str:
    """Loose form of a URL: a model's citation matches a page however it writes a trailing / or #part."""
    return url.strip().split("#", 1)[0].rstrip("/").lower()


def hallucinated(cited: Iterable[str], retrieved: Iterable[str]) -> bool:
    """Eq. 2: some citation is not among the retrieved documents."""
    known = {url_key(u) for u in retrieved}
    return any(url_key(u) not in known for u in cited)


def grounded(cited: Iterable[str], gold: Iterable[str]) -> bool:
    """Eq. 3: some citation is a gold page."""
    g = {url_key(u) for u in gold}
    return any(url_key(u) in g for u in cited)


def first_citation_gold(cited: Sequence[str], gold: Iterable[str]) -> bool | None:
    """Whether the first cited URL is gold (None: nothing cited)."""
    return grounded(cited[:1], gold) if cited else None


def cited_url_hits(cited: Iterable[str], gold: Iterable[str]) -> tuple[int, int]:
    """(gold, all) among the distinct cited URLs: citing every page cannot raise this share."""
    g = {url_key(u) for u in gold}
    distinct = list(dict.fromkeys(url_key(u) for u in cited))
    return sum(u in g for u in distinct), len(distinct)


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def evidence_found(texts: Iterable[str], gold_evidence: Iterable[str]) -> bool:
    """Some cited text contains some gold evidence string (whitespace and case aside)."""
    golds = [_flat(e) for e in gold_evidence if e.strip()]
    return any(g in _flat(t) for t in texts for g in golds)


def overlap_counts(answer: str, document: str, n: int) -> tuple[int, int, int]:
    """(I_n, |G_n(A)|, |G_n(D)|) over multisets of n-grams of normalised word tokens (n=1: words)."""
    ga, gd = ngrams(words(answer), n), ngrams(words(document), n)
    inter = sum(min(c, gd[g]) for g, c in ga.items())
    return inter, sum(ga.values()), sum(gd.values())


def coverage(facts: Sequence[CitedFact], documents: Mapping[str, str], n: int) -> tuple[float, float] | None:
    """(AnsCov@n, DocFocus@n) of one answer (Eq. 5, 6): each fact against the document it cites,
    averaged over the answer's distinct (fact, document) pairs.

    A cited URL that was not retrieved has no text to trace to and scores 0; a fact shorter than n
    words has no n-gram and is left out. None when nothing is measurable.
    """
    by_key = {url_key(u): text for u, text in documents.items()}
    scores: list[tuple[float, float]] = []
    for sentence, key in dict.fromkeys((f.sentence, url_key(f.url)) for f in facts):
        doc = by_key.get(key)
        if doc is None:
            if len(words(sentence)) >= n:
                scores.append((0.0, 0.0))
            continue
        inter, size_a, size_d = overlap_counts(sentence, doc, n)
        if size_a == 0:
            continue
        scores.append((inter / size_a, inter / size_d if size_d else 0.0))
    if not scores:
        return None
    return sum(s[0] for s in scores) / len(scores), sum(s[1] for s in scores) / len(scores)


def answer_length(answer: str) -> tuple[int, int]:
    """(sentences, words) of an answer's body: citation markers and the reference list left out."""
    body = _CITATION_GROUP.sub(" ", split_references(answer)[0])
    sentences = [(a, b) for a, b in split_sentences(body, inside_items=True) if re.search(r"\w", body[a:b])]
    return len(sentences), len(words(body))


def retrieval_hit(retrieved: Sequence[str], gold: Iterable[str], k: int | None) -> bool:
    """The gold page is among the first k retrieved (all of them when k is None)."""
    return grounded(retrieved if k is None else retrieved[:k], gold)


def action_counts(alignment: Iterable[Mapping[str, object]]) -> dict[str, int]:
    """Passages per alignment action (App. F: kept, truncated, relinked, corrected, dropped)."""
    out = dict.fromkeys(ALIGNMENT_ACTIONS, 0)
    for d in alignment:
        action = str(d.get("action"))
        out[action] = out.get(action, 0) + 1
    return out


def filtering_counts(
    alignment: Sequence[Mapping[str, Any]], documents: Mapping[str, str], n: int, threshold: float
) -> dict[str, int]:
    """App. G counts of one query: extracted and retained passages, those below the threshold
    before filtering (overlap with the cited page) and after it (the retained quote against its
    final page), and the 10-grams of retained quotes found in their page (Cov@10)."""
    by_key = {url_key(u): text for u, text in documents.items()}
    out = {"passages": 0, "retained": 0, "pre_below": 0, "post_below": 0, "cov10_hits": 0, "cov10_total": 0}
    for d in alignment:
        out["passages"] += 1
        if float(d.get("overlap", 0.0)) < threshold:
            out["pre_below"] += 1
        if d.get("action") == "dropped":
            continue
        out["retained"] += 1
        quote = str(d.get("quote") or d.get("content") or "")
        doc = by_key.get(url_key(str(d.get("url", ""))), "")
        if overlap_n(quote, doc, n) < threshold:
            out["post_below"] += 1
        inter, size_a, _ = overlap_counts(quote, doc, 10)
        out["cov10_hits"] += inter
        out["cov10_total"] += size_a
    return out
