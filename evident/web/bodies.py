"""What a request body may carry, read by `RequestGate` (evident/web/gate.py) before any route parses it.

The body is the same on both servers (`langgraph dev` and Aegra), whatever each later hands the auth
handler, so what a request may write is decided here, once:

- **JSON a server can store and answer.** A body is UTF-8 JSON nested at most `max_json_depth` levels
  (server setting, default 32), and none of its strings holds a lone surrogate (`\\ud800`, which is not
  a character: PostgreSQL refuses it, and a recursive reader of a deep body runs out of stack). Each is a
  422 naming the problem, before any route stores anything.
- **Every way into a thread is the user's words, bounded.** A run's `input`, a run's `command.update`
  and `POST /threads/{id}/state` (`update_state`) may write only `messages` and `query` (the graph's
  input), and a client's messages are what a user and an assistant said: `human` and `ai` text (an `ai`
  message without tool calls), or the removal of one. A `system` message, a tool result or a tool call
  is the deployment's and the graph's to write, never a request's. `command.goto` (which would start
  the graph past its checks) and `command.resume` (the served graphs never wait for one) are refused;
  so are `supersteps` (a thread written at its creation) and `as_node` (a write as a step of the graph).
- **Nothing steers tracing or another user's data.** `langsmith_tracer` (the LangSmith project and
  example of the run's traces), `feedback_keys` (signed LangSmith feedback URLs), `webhook` (a URL the
  server would call with the run's output) are 403, and so is a `checkpoint` naming another thread.
- **Metadata is bounded as a whole**: a run's `metadata` and `config.metadata` together, an assistant's
  likewise, and (in the gate, which reads the current one) a thread's or assistant's after a PATCH
  merges into it; `owner` and `created_by` are the server's in `config.metadata` too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langgraph.graph.message import add_messages

from evident.context import EvidentContext
from evident.conversation.messages import size_of
from evident.conversation.rule import oversized, query_too_long

# The keys of the graph's input a client may write into a thread, by any of the three ways.
THREAD_KEYS = ("messages", "query")
# Run fields that choose where the run's traces, feedback or output go.
STEERING_FIELDS = ("langsmith_tracer", "feedback_keys", "webhook")
CHECKPOINT_KEYS = frozenset({"thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map"})
# Metadata keys only the server writes: who owns a thread, run or assistant, and which assistants the
# deployment itself made (readable by everyone).
OWNERSHIP_KEYS = ("owner", "created_by")
# Studio's "re-run from here": a copy of a checkpoint, writing no value.
COPY_NODE = "__copy__"

# A JSON string (escapes included) or one bracket: strings are skipped whole, so a bracket inside one
# is not nesting.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_SURROGATE = re.compile("[\ud800-\udfff]")


class Refusal(Exception):
    """A request the gate refuses (its body, or the request itself): the HTTP status, the message naming the
    problem and any headers the answer carries."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}


def _names(keys: list[str]) -> str:
    return ", ".join(map(repr, keys))


def json_depth(text: str, limit: int) -> int:
    """How deeply `text` nests arrays and objects, counted up to `limit + 1` (then it stops reading):
    no recursion, so any depth is measured safely."""
    depth = deepest = 0
    for token in _TOKENS.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif char in "]}":
            depth -= 1
    return deepest


def lone_surrogate(value: Any) -> str | None:
    """Where `value` (parsed JSON) holds a lone surrogate, as a dotted path (None when it does not)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "the body"
        elif isinstance(item, dict):
            for key, inner in item.items():
                where = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    return where
                stack.append((where, inner))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", inner) for i, inner in enumerate(item))
    return None


def parsed_body(body: bytes, max_depth: int) -> Any:
    """The body as JSON (None when empty); `Refusal` (422) when it is not UTF-8, nests deeper than
    `max_depth`, is not JSON, or holds a lone surrogate."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refusal(422, f"the request body is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        return None
    depth = json_depth(text, max_depth)
    if depth > max_depth:
        raise Refusal(422, f"the request body nests JSON more than {max_depth} levels deep (the limit)")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Refusal(422, f"the request body is not JSON: {exc}") from None
    where = lone_surrogate(value)
    if where is not None:
        raise Refusal(422, f"{where} holds a lone surrogate (such as \\ud800), which is not a character")
    return value


