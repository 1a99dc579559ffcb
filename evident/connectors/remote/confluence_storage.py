"""Confluence storage format (XHTML with `ac:`/`ri:` macros) to the same clean text as any HTML page.

The storage format is HTML plus Confluence's own elements. An HTML parser keeps their text but
loses two things that matter: CDATA sections (the bodies of code blocks) and the difference between
a macro's settings (`ac:parameter`, never content) and its body. Those are rewritten into plain
HTML first; everything else goes through `evident.connectors.index.html_text`, so citations into a
Confluence page behave exactly like citations into any other page.
"""

from __future__ import annotations

import html
import re

from evident.connectors.index.html_text import parse_html

_FLAGS = re.IGNORECASE | re.DOTALL
_CDATA = re.compile(r"<!\[CDATA\[(.*?)\]\]>", _FLAGS)
# Elements whose content is configuration or chrome, not text a reader sees as page content.
_DROP = re.compile(
    r"<(ac:parameter|ac:task-id|ac:task-uuid|ac:task-status|ac:image|ac:emoticon|ac:placeholder)\b[^>]*?"
    r"(?:/>|>.*?</\1\s*>)",
    _FLAGS,
)
_PLAIN_BODY = re.compile(r"<ac:plain-text-body\b[^>]*>(.*?)</ac:plain-text-body\s*>", _FLAGS)
_LINK = re.compile(r"<ac:link\b[^>]*>(.*?)</ac:link\s*>", _FLAGS)
_LINK_BODY = re.compile(r"<ac:(?:plain-text-)?link-body\b[^>]*>(.*?)</ac:(?:plain-text-)?link-body\s*>", _FLAGS)
_LINK_TARGET = re.compile(r'ri:(?:content-title|filename|space-key|value)\s*=\s*"([^"]*)"', _FLAGS)
_SELF_CLOSING = re.compile(r"<((?:ac|ri):[\w-]+)\b([^>]*?)/>", _FLAGS)


def storage_to_text(storage: str) -> str:
    """Readable text of a page body in storage format."""
    text = _DROP.sub("", storage)
    # Code macro bodies are CDATA: keep them verbatim, as preformatted text.
    text = _PLAIN_BODY.sub(lambda m: f"<pre>{_cdata_to_text(m.group(1))}</pre>", text)
    text = _LINK.sub(_link_text, text)
    text = _CDATA.sub(lambda m: html.escape(m.group(1), quote=False), text)
    # `<ri:user .../>` and friends are not void elements to an HTML parser: closing them explicitly
    # keeps the following text from being swallowed as their children.
    text = _SELF_CLOSING.sub(r"<\1\2></\1>", text)
    return parse_html(f"<html><body>{text}</body></html>").text


def _cdata_to_text(body: str) -> str:
    match = _CDATA.search(body)
    raw = match.group(1) if match else html.unescape(body)
    return html.escape(raw, quote=False)


def _link_text(match: re.Match[str]) -> str:
    inner = match.group(1)
    body = _LINK_BODY.search(inner)
    if body is not None:
        content = body.group(1)
        cdata = _CDATA.search(content)
        return html.escape(cdata.group(1), quote=False) if cdata else content
    target = _LINK_TARGET.search(inner)
    return html.escape(html.unescape(target.group(1)), quote=False) if target else ""
