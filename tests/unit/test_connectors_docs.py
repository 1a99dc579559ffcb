"""The documentation-site connector against a local static site: sitemap, robots.txt, broken links, refreshes."""

from __future__ import annotations

import gzip
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from evident.connectors.index.embedded import LocalIndex
from evident.connectors.index.html_text import parse_html
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.remote.docs_index import pages_path, read_pages, refresh_docs_index
from evident.connectors.remote.docs_site import Crawler, CrawlSettings, RateLimiter
from evident.connectors.remote.robots import Robots
from evident.connectors.remote.sitemap import SitemapError, parse_sitemap
from evident.connectors.source import SourceFailure
from tests.support.wiki_servers import Response, StaticSite

HTML = "text/html; charset=utf-8"
NAV = '<nav><a href="{base}/docs/">Home</a> <a href="{base}/docs/install">Install</a></nav>'


def page(title: str, body: str, head: str = "") -> tuple[str, str]:
    return HTML, (f"<html><head><title>{title}</title>{head}</head><body>{NAV}"
                  f"<main><h1>{title}</h1>{body}</main><footer>© Tessellate</footer></body></html>")


def urlset(*entries: tuple[str, str]) -> tuple[str, str]:
    urls = "".join(f"<url><loc>{{base}}{path}</loc>" + (f"<lastmod>{mod}</lastmod>" if mod else "") + "</url>"
                   for path, mod in entries)
    return "application/xml", f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'


SITEMAP_PAGES = [
    ("/docs/", "2025-01-01"), ("/docs/install", "2025-01-01"), ("/docs/config", "2025-01-01"),
    ("/docs/private/keys", "2025-01-01"), ("/docs/missing", ""), ("/docs/manual.pdf", ""), ("/blog/post", ""),
    ("/docs/old", ""), ("/docs/noindex", ""), ("/docs/empty", ""),
]


def site_files() -> dict[str, tuple[str, str] | Response]:
    return {
        "/robots.txt": ("text/plain", "User-agent: *\nDisallow: /docs/private/\n"),
        "/sitemap.xml": ("application/xml", '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/'
                         'sitemap/0.9"><sitemap><loc>{base}/sitemap-docs.xml</loc></sitemap></sitemapindex>'),
        "/sitemap-docs.xml": urlset(*SITEMAP_PAGES),
        "/docs/": page("Tessellate Flow docs", '<p>Start with <a href="install">installing Flow</a> or read the '
                       '<a href="/docs/config#top">configuration reference</a>.</p>'
                       '<p><a href="/docs/gone">Old page</a> '
                       '<a href="http://example.invalid/x">Elsewhere</a> <a href="mailto:docs@example.com">Mail</a> '
                       '<a href="/docs/private/keys">Keys</a></p>'),
        "/docs/install": page("Installing Flow", "<p>Install Flow with <code>pip install tessellate-flow</code>. "
                              "Flow needs Python 3.11 or newer.</p>",
                              head='<link rel="canonical" href="{base}/docs/install">'),
        "/docs/config": page("Configuration reference", "<p>The <code>workers</code> setting defaults to 4 worker "
                             "processes per node.</p>", head='<meta name="evident:acl" content="group:engineering">'),
        "/docs/private/keys": page("Signing keys", "<p>Never crawl me.</p>"),
        "/docs/manual.pdf": ("application/pdf", "%PDF-1.4 not a page"),
        "/blog/post": page("Blog", "<p>Outside the docs.</p>"),
        "/docs/old": Response(301, "", "text/html", {"Location": "{base}/docs/upgrade"}),
        "/docs/upgrade": page("Upgrading to Flow 5", "<p>Upgrading from Flow 4 requires a config migration.</p>"),
        "/docs/noindex": page("Draft", "<p>Draft text.</p>", head='<meta name="robots" content="noindex">'),
        "/docs/empty": (HTML, "<html><body><nav>menu only</nav></body></html>"),
    }


