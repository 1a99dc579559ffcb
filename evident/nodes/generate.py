"""generate (paper §3.4): the answer, written from verified passages only, a [url] per sentence.

LLM mode: one call with the generation prompt (App. D.2) over the verified passages' quotes. Its
reply, read once into its lines of cited sentences, is the draft, before `verify` has checked it: the
call is tagged `nostream`, so LangGraph's `stream_mode="messages"` never shows it (the verified answer
joins `messages` at `postprocess`).
A failed call (timeout, 429 after retries, refusal, empty reply) falls back to the offline extractive
composer and is reported in `model_errors`. A reply that cites nothing goes to `verify`, which re-cites
the sentences a verified passage supports. Offline mode: the composer.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from evident.citations.answer import parse_answer
from evident.context import EvidentContext
from evident.conversation.said import fresh_passages, said_text
from evident.llm.failures import ModelFailure, call_with_retries, describe_failure
from evident.llm.replies import refusal_of, text_of
from evident.llm.servers import server_slot
from evident.models import AlignmentDecision, Line, SourceDocument
from evident.nodes.common import conversation_of, known_documents, offline_draft, timed
from evident.nodes.names import GENERATE
from evident.nodes.parts import DEFAULT_PARTS, GraphParts
from evident.prompts.render import render_passages
from evident.request_settings import run_settings
from evident.state import DraftUpdate, EvidentState, read

OFFLINE_FALLBACK = "used the offline composer"
_CALL_CONFIG: dict[str, Any] = {"tags": ["nostream"], "run_name": "generate_answer"}


def generate_with_model(model: Any, ctx: EvidentContext, state: EvidentState) -> list[Line]:
    """The model's draft, read into its cited sentences; raises `ModelFailure` when there is no usable one."""
    # A passage an earlier answer already quoted is not offered again, unless nothing else is left.
    verified = fresh_passages(read(AlignmentDecision, state.get("verified")), said_text(conversation_of(state).said))
    # Here, not at the top: the template brings LangChain's prompt machinery, which the offline
    # composer never needs.
    from evident.prompts.generation import GENERATION_PROMPT

    messages = GENERATION_PROMPT.format_messages(
        passages=render_passages(verified, read(SourceDocument, state.get("documents"))), query=state["query"]
    )
    def request() -> Any:
        with server_slot(ctx, model):  # the timeout starts when the request is sent, not while queued
            return model.invoke(messages, config=_CALL_CONFIG)

    message = call_with_retries(request, ctx)
    refusal = refusal_of(message)
    if refusal:
        raise ModelFailure("model", f"the model refused: {refusal}")
    draft = text_of(message).strip()
    if not draft:
        raise ModelFailure("model", "the model returned an empty answer")
    return parse_answer(draft, known_documents(state))


def generate(
    state: EvidentState, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> DraftUpdate:
    ctx = run_settings(runtime)
    update: DraftUpdate = {}
    with timed(GENERATE, update):
        if parts.models.enabled(ctx):
            try:
                update["draft"] = generate_with_model(parts.models.get(ctx, "generate"), ctx, state)
                update["generated_by"] = "model"
                return update
            except Exception as exc:  # any model failure degrades this step, never the query
                failure = describe_failure(exc, ctx)
                update["model_errors"] = [failure.to_error(parts.models.name(ctx), GENERATE, OFFLINE_FALLBACK)]
        update["draft"] = offline_draft(state, ctx)
        update["generated_by"] = "offline"
    return update
