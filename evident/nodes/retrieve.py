"""retrieve (paper §3.1): ask every configured source at once and keep the top fused documents.

The retriever comes from `build_graph` or, by default, from the settings (evident/connectors/retrievers.py).

Whatever the retriever (the embedded index, the configured sources, or any LangChain retriever passed
to `build_graph`), it runs behind a `FederatedRetriever`, so the same rules hold everywhere:

- documents the caller's principal may not see are dropped first, before fusion, before any model or
  trace sees them; how many goes to the log and the retrieve step's trace only (`acl_dropped`), never
  to the caller, whose output must not confirm that a hidden document matched;
- on the server the principal is the authenticated caller, never the request body, and a request's
  settings beyond the allowed ones end the query before anything is searched (`run_settings`,
  evident/request_settings.py);
- it starts every query's results (only `rewrite` runs before it, writing the question and the conversation):
  its update empties what a previous query on the thread left.
- a failing or slow source becomes a `SourceError` and the query goes on (`status: "degraded"`);
- bad input, an invalid principal, or nothing searchable at all ends the query with `status: "error"`.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from evident.connectors.acl import PrincipalError, coerce_principal
from evident.connectors.background import BACKGROUND
from evident.connectors.federated import FederatedResult, FederatedRetriever, url_key
from evident.connectors.query_meaning import PreparedMeaning, prepare_meaning
from evident.connectors.rerank import rerank_by_meaning
from evident.connectors.retrievers import as_federated
from evident.context import EvidentContext
from evident.conversation.messages import earlier_turns
from evident.conversation.pages import conversation_text, with_conversation
from evident.conversation.rule import query_too_long
from evident.embeddings.failures import EmbeddingsError
from evident.embeddings.meaning import QueryMeaning, without_meaning
from evident.models import Principal, RetrievedRef, SourceDocument, SourceError
from evident.nodes.common import authenticated_principal, timed
from evident.nodes.names import RETRIEVE, REWRITE
from evident.nodes.parts import DEFAULT_PARTS, GraphParts
from evident.nodes.runs import add_to_run
from evident.request_settings import refused_settings, run_settings, served
from evident.state import EvidentState, QueryStart, start_of_query

log = logging.getLogger(__name__)

UNAVAILABLE = "the documents cannot be searched: the server's corpus or sources are misconfigured (see its log)"

IGNORED_PRINCIPAL = ("the request's principal was ignored: on the server, documents are filtered "
                     "for the authenticated caller")

__all__ = ["IGNORED_PRINCIPAL", "check_query", "retrieve"]


def check_query(query: object, ctx: EvidentContext) -> str | None:
    if query is None:
        return ('the input has no query: give {"query": "your question"} '
                'or {"messages": [{"role": "user", "content": "your question"}]}')
    if not isinstance(query, str):
        return f"the query must be a string, not {type(query).__name__}"
    if not query.strip():
        return "the query is empty"
    if any("\ud800" <= char <= "\udfff" for char in query):
        return "the query is not valid UTF-8 text (it holds an unpaired surrogate)"
    return query_too_long(query, ctx.max_query_chars)


def _fail(update: QueryStart, message: str) -> None:
    update.update({"status": "error", "error": message, "documents": [], "retrieved": []})


def _finish(update: QueryStart, result: FederatedResult, ctx: EvidentContext, prepared: PreparedMeaning) -> None:
    docs = result.documents[: ctx.top_n]
    if prepared.notes:
        update["notes"] = [*update.get("notes", []), *prepared.notes]
    update.update({
        "documents": docs,
        "retrieved": [RetrievedRef(url=d.url, title=d.title, source=d.source) for d in docs],
        "source_errors": [*prepared.errors, *result.errors],
        # A source that answered only with hidden documents, or hid itself, reads as empty, as if nothing matched.
        "source_runs": [r.model_copy(update={"denied": 0, "hidden": [],
                                             "status": "empty" if r.status == "ok" and not r.documents
                                             else r.status}) for r in result.runs],
    })
    _report_hidden(result)


def _run_config() -> RunnableConfig | None:
    try:
        return get_config()
    except RuntimeError:  # called outside a graph run (a unit test of the node)
        return None


def _report_hidden(result: FederatedResult) -> None:
    """How many documents permissions hid, and why whole sources were hidden: to the log and to this step's
    trace, not the state (the caller must not learn what exists behind a permission)."""
    hidden = {r.source: r.hidden for r in result.runs if r.hidden}
    if not result.acl_dropped and not hidden:
        return
    if result.acl_dropped:
        log.info("retrieve: %d document(s) hidden by permissions", result.acl_dropped)
    for reasons in hidden.values():
        for reason in reasons:  # an identity the source cannot map: a deployment's problem, worth a warning
            log.warning("retrieve: source hidden from this caller: %s", reason)
    add_to_run({
        "acl_dropped": result.acl_dropped,
        "denied_by_source": {r.source: r.denied for r in result.runs if r.denied},
        "hidden_sources": hidden,
    })


def _principal(state: EvidentState, runtime: Runtime[EvidentContext], update: QueryStart) -> Principal | None:
    """Who is asking: the authenticated caller on the server, else the principal of the input."""
    if not served(runtime):
        return coerce_principal(state.get("principal"))
    if state.get("principal"):
        update["notes"] = [IGNORED_PRINCIPAL]
        log.info("retrieve: %s", IGNORED_PRINCIPAL)
    update["principal"] = None  # a body principal must not stay in the thread's state either
    return authenticated_principal(runtime, _run_config())


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _conversation_problem(state: EvidentState) -> str | None:
    """Why the `rewrite` step refused the request's messages (evident/nodes/rewrite.py)."""
    return _field(state.get("rewrite"), "problem") or None


