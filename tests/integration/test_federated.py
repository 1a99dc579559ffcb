"""Federated retrieval: concurrency, deadlines, failures, fusion, deduplication and permissions, end to end."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tracers.run_collector import RunCollectorCallbackHandler
from pydantic import PrivateAttr, SecretStr

from evident.connectors.federated import FederatedRetriever, FederatedSearchError, url_key
from evident.connectors.source import AccessReport, PermissionAware, Source, SourceFailure
from evident.context import EvidentContext
from evident.graph import build_graph
from evident.models import INSUFFICIENT_ANSWER, Principal
from tests.support.sources import UNMAPPED_REASON, Unmapped


def doc(url: str, text: str, **metadata: Any) -> Document:
    return Document(page_content=text, metadata={"url": url, "title": url.rsplit("/", 1)[-1], **metadata})


class Scripted(BaseRetriever):
    """Returns `docs`, or raises `error`; may wait on a barrier (proves concurrency) or an event (a hang)."""

    docs: list[Any] = []
    error: str = ""
    barrier: Any = None
    hang: Any = None  # threading.Event: blocks until set
    calls: list[str] = []

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.calls.append(query)
        if self.barrier is not None:
            self.barrier.wait()
        if self.hang is not None:
            self.hang.wait(30)
        if self.error:
            raise ConnectionError(self.error)
        return list(self.docs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.calls.append(query)
        if self.barrier is not None:
            await self.barrier.wait()
        if self.hang is not None:
            await asyncio.sleep(30)
        if self.error:
            raise ConnectionError(self.error)
        return list(self.docs)


class Aware(PermissionAware, BaseRetriever):
    """A connector that knows permissions: it hides `secret` docs from everyone but `reader`."""

    reader: str = "alice"
    seen: list[Any] = []

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, principal: Any = None,
        report: AccessReport | None = None,
    ) -> list[Document]:
        self.seen.append(principal)
        if principal is not None and principal.user == self.reader:
            return [doc("https://aware.example/secret", "Aware secret text for the reader.")]
        if report is not None:
            report.denied += 1
        return [doc("https://aware.example/open", "Aware open text for everyone.")]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # let a hung source's thread finish


def fed(*sources: Source, **kw: Any) -> FederatedRetriever:
    return FederatedRetriever(sources=list(sources), **kw)


# -- concurrency and deadlines -----------------------------------------------------------------


def test_sources_are_queried_concurrently_with_threads() -> None:
    barrier = threading.Barrier(3, timeout=10)  # passes only if all three run at the same time
    sources = [Source(name=n, retriever=Scripted(docs=[doc(f"https://{n}.example/a", f"text {n}")], barrier=barrier))
               for n in ("a", "b", "c")]
    result = fed(*sources).search("q")
    assert result.errors == [] and len(result.documents) == 3


def test_sources_are_queried_concurrently_with_asyncio() -> None:
    async def main() -> Any:
        barrier = asyncio.Barrier(3)
        sources = [Source(name=n, timeout_s=10,
                          retriever=Scripted(docs=[doc(f"https://{n}.example/a", f"text {n}")], barrier=barrier))
                   for n in ("a", "b", "c")]
        return await fed(*sources).asearch("q")

    result = asyncio.run(main())
    assert result.errors == [] and len(result.documents) == 3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_source_that_times_out_is_skipped(mode: str, release: threading.Event) -> None:
    hung = Scripted(hang=release)
    federation = fed(
        Source(name="fast", retriever=Scripted(docs=[doc("https://fast.example/a", "fast text")])),
        Source(name="stuck", retriever=hung, timeout_s=0.3),
    )
    result = federation.search("q") if mode == "sync" else asyncio.run(federation.asearch("q"))
    assert not release.is_set()  # the answer came while the stuck source was still stuck
    assert [d.url for d in result.documents] == ["https://fast.example/a"]
    assert [(e.source, e.kind, e.message) for e in result.errors] == [("stuck", "timeout", "no answer within 0.3 s")]
    assert {r.source: r.status for r in result.runs} == {"fast": "ok", "stuck": "timeout"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_source_that_raises_and_one_that_returns_nothing(mode: str) -> None:
    federation = fed(
        Source(name="ok", retriever=Scripted(docs=[doc("https://ok.example/a", "ok text")])),
        Source(name="down", retriever=Scripted(error="connection to wiki.internal refused (key hunter2-secret)"),
               secrets=[SecretStr("hunter2-secret")]),
        Source(name="empty", retriever=Scripted()),
        Source(name="garbage", retriever=Scripted(docs=[doc("https://g.example/a", "fine"),
                                                        Document(page_content="no url"), "not a document"])),
    )
    result = federation.search("q") if mode == "sync" else asyncio.run(federation.asearch("q"))
    assert {d.url for d in result.documents} == {"https://ok.example/a", "https://g.example/a"}
    errors = {e.source: e for e in result.errors}
    assert set(errors) == {"down", "garbage"}
    assert errors["down"].kind == "error"
    assert errors["down"].message == "ConnectionError: connection to wiki.internal refused (key ***)"
    assert errors["garbage"].message == ('1 document had no valid id (Document.id, or url or source in its metadata) '
                                         'and was skipped: "no url"; 1 hit was not a document with text and was '
                                         'skipped')
    runs = {r.source: r for r in result.runs}
    assert runs["empty"].status == "empty" and runs["down"].status == "error" and runs["ok"].documents == 1


def test_a_retriever_cannot_hand_back_an_id_that_leads_elsewhere() -> None:
    hostile = ["//evil.test/x", "javascript:alert(1)", "jav&#x61;script:alert(1)", "https://user:pass@host.example/x",
               "\\\\evil\\share"]
    hidden = Document(page_content="secret", metadata={"url": "//evil.test/hidden", "acl": "group:board"})
    federation = fed(Source(name="any", retriever=Scripted(
        docs=[doc("https://ok.example/a", "fine"), *(doc(url, "text") for url in hostile), hidden])))
    result = federation.search("q", principal={"user": "bob", "groups": ["staff"]})
    assert [d.url for d in result.documents] == ["https://ok.example/a"]
    # The hidden document's bad id is not counted: the caller learns nothing of what it may not see.
    (error,) = result.errors
    assert error.message.startswith(f"{len(hostile)} documents had no valid id") and "hidden" not in error.message


def test_source_failure_kinds_and_all_failing() -> None:
    class Failing(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            raise SourceFailure("wiki.example did not answer within 2 s", kind="timeout")

    federation = fed(Source(name="a", retriever=Failing()), Source(name="b", retriever=Scripted(error="boom")))
    result = federation.search("q")
    assert [(e.source, e.kind) for e in result.errors] == [("a", "timeout"), ("b", "error")]
    with pytest.raises(FederatedSearchError, match="a: wiki.example did not answer"):
        federation.invoke("q")  # a plain retriever call has nowhere to report, so it raises
    assert fed(Source(name="e", retriever=Scripted())).invoke("q") == []  # nothing found is not a failure


# -- fusion and deduplication ------------------------------------------------------------------


def test_reciprocal_rank_fusion_with_weights() -> None:
    a = Scripted(docs=[doc("https://x/1", "one"), doc("https://x/2", "two"), doc("https://x/3", "three")])
    b = Scripted(docs=[doc("https://x/3", "three"), doc("https://x/4", "four")])
    result = fed(Source(name="a", retriever=a), Source(name="b", retriever=b), rrf_k=1).search("q")
    # a: 1/2, 1/3, 1/4; b: 1/2, 1/3. x/3 = 1/4 + 1/2 wins, then x/1 (1/2, a first), x/2 and x/4 (1/3 each).
    assert [d.url for d in result.documents] == ["https://x/3", "https://x/1", "https://x/2", "https://x/4"]
    assert result.documents[0].metadata["found_in"] == ["b", "a"]
    weighted = fed(Source(name="a", retriever=a), Source(name="b", retriever=b, weight=3), rrf_k=1).search("q")
    assert [d.url for d in weighted.documents][:2] == ["https://x/3", "https://x/4"]


def test_duplicates_across_sources_by_url_and_by_content() -> None:
    wiki = Scripted(docs=[doc("https://wiki.example/Travel#Flights", "Book flights 14 days ahead."),
                          doc("https://wiki.example/Leave", "Leave policy text.")])
    docs = Scripted(docs=[doc("https://WIKI.example/Travel", "Book flights 14 days ahead."),  # same URL, other form
                          doc("https://mirror.example/leave.html", "Leave policy text."),  # same text, other URL
                          doc("https://docs.example/other", "Something else.")])
    result = fed(Source(name="wiki", retriever=wiki), Source(name="docs", retriever=docs), top_n=10).search("q")
    assert [d.url for d in result.documents] == [
        "https://wiki.example/Travel#Flights", "https://wiki.example/Leave", "https://docs.example/other"]
    assert result.documents[0].metadata["found_in"] == ["wiki", "docs"]
    assert len({d.content_hash for d in result.documents}) == 3


def test_top_n_and_per_source_k() -> None:
    many = Scripted(docs=[doc(f"https://m/{i}", f"text {i}") for i in range(10)])
    assert len(fed(Source(name="m", retriever=many, k=4), top_n=8).search("q").documents) == 4
    assert len(fed(Source(name="m", retriever=many), top_n=3).search("q").documents) == 3


def test_url_key() -> None:
    assert url_key("HTTPS://Wiki.Example/a/b/#x") == url_key("https://wiki.example/a/b") == "https://wiki.example/a/b"
    assert url_key("https://d/p?id=1") != url_key("https://d/p?id=2")


def test_every_document_carries_the_fields() -> None:
    source = Source(name="policies", source_type="policy", retriever=Scripted(docs=[doc("https://p/a", "text a")]))
    (d,) = fed(source).search("q").documents
    assert (d.url, d.title, d.source, d.source_type, d.content) == ("https://p/a", "a", "policies", "policy", "text a")
    assert d.content_hash and d.metadata["found_in"] == ["policies"]
    (lc,) = fed(source).invoke("q")
    assert {"url", "title", "source", "source_type", "content_hash"} <= set(lc.metadata)


def test_source_names_are_unique() -> None:
    with pytest.raises(ValueError, match="named 'a'"):
        fed(Source(name="a", retriever=Scripted()), Source(name="a", retriever=Scripted()))


# -- permissions -------------------------------------------------------------------------------

SECRET = "The executive bonus pool for 2025 is 4.2 million USD."
RESTRICTED = doc("https://hr.example/exec-comp", SECRET, title="Executive compensation", acl={"groups": ["executives"]})
PUBLIC = doc("https://hr.example/bonus", "The annual bonus for staff is paid in March. The staff bonus pool is set by "
             "the board each year.", title="Staff bonus")


def test_acl_filtering_happens_per_source_before_fusion() -> None:
    # The same text as a restricted page and as a public mirror: the visible copy must survive dedup.
    restricted = Scripted(docs=[doc("https://a/secret", "Shared text.", acl="group:hr")])
    mirror = Scripted(docs=[doc("https://b/public", "Shared text.")])
    result = fed(Source(name="a", retriever=restricted), Source(name="b", retriever=mirror)).search("q")
    assert [d.url for d in result.documents] == ["https://b/public"] and result.acl_dropped == 1
    assert {r.source: r.denied for r in result.runs} == {"a": 1, "b": 0}


def test_source_default_acl_and_source_acl() -> None:
    docs = [doc("https://d/1", "one"), doc("https://d/2", "two", acl="public")]
    deny = fed(Source(name="d", retriever=Scripted(docs=docs), default_acl="deny"))
    assert [d.url for d in deny.search("q").documents] == ["https://d/2"]
    staff = fed(Source(name="d", retriever=Scripted(docs=docs), acl=["group:staff"]))
    assert [d.url for d in staff.search("q").documents] == ["https://d/2"]
    assert len(staff.search("q", principal={"user": "x", "groups": ["staff"]}).documents) == 2


def test_permission_aware_connectors_get_the_principal() -> None:
    aware, plain = Aware(seen=[]), Scripted(calls=[])
    federation = fed(Source(name="aware", retriever=aware), Source(name="plain", retriever=plain))
    result = federation.search("q", principal=Principal(user="bob"))
    assert [d.url for d in result.documents if "aware" in d.url] == ["https://aware.example/open"]
    assert result.acl_dropped == 1 and aware.seen == [Principal(user="bob")]
    result = federation.search("q", principal={"user": "alice"})
    assert "https://aware.example/secret" in [d.url for d in result.documents] and result.acl_dropped == 0


def test_why_a_source_hid_itself_is_in_its_run() -> None:
    open_docs = Scripted(docs=[doc("https://d/open", "Refunds are issued within ten days of the return.")])
    federation = fed(Source(name="crm", retriever=Unmapped()), Source(name="docs", retriever=open_docs))
    runs = {r.source: r for r in federation.search("refunds", principal={"user": "x", "groups": ["staff"]}).runs}
    assert runs["crm"].hidden == [UNMAPPED_REASON] and runs["docs"].hidden == []


def _dump_runs(handler: RunCollectorCallbackHandler) -> str:
    return json.dumps([run.model_dump(mode="json") for run in handler.traced_runs], default=str)


def test_traces_show_only_visible_documents() -> None:
    handler = RunCollectorCallbackHandler()
    federation = fed(Source(name="hr", retriever=Scripted(docs=[RESTRICTED, PUBLIC])),
                     Source(name="down", retriever=Scripted(error="nope")))
    federation.invoke("bonus pool", {"callbacks": [handler]}, principal=Principal(user="bob", groups=["staff"]))
    (root,) = handler.traced_runs
    assert [child.name for child in root.child_runs] == ["hr", "down"]
    assert root.child_runs[1].error
    dumped = _dump_runs(handler)
    assert "staff bonus" in dumped.lower()
    assert "4.2 million" not in dumped and "exec-comp" not in dumped and "Executive compensation" not in dumped


def _state_json(state: dict[str, Any]) -> str:
    return json.dumps(state, default=lambda o: o.model_dump(mode="json") if hasattr(o, "model_dump") else str(o))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_restricted_documents_never_reach_the_answer_or_the_outputs(mode: str) -> None:
    hr = Source(name="hr", source_type="policy", retriever=Scripted(docs=[RESTRICTED, PUBLIC]))
    graph = build_graph(retriever=fed(hr, Source(name="down", retriever=Scripted(error="wiki offline"))))
    handler = RunCollectorCallbackHandler()
    query = {"query": "How large is the executive bonus pool for 2025?",
             "principal": {"user": "bob", "groups": ["staff"]}}
    config = {"callbacks": [handler]}
    ctx = EvidentContext()
    if mode == "sync":
        out = graph.invoke(query, config, context=ctx)
    else:
        out = asyncio.run(graph.ainvoke(query, config, context=ctx))
    assert "acl_dropped" not in out and [r["denied"] for r in out["source_runs"]] == [0, 0]
    assert out["status"] == "degraded" and out["source_errors"][0]["source"] == "down"
    for text in (_state_json(out), _dump_runs(handler)):
        assert "4.2 million" not in text and "exec-comp" not in text and "Executive compensation" not in text
    assert [d["url"] for d in out["documents"]] == ["https://hr.example/bonus"]

    # The same question from an executive: the document is there, so the test above is not vacuous.
    allowed = graph.invoke({**query, "principal": Principal(user="carol", groups=["executives"])}, context=ctx)
    assert "4.2 million" in allowed["answer"]
    assert any(c["url"] == "https://hr.example/exec-comp" for c in allowed["citations"])


def test_anonymous_callers_see_public_documents_only() -> None:
    graph = build_graph(retriever=Scripted(docs=[RESTRICTED, PUBLIC]))
    out = graph.invoke({"query": "How large is the executive bonus pool for 2025?"})
    assert "acl_dropped" not in out and "4.2 million" not in _state_json(out)
    only_secret = build_graph(retriever=Scripted(docs=[RESTRICTED])).invoke({"query": "executive bonus pool 2025?"})
    assert only_secret["answer"] == INSUFFICIENT_ANSWER and only_secret["documents"] == []
    assert only_secret["status"] == "insufficient"  # hidden documents are not a failure of the source


def test_invalid_principal_is_an_error() -> None:
    graph = build_graph(retriever=Scripted(docs=[PUBLIC]))
    out = graph.invoke({"query": "bonus?", "principal": {"user": "bob", "groups": "staff"}})
    assert out["status"] == "error" and "invalid principal" in out["error"] and out["documents"] == []


class _Closable(BaseRetriever):
    """A retriever with a private attribute, like most real ones; wrapped per query by the node."""

    _n: int = PrivateAttr(default=0)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self._n += 1
        return [PUBLIC]


def test_plain_retrievers_are_federated_too() -> None:
    out = build_graph(retriever=_Closable()).invoke({"query": "When is the staff bonus paid?"})
    assert out["status"] == "answered" and out["source_runs"][0]["source"] == "_Closable"
    assert out["documents"][0]["source"] == "_Closable"


def test_langsmith_traces_never_carry_hidden_documents() -> None:
    """Everything LangSmith would receive (a mock session stands in for the server) is free of the secret."""
    from unittest.mock import MagicMock

    import langsmith
    from langchain_core.tracers.langchain import wait_for_all_tracers

    session = MagicMock()
    client = langsmith.Client(api_url="http://127.0.0.1:1", api_key="test", session=session, auto_batch_tracing=False)
    graph = build_graph(retriever=fed(Source(name="hr", retriever=Scripted(docs=[RESTRICTED, PUBLIC]))))
    with langsmith.tracing_context(client=client, enabled=True):
        graph.invoke({"query": "How large is the executive bonus pool for 2025?", "principal": {"user": "bob"}})
    wait_for_all_tracers()
    sent = "".join(
        part.decode("utf-8", "replace") if isinstance(part, (bytes, bytearray)) else str(part)
        for call in session.mock_calls for part in [*call.args, *call.kwargs.values()]
    )
    assert "staff bonus" in sent.lower()  # the trace is there, with the visible document
    assert "4.2 million" not in sent and "exec-comp" not in sent and "Executive compensation" not in sent


def test_stuck_sources_never_make_later_queries_wait(release: threading.Event) -> None:
    """Each query's stuck source keeps its thread; later queries still get threads of their own."""
    from evident.connectors.federated import SourceWorkers

    federation = fed(
        Source(name="stuck", retriever=Scripted(hang=release), timeout_s=0.2),
        Source(name="ok", retriever=Scripted(docs=[doc("https://ok.example/a", "ok text")]), timeout_s=5),
        workers=SourceWorkers(size=3),  # a small shared pool, quickly exhausted
    )
    for _ in range(5):  # more stuck threads than the shared pool has room for
        result = federation.search("q")
        assert [d.url for d in result.documents] == ["https://ok.example/a"]
        assert [e.kind for e in result.errors] == ["timeout"]
