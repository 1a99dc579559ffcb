"""Documentation sites: crawled politely, turned into clean text, searched through the embedded index.

A site is given by its `sitemap.xml` (the page list) or by start URLs whose links are followed, and
never leaves its allowed URL prefixes. Politeness: robots.txt is honoured (RFC 9309: an unreachable
robots.txt means "do not crawl", a missing one means "allowed"), requests are spaced by the rate limit
or the site's Crawl-delay, whichever is slower, redirects are re-checked, and a page cap bounds the
load. A page that cannot be fetched this time (the site is down) keeps its text from the last crawl;
a page that is gone (404/410) is dropped. Storing and indexing the pages: `docs_index`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel, Field

from evident.citations.recheck import REVISION
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.html_text import parse_html
from evident.connectors.remote.crawled_page import decode_page, links_and_robots
from evident.connectors.remote.http import USER_AGENT, transport_failure
from evident.connectors.remote.robots import Robots
from evident.connectors.remote.sitemap import MAX_SITEMAP_BYTES, SitemapError, parse_sitemap
from evident.connectors.source import SourceFailure

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
MAX_REDIRECTS = 5
MAX_SITEMAPS = 50
GONE = frozenset({404, 410})

SkipReporter = Callable[[str, str], None]

log = logging.getLogger(__name__)


class CrawlSettings(BaseModel):
    """What to crawl and how gently."""

    source_name: str
    sitemaps: list[str] = Field(default_factory=list)
    start_urls: list[str] = Field(default_factory=list)
    allowed_prefixes: list[str] = Field(
        default_factory=list, description="Default: each start URL's folder, each sitemap's site."
    )
    max_pages: int = Field(500, ge=1)
    rate_limit_per_s: float = Field(2.0, gt=0, description="Requests per second at most.")
    timeout_s: float = Field(15.0, gt=0)
    max_page_bytes: int = Field(5_000_000, ge=1000)
    source_type: str = "docs"
    verify_tls: bool | str = True
    trust_env: bool = False

    def prefixes(self) -> list[str]:
        if self.allowed_prefixes:
            return [normalize_url(p) for p in self.allowed_prefixes]
        found = [normalize_url(u.rsplit("/", 1)[0] + "/") for u in self.start_urls]
        found += [normalize_url(f"{urlsplit(u).scheme}://{urlsplit(u).netloc}/") for u in self.sitemaps]
        return found


@dataclass
class CrawlResult:
    records: list[dict[str, Any]] = field(default_factory=list)
    fetched: int = 0
    reused: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unreachable: int = 0  # pages that failed for a reason that may pass (kept from the last crawl)


def normalize_url(url: str) -> str:
    """Scheme and host case-folded, default port and fragment dropped: the crawler's page identity."""
    parts = urlsplit(url.strip())
    netloc = parts.netloc.lower()
    if (parts.scheme == "http" and netloc.endswith(":80")) or (parts.scheme == "https" and netloc.endswith(":443")):
        netloc = netloc.rsplit(":", 1)[0]
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))


