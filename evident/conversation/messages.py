"""LangChain messages in and out of a query: the conversation as `Turn`s, the answer as an `AIMessage`.

The answer message's `content` is the verified answer with its `[url]` citations, exactly the state's
`answer`; its `additional_kwargs` carry `status`, `citations` (sentence, url, passage ids, spans,
quote), `standalone_query` (the question it answered, which the next turn's rewrite reads) and
`error` when the query failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, convert_to_messages

from evident.context import EvidentContext
from evident.conversation.rule import Role, Turn, overflow
from evident.llm.replies import text_of

_ROLES = {"human": "user", "ai": "assistant", "user": "user", "assistant": "assistant"}


def role_of(message: Any) -> str:
    """"user", "assistant", or the message's own type ("system", "tool", …) for any other."""
    kind = str(getattr(message, "type", "") or "")
    return _ROLES.get(kind, kind or type(message).__name__)


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
    """The conversation as turns, or why it cannot be read (a message that is not text)."""
    turns = []
    for message in messages:
        text = text_of(message, strict=True)
        role = role_of(message)
        if text is None and role in ("user", "assistant"):
            return [], f"a conversation's messages must be text; a {role} message holds something else"
        # Unvalidated on purpose: a "system" or "tool" turn is kept so that `check_turns` names it.
        turns.append(Turn.model_construct(role=cast(Role, role), content=text or "", standalone=_standalone(message)))
    return turns, None


def earlier_turns(messages: Sequence[Any]) -> list[Turn]:
    """The conversation before its last message, when that message is a user's question the graph has
    not answered yet (a `query` input on a thread stands alone by contract); [] otherwise, and for
    messages that are not all text."""
    if len(messages) < 2 or answered(messages[-1]):
        return []
    turns, problem = to_turns(messages)
    return [] if problem or turns[-1].role != "user" else turns[:-1]


def earlier_answers(messages: Sequence[Any], limit: int = 6) -> list[str]:
    """The text of the conversation's last `limit` assistant messages (what was already said)."""
    texts = [text_of(m) or "" for m in messages if role_of(m) == "assistant"]
    return [t for t in texts[-limit:] if t.strip()] if limit > 0 else []


def answered(message: Any) -> bool:
    """Whether a message is one of this graph's answers (as opposed to one a client sent)."""
    return role_of(message) == "assistant" and "status" in (getattr(message, "additional_kwargs", None) or {})


def refused(messages: Sequence[Any]) -> list[RemoveMessage]:
    """Removals of what a refused request added: every message after the graph's last answer, so the
    thread stays usable for the next, valid question."""
    last = max((i for i, m in enumerate(messages) if answered(m)), default=-1)
    return [RemoveMessage(id=m.id) for m in messages[last + 1:] if getattr(m, "id", None)]


def answer_message(state: Mapping[str, Any], update: Mapping[str, Any]) -> AIMessage:
    status = str(update.get("status") or state.get("status") or "")
    extra: dict[str, Any] = {
        "status": status,
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
    held = list(convert_to_messages(state.get("messages") or []))
    sizes = [size_of(m) for m in held] + [size_of(message)]
    drop = overflow(sizes, max_messages=ctx.max_messages, max_chars=ctx.max_conversation_chars,
                    room=ctx.max_query_chars)
    return [*(RemoveMessage(id=m.id) for m in held[:drop] if m.id), message]
