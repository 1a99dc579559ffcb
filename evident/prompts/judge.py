"""The LLM-as-judge entailment check (paper App. D.3), in our own words.

Variables: `source_text` (what a citation points to: EvidenT's quote, or the cited document) and
`target_text` (the answer sentence that cites it). The reply is one JSON object
`{"label": "Yes" | "Partial" | "No", "reason": str, "confidence_score": float}`.
"""

from __future__ import annotations

from langchain_core.prompts import ChatPromptTemplate

JUDGE_SYSTEM = "You are a careful assistant that checks whether a statement is backed by a source."

JUDGE_USER = """\
Decide whether the source text below supports the target text: is everything the target text says \
stated in, or strictly implied by, the source text?

Answer with a single JSON object and nothing else. It has three fields:
- "label": "Yes" when the source text supports all of the target text, "Partial" when it supports only \
part of it (the target text adds, generalises or changes something), "No" when it does not support it \
or contradicts it;
- "reason": one short sentence explaining the label;
- "confidence_score": a number between 0 and 1, how sure you are of the label.

Examples (their texts are made up):
Source text: "Badges are reissued by the front desk within two working days of a request."
Target text: "The front desk reissues a badge in two working days."
{{"label": "Yes", "reason": "The target restates the source.", "confidence_score": 0.9}}

Source text: "The nightly backup of the billing database failed on Tuesday because the disk was full."
Target text: "Backups are unreliable."
{{"label": "Partial", "reason": "One failed backup does not show that backups in general are unreliable.", \
"confidence_score": 0.7}}

Source text: "Archived projects stay readable but cannot be edited."
Target text: "Archived projects are deleted after a year."
{{"label": "No", "reason": "The source says archived projects stay readable; it says nothing about deletion.", \
"confidence_score": 0.8}}

Source text: {source_text}
Target text: {target_text}
JSON:"""

JUDGE_PROMPT = ChatPromptTemplate.from_messages([("system", JUDGE_SYSTEM), ("human", JUDGE_USER)])
"""The entailment judge of paper App. D.3."""