# -- what a client may write into a thread ------------------------------------------------------------------


def client_messages(value: Any, where: str) -> list[BaseMessage]:
    """A request's `messages` as LangChain messages, each one a client may write; `Refusal` (422)
    naming the first that is not."""
    if not isinstance(value, list):
        raise Refusal(422, f"{where} must be a list of messages")
    try:
        messages = convert_to_messages(value)
    except Exception as exc:  # any malformed message: its reason, never a 500
        raise Refusal(422, f"{where} holds a message that cannot be read: {exc}") from None
    for message in messages:
        kind = message.type
        calls = getattr(message, "tool_calls", None) or getattr(message, "invalid_tool_calls", None)
        if kind in ("human", "remove") or (kind == "ai" and not calls):
            continue
        what = "an assistant (ai) message with tool calls" if kind == "ai" else f"a {kind!r} message"
        raise Refusal(422, f"{where} holds {what}: a client writes only user (human) and assistant (ai) "
                          "text; instructions, tool calls and tool results are the deployment's and the graph's")
    return messages


def thread_write(values: Any, where: str, ctx: EvidentContext) -> list[BaseMessage] | None:
    """Check what a request writes into a thread (`input`, `command.update`, `update_state`'s values):
    only `messages` and `query`, a client's messages, within the deployment's bounds on their own.
    Returns the messages written (None when none are)."""
    if values is None:
        return None
    if not isinstance(values, Mapping):
        raise Refusal(422, f"{where} must be an object")
    query = values.get("query")
    if isinstance(query, str) and (problem := query_too_long(query, ctx.max_query_chars)):
        raise Refusal(422, problem)
    if "messages" not in values:
        return None
    messages = client_messages(values["messages"], f"{where}.messages")
    problem = oversized([size_of(m) for m in messages if m.type != "remove"], max_messages=ctx.max_messages,
                        max_chars=ctx.max_conversation_chars)
    if problem:
        raise Refusal(422, problem)
    return messages


def only_thread_keys(values: Any, where: str) -> None:
    """403 naming the keys of a write into a thread that are the graph's own (its answer, citations, ...)."""
    if isinstance(values, Mapping):
        others = sorted(str(k) for k in values if k not in THREAD_KEYS)
        if others:
            raise Refusal(403, f"{where} may write only {_names(list(THREAD_KEYS))} into a thread, not "
                              f"{_names(others)}: the rest of a thread's state is the graph's")


def command_update(command: Any) -> Any:
    """A run's `command`, checked: only its `update` is taken (as a dict, returned); `goto` and `resume`
    are refused by name."""
    if command is None:
        return None
    if not isinstance(command, Mapping):
        raise Refusal(422, "command must be an object")
    if command.get("goto") not in (None, [], ""):
        raise Refusal(422, "command.goto is not accepted: a run starts at the graph's start (send `input`), "
                          "so every question passes its checks")
    if command.get("resume") is not None:
        raise Refusal(422, "command.resume is not accepted: the served graph never waits for one")
    update = command.get("update")
    if isinstance(update, list):  # the API's other shape: [[key, value], ...]
        if not all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in update):
            raise Refusal(422, "command.update must be an object (or a list of [key, value] pairs)")
        update = dict(update)
    only_thread_keys(update, "command.update")
    return update


def conversation_after(current: list[Any], written: list[BaseMessage], ctx: EvidentContext) -> None:
    """422 when the thread's conversation, with `written` applied as the graph's reducer applies it,
    would break the deployment's bounds (a write the graph does not run after, so never checks)."""
    # The graph's reducer itself: a message with an id already there replaces it, a removal removes it.
    merged = add_messages(list[Any](current), list[Any](written))
    problem = oversized([size_of(m) for m in merged], max_messages=ctx.max_messages,
                        max_chars=ctx.max_conversation_chars)
    if problem:
        raise Refusal(422, f"{problem}, with the thread's messages")


