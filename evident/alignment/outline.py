"""The heading path of a place in a document's text: title › section › … › term.

Read from the text itself, so it holds for every source the same way: a Markdown heading (`#` to
`######`) opens a section at its level (the HTML loader writes `h1`–`h6` so, and a definition's term,
`dt`, as a heading one level below its section); in text without markers (plain text, a JSONL corpus),
a short line standing alone that does not end like a sentence is a heading, one level below the last
marked one. The path is context for a quote, never part of it: a quote stays the source text at its
spans. Pure Python, no framework imports.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from evident.alignment.models import SourceDocument
from evident.alignment.sentences import Kind, split_units, strip_marker

__all__ = [
    "HEADING_WORDS", "PATH_SEPARATOR", "SECTION_OUTLINE", "Heading", "document_path", "heading_path", "headings_above",
    "is_section_heading", "outline", "section_outline", "show_path",
]

# Past this many words a line is a paragraph, not a heading.
HEADING_WORDS = 16
PATH_SEPARATOR = " › "
# The metadata key of a section's `section_outline` (evident.connectors.index.sections).
SECTION_OUTLINE = "section_outline"
_MAX_LEVEL = 6


@dataclass(frozen=True)
class Heading:
    """One heading of a text: where its line starts and ends, its level (1 = top), its words, and whether
    it is a Markdown heading (`marked`) rather than a short line standing alone."""

    start: int
    end: int
    level: int
    text: str
    marked: bool = False


def is_section_heading(text: str, start: int, end: int, kind: Kind) -> bool:
    """A Markdown heading, or a short line standing alone that does not end like a sentence (the
    headings of pages read as plain text; a FAQ's question counts, its answer follows)."""
    if kind == "heading":
        return True
    if kind != "prose" or text[start:end].rstrip().endswith((".", "!", ":", ";", ",")):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    alone = not text[line_start:start].strip() and not text[end : len(text) if line_end < 0 else line_end].strip()
    return alone and len(text[start:end].split()) <= HEADING_WORDS


@lru_cache(maxsize=256)
def outline(text: str) -> tuple[Heading, ...]:
    """The headings of `text` in order (cached: the same pages come back query after query)."""
    out: list[Heading] = []
    marked = 0  # the level of the last Markdown heading; unmarked headings sit one below it
    for n, (start, end, kind) in enumerate(split_units(text)):
        if not is_section_heading(text, start, end, kind):
            continue
        raw = text[start:end]
        if kind != "heading" and " | " in raw:
            continue  # a lone table row, not a title
        words = " ".join(strip_marker(raw, kind).split())
        if not words:
            continue
        if kind == "heading":
            marked = min(_MAX_LEVEL, len(raw) - len(raw.lstrip("#")))
            level = marked
            last = out[-1] if out else None
            if last is not None and last.level == level and last.marked and not text[last.end : start].strip():
                # Two names over one text, as a definition list gives them ("-f <file>", "--file <file>").
                out[-1] = Heading(last.start, end, level, f"{last.text}, {words}", marked=True)
                continue
        else:
            # A plain text's first line is its title: the headings after it sit below it.
            level = min(_MAX_LEVEL, marked + 1) if marked else 1 if n == 0 else 2
        out.append(Heading(start, end, level, words, marked=kind == "heading"))
    return tuple(out)


def _folded(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(":")


def headings_above(text: str, offset: int) -> list[Heading]:
    """The headings `offset` sits under in `text`, outermost first (see `heading_path`)."""
    headings = outline(text)
    stack: list[Heading] = []
    for h in headings[: bisect_left([h.start for h in headings], offset + 1)]:
        while stack and stack[-1].level >= h.level:
            stack.pop()
        if h.end > offset:
            break  # the heading at `offset` itself
        stack.append(h)
    return stack


def heading_path(text: str, offset: int, title: str = "", above: Sequence[Sequence[Any]] = ()) -> list[str]:
    """The path of the place `offset` in `text`: `title` (when given), then each heading above it, outermost
    first (a quote that starts with a heading sits where that heading does: under its parents). The text's
    top heading is left out when it and the title say the same ("Connection Settings" under the title
    "PostgreSQL: Connection Settings", "git-config(1) Manual Page" under "git-config(1)").

    `above`: for a text that is a section of a larger document (`SECTION_OUTLINE` in its metadata), the
    `[level, words]` of the headings its start sits under in the whole document; the section's own
    headings nest under them by level (a short line standing alone, one level below the last)."""
    stack = [Heading(-1, -1, int(level), str(words), marked=True) for level, words in above]
    deepest = stack[-1].level if stack else 0
    seen_marked = False
    for h in headings_above(text, offset) if stack else []:
        seen_marked = seen_marked or h.marked
        level = h.level if seen_marked else min(_MAX_LEVEL, deepest + 1)
        while stack and stack[-1].level >= level:
            stack.pop()
        stack.append(Heading(h.start, h.end, level, h.text, h.marked))
    path = [h.text for h in (stack if above else headings_above(text, offset))]
    name = " ".join(title.split())
    if name and path and (_folded(path[0]) in _folded(name) or _folded(name) in _folded(path[0])):
        path = path[1:]
    return [name, *path] if name else path


def section_outline(text: str, start: int) -> list[list[Any]]:
    """What a section of `text` starting at `start` stores as `SECTION_OUTLINE`: `[level, words]` of
    the headings above its start."""
    return [[h.level, h.text] for h in headings_above(text, start)]


def document_path(doc: SourceDocument, spans: Sequence[tuple[int, int]]) -> list[str]:
    """The heading path of the text at `spans` (their first) in `doc`, under its title; [] without spans.
    A section of a larger document knows the headings above its start (`SECTION_OUTLINE`)."""
    if not spans:
        return []
    stored = doc.metadata.get(SECTION_OUTLINE)
    above: list[list[Any]] = stored if isinstance(stored, list) else []
    if not all(isinstance(a, list) and len(a) == 2 for a in above):
        above = []
    return heading_path(doc.content, spans[0][0], doc.title, above)


def show_path(path: Sequence[str]) -> str:
    """A heading path on one line, outermost first."""
    return PATH_SEPARATOR.join(path)
