"""Local stand-ins for a MediaWiki, a Confluence and a static documentation site, on 127.0.0.1,
and a real MediaWiki (Debian's package on SQLite, served by `php -S`) for what a stand-in cannot prove.

They answer the request shapes the real systems answer (MediaWiki Action API with
`formatversion=2`, Confluence REST `content/search` with CQL and `_links.next` pagination, plain
static files with robots.txt and sitemaps), with responses shaped like recorded ones, and they can
be told to misbehave: slow answers, HTTP errors, malformed bodies, API errors.
Every request is recorded, so tests can assert on what a connector asked for (and did not).

Stdlib only. `stop()` wakes any stalled reply, shuts the server down and joins its threads.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from tests.support import ports


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""

    def form(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(self.body.decode("utf-8")).items()}

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int = 200
    body: bytes | str | Any = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body).encode("utf-8")


Handler = Callable[[Request], Response]


class FixtureServer:
    """A threaded HTTP server whose every request goes to `handle`; use as a context manager."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Request(
                    method=self.command, path=parts.path,
                    query={k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                    headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                )
                with outer._lock:
                    outer.requests.append(request)
                response = outer.handle(request)
                if response.delay_s and outer._stopping.wait(response.delay_s):
                    return
                payload = response.payload()
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", response.content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in response.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): nothing to do

            do_GET = do_POST = do_HEAD = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        # A short poll interval: stop() waits for the serving loop to notice, once per test.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), name=type(self).__name__,
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def handle(self, request: Request) -> Response:
        raise NotImplementedError

    def start(self) -> FixtureServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def _score(query: str, *texts: str) -> int:
    words = set(_words(query))
    return sum(1 for t in texts for w in _words(t) if w in words)


# -- MediaWiki ---------------------------------------------------------------------------------


@dataclass
class WikiPage:
    pageid: int
    title: str
    text: str  # what TextExtracts returns with explaintext
    html: str = ""  # what action=parse returns
    ns: int = 0