@pytest.fixture
def site() -> Iterator[StaticSite]:
    with StaticSite(site_files()) as server:
        yield server


def settings(site: StaticSite, **kw: object) -> CrawlSettings:
    values: dict[str, object] = {"source_name": "docs", "sitemaps": [site.url + "/sitemap.xml"],
                                 "allowed_prefixes": [site.url + "/docs/"], "rate_limit_per_s": 1000.0, "timeout_s": 5}
    values.update(kw)
    return CrawlSettings(**values)  # type: ignore[arg-type]


def test_sitemap_crawl_is_polite_and_reports_every_skip(site: StaticSite) -> None:
    result = Crawler(settings(site)).run()
    urls = {r["url"].removeprefix(site.url) for r in result.records}
    assert urls == {"/docs/", "/docs/install", "/docs/config", "/docs/upgrade"}
    reasons = {url.removeprefix(site.url): why for url, why in result.skipped}
    assert reasons["/docs/private/keys"] == "disallowed by robots.txt"
    assert reasons["/docs/missing"] == "broken link (HTTP 404)"
    assert reasons["/docs/manual.pdf"] == "not an HTML page (application/pdf)"
    assert reasons["/blog/post"] == "outside the allowed URL prefixes"
    assert reasons["/docs/noindex"] == "page asks not to be indexed (robots noindex)"
    assert reasons["/docs/empty"] == "no readable text in the page"
    fetched = site.paths()
    assert fetched[0] == "/robots.txt" and fetched.count("/robots.txt") == 1
    assert "/docs/private/keys" not in fetched and "/blog/post" not in fetched
    assert "/docs/gone" not in fetched  # sitemap pages' links are not followed


def test_clean_text_and_metadata(site: StaticSite) -> None:
    records = {r["url"].removeprefix(site.url): r for r in Crawler(settings(site)).run().records}
    install = records["/docs/install"]
    assert install["title"] == "Installing Flow" and install["source_type"] == "docs"
    assert install["text"] == ("# Installing Flow\n\n"
                               "Install Flow with pip install tessellate-flow. Flow needs Python 3.11 or newer.")
    config = records["/docs/config"]["metadata"]
    assert config == {"acl": "group:engineering", "revision": config["revision"]}
    assert config["revision"].startswith('etag="')
    assert records["/docs/upgrade"]["crawl"]["fetched_url"] == site.url + "/docs/upgrade"  # the redirect target


def test_start_url_crawl_follows_links_inside_the_prefix(site: StaticSite) -> None:
    result = Crawler(settings(site, sitemaps=[], start_urls=[site.url + "/docs/"], allowed_prefixes=[])).run()
    urls = {r["url"].removeprefix(site.url) for r in result.records}
    assert urls == {"/docs/", "/docs/install", "/docs/config"}
    assert (site.url + "/docs/gone", "broken link (HTTP 404)") in result.skipped
    assert (site.url + "/docs/private/keys", "disallowed by robots.txt") in result.skipped
    assert "/docs/private/keys" not in site.paths()


def test_page_cap(site: StaticSite) -> None:
    result = Crawler(settings(site, max_pages=2)).run()
    assert result.fetched == 2 and len(result.records) == 2
    assert any("page cap of 2 reached" in why for _, why in result.skipped)