class RateLimiter:
    """At most one request per `interval` seconds (per crawler: one site is crawled at a time)."""

    def __init__(self, interval: float, *, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.interval = interval
        self._clock = clock
        self._sleep = sleep
        self._next = 0.0

    def slow_down(self, interval: float) -> None:
        self.interval = max(self.interval, interval)

    def wait(self) -> None:
        now = self._clock()
        if now < self._next:
            self._sleep(self._next - now)
            now = self._next
        self._next = now + self.interval


class Crawler:
    def __init__(
        self,
        settings: CrawlSettings,
        *,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        on_skip: SkipReporter | None = None,
    ) -> None:
        self.settings = settings
        self._client = client
        self._limiter = RateLimiter(1.0 / settings.rate_limit_per_s, clock=clock, sleep=sleep)
        self._robots: dict[str, Robots] = {}
        self._prefixes = settings.prefixes()
        self._on_skip = on_skip

    # -- entry point ---------------------------------------------------------------------------

    def run(self, previous: dict[str, dict[str, Any]] | None = None) -> CrawlResult:
        previous = previous or {}
        owns = self._client is None
        client = self._client or httpx.Client(
            timeout=self.settings.timeout_s, verify=self.settings.verify_tls, follow_redirects=False,
            headers={"User-Agent": USER_AGENT}, trust_env=self.settings.trust_env,
        )
        try:
            return self._crawl(client, previous)
        finally:
            if owns:
                client.close()

    def _crawl(self, client: httpx.Client, previous: dict[str, dict[str, Any]]) -> CrawlResult:
        result = CrawlResult()
        queue: deque[tuple[str, str, bool]] = deque()  # (url, sitemap lastmod, follow links)
        seen: set[str] = set()

        def enqueue(url: str, lastmod: str, follow: bool) -> None:
            key = normalize_url(url)
            if key not in seen and self._allowed(key):
                seen.add(key)
                queue.append((key, lastmod, follow))

        for entry_url, lastmod in self._sitemap_pages(client, result):
            if not self._allowed(normalize_url(entry_url)):
                self._skip(result, entry_url, "outside the allowed URL prefixes")
                continue
            enqueue(entry_url, lastmod, False)
        for start in self.settings.start_urls:
            enqueue(start, "", True)

        while queue and len(result.records) < self.settings.max_pages and result.fetched < self.settings.max_pages:
            url, lastmod, follow = queue.popleft()
            old = previous.get(url)
            # Even an unchanged lastmod is asked about (conditionally): generators such as MkDocs
            # write the build date, and sites edit pages without touching their sitemap.
            page = self._fetch_page(client, url, old, result, conditional=not follow)
            if page is None:
                continue
            record, links = page
            if record is not None:
                record["crawl"]["lastmod"] = lastmod
                result.records.append(record)
            if follow:
                for link in links:
                    enqueue(link, "", True)
        if queue:
            self._skip(result, queue[0][0],
                       f"page cap of {self.settings.max_pages} reached; {len(queue)} pages not crawled")
        unique: dict[str, dict[str, Any]] = {}
        for record in result.records:
            try:
                validate_document_id(record["url"])
            except DocumentIdError as exc:
                # One page the index would refuse must not cost the site its index: that page is skipped.
                self._skip(result, record.get("crawl", {}).get("fetched_url") or record["url"],
                           f"not indexed: {exc}", warn=True)
                continue
            unique.setdefault(record["url"], record)  # two addresses, one canonical page: the first wins
        result.records = list(unique.values())
        return result

    # -- policies ------------------------------------------------------------------------------

    def _allowed(self, url: str) -> bool:
        return url.startswith(("http://", "https://")) and any(url.startswith(p) for p in self._prefixes)

    def _skip(self, result: CrawlResult, url: str, reason: str, *, warn: bool = False) -> None:
        """Report a page that is not indexed; `warn`: log it as well when nobody listens to reports."""
        result.skipped.append((url, reason))
        if self._on_skip is not None:
            self._on_skip(url, reason)
        elif warn:
            log.warning("skipped %s: %s", url, reason)

    def _robots_for(self, client: httpx.Client, url: str, result: CrawlResult) -> Robots:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        robots = self._robots.get(origin)
        if robots is not None:
            return robots
        try:
            self._limiter.wait()
            response = client.get(origin + "/robots.txt", follow_redirects=True)
            status = response.status_code
        except httpx.HTTPError as exc:
            robots = Robots.disallow_all()
            problem = self._unreachable(exc, origin)
            self._skip(result, origin + "/robots.txt", f"unreachable ({problem}); not crawling {parts.netloc}")
        else:
            if status >= 500:
                robots = Robots.disallow_all()
                self._skip(result, origin + "/robots.txt", f"HTTP {status}; not crawling {parts.netloc}")
            elif status >= 400:
                robots = Robots.allow_all()
            else:
                robots = Robots.parse(response.text)
                if robots.crawl_delay():
                    self._limiter.slow_down(robots.crawl_delay())
        self._robots[origin] = robots
        return robots

    def _unreachable(self, exc: httpx.HTTPError, url: str) -> str:
        return transport_failure(exc, httpx.Request("GET", url), self.settings.timeout_s).message

    # -- sitemaps ------------------------------------------------------------------------------

    def _sitemap_pages(self, client: httpx.Client, result: CrawlResult) -> list[tuple[str, str]]:
        pages: list[tuple[str, str]] = []
        todo = deque(self.settings.sitemaps)
        done: set[str] = set()
        while todo and len(done) < MAX_SITEMAPS:
            url = todo.popleft()
            if url in done:
                continue
            done.add(url)
            if not self._robots_for(client, url, result).allowed(url):
                self._skip(result, url, "sitemap disallowed by robots.txt")
                continue
            try:
                self._limiter.wait()
                response = client.get(url)
            except httpx.HTTPError as exc:
                self._skip(result, url, f"sitemap unreachable: {self._unreachable(exc, url)}")
                result.unreachable += 1
                continue
            if response.status_code != 200:
                self._skip(result, url, f"sitemap: HTTP {response.status_code}")
                result.unreachable += response.status_code not in GONE
                continue
            if len(response.content) > MAX_SITEMAP_BYTES:
                self._skip(result, url, "sitemap larger than 50 MB")
                continue
            try:
                sitemap = parse_sitemap(response.content)
            except SitemapError as exc:
                self._skip(result, url, f"sitemap: {exc}")
                continue
            pages.extend((entry.loc, entry.lastmod) for entry in sitemap.pages)
            # Child sitemaps stay on the parent's site.
            todo.extend(e.loc for e in sitemap.sitemaps if urlsplit(e.loc).netloc == urlsplit(url).netloc)
        return pages

    # -- pages ---------------------------------------------------------------------------------

    def _fetch_page(
        self, client: httpx.Client, url: str, old: dict[str, Any] | None, result: CrawlResult, *, conditional: bool
    ) -> tuple[dict[str, Any] | None, list[str]] | None:
        """The page's record (None if it is not indexable) and its links; None if it could not be had.

        `conditional`: ask "changed since?" with the last crawl's validators. Not for pages whose links
        are followed, since a 304 has no body to take links from.
        """
        target = url
        for _ in range(MAX_REDIRECTS + 1):
            if not self._robots_for(client, target, result).allowed(target):
                self._skip(result, target, "disallowed by robots.txt")
                return None
            headers = {"Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"}
            crawl = ((old or {}).get("crawl") or {}) if conditional else {}
            if target == url and crawl.get("etag"):
                headers["If-None-Match"] = crawl["etag"]
            if target == url and crawl.get("last_modified"):
                headers["If-Modified-Since"] = crawl["last_modified"]
            self._limiter.wait()
            result.fetched += 1
            try:
                status, resp_headers, body = self._get(client, target, headers)
            except SourceFailure as exc:
                self._skip(result, target, exc.message)
                self._carry_over(result, old)
                return None
            if status in {301, 302, 303, 307, 308}:
                location = resp_headers.get("location", "")
                nxt = normalize_url(urljoin(target, location)) if location else ""
                if not nxt or not self._allowed(nxt):
                    self._skip(result, url, "redirected outside the allowed URL prefixes")
                    return None
                target = nxt
                continue
            break
        else:
            self._skip(result, url, f"more than {MAX_REDIRECTS} redirects")
            return None
        if status == 304 and old is not None:
            result.reused += 1
            return dict(old), []
        if status in GONE:
            self._skip(result, target, f"broken link (HTTP {status})")
            return None
        if status != 200:
            self._skip(result, target, f"HTTP {status}")
            if status >= 500 or status == 429:
                self._carry_over(result, old)
            return None
        ctype = resp_headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype not in HTML_TYPES:
            self._skip(result, target, f"not an HTML page ({ctype or 'no content type'})")
            return None
        html = decode_page(body, resp_headers.get("content-type", ""))
        page = parse_html(html)
        links, robots_meta = links_and_robots(html, target)
        if "nofollow" in robots_meta:
            links = []
        if "noindex" in robots_meta:
            self._skip(result, target, "page asks not to be indexed (robots noindex)")
            return None, links
        if not page.text.strip():
            self._skip(result, target, "no readable text in the page")
            return None, links
        record_url = self._page_id(target, page.canonical_url)
        metadata = dict(page.meta)
        # The server's own revision of the page, kept with each citation of it (evident/connectors/revisions.py).
        if resp_headers.get("etag"):
            metadata[REVISION] = f"etag={resp_headers['etag']}"
        elif resp_headers.get("last-modified"):
            metadata[REVISION] = f"last-modified={resp_headers['last-modified']}"
        record = {
            "url": record_url, "title": page.title or record_url, "text": page.text,
            "source_type": page.source_type or self.settings.source_type, "metadata": metadata,
            "crawl": {"fetched_url": target, "etag": resp_headers.get("etag", ""),
                      "last_modified": resp_headers.get("last-modified", "")},
        }
        return record, links

    def _page_id(self, target: str, canonical_url: str) -> str:
        """The page's canonical link when it is inside the prefixes and a valid document id, else its address."""
        canonical = normalize_url(canonical_url) if canonical_url else ""
        if not canonical or not self._allowed(canonical):
            return target
        try:
            return validate_document_id(canonical)
        except DocumentIdError as exc:
            # As for a local HTML file: the page is fine, only its canonical link is not an id.
            log.warning("%s: canonical link ignored: %s", target, exc)
            return target

    def _carry_over(self, result: CrawlResult, old: dict[str, Any] | None) -> None:
        result.unreachable += 1
        if old is not None:
            result.records.append(old)

    def _get(self, client: httpx.Client, url: str, headers: dict[str, str]) -> tuple[int, httpx.Headers, bytes]:
        request = client.build_request("GET", url, headers=headers)
        try:
            response = client.send(request, stream=True)
            try:
                chunks: list[bytes] = []
                size = 0
                if response.status_code == 200:
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if size > self.settings.max_page_bytes:
                            raise SourceFailure(f"page larger than {self.settings.max_page_bytes} bytes")
                        chunks.append(chunk)
                return response.status_code, response.headers, b"".join(chunks)
            finally:
                response.close()
        except httpx.HTTPError as exc:
            raise transport_failure(exc, request, self.settings.timeout_s) from None

