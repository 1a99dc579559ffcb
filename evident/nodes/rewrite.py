"""rewrite (beyond the paper): the question a query answers, from a `query` or a conversation.

The first step of every query. Input `{"query": ...}` is a standalone question, taken as it is (its
answer still joins `messages`, so a later follow-up on the thread can refer to it). Input
`{"messages": [...]}` (anything after the graph's last answer) is a conversation, which must hold a
user's message after that answer: the last one is the question, turned into a standalone one by the
chat model in LLM mode (evident/prompts/rewrite.py) or by the offline rule
(evident/conversation/rule.py). A failed model call falls back to the rule and is reported in
`model_errors` (status `degraded`). The result is `query` (what retrieval, extraction and generation
use), `standalone_query`, and `rewrite` (how it was made), written at every turn.

The messages may be an agent's state: the question is the last human message after the graph's last
answer, and the rewrite reads the conversation's turns before it, the user's messages and the
assistant's text replies (evident/conversation/messages.py). System and developer instructions, tool
results and an assistant's tool calls are context: they are neither the question nor the user's
words, and neither the rule nor the rewrite prompt reads them (a tool's result is a document's or a
service's text, not something the user said, and an instruction is the agent's, not EvidenT's).
Every message, context too, counts toward the deployment's limits (`max_messages`,
`max_conversation_chars`; `max_query_chars` for the question). A refused conversation ends the query,
like any bad input (evident/nodes/prepare.py), and what the request added is removed from the thread.

The conversation's messages are read here and nowhere else in a query: the steps after it read what this step
learned of them (`conversation`: the turns before the question, and what the last answers already said).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from evident.context import EvidentContext
from evident.conversation.messages import (
    answered,
    earlier_answers,
    question_at,
    read_messages,
    refused,
    size_of,
    to_turns,
    turn_role,
)
from evident.conversation.rule import check_turns, condense
from evident.llm.failures import ModelFailure, call_with_retries, describe_failure
from evident.llm.models import Models
from evident.llm.replies import refusal_of, text_of
from evident.models import Conversation, Rewrite, SourceError, Turn
from evident.nodes.common import timed
from evident.nodes.names import REWRITE
from evident.nodes.parts import DEFAULT_PARTS, GraphParts
from evident.nodes.prepare import admit, check_query
from evident.request_settings import refused_settings, run_settings
from evident.state import EvidentState, QueryStart, start_of_query

RULE_FALLBACK = "used the offline rewrite rule"
# Tokens of the rewrite call are not an answer: chat clients streaming messages must not show them.
_CALL_CONFIG: dict[str, Any] = {"tags": ["nostream"], "run_name": "rewrite_question"}
HISTORY_TURNS = 6  # earlier messages shown to the model
ANSWER_CHARS = 600  # of each earlier answer: enough to resolve a reference


def render_history(history: Sequence[Turn]) -> str:
    lines = []
    for turn in history[-HISTORY_TURNS:]:
        text = " ".join(turn.content.split())
        if turn.role == "assistant":
            lines.append(f"Assistant: {text[:ANSWER_CHARS]}{' …' if len(text) > ANSWER_CHARS else ''}")
        else:
            lines.append(f"User: {text}")
    return "\n".join(lines)


def rewrite_with_model(model: Any, ctx: EvidentContext, question: str, history: Sequence[Turn]) -> str:
    """The model's standalone question; raises `ModelFailure` when there is no usable one."""
    # Here, not at the top: the template brings LangChain's prompt machinery, which the offline rule never needs.
    from evident.prompts.rewrite import REWRITE_PROMPT

    messages = REWRITE_PROMPT.format_messages(history=render_history(history), question=question)
    reply = call_with_retries(lambda: model.invoke(messages, config=_CALL_CONFIG), ctx)
    if refusal_of(reply):
        raise ModelFailure("model", f"the model refused: {refusal_of(reply)}")
    lines = [line.strip().strip('"“”').strip() for line in text_of(reply).strip().splitlines() if line.strip()]
    if not lines:
        raise ModelFailure("model", "the model returned an empty question")
    if len(lines[0]) > ctx.max_query_chars:
        raise ModelFailure("model", "the model's question is longer than a query may be")
    return lines[0]