class MediaWikiServer(FixtureServer):
    """`/w/api.php` of a wiki: search, extracts (one full page per response), parse, siteinfo.

    Only for what a real wiki cannot be made to do (`RealMediaWiki` proves the rest): scripted faults
    through `fault`, and `token`, an OAuth Bearer token (an extension the real test wiki lacks).
    """

    def __init__(
        self,
        pages: list[WikiPage],
        *,
        token: str | None = None,
    ) -> None:
        super().__init__()
        self.pages = pages
        self.token = token
        self.fault: Callable[[Request], Response | None] | None = None

    @property
    def api_url(self) -> str:
        return self.url + "/w/api.php"

    def fullurl(self, page: WikiPage) -> str:
        return f"{self.url}/wiki/{quote(page.title.replace(' ', '_'))}"

    def handle(self, request: Request) -> Response:
        if request.path != "/w/api.php":
            return Response(404, "<html><body>Not Found</body></html>", "text/html")
        if self.fault is not None and (scripted := self.fault(request)) is not None:
            return scripted
        params = {**request.query, **(request.form() if request.method == "POST" else {})}
        if params.get("format") != "json":
            return Response(200, "<html><body>MediaWiki API help</body></html>", "text/html")
        if self.token is not None and request.headers.get("authorization") != f"Bearer {self.token}":
            return self._error("mwoauth-invalid-authorization",
                               "The authorization headers in your request are not valid.")
        if params.get("action") == "parse":
            return self._parse(params)
        if params.get("list") == "search":
            return self._search(params)
        if params.get("meta") == "siteinfo":
            return Response(body={"batchcomplete": True, "query": {"usergroups": [
                {"name": "*", "rights": ["read", "createaccount"]}, {"name": "user", "rights": ["read", "edit"]},
            ]}})
        if "extracts" in params.get("prop", "") or params.get("prop") == "info":
            return self._pages(params)
        return Response(body={"errors": [{"code": "badvalue", "text": "Unrecognized value.", "module": "main"}]})

    def _error(self, code: str, text: str) -> Response:
        return Response(body={"errors": [{"code": code, "text": text, "module": "main"}], "servedby": "mw1"},
                        headers={"MediaWiki-API-Error": code})

    def _search(self, params: dict[str, str]) -> Response:
        query = params.get("srsearch", "")
        limit = int(params.get("srlimit", "10"))
        offset = int(params.get("sroffset", "0"))
        namespaces = {int(n) for n in params.get("srnamespace", "0").split("|") if n}
        hits = sorted(
            ((s, p) for p in self.pages if p.ns in namespaces and (s := _score(query, p.title, p.text)) > 0),
            key=lambda sp: (-sp[0], sp[1].pageid),
        )
        window = hits[offset : offset + limit]
        body: dict[str, Any] = {"batchcomplete": True, "query": {
            "searchinfo": {"totalhits": len(hits)},
            "search": [{"ns": p.ns, "title": p.title, "pageid": p.pageid} for _, p in window],
        }}
        if offset + limit < len(hits):
            body["continue"] = {"sroffset": offset + limit, "continue": "-||"}
        return Response(body=body)

    def _pages(self, params: dict[str, str]) -> Response:
        ids = [int(i) for i in params.get("pageids", "").split("|") if i]
        by_id = {p.pageid: p for p in self.pages}
        start = int(params.get("excontinue", "0"))
        pages = []
        for position, pid in enumerate(ids):
            page = by_id.get(pid)
            if page is None:
                pages.append({"pageid": pid, "missing": True})
                continue
            entry: dict[str, Any] = {
                "pageid": pid, "ns": page.ns, "title": page.title, "contentmodel": "wikitext",
                "pagelanguage": "en", "touched": "2025-01-02T03:04:05Z", "lastrevid": 1000 + pid,
                "length": len(page.text), "fullurl": self.fullurl(page),
                "editurl": self.fullurl(page) + "?action=edit", "canonicalurl": self.fullurl(page),
            }
            # TextExtracts: a whole-page extract only for one page per response.
            if "extracts" in params.get("prop", "") and position == start:
                entry["extract"] = page.text
            pages.append(entry)
        body: dict[str, Any] = {"batchcomplete": True, "query": {"pages": pages}}
        if "extracts" in params.get("prop", "") and start + 1 < len(ids):
            body = {"continue": {"excontinue": start + 1, "continue": "||info"}, "query": {"pages": pages}}
        return Response(body=body)

    def _parse(self, params: dict[str, str]) -> Response:
        page = next((p for p in self.pages if str(p.pageid) == params.get("pageid")), None)
        if page is None:
            return self._error("nosuchpageid", "There is no page with ID.")
        html = page.html or f'<div class="mw-parser-output"><p>{page.text}</p></div>'
        return Response(body={"parse": {"title": page.title, "pageid": page.pageid, "displaytitle": page.title,
                                        "text": html}})


# -- Confluence --------------------------------------------------------------------------------


@dataclass
class ConfluencePage:
    id: str
    title: str
    space: str
    storage: str  # the body in storage format
    read_users: list[str] = field(default_factory=list)
    read_groups: list[str] = field(default_factory=list)
    readers: list[str] | None = None  # who permission/check says may read (None: everyone)


