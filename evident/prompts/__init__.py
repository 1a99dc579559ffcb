"""Prompt templates (LangChain `ChatPromptTemplate`s), written in our own words after the paper.

- `EXTRACTION_PROMPT`: structured verbatim passage extraction (§3.2, App. D.1).
- `GENERATION_PROMPT`: cited answer generation from verified passages (§3.4, App. D.2).
- `PILOT_PROMPT`, `DIRECT_PROMPT`, `GES_PROMPT`: the baselines (App. B, C.1, C.2).
"""

from evident.prompts.baselines import DIRECT_PROMPT, GES_PROMPT, PILOT_PROMPT
from evident.prompts.extraction import EXTRACTION_JSON_SCHEMA, EXTRACTION_PROMPT
from evident.prompts.generation import GENERATION_PROMPT
from evident.prompts.render import render_document, render_documents, render_numbered_documents, render_passages

BASELINE_PROMPTS = {"pilot": PILOT_PROMPT, "direct": DIRECT_PROMPT, "ges": GES_PROMPT}

__all__ = [
    "BASELINE_PROMPTS", "DIRECT_PROMPT", "EXTRACTION_JSON_SCHEMA", "EXTRACTION_PROMPT", "GENERATION_PROMPT",
    "GES_PROMPT", "PILOT_PROMPT", "render_document", "render_documents", "render_numbered_documents",
    "render_passages",
]
