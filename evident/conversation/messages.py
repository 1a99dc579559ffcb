"""LangChain messages in and out of a query: the conversation as `Turn`s, the answer as an `AIMessage`.

Messages arrive as LangChain message objects or as plain dicts (`{"role": ...}` or `{"type": ...}`);
`read_messages` reads both. An agent's state is read as it is: the conversation's turns are its
user (human) messages and the assistant's text replies; system and developer instructions, tool
results and an assistant message that calls tools are context (`turn_role` is None). They count
toward the conversation's bounds like any message, but never become the question, never stand for
the user's words and never reach a prompt. The question is the last human message after the graph's
last answer (`question_at`).

The answer message's `content` is the verified answer with its `[url]` citations, exactly the state's
`answer`; its `additional_kwargs` carry `status`, `citations` (sentence, url, passage ids, spans,
quote), `standalone_query` (the question it answered, which the next turn's rewrite reads) and
`error` when the query failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, convert_to_messages

from evident.context import EvidentContext
from evident.conversation.rule import overflow
from evident.llm.replies import text_of
from evident.models import Role, Turn

_ROLES = {"human": "user", "ai": "assistant", "user": "user", "assistant": "assistant",
          "HumanMessageChunk": "user", "AIMessageChunk": "assistant"}


def read_messages(messages: Iterable[Any] | None) -> list[BaseMessage]:
    """The messages as LangChain messages: message objects as they are, plain dicts (`{"role": ...}`,
    `{"type": ...}`, as a JSON state or a client holds them) converted. Raises `ValueError` naming the
    first message that is neither."""
    out: list[BaseMessage] = []
    for number, message in enumerate(messages or [], 1):
        if isinstance(message, BaseMessage):
            out.append(message)
            continue
        try:
            out.extend(convert_to_messages([message]))
        except Exception as exc:  # LangChain raises ValueError, NotImplementedError, KeyError, ... here
            raise ValueError(f"message {number} of the conversation is not a chat message: "
                             f"{type(exc).__name__}") from None
    return out


def _readable(messages: Iterable[Any] | None) -> list[BaseMessage]:
    """`read_messages`, or [] when a message cannot be read (the rewrite step has refused it then)."""
    try:
        return read_messages(messages)
    except ValueError:
        return []


def role_of(message: Any) -> str:
    """"user", "assistant", or the message's own type ("system", "tool", …) for any other."""
    kind = str(getattr(message, "type", "") or "")
    return _ROLES.get(kind, kind or type(message).__name__)


def turn_role(message: Any) -> Role | None:
    """"user" for a human message, "assistant" for an assistant message that calls no tool; None for
    every other message (system or developer instructions, a tool's result, an assistant's tool calls),
    which is context: never the question, never a turn that the rewrite reads."""
    role = role_of(message)
    if role == "user":
        return "user"
    calls = (getattr(message, "tool_calls", None) or getattr(message, "invalid_tool_calls", None)
             or (getattr(message, "additional_kwargs", None) or {}).get("function_call"))
    return "assistant" if role == "assistant" and not calls else None


def _standalone(message: Any) -> str | None:
    if role_of(message) != "assistant":
        return None
    value = (getattr(message, "additional_kwargs", None) or {}).get("standalone_query")
    return value if isinstance(value, str) else None


# A message's fields besides its text that a client may fill: they are kept in every checkpoint of
# the thread, so they count toward the conversation's bounds like its text does.
_EXTRA_FIELDS = ("id", "additional_kwargs", "response_metadata", "name", "tool_calls", "invalid_tool_calls",
                 "usage_metadata", "artifact")


def size_of(message: Any) -> int:
    """The characters a message holds: its text and, as compact JSON, every other field it fills
    (`id`, `additional_kwargs`, `response_metadata`, `name`, ...); the graph's own answers count their
    citations too."""
    extra = {name: value for name in _EXTRA_FIELDS if (value := getattr(message, name, None))}
    text = len(text_of(message, strict=True) or "")
    return text + (len(json.dumps(extra, ensure_ascii=False, separators=(",", ":"), default=str)) if extra else 0)


def to_turns(messages: Sequence[Any]) -> tuple[list[Turn], str | None]:
    """The conversation's turns (user messages and the assistant's text replies; context messages are
    left out, see `turn_role`), or why they cannot be read (a turn that is not text)."""
    turns = []
    for message in messages:
        role = turn_role(message)
        if role is None:
            continue
        text = text_of(message, strict=True)
        if text is None:
            return [], f"a conversation's messages must be text; a {role} message holds something else"
        turns.append(Turn(role=role, content=text, standalone=_standalone(message)))
    return turns, None


def question_at(messages: Sequence[Any]) -> int | None:
    """Where the question is: the last human message after the graph's last answer (None when there is
    none). Whatever follows it (an agent's tool calls and their results) is context."""
    for i in range(len(messages) - 1, -1, -1):
        if answered(messages[i]):
            return None
        if turn_role(messages[i]) == "user":
            return i
    return None


def earlier_answers(messages: Iterable[Any] | None, limit: int = 6) -> list[str]:
    """The text of the conversation's last `limit` assistant replies (what was already said)."""
    texts = [text_of(m) or "" for m in _readable(messages) if turn_role(m) == "assistant"]
    return [t for t in texts[-limit:] if t.strip()] if limit > 0 else []


def answered(message: Any) -> bool:
    """Whether a message is one of this graph's answers (as opposed to one a client sent)."""
    return role_of(message) == "assistant" and "status" in (getattr(message, "additional_kwargs", None) or {})


def refused(messages: Sequence[BaseMessage]) -> list[RemoveMessage]:
    """Removals of what a refused request added: every message after the graph's last answer, so the
    thread stays usable for the next, valid question."""
    last = max((i for i, m in enumerate(messages) if answered(m)), default=-1)
    return [RemoveMessage(id=m.id) for m in messages[last + 1:] if m.id]


def answer_message(state: Mapping[str, Any], update: Mapping[str, Any]) -> AIMessage:
    status = str(update.get("status") or state.get("status") or "")
    extra: dict[str, Any] = {
        "status": status,
        "evidence": str(update.get("evidence") or state.get("evidence") or ""),
        "standalone_query": str(state.get("standalone_query") or state.get("query") or ""),
        "citations": [c.model_dump(mode="json") if hasattr(c, "model_dump") else dict(c)
                      for c in update.get("citations") or []],
    }
    content = str(update.get("answer") or "")
    if status == "error":
        extra["error"] = str(state.get("error") or "")
        content = f"The question could not be answered: {extra['error']}"
    return AIMessage(content=content, additional_kwargs=extra)


def conclude(state: Mapping[str, Any], update: Mapping[str, Any], ctx: EvidentContext) -> list[BaseMessage]:
    """The `messages` update of a query's last step: its answer, and removals of the oldest messages
    when the thread would otherwise reach its limits (`max_messages`, `max_conversation_chars`) with
    the next question (up to `max_query_chars`)."""
    message = answer_message(state, update)
    held = _readable(state.get("messages"))
    sizes = [size_of(m) for m in held] + [size_of(message)]
    drop = overflow(sizes, max_messages=ctx.max_messages, max_chars=ctx.max_conversation_chars,
                    room=ctx.max_query_chars)
    return [*(RemoveMessage(id=m.id) for m in held[:drop] if m.id), message]