# -- runs, checkpoints, metadata ---------------------------------------------------------------------------------


def checkpoint_problem(checkpoint: Any, thread_id: str | None, where: str = "checkpoint") -> None:
    """403 when a `checkpoint` names another thread or sets more than a checkpoint's coordinates."""
    if checkpoint is None:
        return
    if not isinstance(checkpoint, Mapping):
        raise Refusal(422, f"{where} must be an object")
    others = sorted(str(k) for k in checkpoint if k not in CHECKPOINT_KEYS)
    if others:
        raise Refusal(403, f"{where} may hold only {_names(sorted(CHECKPOINT_KEYS))}, not {_names(others)}")
    named = checkpoint.get("thread_id")
    if named is not None and str(named) != str(thread_id):
        raise Refusal(403, f"{where}.thread_id names another thread than the request's")


def metadata_problem(body: Mapping[str, Any], max_bytes: int) -> None:
    """`metadata` and `config.metadata` of a run or assistant: the server's keys refused (403), both
    together bounded (422)."""
    config = body.get("config")
    parts = {"metadata": body.get("metadata"),
             "config.metadata": config.get("metadata") if isinstance(config, Mapping) else None}
    size = 0
    for where, metadata in parts.items():
        if metadata is None:
            continue
        if not isinstance(metadata, Mapping):
            raise Refusal(422, f"{where} must be an object")
        claimed = [key for key in OWNERSHIP_KEYS if key in metadata]
        if claimed:
            raise Refusal(403, f"{where} {_names(claimed)} may not be set by a request: the server sets who "
                              "owns what")
        size += json_size(metadata)
    if size > max_bytes:
        raise Refusal(422, f"the metadata is too large: {size} bytes (the limit is {max_bytes})")


def merged_metadata_problem(current: Any, patch: Any, max_bytes: int) -> None:
    """422 when a PATCH's metadata, merged into the current one (as both servers merge it), passes the bound."""
    if not isinstance(current, Mapping) or not isinstance(patch, Mapping):
        return
    size = json_size({**current, **patch})
    if size > max_bytes:
        raise Refusal(422, f"the metadata would be too large: {size} bytes with what it holds already "
                          f"(the limit is {max_bytes})")


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (UTF-8), the way it is stored."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"))


def run_problem(body: Any, thread_id: str | None, ctx: EvidentContext,
                max_metadata_bytes: int) -> list[BaseMessage] | None:
    """Check a run's body; returns the messages its `command.update` writes into the thread (the gate
    then checks the thread's whole conversation: the graph does not run after such a write), else None."""
    if not isinstance(body, Mapping):
        return None  # not a run: the route says why
    steering = [field for field in STEERING_FIELDS if body.get(field) not in (None, [], "")]
    if steering:
        raise Refusal(403, f"{_names(steering)} may not be set by a request: where a run's traces, feedback "
                          "and output go is the deployment's")
    checkpoint_problem(body.get("checkpoint"), thread_id)
    metadata_problem(body, max_metadata_bytes)
    thread_write(body.get("input"), "input", ctx)
    return thread_write(command_update(body.get("command")), "command.update", ctx)


def state_update_problem(body: Any, thread_id: str, ctx: EvidentContext) -> list[BaseMessage] | None:
    """Check `POST /threads/{id}/state` (`update_state`); returns the messages it writes (the gate then
    checks the thread's whole conversation), else None."""
    if not isinstance(body, Mapping):
        raise Refusal(422, "the body must be an object")
    values, as_node = body.get("values"), body.get("as_node")
    if as_node is not None and not (as_node == COPY_NODE and values is None):
        raise Refusal(403, f"as_node {as_node!r} is not accepted: a client writes a thread as its user, "
                          "never as a step of the graph")
    checkpoint_problem(body.get("checkpoint"), thread_id)
    if isinstance(values, list):
        raise Refusal(422, "values must be an object")
    only_thread_keys(values, "values")
    return thread_write(values, "values", ctx)
