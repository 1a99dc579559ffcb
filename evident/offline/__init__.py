"""Offline engine: what EvidenT answers with when no LLM is configured (framework-free).

    from evident.offline import extract_passages, compose_answer
    passages = extract_passages(query, documents)        # verbatim sentence windows
    answer = compose_answer(query, align(passages, documents))   # cited extractive answer
"""

from evident.offline.composer import OFFLINE_PREFACE, PREFACE, answer_coverage, compose_answer, preface
from evident.offline.extractor import address_score, extract_passages

__all__ = [
    "OFFLINE_PREFACE", "PREFACE", "address_score", "answer_coverage", "compose_answer", "extract_passages",
    "preface",
]
