"""A scripted chat model for agent tests: it calls the tools it is told to, then answers."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk


class ScriptedModel(GenericFakeChatModel):
    """A chat model that calls tools as scripted: `bind_tools` keeps it as it is."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        # Streamed whole, tool calls included (the generic fake streams words of the text only, and a reply
        # that is only a tool call would stream nothing): what a graph streamed with stream_mode="messages" needs.
        reply = self._generate(messages, stop=stop, run_manager=None, **kwargs).generations[0].message
        chunk = ChatGenerationChunk(message=AIMessageChunk(
            content=reply.content, id=reply.id,
            tool_call_chunks=[{"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                              for i, c in enumerate(getattr(reply, "tool_calls", []) or [])]))
        if run_manager:
            run_manager.on_llm_new_token(str(reply.content), chunk=chunk)
        yield chunk


def asking(tool: str, *questions: str) -> Iterator[AIMessage]:
    """For each question: a call of `tool` with it, then a final answer naming the call's number."""
    for i, question in enumerate(questions):
        yield AIMessage("", tool_calls=[{"id": f"call-{i}", "name": tool, "args": {"query": question}}])
        yield AIMessage(f"Answered from the documents [{i}].")
