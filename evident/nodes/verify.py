"""verify (beyond the paper): every answer sentence must be supported by a passage it cites."""

from __future__ import annotations

from typing import Any

from evident.answer import check_answer, known_ids, parse_answer, render_answer, units_of
from evident.models import SourceError
from evident.nodes.common import settings, timed
from evident.offline.composer import compose_answer
from evident.state import EvidentState
from evident.support import GeneratedSentenceSupport


def verify(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
    ctx = settings(runtime)
    update: dict[str, Any] = {}
    with timed("verify", update):
        # A model paraphrases, so its sentences are judged by their own measure (evident/support.py).
        model_written = state.get("generated_by") == "model"
        known = known_ids(state.get("verified") or [], state.get("documents") or [])
        lines, removed = check_answer(
            parse_answer(state.get("draft") or "", known), state.get("verified") or [],
            n=ctx.ngram_n, threshold=ctx.threshold, unsupported=ctx.unsupported,
            measure=GeneratedSentenceSupport(ctx.sentence_threshold) if model_written else None,
        )
        if model_written and not any(u.urls and not u.flagged for u in units_of(lines)):
            # Evidence was verified but none of the model's sentences stands on it: answer extractively.
            draft = compose_answer(state["query"], state.get("verified") or [])
            lines, more = check_answer(
                parse_answer(draft, known), state.get("verified") or [],
                n=ctx.ngram_n, threshold=ctx.threshold, unsupported=ctx.unsupported,
            )
            removed = removed + more
            update["generated_by"] = "offline"
            update["model_errors"] = [SourceError(
                source=ctx.model or "model", kind="model",
                message="verify: no sentence of the model's answer is supported by the verified passages; "
                "used the offline composer",
            )]
        update["draft"] = render_answer(lines)
        update["removed_sentences"] = removed
    return update
