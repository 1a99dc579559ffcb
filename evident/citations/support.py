"""When does a verified passage support an answer sentence? Two deterministic, lexical measures.

Offline answers are copied from the verified quotes, so the verify step uses the paper's own
n-gram measure for them (`overlap_n(sentence, quote) > threshold`, see `evident.citations.answer.support`).

A model rewrites: "Reports must be submitted within 30 days" comes back as "You must submit your
report within 30 days", whose 5-gram overlap with the source is near zero although nothing was
invented. For model-written sentences the measure is therefore:

1. Numbers gate: every number written with digits in the sentence ("30", "1,000", "8.5") must occur
   in the passage. A changed number is the costliest hallucination and the one a word-overlap
   measure forgives most easily, so it alone makes a sentence unsupported.
2. Negation gate: a negation ("not", "never", "no", "n't", "without", …) the passage does not have
   makes the sentence unsupported, and so does restating a negated clause of the passage without
   its negation ("must not be shared" → "must be shared"). Like a number, one word flips the claim.
3. Content-token recall: the share of the sentence's content tokens (case-folded NFKC word tokens,
   minus a short list of function words, each reduced by the shared stemmer
   `evident.alignment.lexicon.stem` so "submitted" matches "submit" and "reports" matches
   "report") that occur in the passage. The sentence is supported when this share exceeds
   `EvidentContext.sentence_threshold` (0.8 by default).

Modals, quantifiers and before/after are content words on purpose: "may", "all", "only" and
"before" change what a sentence claims. Known limit: a long sentence can
carry one unsupported word and still exceed 0.8; set `sentence_threshold` higher (up to 1.0, every
content word must be in the source) for stricter checking, or `unsupported = "flag"` to see what was
judged unsupported. Framework-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evident.alignment import AlignmentDecision, nfkc_casefold
from evident.alignment.lexicon import NOT, content_tokens

# A passage's negated clause is "restated" when the sentence has this many of its next content words.
_NEGATED_CLAUSE = 2
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")


def _negated_words(tokens: list[str]) -> list[set[str]]:
    """For each negation in `tokens`, the content words of the clause it negates (the next few)."""
    out: list[set[str]] = []
    for i, t in enumerate(tokens):
        if t == NOT:
            out.append({x for x in tokens[i + 1 : i + 1 + _NEGATED_CLAUSE] if x != NOT})
    return out


def _flips_negation(mine: list[str], theirs: list[str]) -> bool:
    """The sentence negates something the source does not, or restates a negated clause of the
    source without its negation. Negations are matched by the words right after them, so a "not"
    elsewhere in a long passage does not vouch for the sentence's."""
    source_clauses = _negated_words(theirs)
    for clause in _negated_words(mine):
        if not any(clause & other or not clause for other in source_clauses):
            return True
    if NOT in mine:
        return False
    present = set(mine)
    return any(len(c) == _NEGATED_CLAUSE and c <= present for c in source_clauses)


def numbers_in(text: str) -> set[str]:
    return {m.group(0).replace(",", "") for m in _NUMBER.finditer(nfkc_casefold(text))}


def token_support(sentence: str, source: str) -> float:
    """Numbers and negation gates, then the share of the sentence's content tokens found in `source` (0..1)."""
    if not numbers_in(sentence) <= numbers_in(source):
        return 0.0
    mine = content_tokens(sentence)
    if not mine:
        return 0.0
    theirs = content_tokens(source)
    if _flips_negation(mine, theirs):
        return 0.0
    present = set(theirs)
    return sum(1 for t in mine if t in present) / len(mine)


@dataclass(frozen=True)
class GeneratedSentenceSupport:
    """The measure for model-written sentences (module docstring): score and pass rule together."""

    threshold: float = 0.8

    def score(self, sentence: str, decision: AlignmentDecision) -> float:
        return token_support(sentence, decision.quote or decision.content)

    def passes(self, score: float) -> bool:
        return score > self.threshold
