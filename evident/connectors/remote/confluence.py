"""Confluence (Cloud and Data Center) through its REST API.

Search is CQL (`/rest/api/content/search`) with the page body expanded in storage format, so one
request gives ranked hits and their text; pages beyond the server's page size are followed through
`_links.next`, which must stay on the configured base URL. Storage format becomes text through
`confluence_storage`. Credentials: Cloud uses an e-mail address and an API token (basic auth),
Data Center a personal access token (Bearer) or a user name and password, all from the environment.
Scoped Cloud API tokens go through the API gateway (`https://api.atlassian.com/ex/confluence/{cloudId}`);
citation links then use `site_url`, the site readers know.

Permissions: the service account sees more than most readers. Each hit carries its page-level read
restrictions as `metadata.acl` (users and groups); with `check_permissions` (Cloud), every hit is
also checked for the caller through `/rest/api/content/{id}/permission/check`, which accounts for
space permissions and inherited restrictions. Hits the caller may not read are not returned.
"""

from __future__ import annotations

import base64
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import httpx
from langchain_core.documents import Document
from pydantic import Field, SecretStr

from evident.connectors.acl import is_anonymous
from evident.connectors.remote.base import RemoteRetriever
from evident.connectors.remote.confluence_storage import storage_to_text
from evident.connectors.remote.http import Flow, host, json_body, one_line
from evident.connectors.source import AccessReport, SourceFailure
from evident.conversation.asking import search_terms
from evident.models import Principal

EXPAND = "body.storage,space,version,restrictions.read.restrictions.user,restrictions.read.restrictions.group"
MAX_PAGES = 20  # pagination requests per query; k hits never need more
MAX_TERMS = 16  # CQL text queries get slow and error-prone beyond a handful of words


def cql_for(query: str, *, spaces: list[str], content_types: list[str], extra: str = "") -> str | None:
    """The CQL of a free-text query: words only (CQL and Lucene syntax in them would be injection)."""
    terms = search_terms(query)[:MAX_TERMS]
    if not terms:
        return None
    clauses = [f'text ~ "{" ".join(terms)}"']
    if content_types:
        clauses.insert(0, "type in (" + ", ".join(f'"{_cql_string(t)}"' for t in content_types) + ")")
    if spaces:
        clauses.append("space in (" + ", ".join(f'"{_cql_string(s)}"' for s in spaces) + ")")
    if extra.strip():
        clauses.append(f"({extra.strip()})")
    return " AND ".join(clauses)