def test_rate_limit_and_crawl_delay(site: StaticSite) -> None:
    site.files["/robots.txt"] = ("text/plain", "User-agent: EvidenT\nCrawl-delay: 3\n")
    now = [100.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    result = Crawler(settings(site, rate_limit_per_s=1.0), clock=lambda: now[0], sleep=sleep).run()
    requests = len(site.requests)
    assert result.records and len(sleeps) == requests - 1
    assert sleeps[0] == 1.0 and set(sleeps[1:]) == {3.0}  # the site's Crawl-delay is slower than our rate

    limiter = RateLimiter(0.5, clock=lambda: now[0], sleep=sleep)
    sleeps.clear()
    limiter.wait()
    limiter.wait()
    now[0] += 10
    limiter.wait()
    assert sleeps == [0.5]


@pytest.mark.parametrize(("status", "crawled"), [(503, False), (404, True)])
def test_robots_txt_status(site: StaticSite, status: int, crawled: bool) -> None:
    site.files["/robots.txt"] = Response(status, "nope", "text/plain")
    result = Crawler(settings(site)).run()
    assert bool(result.records) is crawled
    if not crawled:
        assert site.paths() == ["/robots.txt"]
        assert any("HTTP 503; not crawling" in why for _, why in result.skipped)


def test_refresh_builds_and_updates_the_index(site: StaticSite, tmp_path: Path) -> None:
    index = tmp_path / "docs.sqlite3"
    skips: list[str] = []
    stats = refresh_docs_index(settings(site), index, on_skip=lambda url, why: skips.append(why))
    assert stats.pages == 4 and stats.added == 4 and "broken link (HTTP 404)" in skips
    retriever = LocalCorpusRetriever(index_path=index, source_name="docs", k=3)
    hit = retriever.invoke("how do I install flow with pip")[0]
    assert hit.metadata["url"] == site.url + "/docs/install"
    assert hit.metadata["source"] == "docs" and hit.metadata["source_type"] == "docs"
    assert hit.metadata["revision"].startswith('etag="')  # the server's ETag is the page's revision
    assert pages_path(index).exists()

    # Unchanged lastmod: every page is still asked "changed since?" (its ETag) and skipped on 304.
    before = len(site.requests)
    stats = refresh_docs_index(settings(site), index)
    again = [r for r in site.requests[before:] if r.path in {"/docs/", "/docs/install", "/docs/config"}]
    assert sorted(r.path for r in again) == ["/docs/", "/docs/config", "/docs/install"]
    assert all(r.headers.get("if-none-match") for r in again)
    assert stats.unchanged == 4 and stats.reused == 3  # /docs/upgrade, reached by a redirect, is fetched whole

    # Same lastmod, new text (the sitemap was not regenerated): the conditional request sees the change.
    site.files["/docs/config"] = page("Configuration reference",
                                      "<p>The <code>workers</code> setting defaults to 8.</p>")
    with LocalIndex(index, read_only=True) as stored:
        before_edit = stored.get(site.url + "/docs/config")
    stats = refresh_docs_index(settings(site), index)
    changed = retriever.invoke("workers setting default")[0]
    assert stats.updated == 1 and "defaults to 8" in changed.page_content
    assert before_edit is not None and before_edit.url == changed.metadata["url"]
    assert changed.metadata["revision"].startswith('etag="')
    assert changed.metadata["revision"] != before_edit.metadata["revision"]

    # A page changed (new lastmod) and a page removed from the site.
    files = site.files
    files["/docs/install"] = page("Installing Flow", "<p>Install Flow with pipx now.</p>")
    files["/sitemap-docs.xml"] = urlset(("/docs/", "2025-01-01"), ("/docs/install", "2025-02-02"),
                                        ("/docs/config", "2025-01-01"))
    stats = refresh_docs_index(settings(site), index)
    assert stats.updated == 1 and stats.removed == 1 and stats.pages == 3
    assert "pipx" in retriever.invoke("install flow")[0].page_content


def test_unchanged_pages_answer_304(site: StaticSite, tmp_path: Path) -> None:
    index = tmp_path / "docs.sqlite3"
    site.files["/sitemap-docs.xml"] = urlset(("/docs/install", ""), ("/docs/config", ""))
    refresh_docs_index(settings(site), index)
    before = len(site.requests)
    stats = refresh_docs_index(settings(site), index)
    conditional = [r for r in site.requests[before:] if r.path.startswith("/docs/")]
    assert conditional and all(r.headers.get("if-none-match") for r in conditional)
    assert stats.reused == 2 and stats.unchanged == 2


def test_site_down_keeps_the_index(tmp_path: Path) -> None:
    index = tmp_path / "docs.sqlite3"
    with StaticSite(site_files()) as site:
        refresh_docs_index(settings(site), index)
        config = settings(site)
    snapshot = read_pages(pages_path(index))
    with pytest.raises(SourceFailure, match="found no pages .*the index was left as it was"):
        refresh_docs_index(config, index)  # the server is gone: connection refused
    assert read_pages(pages_path(index)) == snapshot
    assert LocalCorpusRetriever(index_path=index, source_name="docs").invoke("install flow")


def test_server_errors_keep_previous_pages(site: StaticSite, tmp_path: Path) -> None:
    index = tmp_path / "docs.sqlite3"
    refresh_docs_index(settings(site), index)
    site.files["/docs/install"] = Response(500, "oops", "text/html")
    site.files["/sitemap-docs.xml"] = urlset(("/docs/", "2025-01-01"), ("/docs/install", "2025-03-03"))
    stats = refresh_docs_index(settings(site), index)
    assert stats.pages == 2  # install kept from the last crawl, config removed from the sitemap


def test_a_page_whose_id_is_invalid_is_skipped_and_the_rest_indexed(
    site: StaticSite, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A page address with a space, and a canonical link with brackets: neither may be a document id.
    site.files["/docs/release%20notes"] = page("Release notes", "<p>Flow 5 adds autoscaling of workers.</p>")
    site.files["/docs/install"] = page("Installing Flow",
                                       "<p>Install Flow with <code>pip install tessellate-flow</code>.</p>",
                                       head='<link rel="canonical" href="{base}/docs/install[v2]">')
    site.files["/sitemap-docs.xml"] = urlset(("/docs/", ""), ("/docs/release notes", ""), ("/docs/install", ""))
    index = tmp_path / "docs.sqlite3"
    skips: list[tuple[str, str]] = []
    with caplog.at_level(logging.WARNING, logger="evident.connectors.remote.docs_site"):
        stats = refresh_docs_index(settings(site), index, on_skip=lambda url, why: skips.append((url, why)))
    assert stats.pages == 2 and stats.added == 2
    assert skips == [(site.url + "/docs/release notes", f"not indexed: id {site.url + '/docs/release notes'!r} "
                      "contains whitespace")]
    # The bracketed canonical link is ignored (with a warning naming the page); its address is the id.
    assert f"{site.url}/docs/install: canonical link ignored" in caplog.text
    retriever = LocalCorpusRetriever(index_path=index, source_name="docs", k=3)
    assert retriever.invoke("install flow with pip")[0].metadata["url"] == site.url + "/docs/install"
    assert all("autoscaling" not in doc.page_content for doc in retriever.invoke("autoscaling of workers"))

    # Without a skip handler the skipped page is logged as a warning that names it.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="evident.connectors.remote.docs_site"):
        assert refresh_docs_index(settings(site), index).pages == 2
    assert f"skipped {site.url}/docs/release notes: not indexed: id" in caplog.text


def test_page_charset_and_size(site: StaticSite) -> None:
    latin = "<html><body><p>Caf\xe9 cr\xe8me policy.</p></body></html>".encode("latin-1")
    site.files["/docs/latin"] = Response(200, latin, "text/html; charset=iso-8859-1")
    site.files["/docs/huge"] = (HTML, "<html><body><p>" + "x " * 20_000 + "</p></body></html>")
    site.files["/sitemap-docs.xml"] = urlset(("/docs/latin", ""), ("/docs/huge", ""))
    result = Crawler(settings(site, max_page_bytes=10_000)).run()
    assert [r["text"] for r in result.records] == ["Café crème policy."]
    assert (site.url + "/docs/huge", "page larger than 10000 bytes") in result.skipped


def test_sitemap_parsing() -> None:
    xml = (b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           b'<url><loc> https://d/a </loc><lastmod>2025</lastmod></url></urlset>')
    parsed = parse_sitemap(gzip.compress(xml))
    assert [(e.loc, e.lastmod) for e in parsed.pages] == [("https://d/a", "2025")]
    with pytest.raises(SitemapError, match="DOCTYPE"):
        parse_sitemap(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><urlset>&a;</urlset>')
    with pytest.raises(SitemapError, match="not valid XML"):
        parse_sitemap(b"<html><body>not a sitemap")
    with pytest.raises(SitemapError, match="root element <html>"):
        parse_sitemap(b"<html><body/></html>")


ROBOTS = """
User-agent: *
Disallow: /

User-agent: EvidenT
Disallow: /
Allow: /user-guide/
Disallow: /user-guide/internal/
Allow: /user-guide/internal/public-
Disallow: /*.pdf$
Disallow: /user-guide/*?print=
Crawl-delay: 2
"""


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/", False),  # Disallow: / applies where nothing longer matches
        ("/blog/", False),
        ("/user-guide/", True),  # the longer Allow wins over Disallow: / (urllib's first match refused it)
        ("/user-guide/install", True),
        ("/user-guide/internal/keys", False),  # a longer Disallow wins again
        ("/user-guide/internal/public-faq", True),  # and a longer Allow again
        ("/files/manual.pdf", False),  # `*` and `$`
        ("/files/manual.pdf.html", False),  # not the `$` rule, but still under Disallow: /
        ("/user-guide/manual.pdf", True),  # Allow: /user-guide/ (12 chars) is longer than /*.pdf$ (7)
        ("/user-guide/page?print=1", False),  # `*` in the middle of a rule, query included
    ],
)
def test_robots_txt_is_read_as_rfc_9309_says(path: str, allowed: bool) -> None:
    assert Robots.parse(ROBOTS).allowed("https://docs.example.com" + path) is allowed


def test_robots_end_anchor_and_agent_groups() -> None:
    robots = Robots.parse("User-agent: *\nDisallow: /*.pdf$\nAllow: /\n")
    assert not robots.allowed("https://d.example/a/manual.pdf")
    assert robots.allowed("https://d.example/a/manual.pdf.html")  # `$`: the rule ends at .pdf
    assert robots.allowed("https://d.example/a/manual.pdfx")
    other = Robots.parse("User-agent: SomeoneElse\nDisallow: /\n")
    assert other.allowed("https://d.example/") and other.crawl_delay() == 0.0
    assert Robots.parse(ROBOTS).crawl_delay() == 2.0
    assert Robots.parse("User-agent: evident\nRequest-rate: 1/5\n").crawl_delay() == 5.0  # agent names fold case


def test_the_crawler_obeys_longest_match_rules(site: StaticSite) -> None:
    site.files["/robots.txt"] = ("text/plain", "User-agent: *\nDisallow: /\nAllow: /docs/\nDisallow: /docs/*fig$\n"
                                 "Allow: /sitemap\n")
    site.files["/sitemap-docs.xml"] = urlset(("/docs/", ""), ("/docs/install", ""), ("/docs/config", ""))
    result = Crawler(settings(site)).run()
    urls = {r["url"].removeprefix(site.url) for r in result.records}
    assert urls == {"/docs/", "/docs/install"}
    assert (site.url + "/docs/config", "disallowed by robots.txt") in result.skipped
    assert "/docs/config" not in site.paths()


def test_heading_permalinks_are_not_text() -> None:
    html = ('<html><body><main><h1>Install<a class="headerlink" href="#install" title="Permanent link">¶</a></h1>'
            '<p>Run the installer.</p><h2 id="req">Requirements <a href="#req">#</a></h2><p>Python 3.11.</p>'
            '<h2>See also<a class="anchor" href="#see"></a></h2><p>Read <a href="#req">the requirements</a>.</p>'
            "</main></body></html>")
    assert parse_html(html).text == ("# Install\n\nRun the installer.\n\n## Requirements\n\nPython 3.11.\n\n"
                                     "## See also\n\nRead the requirements.")
