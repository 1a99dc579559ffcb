"""Readable, deterministic text from an HTML page.

Citations resolve to character spans of this text, so it has to be faithful (no dropped table rows or
list items, which generic boilerplate removers like trafilatura sometimes discard) and stable (the same
bytes always give the same text). We therefore walk the DOM ourselves with selectolax's lexbor parser:
block elements become paragraphs separated by blank lines, list items and table rows become lines, and
only markup that is never content (scripts, styles, navigation, hidden elements) is dropped.

The page's structure stays readable in the text, the way Markdown writes it, so that every reader of
the text (`evident.alignment.outline`, the offline engine, a model's prompt, the section splitter)
knows what each sentence is about: a heading `h1`–`h6` is one line `#`–`######`, a definition's
term (`dt`, a reference entry's name) is a heading one level below the section it is in, so that its
description (`dd`) sits under it, and preformatted text (`pre`) is fenced with ``` lines, so that its
lines are code, never headings or list items.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser, LexborNode

# Never reader-visible content, or navigation that would pollute every page with the same words.
_SKIP = frozenset(
    {
        "script", "style", "noscript", "template", "nav", "head", "svg", "iframe", "object",
        "embed", "canvas", "button", "select", "datalist", "input", "textarea", "img", "video",
        "audio", "map", "dialog",
    }
)  # fmt: skip
_PARAGRAPH = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "center", "details", "div", "dl",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hgroup", "hr", "legend", "main", "p", "pre", "section", "summary",
    }
)  # fmt: skip
_LINE = frozenset({"li", "dt", "dd", "tr", "caption"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_MAX_LEVEL = 6
_FENCE = "```"
_PERMALINK_CLASSES = frozenset({"headerlink", "anchor", "anchorjs-link", "heading-anchor", "permalink"})
_PERMALINK_GLYPHS = frozenset({"", "¶", "#", "§", "🔗"})
_LISTS = frozenset({"ul", "ol", "menu"})
_CELLS = frozenset({"td", "th"})
_WS = re.compile(r"\s+")
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)


@dataclass(frozen=True)
class HtmlPage:
    text: str
    title: str = ""
    canonical_url: str = ""
    source_type: str = ""
    meta: dict[str, str] = field(default_factory=dict)


def declared_charset(data: bytes) -> str | None:
    """The charset a page declares in a `<meta>` tag near its top, if any."""
    match = _CHARSET.search(data[:4096])
    return match.group(1).decode("ascii") if match else None


def parse_html(html: str) -> HtmlPage:
    tree = LexborHTMLParser(html)
    meta = _evident_meta(tree)
    return HtmlPage(
        text=_readable_text(tree),
        title=_title(tree),
        canonical_url=_canonical(tree),
        source_type=meta.pop("source_type", ""),
        meta=meta,
    )


def _title(tree: LexborHTMLParser) -> str:
    for selector in ("title", "h1"):
        node = tree.css_first(selector)
        if node is not None:
            title = _WS.sub(" ", node.text()).strip()
            if title:
                return title
    return ""


def _canonical(tree: LexborHTMLParser) -> str:
    base = ""
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        base = (base_node.attributes.get("href") or "").strip()
    for link in tree.css("link[href]"):
        rel = (link.attributes.get("rel") or "").lower().split()
        if "canonical" not in rel:
            continue
        href = (link.attributes.get("href") or "").strip()
        if _is_absolute(href):
            return href
        # A relative canonical only identifies the page together with an absolute base; alone it
        # could collide across sites, so the caller falls back to the file's own URI.
        if href and _is_absolute(base):
            return urljoin(base, href)
    return ""


def _is_absolute(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme and (parts.netloc or parts.scheme in {"file", "urn", "mailto"}))


def _evident_meta(tree: LexborHTMLParser) -> dict[str, str]:
    values: dict[str, str] = {}
    for meta in tree.css("meta[name]"):
        name = (meta.attributes.get("name") or "").strip().lower()
        if name.startswith("evident:") and len(name) > len("evident:"):
            values.setdefault(name[len("evident:") :], (meta.attributes.get("content") or "").strip())
    return values


def _content_roots(tree: LexborHTMLParser) -> list[LexborNode]:
    for selector in ("main, [role=main]", "article"):
        found = _outermost(tree.css(selector))
        if found:
            return found
    body = tree.body
    return [body] if body is not None else ([tree.root] if tree.root is not None else [])


def _outermost(nodes: list[LexborNode]) -> list[LexborNode]:
    """Drop nodes nested inside another selected node, so no text is emitted twice."""
    ids = {node.mem_id for node in nodes}
    result = []
    for node in nodes:
        parent = node.parent
        while parent is not None and parent.mem_id not in ids:
            parent = parent.parent
        if parent is None:
            result.append(node)
    return result


def _readable_text(tree: LexborHTMLParser) -> str:
    writer = _Writer()
    for root in _content_roots(tree):
        writer.block(2)
        _walk(root, writer)
    return writer.result()


def _hidden(node: LexborNode) -> bool:
    attrs = node.attributes
    return "hidden" in attrs or (attrs.get("aria-hidden") or "").strip().lower() == "true"


def _permalink(node: LexborNode) -> bool:
    """A heading's permalink anchor (MkDocs and Sphinx `a.headerlink`, a ¶ or # glyph): not the page's words."""
    if node.tag != "a":
        return False
    classes = set((node.attributes.get("class") or "").split())
    if "headerlink" in classes:
        return True
    if not (node.attributes.get("href") or "").startswith("#"):
        return False
    return bool(classes & _PERMALINK_CLASSES) or node.text().strip() in _PERMALINK_GLYPHS


def _walk(root: LexborNode, writer: _Writer, *, structure: bool = True) -> None:
    """Writes the text under `root`; with `structure`, its headings as `#` lines and its preformatted
    blocks fenced with ``` (a code line starting with "#" is then never read as a heading)."""
    # Iterative on purpose: machine-generated pages nest deeper than Python's recursion limit.
    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    pre_depth = 0
    list_depth = 0
    level = 0  # the level of the last heading written (a term's section)
    terms: list[int] = []  # per open `dl`: the level of the section it is in
    while stack:
        node, leaving = stack.pop()
        tag = node.tag or ""
        if leaving:
            if tag == "pre":
                pre_depth -= 1
                if structure and pre_depth == 0:
                    writer.own_line(_FENCE)
            if tag in _LISTS:
                list_depth -= 1
            if tag == "dl":
                level = terms.pop()
            writer.block(_break_after(tag, list_depth))
            continue
        if node.is_text_node:
            writer.text(node.text(deep=False), preformatted=pre_depth > 0)
            continue
        if not node.is_element_node or tag in _SKIP or _hidden(node) or _permalink(node):
            continue
        if tag == "br":
            writer.line_break()
            continue
        # Inside a list or preformatted text a heading stays a line of it (a list item's own title).
        if structure and (tag in _HEADINGS or tag == "dt") and pre_depth == 0 and list_depth == 0:
            words = _inline_text(node)
            if words:
                level = _HEADINGS[tag] if tag in _HEADINGS else min(_MAX_LEVEL, (terms[-1] if terms else level) + 1)
                writer.block(2)
                writer.raw("#" * level + " " + words)
                writer.block(2)
            continue
        if tag == "dl":
            terms.append(level)
        if tag == "table":
            writer.block(2)
            for line in _table_lines(node):
                writer.block(1)
                writer.raw(line)
            writer.block(2)
            continue
        writer.block(_break_after(tag, list_depth))
        if tag == "pre":
            if not node.text().strip():
                continue
            if structure and pre_depth == 0:
                writer.raw(_FENCE)
                writer.block(1)
            pre_depth += 1
        if tag in _LISTS:
            list_depth += 1
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(list(node.iter(include_text=True))))


def _break_after(tag: str, list_depth: int) -> int:
    if tag in _PARAGRAPH:
        # Inside a list, paragraphs (loose Markdown lists wrap items in <p>) stay one item per line.
        return 1 if list_depth > 0 else 2
    if tag in _LISTS:
        # A list nested in an item continues that item's lines instead of opening a paragraph.
        return 1 if list_depth > 0 else 2
    if tag in _LINE:
        return 1
    return 0


def _table_lines(table: LexborNode) -> list[str]:
    lines: list[str] = []
    for child in _children(table):
        if child.tag == "caption":
            caption = _inline_text(child)
            if caption:
                lines.append(caption)
        elif child.tag in {"thead", "tbody", "tfoot"}:
            lines.extend(line for row in _children(child) if row.tag == "tr" if (line := _row_line(row)))
        elif child.tag == "tr" and (line := _row_line(child)):
            lines.append(line)
    return lines


def _row_line(row: LexborNode) -> str:
    cells = [_inline_text(cell) for cell in _children(row) if cell.tag in _CELLS and not _hidden(cell)]
    return " | ".join(cells) if any(cells) else ""


def _inline_text(node: LexborNode) -> str:
    """A cell or caption as one line: its own structure (lists, nested tables) flattened to spaces."""
    writer = _Writer()
    _walk(node, writer, structure=False)
    return _WS.sub(" ", writer.result()).strip()


def _children(node: LexborNode) -> Iterable[LexborNode]:
    return (child for child in node.iter(include_text=False) if child.is_element_node)


class _Writer:
    """Accumulates text with collapsed whitespace and the strongest pending break between blocks."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._pending_break = 0  # 0: none, 1: newline, 2: blank line
        self._pending_space = False
        self._at_line_start = True

    def block(self, strength: int) -> None:
        if strength:
            self._pending_break = max(self._pending_break, strength)
            self._pending_space = False

    def line_break(self) -> None:
        # Consecutive <br> tags accumulate into a blank line, like a browser renders them.
        self._pending_break = min(2, self._pending_break + 1)
        self._pending_space = False

    def text(self, value: str, *, preformatted: bool = False) -> None:
        if preformatted:
            if value:
                self._emit(value, preformatted=True)
            return
        collapsed = _WS.sub(" ", value)
        if not collapsed:
            return
        if collapsed.startswith(" "):
            self._pending_space = True
        stripped = collapsed.strip(" ")
        if stripped:
            self._emit(stripped)
            self._pending_space = collapsed.endswith(" ")

    def raw(self, value: str) -> None:
        self._emit(value)

    def own_line(self, value: str) -> None:
        """`value` at the start of a line (after preformatted text that ended with its newline, no blank line)."""
        if not self._at_line_start:
            self.block(1)
        self._emit(value)

    def _emit(self, value: str, *, preformatted: bool = False) -> None:
        if self._pending_break and self._parts:
            self._parts.append("\n" * self._pending_break)
            self._at_line_start = True
        self._pending_break = 0
        if self._pending_space and not self._at_line_start:
            self._parts.append(" ")
        self._pending_space = False
        self._parts.append(value)
        self._at_line_start = preformatted and value.endswith("\n")

    def result(self) -> str:
        lines = "".join(self._parts).split("\n")
        # Trailing spaces are invisible and would only make spans end on whitespace.
        return "\n".join(line.rstrip() for line in lines).strip("\n")
