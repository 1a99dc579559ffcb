"""LLM-as-judge (paper App. D.3): does the cited source entail each cited sentence?

The source of a fact is the exact text its citation resolves to when there is one (EvidenT, bm25),
else the cited document (the baselines cite whole pages); a URL that was not retrieved has no
source and is judged "No" without a call.
"""

from __future__ import annotations

import json
import re
from functools import partial

from evident.context import EvidentContext
from evident.eval.metrics import url_key
from evident.eval.records import MethodRecord
from evident.llm.failures import call_with_retries
from evident.llm.models import Models
from evident.llm.replies import text_of
from evident.prompts.judge import JUDGE_PROMPT

LABELS = ("Yes", "Partial", "No")
MAX_SOURCE_CHARS = 12_000  # a cited page beyond this is cut: the judge reads its beginning
_OBJECT = re.compile(r"\{.*\}", re.S)


def parse_label(text: str) -> str:
    """The judge's label, or "invalid" when the reply holds none."""
    found = _OBJECT.search(text or "")
    if found:
        try:
            label = json.loads(found.group(0)).get("label")
        except (ValueError, AttributeError):
            label = None
        if isinstance(label, str) and label.strip().capitalize() in LABELS:
            return label.strip().capitalize()
    return "invalid"


class Judge:
    def __init__(self, ctx: EvidentContext, chat_model: object = None) -> None:
        self.ctx = ctx
        self.models = Models(chat_model)

    def __call__(self, record: MethodRecord, documents: dict[str, str]) -> list[str]:
        by_key = {url_key(u): t for u, t in documents.items()}
        model = self.models.get(self.ctx, "generate")
        labels: list[str] = []
        for fact in record.facts:
            source = fact.quote or by_key.get(url_key(fact.url))
            if source is None:
                labels.append("No")
                continue
            messages = JUDGE_PROMPT.format_messages(source_text=source[:MAX_SOURCE_CHARS], target_text=fact.sentence)
            try:
                reply = call_with_retries(partial(model.invoke, messages), self.ctx)
            except Exception:  # one failed judgement must not stop the run
                labels.append("invalid")
                continue
            labels.append(parse_label(text_of(reply)))
        return labels
