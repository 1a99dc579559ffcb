"""The MediaWiki connector against a local Action API: search, extracts, parse, login, rights, faults."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from evident.connectors.mediawiki import MediaWikiRetriever
from evident.connectors.source import AccessReport, SourceFailure
from evident.models import Principal
from tests.support.wiki_servers import MediaWikiServer, Request, Response, WikiPage

PAGES = [
    WikiPage(1, "Deploy process", "Deploy process\n\nEvery deploy to production needs a green build and an approved "
             "change ticket. Deploys are frozen on Fridays after 15:00."),
    WikiPage(2, "Incident process", "Incident process\n\nDeclare an incident in the #incidents channel. The incident "
             "commander owns communication until the incident is resolved.",
             html='<div class="mw-parser-output"><h2>Declaring<span class="mw-editsection">[<a href="/e">edit</a>]</span>'
                  '</h2><div id="toc" class="toc"><ul><li>1 Declaring</li></ul></div><p>Declare an incident in the '
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


def test_search_and_paginated_extracts(wiki: MediaWikiServer) -> None:
    docs = retriever(wiki).invoke("How are deploy and incident handled?")
    assert [d.metadata["title"] for d in docs] == ["Incident process", "Deploy process", "Oncall rotation"]
    first = docs[0]
    assert first.metadata["url"] == f"{wiki.url}/wiki/Incident_process"
    assert first.page_content == PAGES[1].text
    assert {"source": "wiki", "source_type": "wiki", "pageid": 2, "lastrevid": 1002}.items() <= first.metadata.items()
    # TextExtracts gives one whole page per response: the connector followed `excontinue` to the end.
    extract_calls = [r for r in wiki.requests if "extracts" in r.query.get("prop", "")]
    assert [r.query.get("excontinue") for r in extract_calls] == [None, "1", "2"]
    search = next(r for r in wiki.requests if r.query.get("list") == "search")
    assert search.query["srsearch"] == "deploy incident handled"  # words only: no search syntax
    assert search.query["srnamespace"] == "0" and search.query["formatversion"] == "2"
    assert search.headers["user-agent"].startswith("EvidenT/")


def test_k_and_namespaces(wiki: MediaWikiServer) -> None:
    docs = retriever(wiki, k=1, namespaces=[0, 1]).invoke("deploy process")
    assert len(docs) == 1
    search = next(r for r in wiki.requests if r.query.get("list") == "search")
    assert search.query["srlimit"] == "1" and search.query["srnamespace"] == "0|1"


def test_parse_mode_turns_html_into_clean_text(wiki: MediaWikiServer) -> None:
    docs = retriever(wiki, text="parse").invoke("incident channel")
    incident = next(d for d in docs if d.metadata["pageid"] == 2)
    assert incident.page_content == "Declaring\n\nDeclare an incident in the #incidents channel.\n\nPage the on-call\nOpen a bridge"
    assert incident.metadata["url"].endswith("/wiki/Incident_process")
    assert any(r.query.get("action") == "parse" for r in wiki.requests)


def test_async_gives_the_same_documents(wiki: MediaWikiServer) -> None:
    r = retriever(wiki)
    sync = r.invoke("deploy incident")
    out = asyncio.run(r.ainvoke("deploy incident"))
    assert [(d.metadata["url"], d.page_content) for d in out] == [(d.metadata["url"], d.page_content) for d in sync]


def test_query_without_words_makes_no_request(wiki: MediaWikiServer) -> None:
    assert retriever(wiki).invoke("what is the ?") == []
    assert wiki.requests == []


def test_bot_password_login_and_expired_session() -> None:
    with MediaWikiServer(PAGES, bot=("Evident@reader", "s3cret-bot-pass")) as wiki:
        r = retriever(wiki, username="Evident@reader", password="s3cret-bot-pass", credential_hint="WIKI_USER / WIKI_PASS")
        assert len(r.invoke("deploy")) == 2
        logins = [q for q in wiki.requests if q.form().get("action") == "login"]
        assert len(logins) == 1 and logins[0].method == "POST"
        assert "s3cret-bot-pass" not in str([q.query for q in wiki.requests])  # never in a URL
        r.invoke("incident")
        assert len([q for q in wiki.requests if q.form().get("action") == "login"]) == 1  # session reused
        wiki.expire_sessions()
        assert len(r.invoke("deploy")) == 2  # assertuserfailed -> logged in again, transparently
        assert len([q for q in wiki.requests if q.form().get("action") == "login"]) == 2


def test_wrong_bot_password_is_a_clear_failure_without_the_secret() -> None:
    with MediaWikiServer(PAGES, bot=("Evident@reader", "right")) as wiki:
        r = retriever(wiki, username="Evident@reader", password="wrong-password-value", credential_hint="WIKI_PASS")
        with pytest.raises(SourceFailure) as err:
            r.invoke("deploy")
    assert "login failed: Incorrect username or password" in err.value.message
    assert "check WIKI_PASS" in err.value.message
    assert "wrong-password-value" not in err.value.message


def test_oauth_token() -> None:
    with MediaWikiServer(PAGES, token="tok-abc-123") as wiki:
        assert retriever(wiki, token="tok-abc-123").invoke("deploy")
        assert wiki.requests[-1].headers["authorization"] == "Bearer tok-abc-123"
        with pytest.raises(SourceFailure) as err:
            retriever(wiki, token="tok-wrong-999").invoke("deploy")
    assert "mwoauth-invalid-authorization" in err.value.message and "tok-wrong" not in err.value.message


def test_private_wiki_without_credentials() -> None:
    with MediaWikiServer(PAGES, bot=("Evident@reader", "pw")) as wiki:
        with pytest.raises(SourceFailure, match="readapidenied"):
            retriever(wiki).invoke("deploy")


def test_read_rights_of_the_principal() -> None:
    rights = {"Alice": ["read", "edit"], "Mallory": ["edit"]}
    with MediaWikiServer(PAGES, user_rights=rights, anonymous_rights=["createaccount"]) as wiki:
        r = retriever(wiki, check_read_rights=True)
        docs = r.invoke("deploy", principal=Principal(user="Alice"))
        assert docs and all(d.metadata["acl"] == {"users": ["Alice"]} for d in docs)

        report = AccessReport()
        assert r.invoke("deploy", principal={"user": "Mallory"}, report=report) == []
        assert report.denied == 2
        report = AccessReport()
        assert r.invoke("deploy", principal=Principal(user="Nobody"), report=report) == [] and report.denied == 2
        report = AccessReport()
        assert r.invoke("deploy", report=report) == [] and report.denied == 2  # anonymous: group "*" cannot read
        # The wiki account may differ from EvidenT's user id.
        assert r.invoke("deploy", principal=Principal(user="alice@corp", ids={"wiki": "Alice"}))
        before = len([q for q in wiki.requests if q.query.get("list") == "users"])
        r.invoke("incident", principal=Principal(user="Alice"))
        assert len([q for q in wiki.requests if q.query.get("list") == "users"]) == before  # rights are cached


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
            MediaWikiRetriever(source_name="wiki", api_url=f"http://127.0.0.1:{port}/w/api.php", timeout_s=2).invoke("deploy")