class ConfluenceServer(FixtureServer):
    """Confluence REST: `content/search` (CQL, expand, `_links.next`) and `permission/check`.

    Cloud (`context="/wiki"`, basic auth e-mail:token) or Data Center (`context=""`, Bearer token).
    The server caps `limit` at `max_limit`, as real Confluence does when bodies are expanded.
    """

    def __init__(
        self,
        pages: list[ConfluencePage],
        *,
        context: str = "/wiki",
        email: str | None = "bot@example.com",
        token: str = "secret-token-123",
        max_limit: int = 2,
        relative_next: bool = False,
    ) -> None:
        super().__init__()
        self.pages = pages
        self.context = context
        self.relative_next = relative_next  # `_links.next` without its leading slash, as some versions send it
        self.email = email
        self.token = token
        self.max_limit = max_limit
        self.fault: Callable[[Request], Response | None] | None = None

    @property
    def base_url(self) -> str:
        return self.url + self.context

    def handle(self, request: Request) -> Response:
        if self.fault is not None and (scripted := self.fault(request)) is not None:
            return scripted
        if not self._authorised(request):
            return Response(401, {"statusCode": 401, "message": "Unauthorized; scope does not match"},
                            headers={"WWW-Authenticate": 'Basic realm="Confluence"'})
        path = request.path[len(self.context):] if request.path.startswith(self.context) else None
        if path == "/rest/api/content/search" and request.method == "GET":
            return self._search(request.query)
        match = re.fullmatch(r"/rest/api/content/(\w+)/permission/check", path or "")
        if match and request.method == "POST":
            return self._check(match.group(1), request.json())
        return Response(404, {"statusCode": 404, "message": "No content found"})

    def _authorised(self, request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        if self.email is not None:
            expected = base64.b64encode(f"{self.email}:{self.token}".encode()).decode()
            return auth == f"Basic {expected}"
        return auth == f"Bearer {self.token}"

    def _search(self, query: dict[str, str]) -> Response:
        cql = query.get("cql", "")
        text = re.search(r'text ~ "([^"]*)"', cql)
        if text is None:
            return Response(400, {"statusCode": 400, "message": f"Could not parse cql : {cql}"})
        spaces = re.search(r"space in \(([^)]*)\)", cql)
        wanted = {s.strip().strip('"') for s in spaces.group(1).split(",")} if spaces else None
        hits = sorted(
            ((s, p) for p in self.pages
             if (wanted is None or p.space in wanted) and (s := _score(text.group(1), p.title, p.storage)) > 0),
            key=lambda sp: (-sp[0], sp[1].id),
        )
        start = int(query.get("start", "0"))
        limit = min(int(query.get("limit", "25")), self.max_limit)
        window = hits[start : start + limit]
        expand = query.get("expand", "")
        results = [self._content(p, expand) for _, p in window]
        links: dict[str, Any] = {"base": self.base_url, "context": self.context,
                                 "self": self.base_url + "/rest/api/content/search"}
        if start + limit < len(hits):
            links["next"] = ("" if self.relative_next else "/") + "rest/api/content/search?" + urlencode(
                {"cql": cql, "limit": limit, "start": start + limit, "expand": expand})
        return Response(body={"results": results, "start": start, "limit": limit, "size": len(results),
                              "_links": links})

    def _content(self, page: ConfluencePage, expand: str) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": page.id, "type": "page", "status": "current", "title": page.title,
            "_links": {"webui": f"/spaces/{page.space}/pages/{page.id}/{page.title.replace(' ', '+')}",
                       "tinyui": f"/x/{page.id}", "self": f"{self.base_url}/rest/api/content/{page.id}"},
            "_expandable": {"container": "", "metadata": "", "operations": "", "children": "", "history": ""},
        }
        if "body.storage" in expand:
            item["body"] = {"storage": {"value": page.storage, "representation": "storage"}}
        if "space" in expand:
            item["space"] = {"id": 1, "key": page.space, "name": page.space.title(), "type": "global"}
        if "version" in expand:
            item["version"] = {"number": 3, "when": "2025-03-04T05:06:07.000Z", "minorEdit": False}
        if "restrictions.read" in expand:
            item["restrictions"] = {"read": {"operation": "read", "restrictions": {
                "user": {"results": [{"type": "known", "accountId": u, "displayName": u} for u in page.read_users],
                         "start": 0, "limit": 200, "size": len(page.read_users)},
                "group": {"results": [{"type": "group", "name": g, "id": f"g-{g}"} for g in page.read_groups],
                          "start": 0, "limit": 200, "size": len(page.read_groups)},
            }}}
        return item

    def _check(self, page_id: str, body: Any) -> Response:
        page = next((p for p in self.pages if p.id == page_id), None)
        if page is None:
            return Response(404, {"statusCode": 404, "message": "No content found"})
        subject = (body or {}).get("subject") or {}
        if subject.get("type") != "user" or (body or {}).get("operation") != "read":
            return Response(400, {"statusCode": 400, "message": "invalid permission check"})
        allowed = page.readers is None or subject.get("identifier") in page.readers
        return Response(body={"hasPermission": allowed, "errors": [] if allowed else [
            {"key": "permission.denied", "message": "User does not have read permission"}]})


