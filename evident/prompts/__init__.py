"""Prompt templates (LangChain `ChatPromptTemplate`s), written in our own words after the paper.

- `EXTRACTION_PROMPT`: structured verbatim passage extraction (§3.2, App. D.1).
- `GENERATION_PROMPT`: cited answer generation from verified passages (§3.4, App. D.2).
- `PILOT_PROMPT`, `DIRECT_PROMPT`, `GES_PROMPT`: the baselines (App. B, C.1, C.2).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evident.prompts.baselines import BASELINE_PROMPTS, DIRECT_PROMPT, GES_PROMPT, PILOT_PROMPT
    from evident.prompts.extraction import EXTRACTION_JSON_SCHEMA, EXTRACTION_PROMPT
    from evident.prompts.generation import GENERATION_PROMPT
    from evident.prompts.render import (
        render_document,
        render_documents,
        render_numbered_documents,
        render_passages,
    )

# Each name loads with its module on first use (PEP 562): the templates import LangChain's prompt
# machinery (with jinja2 and yaml), which the offline path, using only `render`, never needs.
_MODULES = {
    "BASELINE_PROMPTS": "baselines", "DIRECT_PROMPT": "baselines", "GES_PROMPT": "baselines",
    "PILOT_PROMPT": "baselines",
    "EXTRACTION_JSON_SCHEMA": "extraction", "EXTRACTION_PROMPT": "extraction", "GENERATION_PROMPT": "generation",
    "render_document": "render", "render_documents": "render", "render_numbered_documents": "render",
    "render_passages": "render",
}

__all__ = [
    "BASELINE_PROMPTS", "DIRECT_PROMPT", "EXTRACTION_JSON_SCHEMA", "EXTRACTION_PROMPT", "GENERATION_PROMPT",
    "GES_PROMPT", "PILOT_PROMPT", "render_document", "render_documents", "render_numbered_documents",
    "render_passages",
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"evident.prompts.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
