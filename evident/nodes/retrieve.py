"""retrieve (paper §3.1): ask every configured source at once and keep the top fused documents.

The retriever comes from `build_graph` or, by default, from the settings (evident/connectors/retrievers.py).

Whatever the retriever (the embedded index, the configured sources, or any LangChain retriever passed
to `build_graph`), it runs behind a `FederatedRetriever`, so the same rules hold everywhere:

- documents the caller's principal may not see are dropped first, before fusion, before any model or
  trace sees them; how many goes to the log and the retrieve step's trace only (`acl_dropped`), never
  to the caller, whose output must not confirm that a hidden document matched;
- it searches as the query's `caller`, whom `rewrite` settled (on the server the authenticated user, never
  the request body; evident/nodes/prepare.py, which also ends a query on bad input before any search);
- a failing or slow source becomes a `SourceError` and the query goes on (`status: "degraded"`);
- nothing searchable at all ends the query with `status: "error"`.
"""

from __future__ import annotations

import logging

from langgraph.runtime import Runtime

from evident.connectors.background import BACKGROUND
from evident.connectors.federated import FederatedResult, FederatedRetriever, url_key
from evident.connectors.query_meaning import PreparedMeaning, prepare_meaning
from evident.connectors.rerank import rerank_by_meaning
from evident.connectors.retrievers import as_federated
from evident.context import EvidentContext
from evident.conversation.pages import conversation_text, with_conversation
from evident.embeddings.failures import EmbeddingsError
from evident.embeddings.meaning import QueryMeaning, without_meaning
from evident.models import Principal, RetrievedRef, SourceDocument
from evident.nodes.common import conversation_of, timed
from evident.nodes.names import RETRIEVE
from evident.nodes.parts import DEFAULT_PARTS, GraphParts
from evident.nodes.runs import add_to_run
from evident.request_settings import run_settings, served
from evident.state import EvidentState, RetrieveUpdate

log = logging.getLogger(__name__)

UNAVAILABLE = "the documents cannot be searched: the server's corpus or sources are misconfigured (see its log)"


def _fail(update: RetrieveUpdate, message: str) -> None:
    update.update({"status": "error", "error": message, "documents": [], "retrieved": []})


def _finish(state: EvidentState, update: RetrieveUpdate, result: FederatedResult, ctx: EvidentContext,
            prepared: PreparedMeaning) -> None:
    docs = result.documents[: ctx.top_n]
    if prepared.notes:
        update["notes"] = [*state.get("notes", []), *prepared.notes]
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


ConversationSearch = tuple[str, QueryMeaning | None]  # the earlier messages' search text and meaning
Prepared = tuple[FederatedRetriever, str, Principal | None, PreparedMeaning, ConversationSearch | None]


def _fused(result: FederatedResult, conversation: FederatedResult | None, ctx: EvidentContext,
           meaning: QueryMeaning | None) -> FederatedResult:
    """The new turn's result with its documents fused with the conversation's (evident.conversation.pages)."""
    if conversation is None or not conversation.documents:
        return result
    docs = with_conversation(result.documents, conversation.documents, ctx.conversation_weight, ctx.top_n,
                             key=url_key)
    return result.model_copy(update={"documents": _for_this_turn(docs, result.documents, meaning)})


def _prepare(state: EvidentState, ctx: EvidentContext, update: RetrieveUpdate, runtime: Runtime[EvidentContext],
             parts: GraphParts) -> Prepared | None:
    caller = state.get("caller")
    principal = Principal.model_validate(caller) if caller is not None else None
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
    conversation: ConversationSearch | None = None
    earlier = conversation_of(state).history if ctx.conversation_weight else []
    text = conversation_text(earlier, ctx.max_query_chars)
    if text:
        # Its embedding failing leaves the conversation's search to the words; the new turn's says so.
        conversation = text, prepare_meaning(federated, resolved, text, ctx.semantic_weight,
                                             before_search=before, background=background).meaning
    return federated, query, principal, meaning, conversation


def retrieve(
    state: EvidentState, runtime: Runtime[EvidentContext], *, parts: GraphParts = DEFAULT_PARTS
) -> RetrieveUpdate:
    """The retrieve step. With embeddings on, the query is embedded once and every source ranks by meaning
    as well as by words (evident/connectors/query_meaning.py). A follow-up also searches the conversation's
    earlier messages, and the two rankings are fused (evident/conversation/pages.py). A blocking function:
    under `ainvoke` LangGraph runs it in a worker thread, off the server's event loop (opening or building
    a corpus index is file and SQLite work)."""
    ctx = run_settings(runtime)
    update: RetrieveUpdate = {}
    with timed(RETRIEVE, update):
        prepared = _prepare(state, ctx, update, runtime, parts)
        if prepared is not None:
            federated, query, principal, meaning, conversation = prepared
            found = federated.search(query, principal=principal, meaning=meaning.meaning)
            earlier = None
            if conversation is not None:
                earlier = federated.search(conversation[0], principal=principal, meaning=conversation[1])
            _finish(state, update, _fused(found, earlier, ctx, meaning.meaning), ctx, meaning)
    return update
