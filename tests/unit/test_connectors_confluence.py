"""The Confluence connector against a local REST API: CQL search, pagination, storage format, permissions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from evident.connectors.config import Defaults, build_sources, gateway_base
from evident.connectors.remote.confluence import ConfluenceRetriever, cql_for
from evident.connectors.remote.confluence_storage import storage_to_text
from evident.connectors.source import AccessReport, SourceFailure
from evident.models import Principal
from tests.support.wiki_servers import ConfluencePage, ConfluenceServer, Request, Response

TOKEN = "secret-token-123"

DEPLOY = (
    "<h1>Deploy checklist</h1><p>Every deploy needs an approved <strong>change ticket</strong>.</p>"
    '<ac:structured-macro ac:name="code" ac:schema-version="1"><ac:parameter ac:name="language">bash</ac:parameter>'
    "<ac:plain-text-body><![CDATA[./deploy.sh --env prod && echo <done>]]></ac:plain-text-body></ac:structured-macro>"
    '<ac:structured-macro ac:name="info"><ac:parameter ac:name="title">Freeze</ac:parameter><ac:rich-text-body>'
    "<p>Deploys freeze on Fridays.</p></ac:rich-text-body></ac:structured-macro>"
    '<p>See <ac:link><ri:page ri:content-title="Rollback guide" /></ac:link> for rollbacks.</p>'
)
PAGES = [
    ConfluencePage("101", "Deploy checklist", "ENG", DEPLOY),
    ConfluencePage("102", "Rollback guide", "ENG", "<p>A deploy rollback uses the previous release tag.</p>"),
    ConfluencePage("103", "Deploy budget", "FIN", "<p>Deploy infrastructure costs are charged to cost centre 4410.</p>",
                   read_groups=["finance"], readers=["acc-fin"]),
    ConfluencePage("104", "Salary bands", "HR", "<p>Salary bands for every deploy engineer level.</p>",
                   read_users=["acc-hr"], read_groups=["hr-admins"], readers=["acc-hr"]),
    ConfluencePage("105", "Deploy history", "ENG", "<table><tr><th>Date</th><th>Deploy</th></tr>"
                   "<tr><td>2025-01-02</td><td>v5.1</td></tr></table>"),
]


@pytest.fixture
def cloud() -> Iterator[ConfluenceServer]:
    with ConfluenceServer(PAGES) as server:
        yield server


def cloud_retriever(server: ConfluenceServer, **kw: Any) -> ConfluenceRetriever:
    kw.setdefault("token", TOKEN)
    kw.setdefault("timeout_s", 5)
    return ConfluenceRetriever(source_name="confluence", base_url=server.base_url, email="bot@example.com",
                               credential_hint="CONFLUENCE_TOKEN", **kw)


def test_search_follows_pagination_and_converts_storage_format(cloud: ConfluenceServer) -> None:
    docs = cloud_retriever(cloud, k=5).invoke("deploy")
    assert len(docs) == 5
    searches = [r for r in cloud.requests if r.path.endswith("/content/search")]
    assert len(searches) == 3  # the server caps limit at 2 when bodies are expanded
    assert [r.query.get("start", "0") for r in searches] == ["0", "2", "4"]
    assert all("body.storage" in r.query["expand"] for r in searches)
    checklist = next(d for d in docs if d.metadata["page_id"] == "101")
    assert checklist.metadata["url"] == f"{cloud.base_url}/spaces/ENG/pages/101/Deploy+checklist"
    assert checklist.metadata["title"] == "Deploy checklist" and checklist.metadata["space"] == "ENG"
    assert checklist.metadata["version"] == 3 and checklist.metadata["source_type"] == "wiki"
    assert checklist.page_content == (
        "# Deploy checklist\n\nEvery deploy needs an approved change ticket.\n\n"
        "```\n./deploy.sh --env prod && echo <done>\n```\n\n"
        "Deploys freeze on Fridays.\n\nSee Rollback guide for rollbacks."
    )
    history = next(d for d in docs if d.metadata["page_id"] == "105")
    assert history.page_content == "Date | Deploy\n2025-01-02 | v5.1"


def test_cql_space_filter_and_restrictions_as_acl(cloud: ConfluenceServer) -> None:
    docs = cloud_retriever(cloud, spaces=["ENG", "FIN"], k=10).invoke("deploy")
    assert {d.metadata["space"] for d in docs} == {"ENG", "FIN"}
    cql = cloud.requests[0].query["cql"]
    assert cql == 'type in ("page") AND text ~ "deploy" AND space in ("ENG", "FIN")'
    budget = next(d for d in docs if d.metadata["page_id"] == "103")
    assert budget.metadata["acl"] == {"users": [], "groups": ["finance"]}
    assert "acl" not in next(d for d in docs if d.metadata["page_id"] == "101").metadata


def test_permission_check_as_the_principal(cloud: ConfluenceServer) -> None:
    r = cloud_retriever(cloud, k=10, check_permissions=True)
    report = AccessReport()
    docs = r.invoke("deploy", principal=Principal(user="alice", ids={"confluence": "acc-fin"}), report=report)
    assert {d.metadata["page_id"] for d in docs} == {"101", "102", "103", "105"}
    assert report.denied == 1  # the HR page
    checks = [q for q in cloud.requests if q.path.endswith("/permission/check")]
    assert {q.json()["subject"]["identifier"] for q in checks} == {"acc-fin"}
    assert all(q.json()["operation"] == "read" for q in checks)
    budget = next(d for d in docs if d.metadata["page_id"] == "103")
    assert budget.metadata["acl"] == {"users": ["acc-fin"]}  # Confluence vouched for this reader

    report = AccessReport()
    assert r.invoke("deploy", report=report) == [] and report.denied == 5  # anonymous: never guessed
    report = AccessReport()
    assert r.invoke("deploy", principal=Principal(groups=["finance"]), report=report) == [] and report.denied == 5
    assert report.reasons == ["confluence: the caller has groups but no Confluence account id; Confluence checks "
                              "permissions for users, so its pages are not shown"]


def test_async_search(cloud: ConfluenceServer) -> None:
    r = cloud_retriever(cloud, k=3)
    found = asyncio.run(r.ainvoke("deploy"))
    assert [d.metadata["url"] for d in found] == [d.metadata["url"] for d in r.invoke("deploy")]


def test_data_center_with_a_personal_token() -> None:
    with ConfluenceServer(PAGES, context="", email=None, token="pat-456") as dc:
        r = ConfluenceRetriever(source_name="confluence", base_url=dc.base_url, deployment="datacenter",
                                token="pat-456")
        docs = r.invoke("rollback")
        assert docs[0].metadata["url"] == f"{dc.url}/spaces/ENG/pages/102/Rollback+guide"
        assert dc.requests[0].headers["authorization"] == "Bearer pat-456"
        assert dc.requests[0].path == "/rest/api/content/search"


def test_bad_token_says_which_setting_without_the_secret(cloud: ConfluenceServer) -> None:
    with pytest.raises(SourceFailure) as err:
        cloud_retriever(cloud, token="wrong-secret-789").invoke("deploy")
    assert "authentication failed (HTTP 401); check CONFLUENCE_TOKEN" in err.value.message
    assert "wrong-secret" not in err.value.message


def test_cql_error_is_explained(cloud: ConfluenceServer) -> None:
    cloud.fault = lambda request: Response(400, {"statusCode": 400, "message": "Could not parse cql : label = "})
    with pytest.raises(SourceFailure, match="rejected \\(HTTP 400\\): Could not parse cql"):
        cloud_retriever(cloud, extra_cql="label = ").invoke("deploy")


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Response(503, "<html>maintenance</html>", "text/html"), "HTTP 503"),
        (Response(200, "<html><body>Log in to Confluence</body></html>", "text/html"),
         "malformed Confluence search response (expected JSON, got text/html)"),
        (Response(200, {"results": [{"title": "no id"}]}), "malformed Confluence search response"),
        (Response(200, {"size": 0}), "malformed Confluence search response"),
    ],
)
def test_faults(cloud: ConfluenceServer, fault: Response, message: str) -> None:
    cloud.fault = lambda request: fault
    with pytest.raises(SourceFailure) as err:
        cloud_retriever(cloud).invoke("deploy")
    assert message in err.value.message


def test_pagination_link_to_another_host_is_refused(cloud: ConfluenceServer) -> None:
    def evil_next(request: Request) -> Response | None:
        if request.query.get("start") is None:
            return Response(body={"results": [], "_links": {"next": "https://evil.example/rest/api/content/search?x=1"}})
        return None

    cloud.fault = evil_next
    assert cloud_retriever(cloud).invoke("deploy") == []  # an empty page ends the search; nothing fetched elsewhere

    def evil_next_with_results(request: Request) -> Response | None:
        item = {"id": "9", "title": "t", "_links": {"webui": "/x"}, "body": {"storage": {"value": "<p>deploy</p>"}}}
        return Response(body={"results": [item], "_links": {"next": "https://evil.example/rest/api/content/search"}})

    cloud.fault = evil_next_with_results
    with pytest.raises(SourceFailure, match="outside the configured base URL"):
        cloud_retriever(cloud, k=5).invoke("deploy")


def test_slow_confluence_times_out(cloud: ConfluenceServer) -> None:
    cloud.fault = lambda request: Response(body={"results": []}, delay_s=5)
    with pytest.raises(SourceFailure) as err:
        cloud_retriever(cloud, timeout_s=0.2).invoke("deploy")
    assert err.value.kind == "timeout"


def test_cql_is_built_from_words_only() -> None:
    cql = cql_for('deploy" OR space = "HR" AND (title ~ x*)', spaces=['EN"G'], content_types=["page", "blogpost"])
    assert cql == 'type in ("page", "blogpost") AND text ~ "deploy space hr title x" AND space in ("EN\\"G")'
    assert cql_for("the of and", spaces=[], content_types=["page"]) is None


def test_storage_format_edge_cases() -> None:
    assert storage_to_text("<p>Call <ri:user ri:account-id='1'/> now</p>") == "Call now"
    assert storage_to_text("<p>x<ac:emoticon ac:name='smile'/>y</p>") == "xy"
    text = storage_to_text("<ac:task-list><ac:task><ac:task-id>1</ac:task-id><ac:task-status>complete</ac:task-status>"
                           "<ac:task-body>Rotate keys</ac:task-body></ac:task></ac:task-list>")
    assert text == "Rotate keys"
    assert storage_to_text("<p>a <ac:link><ri:page ri:content-title='P'/><ac:link-body>the <b>page</b></ac:link-body>"
                           "</ac:link> b</p>") == "a the page b"


def test_scoped_token_through_the_api_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    # Scoped API tokens must call https://api.atlassian.com/ex/confluence/{cloudId}; the stand-in serves
    # that path on loopback, with the REST API under /wiki as the gateway does, and relative `next` links.
    monkeypatch.setenv("CONF_EMAIL", "bot@example.com")
    monkeypatch.setenv("CONF_TOKEN", TOKEN)
    with ConfluenceServer(PAGES, context="/ex/confluence/0f1e2d3c/wiki", relative_next=True) as gateway:
        sources, errors = build_sources([{
            "name": "confluence", "type": "confluence", "url": f"{gateway.url}/ex/confluence/0f1e2d3c",
            "site_url": "https://acme.atlassian.net/wiki", "email_env": "CONF_EMAIL", "token_env": "CONF_TOKEN",
            "check_permissions": True,  # allowed: the gateway is Cloud
        }], Defaults(k=4))
        assert errors == []
        r = sources[0].retriever
        assert isinstance(r, ConfluenceRetriever) and r.deployment == "cloud"
        report = AccessReport()
        docs = r.invoke("deploy", principal=Principal(user="acc-hr"), report=report)
    assert [d.metadata["page_id"] for d in docs] == ["101", "105", "102"] and report.denied == 1  # 103: finance only
    # Citation links are the site readers know, not the gateway.
    assert docs[0].metadata["url"] == "https://acme.atlassian.net/wiki/spaces/ENG/pages/101/Deploy+checklist"
    searches = [q for q in gateway.requests if q.path.endswith("/content/search")]
    assert [q.path for q in searches] == ["/ex/confluence/0f1e2d3c/wiki/rest/api/content/search"] * 2
    assert [q.query.get("start", "0") for q in searches] == ["0", "2"]  # the "rest/api/..." link was followed


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"url": "https://api.atlassian.com/ex/confluence/abc", "deployment": "datacenter"}, "Confluence Cloud only"),
        ({"url": "https://acme.atlassian.net/wiki", "site_url": "acme.atlassian.net"}, "site_url must be an absolute"),
    ],
)
def test_gateway_settings_that_cannot_work(raw: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONF_EMAIL", "bot@example.com")
    monkeypatch.setenv("CONF_TOKEN", TOKEN)
    _, errors = build_sources([{"name": "c", "type": "confluence", "email_env": "CONF_EMAIL", "token_env": "CONF_TOKEN",
                                **raw}], Defaults())
    assert len(errors) == 1 and message in errors[0].message


def test_gateway_base() -> None:
    assert gateway_base("https://api.atlassian.com/ex/confluence/abc-1") == "https://api.atlassian.com/ex/confluence/abc-1/wiki"
    assert gateway_base("https://api.atlassian.com/ex/confluence/abc-1/wiki") == "https://api.atlassian.com/ex/confluence/abc-1/wiki"
    assert gateway_base("https://acme.atlassian.net/wiki") is None
    assert gateway_base("https://confluence.example.com/ex/other") is None


def test_pagination_link_that_climbs_out_of_the_api_is_refused(cloud: ConfluenceServer) -> None:
    def climbing_next(request: Request) -> Response | None:
        item = {"id": "9", "title": "t", "_links": {"webui": "/x"}, "body": {"storage": {"value": "<p>deploy</p>"}}}
        return Response(body={"results": [item], "_links": {"next": "rest/api/../../admin/users?x=1"}})

    cloud.fault = climbing_next
    with pytest.raises(SourceFailure, match="unexpected pagination link"):
        cloud_retriever(cloud, k=5).invoke("deploy")
