"""Answerability: whether the best evidence retrieved addresses what is asked (the offline engine's
refusal, "Not sufficient information to answer.").

A window's evidence is its lexical coverage (the share of the asking part's weighted terms the window,
its heading and its page title hold: `evident.offline.scoring.Scorer.coverage`, where scenario words
count only where they match, so sentences about the asker's situation do not lower it) and, where the
retrieval by meaning attached them (`SEMANTIC_WINDOWS`), its best cosine to the query. Its
answerability is

    (1 - meaning_weight) * coverage + meaning_weight * cosine    read by meaning (0 if coverage is 0)
    coverage                                                      read by words alone

and the engine answers when the best window reaches `gate` (read by meaning) or `words_gate` (read by
words alone). Meaning lifts a window that says what is asked in other words (the asker's "husband",
the page's "spouse") and lowers one whose words match but whose text means something else; a window
that shares no word with the question has answerability 0 whatever its cosine, so meaning alone never
passes. When no window clears its threshold by `hedge_margin`, the evidence is weak: the engine
answers, but says first that the documentation does not state the answer explicitly. Pure Python, no
framework imports; benchmarks/abstention.py draws the curve the settings come from (docs/evaluation.md,
"Abstention" and "Weak evidence is said to be weak").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from evident.context import EvidentContext

__all__ = ["ALWAYS", "DEFAULT_GATE", "AnswerGate", "Evidence", "answerability", "best_answerability"]


@dataclass(frozen=True)
class Evidence:
    """What the gate reads of one window: `cosine` is None when its page carries no meaning."""

    coverage: float
    cosine: float | None


@dataclass(frozen=True)
class AnswerGate:
    """The answerability model's settings: `EvidentContext.answer_meaning_weight`, `answer_gate`,
    `answer_words_gate` and `answer_hedge_margin`, whose descriptions say where their defaults come from."""

    meaning_weight: float
    gate: float
    words_gate: float
    hedge_margin: float = 0.0

    @classmethod
    def of(cls, ctx: EvidentContext) -> AnswerGate:
        return cls(ctx.answer_meaning_weight, ctx.answer_gate, ctx.answer_words_gate, ctx.answer_hedge_margin)

    def threshold(self, evidence: Evidence) -> float:
        return self.words_gate if evidence.cosine is None else self.gate

    def by_words(self) -> AnswerGate:
        """The same gate reading the words alone (`words_gate` on the coverage), meaning or not."""
        return AnswerGate(0.0, gate=self.words_gate, words_gate=self.words_gate, hedge_margin=self.hedge_margin)

    def admits(self, evidence: Evidence) -> bool:
        """Whether the window addresses the question well enough to answer from."""
        return answerability(evidence, self.meaning_weight) >= self.threshold(evidence)

    def assures(self, evidence: Evidence) -> bool:
        """Whether the window addresses the question clearly: it clears its threshold by `hedge_margin`."""
        return answerability(evidence, self.meaning_weight) >= self.threshold(evidence) + self.hedge_margin


DEFAULT_GATE = AnswerGate.of(EvidentContext())
# Nothing refused or hedged: what a method that always answers (the one-window baseline) uses.
ALWAYS = AnswerGate(DEFAULT_GATE.meaning_weight, gate=0.0, words_gate=0.0)


def answerability(evidence: Evidence, meaning_weight: float) -> float:
    """The window's answerability (0..1) of the module docstring."""
    if evidence.cosine is None or evidence.coverage <= 0.0:
        return evidence.coverage
    return (1.0 - meaning_weight) * evidence.coverage + meaning_weight * max(evidence.cosine, 0.0)


def best_answerability(windows: Iterable[Evidence], meaning_weight: float) -> float:
    """The largest answerability among `windows` (0 for none)."""
    return max((answerability(e, meaning_weight) for e in windows), default=0.0)
