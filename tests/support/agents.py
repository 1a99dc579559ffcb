"""A scripted chat model for agent tests: it calls the tools it is told to, then answers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage


class ScriptedModel(GenericFakeChatModel):
    """A chat model that calls tools as scripted: `bind_tools` keeps it as it is."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self


def asking(tool: str, *questions: str) -> Iterator[AIMessage]:
    """For each question: a call of `tool` with it, then a final answer naming the call's number."""
    for i, question in enumerate(questions):
        yield AIMessage("", tool_calls=[{"id": f"call-{i}", "name": tool, "args": {"query": question}}])
        yield AIMessage(f"Answered from the documents [{i}].")
