"""Federated sources from evident.toml, end to end: a wiki, Confluence, a docs site and a folder on loopback.

`evident index --config` crawls the docs site, `evident sources --config` checks every source, and
`evident ask --config` answers from all of them; broken sources (unknown type, missing credential,
unreachable host, malformed responses) are reported by name while the others still answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evident.context import EvidentContext
from evident.graph import graph
from tests.support.wiki_servers import ConfluencePage, ConfluenceServer, MediaWikiServer, StaticSite, WikiPage

Q = "How do I upgrade Flow to version 5?"
ENV = {"WIKI_TOKEN": "wiki-token-abc", "CONF_EMAIL": "bot@example.com", "CONF_TOKEN": "conf-token-xyz"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Module fixtures run before the per-test environment isolation: keep every index inside `cwd`.
    env = {**os.environ, **ENV, "EVIDENT_INDEX_DIR": str(cwd / "index-cache")}
    for name in ("EVIDENT_CONFIG", "EVIDENT_CORPUS", "EVIDENT_MODEL", "OPENAI_BASE_URL", "LANGSMITH_TRACING"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "evident.cli", *args], capture_output=True, text=True, timeout=120,
        env=env, cwd=cwd, stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    wiki = MediaWikiServer([
        WikiPage(11, "Flow upgrade runbook", "Flow upgrade runbook\n\nBefore you upgrade Tessellate Flow to version 5, "
                 "drain all workers with flowctl drain. The upgrade window for Flow is Sunday 02:00 UTC."),
    ], token=ENV["WIKI_TOKEN"])
    confluence = ConfluenceServer([
        ConfluencePage("201", "Flow 5 release checklist", "ENG", "<p>The Flow 5 upgrade requires a database "
                       "migration with flowctl migrate. The migration takes about 20 minutes per cluster.</p>"),
        ConfluencePage("202", "Flow 5 upgrade budget", "FIN", "<p>The Flow 5 upgrade budget is 180,000 EUR for "
                       "version 5 licences.</p>", read_groups=["finance"]),
    ], email=ENV["CONF_EMAIL"], token=ENV["CONF_TOKEN"])
    site = StaticSite({
        "/robots.txt": ("text/plain", "User-agent: *\nAllow: /\n"),
        "/sitemap.xml": ("application/xml", '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                         "<url><loc>{base}/docs/upgrade</loc></url><url><loc>{base}/docs/guide.pdf</loc></url></urlset>"),
        "/docs/upgrade": ("text/html", "<html><head><title>Upgrading to Flow 5</title></head><body><nav>Docs home</nav>"
                          "<main><h1>Upgrading to Flow 5</h1><p>To upgrade Flow to version 5, run flowctl upgrade "
                          "--to 5 on each node. Flow 5 requires Python 3.11.</p></main></body></html>"),
        "/docs/guide.pdf": ("application/pdf", "%PDF-1.7"),
        "/w/api.php": ("text/html", "<!DOCTYPE html><html><body>This is a wiki page, not the API</body></html>"),
    })
    with wiki, confluence, site:
        yield {"wiki": wiki, "confluence": confluence, "site": site}


def write_config(folder: Path, servers: dict[str, Any], examples: Path, extra: str = "") -> Path:
    config = folder / "evident.toml"
    config.write_text(f"""
top_n = 8

[[sources]]
name = "handbook"
type = "local"
paths = ["{examples / 'docs' / 'flow'}"]
index_path = "indexes/handbook.sqlite3"
source_type = "docs"

[[sources]]
name = "wiki"
type = "mediawiki"
url = "{servers['wiki'].api_url}"
token_env = "WIKI_TOKEN"
timeout_s = 10

[[sources]]
name = "confluence"
type = "confluence"
url = "{servers['confluence'].base_url}"
deployment = "cloud"
email_env = "CONF_EMAIL"
token_env = "CONF_TOKEN"
spaces = ["ENG", "FIN"]
timeout_s = 10

