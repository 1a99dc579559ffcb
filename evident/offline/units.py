"""A page as the offline extractor reads it: sentence units with their matching keys, and the section
heading (or page title) each unit sits under. Cached per page text. Pure Python, no framework imports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from evident.alignment.outline import is_section_heading
from evident.alignment.sentences import Kind, is_noise, split_units
from evident.offline.terms import content_keys, pairs, unit_terms

__all__ = ["CHROME_EDGE", "CHROME_PAGES", "COPY_MIN_WORDS", "Doc", "Unit", "analyse", "analyse_pages"]

_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class Unit:
    idx: int
    start: int
    end: int
    kind: Kind
    noise: bool
    label: bool
    terms: frozenset[str]
    pairs: frozenset[tuple[str, str]]
    key: tuple[str, ...]
    first_word: str
    new_paragraph: bool
    # The section heading this unit sits under (its index, -1 if none) and how many units below it.
    section: int = -1
    depth: int = 0

    @property
    def heading(self) -> bool:
        """A section heading (or a short title line standing alone): units below it count their depth from it."""
        return self.depth == 0


@dataclass(frozen=True)
class Doc:
    units: tuple[Unit, ...]
    terms: frozenset[str]


@lru_cache(maxsize=256)
def analyse(text: str) -> Doc:
    """Units of one document with their matching keys; cached because the same pages come back
    for query after query (a str caches its own hash, so the key costs nothing after the first)."""
    out: list[Unit] = []
    prev_end = 0
    spans = split_units(text)
    section, depth = -1, 0
    for idx, (s, e, kind) in enumerate(spans):
        heading = is_section_heading(text, s, e, kind)
        if heading:
            section, depth = idx, 0
        else:
            depth += 1
        gap = text[prev_end:s]
        prev_end = e
        noise = is_noise(text[s:e], kind)
        # A table's first row is its header: it introduces the rows below like a label does.
        header = (
            kind == "row"
            and not noise
            and (idx == 0 or spans[idx - 1][2] != "row")
            and idx + 1 < len(spans)
            and spans[idx + 1][2] == "row"
        )
        body = text[s:e]
        seq = unit_terms(body)
        keys = content_keys(body)
        out.append(
            Unit(
                idx=idx,
                start=s,
                end=e,
                kind=kind,
                noise=noise,
                # A heading is quoted with the text it introduces, never alone.
                label=heading or body.rstrip("*_ ").endswith(":") or header,
                terms=frozenset(seq),
                pairs=frozenset(pairs(seq)),
                key=keys,
                first_word=keys[0] if keys else "",
                new_paragraph=idx > 0 and len(_BREAK.findall(gap)) >= 2,
                section=section if section != idx else -1,
                depth=depth,
            )
        )
    return Doc(tuple(out), frozenset().union(*(u.terms for u in out)))


# A sentence that stands word for word at the edge (among the first or last CHROME_EDGE sentences of at
# least COPY_MIN_WORDS words) of this many retrieved pages is the site's chrome, a footer's "Internal use
# only. Do not share this page outside the company.", not what any one page says: near-duplicate pages
# come in pairs, while a template repeats its text on every page. A shared paragraph inside the pages of
# one topic ("Parental leave is available from your first day ...") is what they all say, and stays.
CHROME_PAGES = 3
CHROME_EDGE = 3
# A sentence this short ("Yes.", "Health care") recurs as real text on unrelated pages: it is neither
# chrome nor cited as a copy of another page's text.
COPY_MIN_WORDS = 4


def analyse_pages(texts: Sequence[str]) -> list[Doc]:
    """`analyse` of each retrieved page, the site's chrome among them marked as noise."""
    docs = [analyse(t) for t in texts]
    pages: dict[tuple[str, ...], set[int]] = {}
    inside: set[tuple[str, ...]] = set()
    for n, doc in enumerate(docs):
        live = [u for u in doc.units if not u.noise and len(u.key) >= COPY_MIN_WORDS]
        for k, u in enumerate(live):
            pages.setdefault(u.key, set()).add(n)
            if CHROME_EDGE <= k < len(live) - CHROME_EDGE:
                inside.add(u.key)
    chrome = {key for key, where in pages.items() if len(where) >= CHROME_PAGES and key not in inside}
    return [
        Doc(tuple(replace(u, noise=True) if u.key in chrome else u for u in doc.units), doc.terms)
        if chrome and any(u.key in chrome for u in doc.units) else doc
        for doc in docs
    ]
