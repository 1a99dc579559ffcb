"""sitemap.xml (https://www.sitemaps.org/protocol.html): page lists and sitemap indexes."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from xml.etree import ElementTree

MAX_SITEMAP_BYTES = 50_000_000  # the protocol's own limit for an uncompressed sitemap


class SitemapError(ValueError):
    """A sitemap that cannot be read; the message says why."""


@dataclass(frozen=True)
class SitemapEntry:
    loc: str
    lastmod: str = ""


@dataclass(frozen=True)
class Sitemap:
    pages: list[SitemapEntry]
    sitemaps: list[SitemapEntry]  # children, when this is a sitemap index


def parse_sitemap(data: bytes) -> Sitemap:
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data)
    head = data[:4096].lstrip().upper()
    # A sitemap never needs a DTD; refusing one rules out entity-expansion tricks.
    if b"<!DOCTYPE" in head or b"<!ENTITY" in data.upper():
        raise SitemapError("sitemap declares a DOCTYPE or entities")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise SitemapError(f"not valid XML ({exc})") from None
    kind = _local(root.tag)
    if kind not in {"urlset", "sitemapindex"}:
        raise SitemapError(f"not a sitemap (root element <{kind}>)")
    entries = []
    for child in root:
        if _local(child.tag) not in {"url", "sitemap"}:
            continue
        fields = {_local(f.tag): (f.text or "").strip() for f in child}
        if fields.get("loc"):
            entries.append(SitemapEntry(loc=fields["loc"], lastmod=fields.get("lastmod", "")))
    return Sitemap(pages=entries, sitemaps=[]) if kind == "urlset" else Sitemap(pages=[], sitemaps=entries)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _gunzip(data: bytes) -> bytes:
    # Bounded decompression: a small gzip must not expand into gigabytes.
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, MAX_SITEMAP_BYTES + 1)
    except (zlib.error, gzip.BadGzipFile) as exc:
        raise SitemapError(f"bad gzip data ({exc})") from None
    if len(out) > MAX_SITEMAP_BYTES:
        raise SitemapError("sitemap larger than 50 MB uncompressed")
    return out
