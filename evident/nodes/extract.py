"""extract (paper §3.2): candidate verbatim passages from the retrieved documents.

Offline mode uses the deterministic lexical extractor. The LLM extractor is not part of this
version; a configured model is reported in `model_errors` and the offline extractor answers.
"""

from __future__ import annotations

from typing import Any

from evident.models import SourceError
from evident.nodes.common import settings, timed
from evident.offline.extractor import extract_passages
from evident.state import EvidentState


def extract(state: EvidentState, runtime: Any = None) -> dict[str, Any]:
    ctx = settings(runtime)
    update: dict[str, Any] = {}
    with timed("extract", update):
        if ctx.resolved_mode == "llm":
            update["model_errors"] = [SourceError(
                source=ctx.model or "model", kind="model",
                message="the LLM extraction path is not available in this version; used the offline extractor",
            )]
        docs = state.get("documents") or []
        update["passages"] = extract_passages(state["query"], docs, max_passages=ctx.max_passages) if docs else []
    return update
