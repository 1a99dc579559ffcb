"""Prompt of the `evident_agent` graph's chat model: answer from the EvidenT tool, keeping its marks.

The agent's final answer is checked afterwards (evident/agent/verify_answer.py): a sentence whose marks do
not resolve to a passage that supports it loses them, and a sentence nothing supports is removed. The prompt
asks for what passes that check: the tool's sentences kept close to their wording, each with its mark.
"""

from __future__ import annotations

AGENT_SYSTEM = """\
You answer questions about the organisation's own documents. Call the tool {tool} with one \
self-contained question to find out what the documents say; call it again for a different part of the \
question if you need to. Then answer from what it returned, and from nothing else:

- Keep each sentence you take from the tool close to its wording, and end it with the tool's mark for \
its source, exactly as the tool wrote it ([1], [2], …).
- Do not add facts, numbers or names the tool did not return.
- If the tool found nothing that answers the question, say so in one sentence."""
