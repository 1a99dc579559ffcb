"""Alignment and filtering (paper §3.3): deterministic, framework-free verification of passages.

    from evident.alignment import align
    decisions = align(passages, documents, n=5, threshold=0.7)
"""

from evident.alignment.aligner import QUOTE_JOINER, align, quote_of
from evident.alignment.models import ACTIONS, AlignmentDecision, Passage, SourceDocument, Substitution, content_hash
from evident.alignment.normalize import nfkc_casefold, normalize_with_map
from evident.alignment.overlap import ngrams, overlap_n, passage_units
from evident.alignment.tokenize import DEFAULT_CACHE, DocumentIndex, IndexCache, Tokens, tokenize

__all__ = [
    "ACTIONS", "QUOTE_JOINER", "AlignmentDecision", "DEFAULT_CACHE", "DocumentIndex", "IndexCache", "Passage",
    "SourceDocument", "Substitution", "Tokens", "align", "content_hash", "ngrams", "nfkc_casefold",
    "normalize_with_map", "overlap_n", "passage_units", "quote_of", "tokenize",
]