def _cql_string(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class ConfluenceRetriever(RemoteRetriever):
    """Searches Confluence spaces with CQL; one `Document` per page, text from its storage body."""

    base_url: str = Field(description="https://example.atlassian.net/wiki (Cloud) or the Data Center base URL")
    deployment: Literal["cloud", "datacenter"] = "cloud"
    spaces: list[str] = Field(default_factory=list, description="Space keys to search; empty means all.")
    content_types: list[str] = Field(default_factory=lambda: ["page"])
    extra_cql: str = Field("", description="ANDed to every query, e.g. 'label = \"public\"'.")
    email: str | None = Field(None, description="Cloud: the API token's account e-mail (basic auth).")
    username: str | None = Field(None, description="Data Center: user name for basic auth.")
    token: SecretStr | None = Field(None, repr=False, description="Cloud API token or Data Center personal token.")
    password: SecretStr | None = Field(None, repr=False)
    credential_hint: str = ""
    check_permissions: bool = False
    page_limit: int = Field(25, ge=1, le=100)
    site_url: str | None = Field(None, description="Base of citation links when base_url is the API gateway, "
                                                     "e.g. https://example.atlassian.net/wiki")

    def _flow(self, query: str, principal: Principal | None, report: AccessReport) -> Flow[list[Document]]:
        cql = cql_for(query, spaces=self.spaces, content_types=self.content_types, extra=self.extra_cql)
        if cql is None:
            return []
        request = self._request("GET", "/rest/api/content/search",
                                params={"cql": cql, "limit": str(min(self.k, self.page_limit)), "expand": EXPAND})
        results: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            data = self._json((yield request), "Confluence search")
            page = _results(data, self.base_url)
            results.extend(page)
            link = (data.get("_links") or {}).get("next") if isinstance(data.get("_links"), dict) else None
            if len(results) >= self.k or not page or not isinstance(link, str) or not link:
                break
            request = self._next_request(link, cql)
        results = results[: self.k]
        if self.check_permissions and results and principal is not None and not is_anonymous(principal) and not (
                principal.ids.get(self.source_name) or principal.user).strip():
            report.reasons.append(f"{self.source_name}: the caller has groups but no Confluence account id; "
                                  "Confluence checks permissions for users, so its pages are not shown")
        docs: list[Document] = []
        for item in results:
            if self.check_permissions:
                allowed = yield from self._may_read(item, principal)
                if not allowed:
                    report.denied += 1
                    continue
            doc = self._document(item, principal)
            if doc is not None:
                docs.append(doc)
        return docs

    # -- requests ------------------------------------------------------------------------------

    def _request(
        self, method: str, path: str, *, params: dict[str, str] | None = None, json: Any = None
    ) -> httpx.Request:
        return httpx.Request(method, self.base_url + path, params=params, json=json, headers=self._auth_headers())

    def _auth_headers(self) -> dict[str, str]:
        if self.token is not None and self.email:
            pair = f"{self.email}:{self.token.get_secret_value()}"
        elif self.password is not None and self.username:
            pair = f"{self.username}:{self.password.get_secret_value()}"
        elif self.token is not None:
            return {"Authorization": f"Bearer {self.token.get_secret_value()}"}
        else:
            return {}
        return {"Authorization": "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")}

    def _next_request(self, link: str, cql: str) -> httpx.Request:
        """The request for `_links.next`, which must point back into the configured Confluence."""
        base = urlsplit(self.base_url)
        target = urlsplit(link)
        if target.scheme or target.netloc:
            if (target.scheme, target.netloc) != (base.scheme, base.netloc) or not target.path.startswith(base.path):
                raise SourceFailure(f"{host(self.base_url)}: pagination link points outside the configured base URL")
            path = target.path[len(base.path):]
        else:
            # Relative to the base, with or without a leading slash; some Data Center versions repeat the context path.
            path = target.path if target.path.startswith("/") else "/" + target.path
            if base.path and path.startswith(base.path + "/"):
                path = path[len(base.path):]
        if not path.startswith("/rest/api/") or ".." in path.split("/"):
            raise SourceFailure(f"{host(self.base_url)}: unexpected pagination link")
        params = dict(parse_qsl(target.query, keep_blank_values=True))
        params.setdefault("cql", cql)
        params.setdefault("expand", EXPAND)
        return self._request("GET", path, params=params)

    def _may_read(self, item: dict[str, Any], principal: Principal | None) -> Flow[bool]:
        if is_anonymous(principal):
            return False  # Confluence cannot be asked about an anonymous reader: deny, never guess
        assert principal is not None
        subject = (principal.ids.get(self.source_name) or principal.user).strip()
        if not subject:
            return False  # groups only: Confluence checks users, and a group is not a user
        response = yield self._request("POST", f"/rest/api/content/{item['id']}/permission/check", json={
            "subject": {"type": "user", "identifier": subject}, "operation": "read",
        })
        if response.status_code == 404:
            return False  # deleted since the search, or invisible to us: either way not shown
        data = self._json(response, "Confluence permission check")
        allowed = data.get("hasPermission") if isinstance(data, dict) else None
        if not isinstance(allowed, bool):
            raise SourceFailure(f"{host(self.base_url)}: malformed permission check response")
        return allowed

    def _json(self, response: httpx.Response, what: str) -> Any:
        if response.status_code == 400:
            # Confluence explains a bad request (an invalid CQL clause in extra_cql, say) in JSON.
            try:
                message = response.json().get("message")
            except (ValueError, AttributeError):
                message = None
            if isinstance(message, str) and message:
                raise SourceFailure(f"{host(self.base_url)}: {what} rejected (HTTP 400): {one_line(message, 200)}")
        return json_body(response, what=what, credential_hint=self.credential_hint)

    # -- results -------------------------------------------------------------------------------

    def _document(self, item: dict[str, Any], principal: Principal | None) -> Document | None:
        body = ((item.get("body") or {}).get("storage") or {}).get("value")
        webui = (item.get("_links") or {}).get("webui")
        if not isinstance(body, str) or not isinstance(webui, str) or not webui.startswith("/"):
            return None
        text = storage_to_text(body)
        if not text.strip():
            return None
        space = _object(item.get("space"))
        version = _object(item.get("version"))
        metadata: dict[str, Any] = {"page_id": str(item["id"]), "content_type": str(item.get("type", ""))}
        if space.get("key"):
            metadata["space"] = str(space["key"])
        if version.get("number") is not None:
            metadata["version"] = version["number"]
        if version.get("when"):
            metadata["last_modified"] = str(version["when"])
        acl = _restrictions_acl(item)
        if self.check_permissions and principal is not None:
            # Confluence itself said this reader may read the page; that verdict is the acl that counts.
            who = (principal.ids.get(self.source_name) or principal.user).strip()
            acl = {"users": sorted({*((acl or {}).get("users", [])), who})}
        if acl is not None:
            metadata["acl"] = acl
        # The URL is built from the configured base, never from a base the response claims.
        return Document(page_content=text, metadata={
            **metadata, "url": (self.site_url or self.base_url) + webui, "title": str(item.get("title") or ""),
            "source": self.source_name, "source_type": "wiki",
        })


def _results(data: Any, base_url: str) -> list[dict[str, Any]]:
    if isinstance(data, dict) and "results" not in data and data.get("message"):
        raise SourceFailure(f"{host(base_url)}: Confluence error: {one_line(str(data['message']), 200)}")
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or not all(isinstance(r, dict) and r.get("id") is not None for r in results):
        raise SourceFailure(f"{host(base_url)}: malformed Confluence search response (expected results[].id)")
    return results


def _restrictions_acl(item: dict[str, Any]) -> dict[str, list[str]] | None:
    """The page's own read restrictions as an acl; None when it has none (space permissions apply)."""
    read = (((item.get("restrictions") or {}).get("read") or {}).get("restrictions")) or {}
    if not isinstance(read, dict):
        return None
    users = [
        str(u.get("accountId") or u.get("username") or u.get("userKey") or "")
        for u in ((read.get("user") or {}).get("results") or []) if isinstance(u, dict)
    ]
    groups = [
        str(g.get("name") or "") for g in ((read.get("group") or {}).get("results") or []) if isinstance(g, dict)
    ]
    users, groups = [u for u in users if u], [g for g in groups if g]
    if not users and not groups:
        return None
    return {"users": users, "groups": groups}


def _object(value: Any) -> dict[str, Any]:
    """A JSON object of the API's answer, or an empty one where the answer has none."""
    return value if isinstance(value, dict) else {}
