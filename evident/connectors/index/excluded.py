"""What a corpus folder holds that is not indexed: a source's `exclude` globs, and a page's other formats.

Globs are matched against a path relative to the corpus folder, written with '/': `*` and `?` stay within
one name, `**` crosses folders, `[...]` is a set of characters. A glob without '/' matches any one name of
the path (`_sources` is every folder or file of that name, at any depth), as .gitignore reads it.

A documentation build often holds each page twice: `guide/x.html` and its source `guide/x.md` (or
`x.txt`, or Sphinx's `_sources/guide/x.rst.txt`). `same_page_key` gives the files of one page one key;
the index keeps the rendered format (`FORMAT_PREFERENCE`) when the texts agree (`same_text`), and
reports the other as a copy.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from evident.alignment.tokenize import words

# Which format of one page is indexed, first the most preferred: the rendered page is what a reader opens
# and what its links point to; the source's markup (reST roles, Markdown syntax) is noise in a quote.
FORMAT_PREFERENCE = (".html", ".htm", ".pdf", ".md", ".markdown", ".txt")
# Suffixes a page's source carries before its format's (Sphinx's `x.rst.txt`, `x.md.txt`).
_SOURCE_SUFFIXES = frozenset({".rst", ".md", ".markdown", ".txt"})
_SOURCES_FOLDER = "_sources"
# The share of the copy's word 4-grams the kept page must hold: markup adds words ("note", "code-block"),
# the rendered page adds a header and a footer, so equality would miss every real pair.
SAME_TEXT = 0.8
_NGRAM = 4


@functools.lru_cache(maxsize=256)
def _compiled(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : end]
            negated = body.startswith("!")
            body = re.escape(body[1:] if negated else body).replace("\\-", "-")
            out.append(f"[{'^' if negated else ''}{body}]")
            i = end + 1
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


class Exclusions:
    """A source's `exclude` globs; `matches(parts)` says whether the path of these names (relative to the
    corpus folder) is excluded: the file or folder itself, not what it holds (the walk prunes folders)."""

    def __init__(self, globs: Iterable[str]) -> None:
        self.globs = tuple(glob.strip().strip("/") for glob in globs if glob.strip().strip("/"))

    def matches(self, parts: Sequence[str]) -> bool:
        path = "/".join(parts)
        for glob in self.globs:
            pattern = _compiled(glob)
            if "/" in glob:
                if pattern.fullmatch(path):
                    return True
            elif any(pattern.fullmatch(name) for name in parts):
                return True
        return False


def same_page_key(relative: str) -> tuple[str, str] | None:
    """(the page, the format) of a corpus file's relative path, when its format is one a page is written in
    (`FORMAT_PREFERENCE`): `guide/x.html` and `guide/x.rst.txt` are both the page `guide/x`."""
    folder, _, name = relative.rpartition("/")
    # Sphinx keeps each page's source in a `_sources/` tree that mirrors the pages' own.
    folder = "/".join(part for part in folder.split("/") if part != _SOURCES_FOLDER)
    stem, dot, suffix = name.rpartition(".")
    suffix = f".{suffix.lower()}"
    if not dot or not stem or suffix not in FORMAT_PREFERENCE:
        return None
    inner, dot, source = stem.rpartition(".")
    if dot and inner and f".{source.lower()}" in _SOURCE_SUFFIXES:
        stem = inner
    return f"{folder}/{stem}" if folder else stem, suffix


def page_copies(files: Iterable[tuple[str, Path]], text_of: Callable[[Path], str],
                settled: Callable[[Path], bool] = lambda _: False) -> dict[Path, str]:
    """The files (given with their paths relative to the corpus folder) that hold a page in a less preferred
    format than another file of the same page whose text they repeat, each with that file's relative path.
    `text_of` reads a file's text ("" when it is skipped); a page all of whose files are `settled` (unchanged
    since a decision was made about them) is not read."""
    pages: dict[str, list[tuple[int, str, Path]]] = {}
    for relative, file in files:
        key = same_page_key(relative)
        if key is not None:
            pages.setdefault(key[0], []).append((FORMAT_PREFERENCE.index(key[1]), relative, file))
    copies: dict[Path, str] = {}
    for members in pages.values():
        if len(members) < 2 or all(settled(file) for _, _, file in members):
            continue
        readable = [(relative, file, text) for _, relative, file in sorted(members) if (text := text_of(file))]
        if not readable:
            continue
        kept, _, kept_text = readable[0]
        copies.update({file: kept for _, file, text in readable[1:] if same_text(kept_text, text)})
    return copies


def same_text(kept: str, copy: str) -> bool:
    """Whether `copy` says what `kept` says: at least SAME_TEXT of its word 4-grams occur in `kept`."""
    copy_grams = _grams(copy)
    if not copy_grams:
        return False
    kept_grams = set(_grams(kept))
    return sum(gram in kept_grams for gram in copy_grams) >= SAME_TEXT * len(copy_grams)


def _grams(text: str) -> list[tuple[str, ...]]:
    tokens = words(text)
    grams = [tuple(tokens[i : i + _NGRAM]) for i in range(len(tokens) - _NGRAM + 1)]
    return grams or ([tuple(tokens)] if tokens else [])
