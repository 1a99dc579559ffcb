"""verify (beyond the paper): every answer sentence must be supported by a passage it cites.

A model answer is salvaged, not discarded, when some of its sentences carry no citation (small
models often forget them): each such sentence gets the verified passage that supports it by the
same measure, what nothing supports is removed, and only when nothing is left does the offline
composer answer. When the draft cited nothing at all, `model_errors` says how many sentences were
re-cited or removed.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from evident.alignment.lexicon import content_tokens
from evident.alignment.sentences import split_sentences
from evident.citations.answer import (
    check_answer,
    is_preface,
    sentences_in,
)
from evident.citations.support import GeneratedSentenceSupport
from evident.context import EvidentContext
from evident.models import AlignmentDecision, Line, Sentence, SourceError
from evident.nodes.common import draft_of, offline_draft, timed
from evident.nodes.names import VERIFY
from evident.request_settings import run_settings
from evident.state import DraftUpdate, EvidentState, read


def _uncited_sentences(lines: list[Line], min_tokens: int, query: str) -> tuple[list[Sentence], list[str]]:
    """Split every uncited unit (a run of text with no citation) into its sentences, in place, so
    that each can be matched to its own passage; returns those sentence units, and what was taken
    out as no claim at all: fragments (fewer than `min_tokens` content tokens, e.g. a reply cut off
    by its token cap), questions and text whose every content word is the question's (a weak model
    restates the user's question, whose words are all in the passage), and repeats of a sentence
    already kept."""
    out: list[Sentence] = []
    fragments: list[str] = []
    seen: set[str] = set()
    asked = set(content_tokens(query))
    for line in lines:
        units: list[Sentence] = []
        for u in line.sentences:
            if u.urls or not u.text or is_preface(u):
                units.append(u)
                continue
            for text in (u.text[a:b] for a, b in split_sentences(u.text, inside_items=True)):
                key = " ".join(text.casefold().split())
                mine = content_tokens(text)
                if len(mine) < min_tokens or text.endswith("?") or set(mine) <= asked or key in seen:
                    if text:
                        fragments.append(text)
                    continue
                seen.add(key)
                units.append(Sentence(text=text))
                out.append(units[-1])
        line.sentences = units
    return out, fragments


def verify(state: EvidentState, runtime: Runtime[EvidentContext]) -> DraftUpdate:
    ctx = run_settings(runtime)
    update: DraftUpdate = {}
    with timed(VERIFY, update):
        # A model paraphrases, so its sentences are judged by their own measure (evident/citations/support.py).
        model_written = state.get("generated_by") == "model"
        verified = read(AlignmentDecision, state.get("verified"))
        parsed = draft_of(state)
        cited_nothing = not any(u.urls for u in sentences_in(parsed))
        uncited, fragments = (_uncited_sentences(parsed, ctx.min_evidence_tokens, state["query"]) if model_written
                              else ([], []))
        lines, removed = check_answer(
            parsed, verified,
            n=ctx.ngram_n, threshold=ctx.threshold, unsupported=ctx.unsupported,
            measure=GeneratedSentenceSupport(ctx.sentence_threshold) if model_written else None,
        )
        if model_written and not any(u.urls and not u.flagged for u in sentences_in(lines)):
            # Evidence was verified but none of the model's sentences stands on it: answer extractively.
            lines, more = check_answer(
                offline_draft(state, ctx), verified,
                n=ctx.ngram_n, threshold=ctx.threshold, unsupported=ctx.unsupported,
            )
            removed = removed + more
            update["generated_by"] = "offline"
            update["model_errors"] = [SourceError(
                source=ctx.model or "model", kind="model",
                message="verify: no sentence of the model's answer is supported by the verified passages; "
                "used the offline composer",
            )]
        elif (uncited or fragments) and cited_nothing:
            # A draft that ignored the citation format (once a generate failure) says what was salvaged;
            # a cited draft's stray uncited sentence is repaired or removed as always.
            recited = sum(1 for u in uncited if u.urls and not u.flagged)
            update["model_errors"] = [SourceError(
                source=ctx.model or "model", kind="model",
                message=f"verify: {len(uncited) + len(fragments)} sentence(s) of the model's answer had no "
                f"citation: {recited} re-cited to the verified passage that supports them, "
                f"{len(uncited) + len(fragments) - recited} " + ("flagged" if ctx.unsupported == "flag" else "removed"),
            )]
        removed = fragments + removed
        update["draft"] = lines
        update["removed_sentences"] = removed
    return update