# -- a static documentation site ---------------------------------------------------------------


class StaticSite(FixtureServer):
    """Files by path: `{"/docs/": ("text/html", "<html>…")}`; anything else is a 404 page.

    A value may also be a `Response` (redirects, errors, slow pages). `{base}` in any body is replaced
    by the server's URL, so sitemaps and links can be absolute.
    """

    def __init__(self, files: dict[str, tuple[str, str] | Response]) -> None:
        super().__init__()
        self.files = files

    def handle(self, request: Request) -> Response:
        found = self.files.get(request.path)
        if found is None:
            return Response(404, "<html><body><h1>Page not found</h1></body></html>", "text/html")
        if isinstance(found, Response):
            headers = {k: v.replace("{base}", self.url) for k, v in found.headers.items()}
            body = found.body.replace("{base}", self.url) if isinstance(found.body, str) else found.body
            return Response(found.status, body, found.content_type, headers, found.delay_s)
        ctype, body = found
        payload = body.replace("{base}", self.url)
        etag = '"' + hashlib.sha1(payload.encode("utf-8")).hexdigest()[:16] + '"'
        if request.headers.get("if-none-match") == etag:
            return Response(304, b"", ctype, {"ETag": etag})
        return Response(200, payload, ctype, {"ETag": etag})


# -- a real MediaWiki --------------------------------------------------------------------------


MEDIAWIKI_HOME = Path("/usr/share/mediawiki")  # Debian's `mediawiki` package (scripts/test-deps.sh installs it)

# `php -S` serves only files under its document root; the router maps the wiki's /w/api.php to the
# package's api.php, which reads this wiki's settings from MW_CONFIG_FILE. It also writes each request
# line to requests.log (`php -S` does not log what a router serves), for tests to see what was asked.
_ROUTER = """<?php
file_put_contents('%(log)s', $_SERVER['REQUEST_METHOD'] . ' ' . $_SERVER['REQUEST_URI'] . "\\n", FILE_APPEND | LOCK_EX);
if (parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) === '/w/api.php') {
    $_SERVER['SCRIPT_NAME'] = '/w/api.php';
    $_SERVER['SCRIPT_FILENAME'] = '%(home)s/api.php';
    chdir('%(home)s');
    require '%(home)s/api.php';
    return true;
}
http_response_code(404);
echo 'not found';
return true;
"""

# Reading is a right of the `reader` group only: anonymous callers and plain users may not read.
# Sessions are kept in the SQLite object cache (CACHE_DB, wikicache.sqlite beside the database), whatever
# PHP offers: install.php picks CACHE_ACCEL when the APCu extension is loaded (php-apcu, which Debian's
# mediawiki recommends), and `php -S` (SAPI cli-server, where APCu is on) then keeps sessions in its shared
# memory, out of reach of `forget_sessions`.
_PRIVATE_WIKI = """
$wgGroupPermissions['*']['read'] = false;
$wgGroupPermissions['user']['read'] = false;
$wgGroupPermissions['reader']['read'] = true;
$wgPasswordAttemptThrottle = [];
$wgMainCacheType = CACHE_NONE;
$wgSessionCacheType = CACHE_DB;
"""


@dataclass
class BotAccount:
    user: str  # User@BotName, as the API's login wants it
    password: str