[[sources]]
name = "docs"
type = "docs"
sitemap = "{servers['site'].url}/sitemap.xml"
allowed_prefixes = ["{servers['site'].url}/docs/"]
rate_limit_per_s = 100
index_path = "indexes/docs.sqlite3"
{extra}
""", encoding="utf-8")
    return config


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, servers: dict[str, Any], examples: Path) -> Path:
    folder = tmp_path_factory.mktemp("federated")
    write_config(folder, servers, examples)
    proc = run("index", "--config", "evident.toml", "--json", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)["sources"]}
    assert rows["docs"]["status"] == "ok" and rows["docs"]["documents"] == 1
    assert rows["handbook"]["status"] == "ok" and rows["handbook"]["documents"] >= 3
    assert rows["wiki"]["status"] == rows["confluence"]["status"] == "live"
    assert "not an HTML page (application/pdf)" in proc.stderr  # the skipped page is reported
    assert (folder / "indexes" / "docs.sqlite3").exists()
    return folder


def test_sources_lists_and_checks_every_source(workdir: Path) -> None:
    proc = run("sources", "--config", "evident.toml", "--query", "upgrade flow", "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ok"] is True
    rows = {row["name"]: row for row in out["sources"]}
    assert list(rows) == ["handbook", "wiki", "confluence", "docs"]
    assert {r["type"] for r in rows.values()} == {"local", "mediawiki", "confluence", "docs"}
    for row in rows.values():
        assert row["status"] == "ok" and row["documents"] >= 1 and isinstance(row["latency_ms"], float)
    human = run("sources", "--config", "evident.toml", cwd=workdir)
    assert human.returncode == 0 and "confluence" in human.stdout and " ms" in human.stdout


def test_ask_answers_from_every_source(workdir: Path) -> None:
    proc = run("ask", Q, "--config", "evident.toml", "--json", cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "answered", out
    sources = {r["source"] for r in out["retrieved"]}
    assert sources == {"handbook", "wiki", "confluence", "docs"}
    assert "acl_dropped" not in out  # the finance page is hidden, and so is the count of hidden pages
    assert "180,000" not in proc.stdout and "upgrade budget" not in proc.stdout
    assert {r["source"]: r["status"] for r in out["source_runs"]} == dict.fromkeys(sources, "ok")
    retrieved = {r["url"] for r in out["retrieved"]}
    assert out["citations"] and all(c["url"] in retrieved for c in out["citations"])

    finance = run("ask", "What is the Flow 5 upgrade budget?", "--config", "evident.toml", "--user", "fiona",
                  "--group", "finance", "--json", cwd=workdir)
    assert "180,000 EUR" in finance.stdout


def test_async_graph_over_live_connectors(workdir: Path, servers: dict[str, Any],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    ctx = EvidentContext.from_env(workdir / "evident.toml")
    out = asyncio.run(graph.ainvoke({"query": Q, "principal": {"user": "fiona", "groups": ["finance"]}}, context=ctx))
    assert out["status"] == "answered"
    assert {d["source"] for d in out["documents"]} == {"handbook", "wiki", "confluence", "docs"}


def test_broken_sources_are_named_and_the_others_still_answer(
    workdir: Path, servers: dict[str, Any], examples: Path, tmp_path: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
        extra = f"""
[[sources]]
name = "sharepoint"
type = "sharepoint"

[[sources]]
name = "jira"
type = "confluence"
url = "https://jira.example.atlassian.net/wiki"
email_env = "JIRA_EMAIL_UNSET"
token_env = "JIRA_TOKEN_UNSET"

[[sources]]
name = "old-wiki"
type = "mediawiki"
url = "http://127.0.0.1:{closed}/w/api.php"

[[sources]]
name = "html-not-api"
type = "mediawiki"
url = "{servers['site'].url}/w/api.php"
"""
        write_config(tmp_path, servers, examples, extra)
        (tmp_path / "indexes").mkdir()
        (tmp_path / "indexes" / "docs.sqlite3").write_bytes((workdir / "indexes" / "docs.sqlite3").read_bytes())
        proc = run("ask", Q, "--config", "evident.toml", "--json", cwd=tmp_path)
        listing = run("sources", "--config", "evident.toml", "--query", "flow upgrade", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "degraded" and out["citations"]
    errors = {e["source"]: e for e in out["source_errors"]}
    assert set(errors) == {"sharepoint", "jira", "old-wiki", "html-not-api"}
    assert errors["sharepoint"]["kind"] == "config"
    assert "unknown source type 'sharepoint'" in errors["sharepoint"]["message"]
    assert errors["jira"]["kind"] == "config" and "JIRA_EMAIL_UNSET" in errors["jira"]["message"]
    assert errors["old-wiki"]["message"] == (
        f"cannot connect to 127.0.0.1:{closed} (host unreachable or connection refused)")
    assert "malformed MediaWiki API response (expected JSON, got text/html)" in errors["html-not-api"]["message"]
    assert {r["source"] for r in out["retrieved"]} <= {"handbook", "wiki", "confluence", "docs"}

    assert listing.returncode == 1
    rows = {row["name"]: row["status"] for row in json.loads(listing.stdout)["sources"]}
    assert rows == {"handbook": "ok", "wiki": "ok", "confluence": "ok", "docs": "ok", "sharepoint": "config",
                    "jira": "config", "old-wiki": "error", "html-not-api": "error"}


def test_missing_config_file_is_one_line(tmp_path: Path) -> None:
    proc = run("sources", "--config", "nope.toml", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == "evident sources: nope.toml: config file not found"
    proc = run("index", "--config", "nope.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "config file not found" in proc.stderr
