"""The MediaWiki connector against a stand-in Action API, for what a real wiki cannot be made to do.

Search, both text modes, k > 50, login, re-login and read rights are proven against a real MediaWiki
(tests/integration/test_real_mediawiki.py); here: faults (5xx, HTML, malformed JSON, API errors, 429,
redirects, timeouts, a refused host), a search backend without text search, OAuth tokens (an extension
the test wiki does not have) and a public wiki's anonymous readers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from evident.connectors.remote.mediawiki import MediaWikiRetriever
from evident.connectors.source import SourceFailure
from tests.support.wiki_servers import MediaWikiServer, Request, Response, WikiPage

PAGES = [
    WikiPage(1, "Deploy process", "Deploy process\n\nEvery deploy to production needs a green build and an approved "
             "change ticket. Deploys are frozen on Fridays after 15:00."),
    WikiPage(2, "Incident process", "Incident process\n\nDeclare an incident in the #incidents channel. The incident "
             "commander owns communication until the incident is resolved.",
             html='<div class="mw-parser-output">'
                  '<h2>Declaring<span class="mw-editsection">[<a href="/e">edit</a>]</span></h2>'
                  '<div id="toc" class="toc"><ul><li>1 Declaring</li></ul></div><p>Declare an incident in the '
                  "<b>#incidents</b> channel.</p><ul><li>Page the on-call</li><li>Open a bridge</li></ul></div>"),
    WikiPage(3, "Oncall rotation", "Oncall rotation\n\nThe deploy on-call rotates weekly; the incident commander is "
             "always the on-call engineer."),
    WikiPage(4, "Talk:Deploy process", "Talk page about the deploy process.", ns=1),
]


@pytest.fixture
def wiki() -> Iterator[MediaWikiServer]:
    with MediaWikiServer(PAGES) as server:
        yield server


def retriever(server: MediaWikiServer, **kw: Any) -> MediaWikiRetriever:
    return MediaWikiRetriever(source_name="wiki", api_url=server.api_url, timeout_s=5, **kw)


def test_k_and_namespaces(wiki: MediaWikiServer) -> None:
    docs = retriever(wiki, k=1, namespaces=[0, 1]).invoke("deploy process")
    assert len(docs) == 1
    search = next(r for r in wiki.requests if r.query.get("list") == "search")
    assert search.query["srlimit"] == "1" and search.query["srnamespace"] == "0|1"


def test_query_without_words_makes_no_request(wiki: MediaWikiServer) -> None:
    assert retriever(wiki).invoke("what is the ?") == []
    assert wiki.requests == []


def test_oauth_token() -> None:
    with MediaWikiServer(PAGES, token="tok-abc-123") as wiki:
        assert retriever(wiki, token="tok-abc-123").invoke("deploy")
        assert wiki.requests[-1].headers["authorization"] == "Bearer tok-abc-123"
        with pytest.raises(SourceFailure) as err:
            retriever(wiki, token="tok-wrong-999").invoke("deploy")
    assert "mwoauth-invalid-authorization" in err.value.message and "tok-wrong" not in err.value.message


def test_public_wiki_rights_for_anonymous() -> None:
    with MediaWikiServer(PAGES) as wiki:
        docs = retriever(wiki, check_read_rights=True).invoke("deploy")
        assert docs and all(d.metadata["acl"] == "public" for d in docs)


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Response(500, "<html><body>Internal error</body></html>", "text/html"), "HTTP 500"),
        (Response(200, "<!DOCTYPE html><html><body>Main Page</body></html>", "text/html"),
         "malformed MediaWiki API response (expected JSON, got text/html)"),
        (Response(200, '{"query": {"search": "oops"}}'), "malformed search response"),
        (Response(200, '{"batchcomplete": true, "query": {"sear'), "expected JSON"),
        (Response(body={"errors": [{"code": "maxlag", "text": "Waiting for a database server: 7 seconds lagged."}]}),
         "MediaWiki API error maxlag: Waiting for a database server"),
        (Response(429, "slow down", "text/plain", {"Retry-After": "30"}), "rate limited (HTTP 429), retry after 30 s"),
        (Response(302, "", "text/html", {"Location": "/login"}), "unexpected redirect (HTTP 302)"),
    ],
)
def test_faults_are_clear_failures(wiki: MediaWikiServer, fault: Response, message: str) -> None:
    wiki.fault = lambda request: fault
    with pytest.raises(SourceFailure) as err:
        retriever(wiki).invoke("deploy")
    assert message in err.value.message
    assert "127.0.0.1" in err.value.message  # names the host, not the query


def test_a_page_deleted_between_search_and_fetch_is_skipped(wiki: MediaWikiServer) -> None:
    def drop_page_two(request: Request) -> Response | None:
        if "extracts" in request.query.get("prop", ""):
            wiki.pages = [p for p in PAGES if p.pageid != 2]
        return None

    wiki.fault = drop_page_two
    docs = retriever(wiki).invoke("deploy incident")
    assert 2 not in [d.metadata["pageid"] for d in docs] and docs


def test_slow_wiki_times_out(wiki: MediaWikiServer) -> None:
    wiki.fault = lambda request: Response(body={}, delay_s=5)
    with pytest.raises(SourceFailure) as err:
        MediaWikiRetriever(source_name="wiki", api_url=wiki.api_url, timeout_s=0.2).invoke("deploy")
    assert err.value.kind == "timeout" and "did not answer within 0.2 s" in err.value.message


def test_unreachable_host() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(SourceFailure, match=f"cannot connect to 127.0.0.1:{port}"):
            retriever = MediaWikiRetriever(source_name="wiki", api_url=f"http://127.0.0.1:{port}/w/api.php",
                                           timeout_s=2)
            retriever.invoke("deploy")


def test_a_backend_without_text_search_is_asked_once_then_searched_its_own_way(wiki: MediaWikiServer) -> None:
    def refuse_text_search(request: Request) -> Response | None:
        if request.query.get("srwhat") == "text":
            return Response(body={"errors": [{"code": "search-text-disabled", "text": "Text search is disabled."}]})
        return None

    wiki.fault = refuse_text_search
    r = retriever(wiki, k=2)
    assert [d.metadata["title"] for d in r.invoke("deploy process")] == ["Deploy process", "Incident process"]
    r.invoke("incident")
    searches = [q.query.get("srwhat") for q in wiki.requests if q.query.get("list") == "search"]
    assert searches == ["text", None, None]  # detected once per source


def test_relaxed_search_when_no_page_holds_every_word(wiki: MediaWikiServer) -> None:
    def every_word(request: Request) -> Response | None:
        # MediaWiki's own backends require every word of the search.
        words = request.query.get("srsearch", "").split()
        if request.query.get("list") == "search" and len(words) > 1:
            return Response(body={"batchcomplete": True, "query": {"search": []}})
        return None

    wiki.fault = every_word
    docs = retriever(wiki, k=3).invoke("How long is the weekly oncall rotation?")
    assert [d.metadata["title"] for d in docs][0] == "Oncall rotation"  # found by most of the words
    searched = [q.query["srsearch"] for q in wiki.requests if q.query.get("list") == "search"]
    assert searched == ["long weekly oncall rotation", "rotation", "weekly", "oncall", "long"]