class RealMediaWiki:
    """A MediaWiki from Debian's package, installed on SQLite in `folder` and served by `php -S`.

    `pages` maps titles to wikitext. Accounts: `Evident` (group reader, with two bot passwords:
    `reader`, basic grants, and `bulk`, which adds `highvolume`, i.e. `apihighlimits`), `Alice`
    (reader) and `Mallory` (a user who may not read). Use as a context manager.
    """

    ADMIN_PASSWORD = "Admin-pass-4f9c1b"

    def __init__(self, folder: Path, pages: dict[str, str]) -> None:
        self.folder = folder
        self.pages = pages
        self.settings = folder / "LocalSettings.php"
        self.port = ports.free_port()
        self.bot = BotAccount("Evident@reader", "0123456789abcdefghijklmnopqrstuv")
        self.bulk_bot = BotAccount("Evident@bulk", "vutsrqponmlkjihgfedcba9876543210")
        self._server: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return self.url + "/w/api.php"

    @property
    def log(self) -> str:
        """One line per request served so far: `METHOD /path?query`."""
        path = self.folder / "requests.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def forget_sessions(self) -> int:
        """Drop every session from the wiki's session store (the SQLite object cache beside its database,
        `$wgSessionCacheType = CACHE_DB`), as a restart of that store or an expiry does; returns how many.
        MediaWiki writes a session before it answers the request that made it (`preOutputCommit`, on an
        autocommit connection), so a session a client has used is there to be dropped."""
        with closing(sqlite3.connect(self.folder / "data" / "wikicache.sqlite")) as conn, conn:
            return conn.execute("DELETE FROM objectcache WHERE keyname LIKE '%:MWSession:%'").rowcount

    def maintenance(self, script: str, *args: str) -> str:
        done = subprocess.run(
            ["php", str(MEDIAWIKI_HOME / "maintenance" / script), *args], cwd=MEDIAWIKI_HOME,
            env={**os.environ, "MW_CONFIG_FILE": str(self.settings)}, capture_output=True, text=True, timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{script} failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
        return done.stdout

    def install(self) -> None:
        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.maintenance(
            "install.php", "--dbtype", "sqlite", "--dbpath", str(data), "--dbname", "wiki",
            "--confpath", str(self.folder),
            "--server", self.url, "--scriptpath", "/w", "--pass", self.ADMIN_PASSWORD, "--skins", "",
            "--extensions", "TextExtracts", "--quiet", "EvidenT test wiki", "Admin",
        )
        with self.settings.open("a", encoding="utf-8") as handle:
            handle.write(_PRIVATE_WIKI)
        self.maintenance("createAndPromote.php", "--custom-groups", "reader,bot", "Evident", "Evident-pass-8d2e7a")
        self.maintenance("createAndPromote.php", "--custom-groups", "reader", "Alice", "Alice-pass-3b6c0f")
        self.maintenance("createAndPromote.php", "Mallory", "Mallory-pass-9e1d4c")
        self.maintenance("createBotPassword.php", "--appid", "reader", "--grants", "basic", "Evident",
                         self.bot.password)
        self.maintenance("createBotPassword.php", "--appid", "bulk", "--grants", "basic,highvolume", "Evident",
                         self.bulk_bot.password)
        # One file per page, named by its title: one process imports them all (edits, search index included).
        texts = self.folder / "pages"
        texts.mkdir()
        files = []
        for title, wikitext in self.pages.items():
            path = texts / title
            path.write_text(wikitext, encoding="utf-8")
            files.append(str(path))
        self.maintenance("importTextFiles.php", "--bot", "--summary", "test pages", *files)

    def start(self) -> RealMediaWiki:
        router = self.folder / "router.php"
        router.write_text(_ROUTER % {"home": MEDIAWIKI_HOME, "log": self.folder / "requests.log"}, encoding="utf-8")
        log = (self.folder / "server.log").open("wb")
        # Two workers, so that concurrent requests of one query do not queue; its own session, so
        # that stop() can end the master and its workers together.
        self._server = subprocess.Popen(
            ["php", "-S", f"127.0.0.1:{self.port}", str(router)], cwd=self.folder, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "MW_CONFIG_FILE": str(self.settings), "PHP_CLI_SERVER_WORKERS": "2"},
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if self._server.poll() is not None:
                    output = (self.folder / "server.log").read_text(errors="replace")
                    raise RuntimeError(f"php -S exited: {output[-2000:]}") from None
                time.sleep(0.05)
        raise RuntimeError("php -S did not start listening within 30 s")

    def stop(self) -> None:
        if self._server is not None and self._server.poll() is None:
            os.killpg(self._server.pid, signal.SIGTERM)
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._server.pid, signal.SIGKILL)
                self._server.wait(timeout=10)
        self._server = None

    def __enter__(self) -> RealMediaWiki:
        self.install()
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
