"""The windows of a document that are embedded: runs of whole sentences, each an exact span of its text.

One vector per page would blur a long page into its average topic, and one per sentence would make
indexing slow and short sentences ("Yes.") match everything. A window is a run of consecutive
sentences (or lines) of at most WINDOW_WORDS words, cut only where a sentence or line ends, so each
window is `content[start:end]` and a passage's span can be looked up in the windows that hold it.
The page title goes in front of every window's embedded text: a window of "The default grace period
is 24 hours." means more under "Authentication" than alone.

Pure functions, no framework imports.
"""

from __future__ import annotations

import re

from evident.alignment.spans import trim_span

# About 90 word pieces with the title: well under all-MiniLM-L6-v2's 256, and short enough that one
# sentence about the question is not drowned by its neighbours (docs/embeddings.md).
WINDOW_WORDS = 60
# A window's text beyond this many characters is cut before embedding (the model would cut it anyway).
MAX_WINDOW_CHARS = 1500
# Names how windows are cut and what is embedded for them: stored with the vectors, so that vectors of
# another cut are made again, as those of another model are. Change it with any of the above.
WINDOWS_FORMAT = f"windows-1:{WINDOW_WORDS}w:{MAX_WINDOW_CHARS}c:title"
_PIECE_END = re.compile(r"(?<=[.!?。！？:;])\s+|\n\s*")
_WORD = re.compile(r"\S+")


def _pieces(content: str) -> list[tuple[int, int]]:
    """Sentences and lines of `content` as (start, end), whitespace-trimmed, empty ones left out."""
    out: list[tuple[int, int]] = []
    start = 0
    for cut in _PIECE_END.finditer(content):
        if cut.start() > start:
            out.append((start, cut.start()))
        start = cut.end()
    if start < len(content):
        out.append((start, len(content)))
    # A cut ends at the line break: the spaces or "\r" before it, and a page's indentation, stay out.
    return [trimmed for s, e in out if (trimmed := trim_span(content, s, e))[0] < trimmed[1]]


def passage_windows(content: str, *, words: int = WINDOW_WORDS) -> list[tuple[int, int]]:
    """Consecutive, non-overlapping (start, end) spans of `content`, in order, each a run of whole
    sentences or lines of at most `words` words (a longer sentence is a window of its own). Every
    non-blank character of `content` lies in exactly one window; a blank text has none."""
    windows: list[tuple[int, int]] = []
    first = last = -1
    count = 0
    for start, end in _pieces(content):
        n = len(_WORD.findall(content, start, end))
        if first >= 0 and count + n > words:
            windows.append((first, last))
            first = -1
        if first < 0:
            first, count = start, 0
        last = end
        count += n
    if first >= 0:
        windows.append((first, last))
    return windows


def window_text(title: str, content: str, start: int, end: int) -> str:
    """What is embedded for the window `content[start:end]` of a page titled `title`."""
    body = " ".join(content[start:end].split())[:MAX_WINDOW_CHARS]
    head = " ".join(title.split())
    return f"{head}\n{body}" if head else body


def document_windows(title: str, content: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The windows of a page and the texts embedded for them; a page with no text is one window of
    its title (so every page has a vector)."""
    spans = passage_windows(content)
    if not spans:
        return [(0, 0)], [" ".join(title.split()) or "(untitled)"]
    return spans, [window_text(title, content, s, e) for s, e in spans]
