"""Is a verified quote evidence at all? Alignment proves a passage is the document's own text, not
that it says anything: a bare heading ("Overview", "# Travel policy") or a two-word fragment
matches its source perfectly yet supports no claim, and a weak model that cites one still triggers a
generation call. Such a passage is dropped with its reason. Framework-free.
"""

from __future__ import annotations

import re

from evident.alignment import drops
from evident.alignment.lexicon import content_tokens
from evident.alignment.models import AlignmentDecision

# A line that only titles what follows: Markdown ATX / setext headings, a bold-only line.
_HEADING_LINE = re.compile(r"^\s*(#{1,6}\s.*|[=\-]{3,}|\*\*[^*]+\*\*:?|__[^_]+__:?)\s*$")




def is_heading_only(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and all(_HEADING_LINE.match(ln) for ln in lines)


def evidence_problem(text: str, min_tokens: int) -> str | None:
    """Why `text` cannot count as evidence, or None when it can."""
    if is_heading_only(text):
        return drops.HEADING_ONLY
    found = len(content_tokens(text))
    if found < min_tokens:
        return drops.TOO_FEW_WORDS.format(found=found, needed=min_tokens)
    return None


def drop_non_evidence(decision: AlignmentDecision, min_tokens: int) -> AlignmentDecision:
    """`decision` unchanged, or dropped with the reason its quote is not evidence."""
    if decision.action == "dropped":
        return decision
    # The quote may have lost the heading's markup ("# "), which the passage as extracted still has.
    heading = is_heading_only(decision.content)
    problem = drops.HEADING_ONLY if heading else evidence_problem(
        decision.quote or decision.content, min_tokens)
    if problem is None:
        return decision
    return decision.as_dropped(problem)
