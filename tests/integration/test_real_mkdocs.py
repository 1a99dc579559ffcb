"""The docs-site connector against a real documentation site: built by MkDocs, served as static files on loopback.

The site (tests/fixtures/mkdocs-site) has a robots.txt only an RFC 9309 parser reads right (everything
disallowed except the home page, the sitemap and the user guide), heading permalinks (¶) after every
heading, and MkDocs' own sitemap whose lastmod is the build date. It is crawled by sitemap and by start
URL, refreshed with conditional requests, and `evident ask --config` answers from it with exact spans.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evident.connectors.remote.docs_index import pages_path, read_pages, refresh_docs_index
from evident.connectors.remote.docs_site import Crawler, CrawlSettings

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mkdocs-site"
GUIDE = {"/", "/user-guide/install/", "/user-guide/configure/"}


@dataclass
class Site:
    url: str
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # (path, If-Modified-Since, status)

    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("mkdocs")
    served = Site(url="")

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def send_response(self, code: int, message: str | None = None) -> None:
            served.requests.append((self.path, self.headers.get("If-Modified-Since", ""), code))
            super().send_response(code, message)

    # The port first: MkDocs writes absolute URLs (sitemap, canonical links) from site_url.
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(folder / "site")))
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    config = (FIXTURE / "mkdocs.yml").read_text(encoding="utf-8")
    (folder / "mkdocs.yml").write_text(f"site_url: {served.url}/\ndocs_dir: {FIXTURE / 'docs'}\n{config}",
                                       encoding="utf-8")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--strict",
                            "-f", str(folder / "mkdocs.yml"), "-d", str(folder / "site")],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def settings(site: Site, **kw: Any) -> CrawlSettings:
    values: dict[str, Any] = {"source_name": "docs", "rate_limit_per_s": 1000.0, "timeout_s": 10}
    values.update(kw)
    return CrawlSettings(**values)


def test_sitemap_crawl_obeys_longest_match_robots(site: Site) -> None:
    result = Crawler(settings(site, sitemaps=[site.url + "/sitemap.xml"])).run()
    assert {r["url"].removeprefix(site.url) for r in result.records} == GUIDE
    assert (site.url + "/internal/signing-keys/", "disallowed by robots.txt") in result.skipped
    assert "/internal/signing-keys/" not in site.paths()
    install = next(r for r in result.records if r["url"].endswith("/install/"))
    assert install["title"] == "Installing Flow - Tessellate Flow"
    # Headings as Markdown headings without their ¶ permalinks; navigation left out; inline code kept as text.
    assert install["text"] == (
        "# Installing Flow\n\n## Requirements\n\nFlow needs Python 3.11 or newer and a PostgreSQL 15 database.\n\n"
        "## Install\n\nInstall Flow on every node with pip install tessellate-flow. The installer creates the flow "
        "system user and the /var/lib/flow data folder."
    )
    assert all("¶" not in r["text"] for r in result.records)


def test_start_url_crawl_follows_the_sites_links(site: Site) -> None:
    result = Crawler(settings(site, start_urls=[site.url + "/"], allowed_prefixes=[site.url + "/"])).run()
    assert {r["url"].removeprefix(site.url) for r in result.records} == GUIDE
    assert (site.url + "/internal/signing-keys/", "disallowed by robots.txt") in result.skipped
    configure = next(r for r in result.records if r["url"].endswith("/configure/"))
    assert "Queue | Priority\nurgent | 10\nbatch | 1" in configure["text"]


def test_refresh_asks_changed_since_and_skips_on_304(site: Site, tmp_path: Path) -> None:
    index = tmp_path / "docs.sqlite3"
    config = settings(site, sitemaps=[site.url + "/sitemap.xml"])
    assert refresh_docs_index(config, index).added == 3
    before = len(site.requests)
    stats = refresh_docs_index(config, index)  # same build: same lastmod, same files
    pages = [(path, since, status) for path, since, status in site.requests[before:] if path in GUIDE]
    assert sorted(path for path, _, _ in pages) == sorted(GUIDE)
    assert all(since and status == 304 for _, since, status in pages)  # If-Modified-Since from Last-Modified
    assert stats.reused == 3 and stats.unchanged == 3 and stats.pages == 3


def test_ask_answers_from_the_site_with_exact_spans(site: Site, tmp_path: Path) -> None:
    (tmp_path / "evident.toml").write_text(f"""
[[sources]]
name = "flow-docs"
type = "docs"
sitemap = "{site.url}/sitemap.xml"
rate_limit_per_s = 1000
index_path = "docs.sqlite3"
""", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVIDENT_", "OPENAI_", "LANGSMITH_"))}

    def evident(*args: str) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-m", "evident.cli", *args, "--config", "evident.toml", "--json"],
                              capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    indexed = evident("index")
    assert [(row["name"], row["status"], row["documents"]) for row in indexed["sources"]] == [("flow-docs", "ok", 3)]
    out = evident("ask", "How many worker processes does each node run by default?")
    assert out["status"] == "answered" and out["citations"]
    texts = {record["url"]: record["text"] for record in read_pages(pages_path(tmp_path / "docs.sqlite3")).values()}
    for citation in out["citations"]:
        text = texts[citation["url"]]
        assert " … ".join(text[s:e] for s, e in citation["spans"]) == citation["quote"]
    assert any(c["url"] == site.url + "/user-guide/configure/" and "defaults to 4 worker processes" in c["quote"]
               for c in out["citations"])
