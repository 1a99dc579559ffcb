"""MediaWiki (the engine behind most company wikis) through its Action API.

Search is `list=search` over page text (`srwhat=text`; the default backend otherwise matches titles only),
relaxed to single words when no page holds every word of the question; page text is `prop=extracts` as
plain text (TextExtracts, one full page per response, continued with `excontinue`) or `action=parse` HTML
turned into text, fetched for at most 50 page ids per request (500 with `apihighlimits`); page URLs are the
API's `fullurl`. Credentials: a bot password (`action=login`, Special:BotPasswords) or an OAuth 2
owner-only access token, both read from the environment by the source configuration.

Permissions: MediaWiki has no per-page read restrictions in core; reading is a right of user groups.
With `check_read_rights`, the caller's own account is looked up (`list=users`, `usprop=rights`, or the
anonymous group `*` from `meta=siteinfo`) and the wiki's hits are returned only if it holds `read`. A
caller known only by groups has no account to look up and is denied, with the reason in the report.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
from langchain_core.documents import Document
from pydantic import Field, PrivateAttr, SecretStr
from selectolax.lexbor import LexborHTMLParser

from evident.alignment.models import SourceDocument
from evident.citations.recheck import REVISION
from evident.connectors.acl import coerce_principal, is_anonymous
from evident.connectors.base import to_source_document
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.html_text import parse_html
from evident.connectors.remote.base import RemoteRetriever
from evident.connectors.remote.http import Flow, host, json_body, one_line, run_flow
from evident.connectors.source import AccessReport, SourceFailure
from evident.conversation.asking import search_terms
from evident.models import Principal

logger = logging.getLogger(__name__)

MAX_SEARCH_CHARS = 300  # MediaWiki rejects longer search strings
MAX_CONTINUATIONS = 110  # TextExtracts returns one full page per response; k (at most 100) is below this
MAX_RELAXED_WORDS = 5  # single-word searches when the all-words search finds fewer than k pages
LOW_ID_LIMIT = 50  # page ids per API request (ApiBase::LIMIT_SML1)
HIGH_ID_LIMIT = 500  # for accounts with the apihighlimits right (ApiBase::LIMIT_SML2)
# Search backends that cannot search page text answer `srwhat=text` with one of these.
_TEXT_SEARCH_REFUSED = frozenset({"search-text-disabled", "text-search-disabled"})  # 1.29+, older
# Parser output that is page furniture, not content.
_PARSE_NOISE = ".mw-editsection, #toc, .toc, .mw-jump-link, .navbox, .catlinks, .printfooter, .mw-empty-elt"


class MediaWikiRetriever(RemoteRetriever):
    """Searches one MediaWiki through `api.php`."""

    api_url: str = Field(description="The wiki's api.php URL, e.g. https://wiki.example.com/w/api.php")
    namespaces: list[int] = Field(default_factory=lambda: [0])
    text: Literal["extracts", "parse"] = "extracts"
    username: str | None = Field(None, description="Bot password user name (User@BotName).")
    password: SecretStr | None = Field(None, repr=False)
    token: SecretStr | None = Field(None, repr=False, description="OAuth 2 access token (sent as Bearer).")
    credential_hint: str = Field("", description="Which settings hold the credentials, for error messages.")
    check_read_rights: bool = False
    rights_cache_s: float = Field(300.0, ge=0)

    _session: dict[str, str] = PrivateAttr(default_factory=dict)
    _session_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _logged_in_flag: bool = PrivateAttr(default=False)
    _rights: dict[str, tuple[float, bool]] = PrivateAttr(default_factory=dict)
    _srwhat: str | None = PrivateAttr(default=None)  # None: not yet known; "": the backend's default
    _id_limit: int = PrivateAttr(default=0)

    # -- the search ----------------------------------------------------------------------------

    def _flow(self, query: str, principal: Principal | None, report: AccessReport) -> Flow[list[Document]]:
        terms = " ".join(search_terms(query))[:MAX_SEARCH_CHARS].strip()
        if not terms:
            return []
        if self.username and not self._logged_in():
            yield from self._login()
        hits = yield from self._search(terms)
        words = terms.split()
        if len(hits) < self.k and len(words) > 1:
            hits = yield from self._relaxed(hits, words)
        hits = hits[: self.k]
        if not hits:
            return []
        acl: Any = None
        if self.check_read_rights:
            if not (yield from self._may_read(principal, report)):
                report.denied += len(hits)
                return []
            # The wiki itself vouched for this reader; the stamp overrides a source-wide default.
            acl = "public" if is_anonymous(principal) else {"users": [_wiki_user(principal, self.source_name)]}
        ids = [hit["pageid"] for hit in hits]
        pages: dict[int, dict[str, Any]] = {}
        # The API takes at most 50 page ids per request (500 for accounts with apihighlimits).
        batch = (yield from self._ids_per_request()) if len(ids) > LOW_ID_LIMIT else LOW_ID_LIMIT
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            if self.text == "extracts":
                pages.update((yield from self._extracts(chunk)))
            else:
                pages.update((yield from self._parsed(chunk)))
        # A page missing here was deleted or hidden between the search and the fetch.
        found = (self._page_document(page_id, pages[page_id], acl) for page_id in ids if page_id in pages)
        return [doc for doc in found if doc is not None]

    def _page_document(self, page_id: int, page: dict[str, Any], acl: Any) -> Document | None:
        """A fetched page as a document (None when it has no usable address or text); its revision is `revid=…`."""
        url, title, text = page.get("fullurl"), page.get("title"), page.get("text")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")) or not isinstance(text, str):
            return None
        try:
            validate_document_id(url)  # the index's rule for ids holds for live pages too
        except DocumentIdError:
            return None
        if not text.strip():
            return None
        metadata: dict[str, Any] = {"pageid": page_id, "ns": page.get("ns", 0)}
        for key in ("lastrevid", "touched"):
            if key in page:
                metadata[key] = page[key]
        if isinstance(page.get("lastrevid"), int):
            metadata[REVISION] = f"revid={page['lastrevid']}"
        if acl is not None:
            metadata["acl"] = acl
        return Document(page_content=text, metadata={
            **metadata, "url": url, "title": str(title or ""), "source": self.source_name, "source_type": "wiki",
        })

    # -- one page by its id, as the caller may read it now ---------------------------------------

    def fetch_visible(self, url: str, *, principal: Principal | dict[str, Any] | None = None,
                      policy: Any = None, revision: str = "") -> SourceDocument | None:
        """The page at `url` as `principal` may read it now, or None: deleted, moved to another address, or
        not readable by this caller (`check_read_rights`). The page is found by the revision a citation
        names (`revid=…`: MediaWiki maps any revision to its page), else by the title in `url`."""
        flow = self._fetch_flow(url, coerce_principal(principal), revision)
        found = run_flow(flow, self._client.get(self._new_client))
        return to_source_document(found) if found is not None else None

    def _fetch_flow(self, url: str, principal: Principal | None, revision: str) -> Flow[Document | None]:
        if self.username and not self._logged_in():
            yield from self._login()
        acl: Any = None
        if self.check_read_rights:
            if not (yield from self._may_read(principal, AccessReport())):
                return None
            acl = "public" if is_anonymous(principal) else {"users": [_wiki_user(principal, self.source_name)]}
        revid = revision.removeprefix("revid=") if revision.startswith("revid=") else ""
        if revid.isdigit():
            params = {"revids": revid}
        else:
            title = title_in_url(url)
            if not title:
                return None
            params = {"titles": title}
        data = yield from self._api({"action": "query", "prop": "info", "inprop": "url", **params},
                                    tolerate={"invalidtitle"})
        query = data.get("query")
        if not isinstance(query, dict) or "pages" not in query:
            return None  # the revision is deleted with its page: the wiki lists it under `badrevids` only
        pages = [p for p in _pages(data, self.api_url) if p.get("fullurl") == url]
        if not pages:
            return None
        page_id = pages[0]["pageid"]
        if self.text == "extracts":
            texts = yield from self._extracts([page_id])
        else:
            texts = yield from self._parsed([page_id])
        page = texts.get(page_id)
        return self._page_document(page_id, page, acl) if page is not None else None

    def _search(self, terms: str) -> Flow[list[dict[str, Any]]]:
        """Full-text hits. Without `srwhat` most wikis search titles only (the default search backend);
        `srwhat=text` searches page text everywhere, except on backends that refuse it, which then get
        their own default (CirrusSearch and its kin search text and titles together)."""
        params = {
            "action": "query", "list": "search", "srsearch": terms, "srlimit": str(self.k),
            "srnamespace": "|".join(str(n) for n in self.namespaces), "srprop": "", "srinfo": "",
        }
        with self._session_lock:
            srwhat = self._srwhat
        if srwhat is None:
            data = yield from self._api({**params, "srwhat": "text"}, tolerate=_TEXT_SEARCH_REFUSED)
            found = bool(data)
            with self._session_lock:
                self._srwhat = "text" if found else ""
            if found:
                return _search_hits(data, self.api_url)
        elif srwhat:
            params["srwhat"] = srwhat
        return _search_hits((yield from self._api(params)), self.api_url)

    def _relaxed(self, hits: list[dict[str, Any]], words: list[str]) -> Flow[list[dict[str, Any]]]:
        """More hits for a question whose words are not all on one page.

        MediaWiki's own search backends require every word (a question's "how long" sinks it);
        each of the question's longest words is searched alone, and pages found by more of them
        rank first, after the pages that hold every word.
        """
        found: dict[int, list[int]] = {}  # page id -> its rank in each search that found it
        first: dict[int, dict[str, Any]] = {}
        for word in sorted(words, key=len, reverse=True)[:MAX_RELAXED_WORDS]:
            for rank, hit in enumerate((yield from self._search(word))):
                found.setdefault(hit["pageid"], []).append(rank)
                first.setdefault(hit["pageid"], hit)
        strict = [hit["pageid"] for hit in hits]
        others = sorted((pid for pid in found if pid not in strict),
                        key=lambda pid: (-len(found[pid]), sum(found[pid])))
        return hits + [first[pid] for pid in others]

    def _ids_per_request(self) -> Flow[int]:
        """50, or 500 when the wiki grants this account `apihighlimits` (asked once)."""
        with self._session_lock:
            known = self._id_limit
        if known:
            return known
        data = yield from self._api({"action": "query", "meta": "userinfo", "uiprop": "rights"})
        query = data.get("query")
        rights = (query.get("userinfo") or {}).get("rights") if isinstance(query, dict) else None
        limit = HIGH_ID_LIMIT if isinstance(rights, list) and "apihighlimits" in rights else LOW_ID_LIMIT
        with self._session_lock:
            self._id_limit = limit
        return limit

    def _extracts(self, ids: list[int]) -> Flow[dict[int, dict[str, Any]]]:
        params = {
            "action": "query", "prop": "extracts|info", "pageids": "|".join(map(str, ids)), "explaintext": "1",
            "exsectionformat": "plain", "exlimit": "max", "inprop": "url",
        }
        pages: dict[int, dict[str, Any]] = {}
        cont: dict[str, str] = {}
        for _ in range(MAX_CONTINUATIONS):
            data = yield from self._api({**params, **cont})
            for page in _pages(data, self.api_url):
                entry = pages.setdefault(page["pageid"], {})
                entry.update({k: v for k, v in page.items() if k != "extract"})
                if isinstance(page.get("extract"), str):
                    entry["text"] = page["extract"]
            nxt = data.get("continue")
            if not isinstance(nxt, dict) or not nxt:
                break
            cont = {str(k): str(v) for k, v in nxt.items()}
        else:
            raise SourceFailure(f"{host(self.api_url)}: the extracts never finished continuing "
                                f"(more than {MAX_CONTINUATIONS} pages)")
        return pages

    def _parsed(self, ids: list[int]) -> Flow[dict[int, dict[str, Any]]]:
        data = yield from self._api(
            {"action": "query", "prop": "info", "inprop": "url", "pageids": "|".join(map(str, ids))}
        )
        pages = {page["pageid"]: dict(page) for page in _pages(data, self.api_url)}
        for page_id, page in pages.items():
            parsed = yield from self._api({
                "action": "parse", "pageid": str(page_id), "prop": "text|displaytitle",
                "disableeditsection": "1", "disabletoc": "1",
            }, tolerate={"missingtitle", "nosuchpageid"})
            html = (parsed.get("parse") or {}).get("text") if isinstance(parsed.get("parse"), dict) else None
            if isinstance(html, dict):  # formatversion=1 shape, if a proxy rewrote the request
                html = html.get("*")
            if isinstance(html, str):
                page["text"] = _parser_output_text(html)
        return pages

    # -- permissions ---------------------------------------------------------------------------

    def _may_read(self, principal: Principal | None, report: AccessReport) -> Flow[bool]:
        name = "*" if is_anonymous(principal) else _wiki_user(principal, self.source_name)
        if not name:
            # Read rights belong to accounts; a caller known only by its groups has no account to ask about.
            reason = (f"{self.source_name}: the caller has groups but no wiki user name; MediaWiki grants reading "
                      "to accounts, so the wiki's pages are not shown")
            report.reasons.append(reason)
            logger.info(reason)
            return False
        now = time.monotonic()
        cached = self._rights.get(name)
        if cached is not None and cached[0] > now:
            return cached[1]
        if name == "*":
            data = yield from self._api({"action": "query", "meta": "siteinfo", "siprop": "usergroups"})
            groups = (data.get("query") or {}).get("usergroups")
            if not isinstance(groups, list):
                raise SourceFailure(f"{host(self.api_url)}: malformed siteinfo response (no usergroups)")
            rights: object = next((g.get("rights") for g in groups if isinstance(g, dict) and g.get("name") == "*"), [])
        else:
            data = yield from self._api({"action": "query", "list": "users", "ususers": name, "usprop": "rights"})
            users = (data.get("query") or {}).get("users")
            if not isinstance(users, list) or not users or not isinstance(users[0], dict):
                raise SourceFailure(f"{host(self.api_url)}: malformed users response")
            user = users[0]
            rights = [] if ("missing" in user or "invalid" in user) else user.get("rights", [])
        allowed = isinstance(rights, list) and "read" in rights
        self._rights[name] = (now + self.rights_cache_s, allowed)
        return allowed

    # -- the Action API ------------------------------------------------------------------------

    def _api(self, params: dict[str, str], *, tolerate: frozenset[str] | set[str] = frozenset(), retried: bool = False
             ) -> Flow[dict[str, Any]]:
        query = {**params, "format": "json", "formatversion": "2", "errorformat": "plaintext"}
        if self.username:
            query["assert"] = "user"  # fail loudly when the session expired, instead of reading as anonymous
        response = yield self._request("GET", query)
        data = json_body(response, what="MediaWiki API", credential_hint=self.credential_hint)
        if not isinstance(data, dict):
            raise SourceFailure(f"{host(self.api_url)}: malformed MediaWiki API response (not an object)")
        error = _api_error(data)
        if error is None:
            return data
        code, info = error
        if code in tolerate:
            return {}
        if code in {"assertuserfailed", "assertnameduserfailed", "badtoken"} and self.username and not retried:
            self._forget_session()
            yield from self._login()
            return (yield from self._api(params, tolerate=tolerate, retried=True))
        if code in {"readapidenied", "permissiondenied"}:
            hint = f"; check {self.credential_hint}" if self.credential_hint else ""
            raise SourceFailure(
                f"{host(self.api_url)}: the wiki does not let this account read through the API ({code}){hint}"
            )
        raise SourceFailure(f"{host(self.api_url)}: MediaWiki API error {code}: {one_line(info, 200)}")

    def _request(self, method: str, params: dict[str, str], data: dict[str, str] | None = None) -> httpx.Request:
        headers = {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token.get_secret_value()}"
        with self._session_lock:
            cookies = dict(self._session)
        if cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        return httpx.Request(method, self.api_url, params=params, data=data, headers=headers)

    def _login(self) -> Flow[None]:
        if not self.username or self.password is None:
            return None
        response = yield self._request("GET", {"action": "query", "meta": "tokens", "type": "login",
                                               "format": "json", "formatversion": "2"})
        self._remember(response)
        data = json_body(response, what="MediaWiki login token", credential_hint=self.credential_hint)
        token = ((data.get("query") or {}).get("tokens") or {}).get("logintoken") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise SourceFailure(f"{host(self.api_url)}: malformed login token response")
        response = yield self._request("POST", {"format": "json", "formatversion": "2"}, data={
            "action": "login", "lgname": self.username, "lgpassword": self.password.get_secret_value(),
            "lgtoken": token,
        })
        self._remember(response)
        data = json_body(response, what="MediaWiki login", credential_hint=self.credential_hint)
        result = (data.get("login") or {}) if isinstance(data, dict) else {}
        if result.get("result") != "Success":
            # The wiki's reason names the problem ("Incorrect username or password") and never echoes it.
            reason = one_line(str(result.get("reason") or result.get("result") or "no reason given"), 200)
            hint = f"; check {self.credential_hint}" if self.credential_hint else ""
            raise SourceFailure(f"{host(self.api_url)}: login failed: {reason}{hint}")
        with self._session_lock:
            self._logged_in_flag = True
        return None

    def _remember(self, response: httpx.Response) -> None:
        with self._session_lock:
            for name, value in response.cookies.items():
                self._session[name] = value

    def _logged_in(self) -> bool:
        with self._session_lock:
            return self._logged_in_flag

    def _forget_session(self) -> None:
        with self._session_lock:
            self._session.clear()
            self._logged_in_flag = False


def _wiki_user(principal: Principal | None, source: str) -> str:
    assert principal is not None
    return (principal.ids.get(source) or principal.user).strip()


def title_in_url(url: str) -> str:
    """The page title in a page address: `?title=…`, else the path after the script or article path."""
    parts = urlsplit(url)
    named = parse_qs(parts.query).get("title")
    if named:
        return named[0].replace("_", " ")
    path = unquote(parts.path)
    for marker in ("/index.php/", "/wiki/"):
        if marker in path:
            return path.split(marker, 1)[1].replace("_", " ")
    return ""


def _api_error(data: dict[str, Any]) -> tuple[str, str] | None:
    errors = data.get("errors")  # errorformat=plaintext
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        return str(errors[0].get("code", "unknown")), str(errors[0].get("text") or errors[0].get("*") or "")
    error = data.get("error")  # errorformat=bc (older wikis ignore errorformat)
    if isinstance(error, dict):
        return str(error.get("code", "unknown")), str(error.get("info") or error.get("*") or "")
    return None


def _search_hits(data: dict[str, Any], api_url: str) -> list[dict[str, Any]]:
    hits = (data.get("query") or {}).get("search") if isinstance(data.get("query"), dict) else None
    if hits is None and "query" not in data:
        hits = []  # no "query" at all: MediaWiki's answer when nothing matched in some versions
    if not isinstance(hits, list) or not all(isinstance(h, dict) and isinstance(h.get("pageid"), int) for h in hits):
        raise SourceFailure(f"{host(api_url)}: malformed search response (expected query.search[].pageid)")
    return hits


def _pages(data: dict[str, Any], api_url: str) -> list[dict[str, Any]]:
    query = data.get("query")
    if query is None:
        return []
    pages = query.get("pages") if isinstance(query, dict) else None
    if isinstance(pages, dict):  # formatversion=1 shape
        pages = list(pages.values())
    if not isinstance(pages, list):
        raise SourceFailure(f"{host(api_url)}: malformed page response (expected query.pages)")
    return [p for p in pages if isinstance(p, dict) and isinstance(p.get("pageid"), int) and "missing" not in p]


def _parser_output_text(html: str) -> str:
    tree = LexborHTMLParser(html)
    for node in tree.css(_PARSE_NOISE):
        node.decompose()
    return parse_html(tree.html or "").text
