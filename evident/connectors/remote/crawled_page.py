"""What a fetched documentation page says beyond its text: its encoding, its links, its robots directives."""

from __future__ import annotations

import re
from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

from evident.connectors.index.html_text import declared_charset
from evident.connectors.remote.robots import AGENT as ROBOTS_AGENT


def decode_page(body: bytes, content_type: str) -> str:
    """The page's text: the charset of its Content-Type, else of its `<meta>`, else UTF-8 (never an error)."""
    match = re.search(r"charset=([\w.:-]+)", content_type, re.IGNORECASE)
    for charset in (match.group(1) if match else None, declared_charset(body), "utf-8"):
        if not charset:
            continue
        try:
            return body.decode(charset)
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("utf-8", errors="replace")


def links_and_robots(html: str, page_url: str) -> tuple[list[str], set[str]]:
    """The page's absolute http(s) links (not `nofollow` ones) and its robots meta directives."""
    tree = LexborHTMLParser(html)
    base = page_url
    base_node = tree.css_first("base[href]")
    if base_node is not None and base_node.attributes.get("href"):
        base = urljoin(page_url, base_node.attributes["href"] or "")
    links = []
    for node in tree.css("a[href]"):
        href = (node.attributes.get("href") or "").strip()
        rel = (node.attributes.get("rel") or "").lower().split()
        if not href or href.startswith(("#", "mailto:", "javascript:", "tel:")) or "nofollow" in rel:
            continue
        absolute = urljoin(base, href)
        if absolute.startswith(("http://", "https://")):
            links.append(absolute)
    directives: set[str] = set()
    for meta in tree.css("meta[name]"):
        name = (meta.attributes.get("name") or "").strip().lower()
        if name in {"robots", ROBOTS_AGENT.lower()}:
            directives |= {d.strip() for d in (meta.attributes.get("content") or "").lower().split(",")}
    return links, directives