def _query_turn(state: EvidentState, turns: int, update: QueryStart) -> None:
    query = state.get("query")
    asked = query.strip() if isinstance(query, str) else ""
    update.update({"standalone_query": asked, "rewrite": Rewrite(asked=asked, standalone_query=asked, turns=turns)})


def _read(state: EvidentState, runtime: Runtime[EvidentContext], ctx: EvidentContext, parts: GraphParts,
          update: QueryStart) -> None:
    """The question, from the input's `query` or its conversation, and what the later steps need of the
    conversation (`Conversation`): its messages are read here and nowhere else in the query."""
    try:
        messages, unreadable = read_messages(state.get("messages")), None
    except ValueError as exc:
        messages, unreadable = [], str(exc)
    # What the answer should not say again: the last answers, whichever input (a `query` on a thread too).
    conversation = Conversation(said=earlier_answers(messages))
    update["conversation"] = conversation
    earlier = sum(1 for m in messages if turn_role(m) == "user")
    if not unreadable and (not messages or answered(messages[-1])):  # nothing new in `messages`: a query
        _query_turn(state, earlier, update)
        return
    at = question_at(messages)
    turns, problem = to_turns(messages[: at + 1]) if at is not None else ([], unreadable)
    problem = problem or check_turns(
        [size_of(m) for m in messages], asked=at is not None,
        max_messages=ctx.max_messages, max_chars=ctx.max_conversation_chars,
    ) or check_query(turns[-1].content, ctx)
    if problem:
        asked = turns[-1].content.strip() if turns else ""
        update.update({"query": asked, "standalone_query": "", "messages": refused(messages),
                       "rewrite": Rewrite(asked=asked[: ctx.max_query_chars], problem=problem)})
        return
    asked, history = turns[-1].content.strip(), turns[:-1]
    conversation.history = history
    info = Rewrite(asked=asked, standalone_query=asked, turns=earlier - 1)
    if history:
        standalone, by, error = _standalone(parts.models, ctx, asked, history, runtime)
        if len(standalone) > ctx.max_query_chars:  # the rule's added terms must not break the limit
            standalone, by = asked, "none"
        info = info.model_copy(update={"standalone_query": standalone, "rewritten_by": by, "model_error": error})
        if error is not None:
            update["model_errors"] = [error]
    update.update({"query": info.standalone_query, "standalone_query": info.standalone_query, "rewrite": info})


def rewrite(
    state: EvidentState, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> QueryStart:
    """The first step of every query: the question, who asks and whether the query may run (evident/nodes/
    prepare.py); its update starts the query's state afresh (`start_of_query`)."""
    ctx = run_settings(runtime)
    update: QueryStart = {"mode": ctx.resolved_mode}
    with timed(REWRITE, update):
        _read(state, runtime, ctx, parts, update)
        admit(state, runtime, ctx, update)
    return start_of_query(update)


def _standalone(models: Models, ctx: EvidentContext, asked: str, history: Sequence[Turn],
                runtime: Runtime[EvidentContext]) -> tuple[str, str, SourceError | None]:
    """(question, rewritten_by, model error or None)."""
    error = None
    # A request that will be refused (`admit` ends it) must not cost a model call.
    if models.enabled(ctx) and not refused_settings(runtime):
        try:
            question = rewrite_with_model(models.get(ctx, "generate"), ctx, asked, history)
            return question, ("model" if question != asked else "none"), None
        except Exception as exc:  # a model failure degrades the rewrite to the rule, never the query
            error = describe_failure(exc, ctx).to_error(models.name(ctx), REWRITE, RULE_FALLBACK)
    question, changed = condense(asked, history)
    return question, ("rule" if changed else "none"), error

