"""The state of `evident_agent` (evident/agent/graph.py).

Its own module on purpose: a LangGraph server loads graph.py by its file path, under a name that is not in
`sys.modules`, so a state class declared there could not have its annotations resolved.
"""

from __future__ import annotations

from typing import Any, NotRequired

from evident.agent.verify_answer import VerifyAnswerState


class AgentState(VerifyAnswerState):
    """The conversation, the check of the last answer, and the answer while it is a draft."""

    # The final answer before `verify_answer` checked it, as JSON: LangGraph's messages stream emits every
    # message object a node writes, under any key, so a draft kept as a message would reach the reader.
    draft: NotRequired[dict[str, Any] | None]