def _from_rewrite(state: EvidentState) -> QueryStart:
    """What this query's `rewrite` step (it runs just before) reported: kept through the reset below."""
    info = state.get("rewrite")
    out: QueryStart = {}
    error = _field(info, "model_error")
    if error:
        out["model_errors"] = [error if isinstance(error, SourceError) else SourceError.model_validate(error)]
    took = (state.get("timings_ms") or {}).get(REWRITE)
    if took is not None:
        out["timings_ms"] = {REWRITE: took}
    return out


def _for_this_turn(docs: list[SourceDocument], found: list[SourceDocument],
                   meaning: QueryMeaning | None) -> list[SourceDocument]:
    """`docs` with what the new turn's search did not find read against the new turn's meaning (the
    conversation's search measured them against the conversation's): the extractor reads it."""
    own = {url_key(d.url) for d in found}
    other = [d for d in docs if url_key(d.url) not in own]
    if not other:
        return docs
    try:
        rescored = rerank_by_meaning(other, meaning) if meaning is not None else []
    except EmbeddingsError:
        rescored = []
    by_url = {url_key(d.url): d for d in rescored}
    return [d if url_key(d.url) in own else by_url.get(url_key(d.url))
            or d.model_copy(update={"metadata": without_meaning(d.metadata)}) for d in docs]


Conversation = tuple[str, QueryMeaning | None]  # the earlier messages' search text and meaning
Prepared = tuple[FederatedRetriever, str, Principal | None, PreparedMeaning, Conversation | None]


def _fused(result: FederatedResult, conversation: FederatedResult | None, ctx: EvidentContext,
           meaning: QueryMeaning | None) -> FederatedResult:
    """The new turn's result with its documents fused with the conversation's (evident.conversation.pages)."""
    if conversation is None or not conversation.documents:
        return result
    docs = with_conversation(result.documents, conversation.documents, ctx.conversation_weight, ctx.top_n,
                             key=url_key)
    return result.model_copy(update={"documents": _for_this_turn(docs, result.documents, meaning)})


def _prepare(state: EvidentState, ctx: EvidentContext, update: QueryStart, runtime: Runtime[EvidentContext],
             parts: GraphParts) -> Prepared | None:
    try:
        principal = _principal(state, runtime, update)
    except PrincipalError as exc:
        _fail(update, str(exc))
        return None
    refused = refused_settings(runtime)
    if refused:
        also = f" (refused: {', '.join(e.setting for e in refused)})" if len(refused) > 1 else ""
        _fail(update, f"{refused[0]}{also}")
        return None
    problem = _conversation_problem(state) or check_query(state.get("query"), ctx)
    if problem:
        _fail(update, problem)
        return None
    try:
        retriever = parts.retriever(ctx)
    except Exception as exc:  # configuration or corpus problem: nothing to search
        if served(runtime):
            # The reason names the deployment's files and may name a page the caller may not see
            # (a URL claimed by two files): the operator reads it in the log, the caller learns less.
            log.error("evident: the documents cannot be searched: %s", exc)
            _fail(update, UNAVAILABLE)
        else:
            _fail(update, str(exc))
        return None
    federated, query = as_federated(retriever, ctx), state["query"].strip()
    resolved = parts.embeddings.resolve(ctx)
    # A server never embeds an index inside a request: that is minutes for a manual (its background does it).
    before = not served(runtime)
    background = BACKGROUND if served(runtime) and ctx.embeddings_background else None
    meaning = prepare_meaning(federated, resolved, query, ctx.semantic_weight, before_search=before,
                              background=background)
    conversation: Conversation | None = None
    earlier = earlier_turns(state.get("messages")) if ctx.conversation_weight else []
    text = conversation_text(earlier, ctx.max_query_chars)
    if text:
        # Its embedding failing leaves the conversation's search to the words; the new turn's says so.
        conversation = text, prepare_meaning(federated, resolved, text, ctx.semantic_weight,
                                             before_search=before, background=background).meaning
    return federated, query, principal, meaning, conversation


def retrieve(
    state: EvidentState, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> QueryStart:
    """The retrieve step. With embeddings on, the query is embedded once and every source ranks by meaning
    as well as by words (evident/connectors/query_meaning.py). A follow-up also searches the conversation's
    earlier messages, and the two rankings are fused (evident/conversation/pages.py). A blocking function:
    under `ainvoke` LangGraph runs it in a worker thread, off the server's event loop (opening or building
    a corpus index is file and SQLite work)."""
    ctx = run_settings(runtime)
    update: QueryStart = {"mode": ctx.resolved_mode, **_from_rewrite(state)}
    with timed(RETRIEVE, update):
        prepared = _prepare(state, ctx, update, runtime, parts)
        if prepared is not None:
            federated, query, principal, meaning, conversation = prepared
            found = federated.search(query, principal=principal, meaning=meaning.meaning)
            earlier = None
            if conversation is not None:
                earlier = federated.search(conversation[0], principal=principal, meaning=conversation[1])
            _finish(update, _fused(found, earlier, ctx, meaning.meaning), ctx, meaning)
    return start_of_query(update)
