"""A crawled documentation site in the embedded index.

The pages of a crawl are stored as a JSONL snapshot next to the index (readable, diffable), and the
snapshot is indexed like any JSONL corpus, so a refresh only rewrites what changed. A crawl that found
no page at all (the site is down, robots.txt forbids everything) leaves snapshot and index as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from evident.connectors.index.corpus import IndexStats
from evident.connectors.index.embedded import LocalIndex
from evident.connectors.remote.docs_site import Crawler, CrawlSettings, SkipReporter, normalize_url
from evident.connectors.remote.http import host
from evident.connectors.source import SourceFailure
from evident.settings import index_dir


class DocsRefreshStats(IndexStats):
    fetched: int = 0
    reused: int = 0
    pages: int = 0


def default_docs_index(name: str, settings: CrawlSettings) -> Path:
    """Where a docs source's index lives when none is configured: one file per source and site."""
    return default_source_index("docs", name, [*settings.sitemaps, *settings.start_urls])


def default_source_index(kind: str, name: str, identity: list[str]) -> Path:
    """An index file of its own for a source named `name` whose content is identified by `identity`."""
    digest = hashlib.sha256("\n".join([name, *identity]).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or kind
    return index_dir() / f"{kind}-{slug}-{digest}.sqlite3"


def pages_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.stem + ".pages.jsonl")


def read_pages(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    pages: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            pages[normalize_url((record.get("crawl") or {}).get("fetched_url") or record["url"])] = record
    return pages


def write_pages(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in sorted(records, key=lambda r: r["url"]):
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, path)  # readers see the old snapshot or the new one, never half of one


def index_pages(index_path: Path, records: list[dict[str, Any]]) -> tuple[IndexStats, int]:
    """`records` written as the index's snapshot and the index brought to it: its counts and its pages."""
    snapshot = pages_path(index_path)
    write_pages(snapshot, records)
    with LocalIndex(index_path) as index:
        stats = index.add_corpus(snapshot)
        stats.removed += index.retain_roots([snapshot])
        return stats, index.count()


def refresh_docs_index(
    settings: CrawlSettings,
    index_path: Path,
    *,
    client: httpx.Client | None = None,
    on_skip: SkipReporter | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DocsRefreshStats:
    """Crawl the site and bring its index up to date; raises `SourceFailure` if nothing could be crawled."""
    snapshot = pages_path(index_path)
    previous = read_pages(snapshot)
    result = Crawler(settings, client=client, on_skip=on_skip, sleep=sleep).run(previous)
    if not result.records:
        reasons = "; ".join(f"{url}: {why}" for url, why in result.skipped[:3]) or "no pages found"
        raise SourceFailure(f"crawl of {', '.join(host(u) for u in settings.sitemaps + settings.start_urls)} "
                            f"found no pages ({reasons}); the index was left as it was")
    stats, count = index_pages(index_path, result.records)
    return DocsRefreshStats(**stats.model_dump(), fetched=result.fetched, reused=result.reused, pages=count)
