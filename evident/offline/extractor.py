"""Deterministic lexical passage extractor: the offline stand-in for the LLM extraction call.

It chooses among the candidate windows of the retrieved pages (`evident.offline.windows`) those that
answer (the answerability gate decides whether any does), and quotes each verbatim
(`document.content[start:end]`), so that alignment keeps every passage as-is. Pure Python, no
framework imports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypedDict, Unpack

from evident.alignment.models import Passage, SourceDocument
from evident.offline.answerability import DEFAULT_GATE, AnswerGate, Evidence
from evident.offline.terms import QUANTITY
from evident.offline.units import COPY_MIN_WORDS, Unit
from evident.offline.windows import candidate_windows
from evident.settings import DEFAULT_OFFLINE, OfflineSettings

__all__ = [
    "SECONDARY_SCORE_RATIO", "Extraction", "address_score", "extract_evidence", "extract_passages", "join_openings",
    "window_evidence",
]

# A window after the first must score at least this share of the best one.
SECONDARY_SCORE_RATIO = 0.5


def address_score(
    query: str, documents: Sequence[SourceDocument], settings: OfflineSettings = DEFAULT_OFFLINE
) -> float:
    """How well the retrieved text addresses `query` by its words (0..1): the largest share of the
    query's weighted terms that one window covers. Read by words alone, the extractor abstains below
    `AnswerGate.words_gate` of it."""
    if not documents:
        return 0.0
    _, _, windows = candidate_windows(query, documents, 0.0, settings)
    return max((w.coverage for w in windows), default=0.0)


def window_evidence(
    query: str, documents: Sequence[SourceDocument], semantic_weight: float = 0.0,
    settings: OfflineSettings = DEFAULT_OFFLINE,
) -> list[Evidence]:
    """What the answerability gate reads of every candidate window, as `extract_passages` forms them
    (benchmarks/abstention.py draws the gate's trade-off curve from it)."""
    return [w.evidence for w in candidate_windows(query, documents, semantic_weight, settings)[2]] if documents else []


@dataclass(frozen=True)
class Extraction:
    """The extractor's passages, and whether its evidence is weak: the gate admitted a window, but none
    by `AnswerGate.hedge_margin` (the composer then opens the answer by saying so)."""

    passages: list[Passage] = field(default_factory=list)
    weak: bool = False


class ExtractOptions(TypedDict, total=False):
    """`extract_evidence`'s keyword arguments, which `extract_passages` takes too."""

    max_passages: int
    max_per_document: int
    semantic_weight: float
    gate: AnswerGate
    settings: OfflineSettings
    secondary_score_ratio: float


def extract_passages(
    query: str, documents: Sequence[SourceDocument], **options: Unpack[ExtractOptions]
) -> list[Passage]:
    """`extract_evidence(query, documents, **options).passages`: the passages alone."""
    return extract_evidence(query, documents, **options).passages


def extract_evidence(
    query: str,
    documents: Sequence[SourceDocument],
    *,
    max_passages: int = 6,
    max_per_document: int = 3,
    semantic_weight: float = 0.0,
    gate: AnswerGate = DEFAULT_GATE,
    settings: OfflineSettings = DEFAULT_OFFLINE,
    secondary_score_ratio: float = SECONDARY_SCORE_RATIO,
) -> Extraction:
    """Verbatim sentence windows from `documents` (in retrieval rank order) relevant to `query`.

    Each passage is `document.content[start:end]` for a window of at most `settings.window_units`
    consecutive units (a label with its list items; up to the same count, the sentences that read on
    from it with "However", "This", ...), a lower-ranked window that opens the same paragraph
    right before it joined in front (`join_openings`), ids "p1", "p2", ... in score order
    (ties: document order, then position); at most `max_per_document` per document, never
    overlapping; then the same text on other retrieved pages, cited there too (`_with_copies`; these
    copies do not count toward `max_passages`).
    No passages when no window is answerable enough for `gate` (`evident.offline.answerability`): the
    caller then answers "not sufficient information"; `weak` when no window is by the gate's margin.

    `semantic_weight`: the share of meaning in the windows' ranking, for documents retrieved by meaning
    (`evident.offline.windows.candidate_windows`); 0 ranks by words alone. `secondary_score_ratio`: the
    share of the best-ranked window's score another window needs.
    """
    if max_passages <= 0 or not documents:
        return Extraction()
    scorer, units, windows = candidate_windows(query, documents, semantic_weight, settings)
    # The answer leads with a window the gate admits: the best-ranked one whose words cover enough,
    # else the best-ranked one. Never with one it refuses, whose words matched and meaning did not.
    admitted = [w for w in windows if gate.admits(w.evidence)]
    if not admitted:
        return Extraction()
    best = next((w for w in admitted if w.coverage >= gate.words_gate), admitted[0])

    chosen: list[tuple[int, int, int]] = []  # (document, first unit, last unit), best first
    per_doc: dict[int, int] = {}
    for w in windows:
        # The windows skipped below are drops.OFFLINE_CAP (nothing is recorded per window).
        if len(chosen) >= max_passages:
            break
        if w is not best and (
            w.score < secondary_score_ratio * windows[0].score
            # One shared word ("team") is a coincidence; the first window already answers it.
            or w.matched < min(2, len(scorer.weights.keys() - {QUANTITY}))
        ):
            continue
        if per_doc.get(w.doc, 0) >= max_per_document:
            continue
        per_doc[w.doc] = per_doc.get(w.doc, 0) + 1
        chosen.append((w.doc, w.lead, w.end))

    passages: list[Passage] = []
    pieces: list[list[str]] = []
    for d, first, last in join_openings(chosen, units):
        doc = documents[d]
        start, end = units[d][first].start, units[d][last].end
        passages.append(Passage(passage_id=f"p{len(passages) + 1}", url=doc.url, content=doc.content[start:end]))
        span = units[d][first : last + 1]
        sentences = [doc.content[u.start : u.end] for u in span if not u.noise and len(u.key) >= COPY_MIN_WORDS]
        whole = [passages[-1].content] if sum(len(u.key) for u in span) >= COPY_MIN_WORDS else []
        pieces.append(whole + sentences)
    return Extraction(_with_copies(passages, pieces, documents), not any(gate.assures(w.evidence) for w in admitted))


def join_openings(chosen: list[tuple[int, int, int]], units: list[tuple[Unit, ...]]) -> list[tuple[int, int, int]]:
    """`chosen` windows (best first), each joined by a lower-ranked one that opens its paragraph
    right before it: the reader gets "We read every complaint. You can submit one online..."
    in the page's order, at the better window's rank, rather than its opening later, cut off from
    what it introduces. Text after a window stays a passage of its own:
    appended, it lengthens the lead passage the composer keeps whole (measured: fewer gold answers)."""
    out: list[tuple[int, int, int]] = []
    for d, first, last in chosen:
        for n, (od, ofirst, olast) in enumerate(out):
            if od != d or last >= ofirst:
                continue
            lead = units[d][ofirst]
            if all(u.noise for u in units[d][last + 1 : ofirst]) and not lead.new_paragraph and not lead.label:
                out[n] = (d, first, olast)
                break
        else:
            out.append((d, first, last))
    return out


def _with_copies(
    passages: list[Passage], pieces: list[list[str]], documents: Sequence[SourceDocument]
) -> list[Passage]:
    """`passages` plus, after them, the same text quoted from every other retrieved page that holds
    it word for word (`pieces`, per passage: the whole passage, then each of its sentences, each of at
    least COPY_MIN_WORDS words).

    Near-duplicate pages (a page published twice, one policy on two sites) say the same
    thing; the composer merges identical sentences under all their URLs, so the answer is unchanged
    but cites each page that says it, not only the higher-ranked one.
    Appended last, so that the ranking of the passages (and of their sentences) stays as it was.
    """
    out = list(passages)
    for p, texts in zip(passages, pieces, strict=True):
        for doc in documents:
            if doc.url == p.url:
                continue
            for text in texts:
                if text in doc.content and not any(o.url == doc.url and text in o.content for o in out):
                    out.append(Passage(passage_id="", url=doc.url, content=text))
    if len(out) == len(passages):
        return passages
    return [o.model_copy(update={"passage_id": f"p{i + 1}"}) for i, o in enumerate(out)]
