"""The Elasticsearch/OpenSearch recipe of docs/sources.md: the caller's permissions pushed into the engine's query.

STAND-IN: no Elasticsearch or OpenSearch server can run here, so a small HTTP server on 127.0.0.1 answers
`POST /<index>/_search` for the one query shape the recipe sends (`bool` of a `match` and a `terms` filter),
scoring by shared words. What is tested is EvidenT's side: a `SearchesVisible` retriever receives the caller's
visibility tokens, sends them in the query, and its top k are the caller's top k, chunks cited at document offsets.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from evident.connectors.in_search import SearchesVisible
from evident.connectors.visibility import document_tokens
from evident.context import EvidentContext
from evident.embeddings.meaning import QueryMeaning
from evident.graph import build_graph
from evident.models import Citation, SourceDocument

LEAVE = ("# Parental leave\n\nAll parents receive 18 weeks of fully paid parental leave after the birth of a child.\n\n"
         "# Sick leave\n\nTell your manager on the first day you are ill.")
CHUNKS = [  # as a splitter with add_start_index=True would index them
    {"url": "https://hr.example/leave", "title": "Leave", "start_index": LEAVE.index("All parents"),
     "text": LEAVE[LEAVE.index("All parents"):LEAVE.index("\n\n# Sick")], "acl_tokens": document_tokens("public")},
    *({"url": f"https://hr.example/board-{i}", "title": "Board parental leave", "start_index": 0,
       "text": "Board parental leave weeks: parental leave weeks parental leave.",
       "acl_tokens": document_tokens("group:board")} for i in range(5)),
]


class _Engine(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append(body)
        words = set(re.findall(r"\w+", body["query"]["bool"]["must"]["match"]["text"].casefold()))
        allowed = set(body["query"]["bool"]["filter"]["terms"]["acl_tokens"])
        hits = [{"_score": float(len(words & set(re.findall(r"\w+", c["text"].casefold())))), "_source": c}
                for c in CHUNKS if allowed & set(c["acl_tokens"])]  # fmt: skip
        hits = sorted((h for h in hits if h["_score"] > 0), key=lambda h: -h["_score"])[: body["size"]]
        data = json.dumps({"hits": {"hits": hits}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def engine() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Engine.bodies = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


class KnowledgeBase(SearchesVisible):
    """The recipe's retriever, speaking the search API over plain HTTP."""

    base_url: str
    index: str = "kb"

    def search_visible(
        self, query: str, visible: list[str], meaning: QueryMeaning | None
    ) -> list[tuple[SourceDocument, float]]:
        body = {"size": self.k, "query": {"bool": {"must": {"match": {"text": query}},
                                                   "filter": {"terms": {"acl_tokens": visible}}}}}
        hits = httpx.post(f"{self.base_url}/{self.index}/_search", json=body, timeout=5).json()["hits"]["hits"]
        return [(SourceDocument(url=h["_source"]["url"], title=h["_source"]["title"], content=h["_source"]["text"],
                                metadata={"start_index": h["_source"]["start_index"]}), h["_score"])
                for h in hits]  # fmt: skip


def test_the_callers_tokens_go_into_the_query_and_the_top_k_is_theirs(engine: str) -> None:
    graph = build_graph(retriever=KnowledgeBase(base_url=engine, k=1, source_name="kb"))
    bob = {"user": "bob", "groups": ["staff"]}
    out = graph.invoke({"query": "How many weeks of parental leave?", "principal": bob},
                       context=EvidentContext(embeddings="none", k=1, top_n=1))  # fmt: skip
    (body,) = _Engine.bodies  # one request: no refill rounds for a search that filters itself
    assert body["query"]["bool"]["filter"]["terms"]["acl_tokens"] == [
        "public", "authenticated", "user:bob", "group:staff", "unstated", "blank"]
    assert [d["url"] for d in out["documents"]] == ["https://hr.example/leave#chunk-1"]
    citation = Citation.model_validate(out["citations"][0])
    assert citation.url == "https://hr.example/leave" and citation.span_base == "document"
    assert citation.quote == " … ".join(LEAVE[s:e] for s, e in citation.spans)
    assert "18 weeks" in citation.quote
