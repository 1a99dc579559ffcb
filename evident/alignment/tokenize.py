"""Word tokens with exact character offsets.

A token is a maximal run of word characters (`str.isalnum()`, "_", or a combining mark, Unicode
category M*) in the NFKC, case-folded form of the text. Marks count as word characters so that
vowel signs and diacritics (Devanagari matras, Arabic harakat, Thai vowels) stay inside their
word instead of splitting it and being thrown away, as Python's `\\w` alone would. Each token
remembers where it starts and ends in the *original* text, so any token range maps back to an
exact span.

Token sequences are also kept as a "token string": the tokens joined by single spaces, with a
space at both ends. A token sequence occurs in a document exactly when its token string is a
substring of the document's token string, which turns matching into plain `str.find`.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from evident.alignment.normalize import OffsetMap, nfkc_casefold, normalize_with_map

if TYPE_CHECKING:  # numpy is imported where it is used, so that `import evident.alignment` stays cheap
    import numpy as np
    import numpy.typing as npt

    Offsets = npt.NDArray[np.int64]
    Mask = npt.NDArray[np.bool_]


def is_word_char(ch: str) -> bool:
    """The single definition of a word character, shared by every tokenizer entry point."""
    return ch.isalnum() or ch == "_" or unicodedata.category(ch)[0] == "M"


def token_string(tokens: list[str] | tuple[str, ...]) -> str:
    return " " + " ".join(tokens) + " " if tokens else " "


@dataclass(frozen=True)
class Tokens:
    """Tokens of one text: normalised strings plus start/end offsets into the original text."""

    text: str
    tokens: tuple[str, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.tokens)

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Original-text span of tokens `first` .. `last - 1`."""
        return self.starts[first], self.ends[last - 1]


# For ASCII text the regular expression agrees with `is_word_char` (no marks, no other letters)
# and, on a passage-sized text, costs a fraction of the vectorised path's fixed overhead.
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+")


def tokenize(text: str) -> Tokens:
    """Tokenize a (short) text; documents go through `DocumentIndex`, which is vectorised."""
    if text.isascii():
        spans = [m.span() for m in _ASCII_WORD.finditer(text)]
        starts, ends = zip(*spans, strict=True) if spans else ((), ())
        return Tokens(text, tuple(_ASCII_WORD.findall(text.lower())), starts, ends)
    norm, omap = normalize_with_map(text)
    firsts, lasts, tstring = _analyse(norm)
    return Tokens(
        text,
        tuple(tstring.split()),
        tuple(omap.start(int(x)) for x in firsts),
        tuple(omap.end(int(x)) for x in lasts),
    )


_BMP_WORD: list[re.Pattern[str]] = []
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def bmp_word_pattern() -> re.Pattern[str]:
    """`is_word_char` as a regular expression, for text without astral characters: `\\w` (what
    `str.isalnum()` accepts, and "_") plus the combining marks of the word-character table."""
    if not _BMP_WORD:
        # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
        import numpy as np

        codes = np.flatnonzero(_word_table())
        marks = codes[~np.fromiter((chr(c).isalnum() or c == 95 for c in codes.tolist()), dtype=bool,
                                   count=len(codes))]
        cut = np.flatnonzero(np.diff(marks) != 1)
        firsts, lasts = marks[np.r_[0, cut + 1]].tolist(), marks[np.r_[cut, len(marks) - 1]].tolist()
        runs = "".join(f"{chr(a)}-{chr(b)}" for a, b in zip(firsts, lasts, strict=True))
        _BMP_WORD.append(re.compile(rf"[\w{runs}]+"))
    return _BMP_WORD[0]


def words(text: str) -> list[str]:
    """Normalised tokens without offsets: the one plain word tokenizer (`evident.alignment.lexicon.words`).

    `tokenize` gives the same tokens with their offsets into the original text; use it only where a
    span or the text as written is needed.
    """
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    norm = nfkc_casefold(text)
    # A sentence is too short for the vectorised path's fixed cost; astral characters (rare) take it.
    if not _ASTRAL.search(norm):
        found: list[str] = bmp_word_pattern().findall(norm)
        return found
    return _analyse(norm)[2].split()


@dataclass
class DocumentIndex:
    """Everything alignment needs about one document, built once per content.

    The token string is built with vectorised operations (no per-token Python work), because a
    query may bring twenty documents of 100 KB and the alignment budget is a few milliseconds.
    Offsets are computed the same way and mapped back to the original text only on demand.
    """

    text: str
    content_hash: str
    norm: str = field(init=False, repr=False)
    omap: OffsetMap = field(init=False, repr=False)
    tstring: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.norm, self.omap = normalize_with_map(self.text)
        starts, ends, self.tstring = _analyse(self.norm)
        self._starts = starts
        self._ends = ends
        if len(starts):
            # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
            import numpy as np

            lens = ends - starts
            # Position of each token in the token string: 1 + sum of (len + 1) of those before.
            tpos = np.empty(len(starts), dtype=np.int64)
            tpos[0] = 1
            np.cumsum(lens[:-1] + 1, out=tpos[1:])
            tpos[1:] += 1
            self._tpos: Offsets | None = tpos
        else:
            self._tpos = None

    @property
    def n_tokens(self) -> int:
        return len(self._starts)

    def token_at(self, tpos: int) -> int:
        """Index of the token that starts at position `tpos` of the token string."""
        # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
        import numpy as np

        assert self._tpos is not None, "a position in the token string of a document with no tokens"
        return int(np.searchsorted(self._tpos, tpos))

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Original-text span of tokens `first` .. `last - 1`."""
        return self.omap.start(int(self._starts[first])), self.omap.end(int(self._ends[last - 1]))

    @cached_property
    def tokens(self) -> list[str]:
        return self.tstring.split()

    def tokens_in(self, first: int, last: int) -> list[str]:
        """Tokens `first` .. `last - 1` (clamped), read from the token string: no full token list."""
        n = self.n_tokens
        first, last = max(0, first), min(last, n)
        if first >= last or self._tpos is None:
            return []
        end = int(self._tpos[last]) - 1 if last < n else len(self.tstring) - 1
        return self.tstring[int(self._tpos[first]) : end].split()


_WORD_TABLE: list[Mask] = []


def _word_table() -> Mask:
    """Boolean table: is code point i (BMP) a word character? Built once, about 25 ms."""
    if not _WORD_TABLE:
        # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
        import numpy as np

        category = unicodedata.category
        alnum = np.fromiter((chr(i).isalnum() for i in range(65536)), dtype=bool, count=65536)
        mark = np.fromiter((category(chr(i))[0] == "M" for i in range(65536)), dtype=bool, count=65536)
        alnum[95] = True  # "_"
        _WORD_TABLE.append(alnum | mark)
    return _WORD_TABLE[0]


def _word_mask(norm: str) -> tuple[npt.NDArray[np.uint32], Mask]:
    # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
    import numpy as np

    cps = np.frombuffer(norm.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    mask = _word_table().take(cps, mode="clip")  # astral code points read entry 65535 ...
    astral = np.flatnonzero(cps > 65535)  # ... and are looked up one by one
    for i in astral:  # rare: emoji, historic scripts, some CJK extensions
        mask[i] = is_word_char(chr(int(cps[i])))
    return cps, mask


def _analyse(norm: str) -> tuple[Offsets, Offsets, str]:
    """Token start/end offsets (in `norm`) and the token string, all in vectorised steps."""
    # start-up time: numpy (~50 ms) loads at the first vectorised step: `import evident.alignment` stays cheap
    import numpy as np

    if not norm:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, " "
    cps, mask = _word_mask(norm)
    padded = np.zeros(len(mask) + 2, dtype=bool)
    padded[1:-1] = mask
    # Where the mask changes; token boundaries alternate: start, end, start, end, ...
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = edges[0::2], edges[1::2]
    if not len(starts):
        return starts, ends, " "
    # Keep every word character and, of each run of other characters, only the first one that
    # follows a word, turned into a space: the tokens joined by single spaces.
    keep = padded[1:-1] | padded[:-2]
    spaced = cps * mask + np.uint32(32) * ~mask
    text = np.compress(keep, spaced).tobytes().decode("utf-32-le", "surrogatepass")
    return starts, ends, " " + text if text[-1] == " " else " " + text + " "


# Per-document indexes, built once per content and shared across queries and threads.
class IndexCache:
    """LRU cache of `DocumentIndex` keyed by content hash, bounded by total characters.

    Keyed by content, not URL: the same page fetched twice costs nothing, and an edited page
    can never be verified against its stale text.
    """

    def __init__(self, max_chars: int = 64_000_000) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[str, DocumentIndex] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str, key: str | None = None) -> DocumentIndex:
        # Without a stored content hash, Python's string hash (computed once per string object)
        # is key enough: a hit is only ever served for identical text, checked below.
        key = key or f"py:{len(text)}:{hash(text)}"
        with self._lock:
            found = self._items.get(key)
            # A key handed in by the caller (a stored content_hash) may be stale: an index is
            # only ever used for the exact text it was built from (same object: no comparison).
            if found is not None and (found.text is text or found.text == text):
                self._items.move_to_end(key)
                self.hits += 1
                return found
        index = DocumentIndex(text, key)  # built outside the lock: other threads keep going
        with self._lock:
            self.misses += 1
            current = self._items.get(key)
            if current is None or current.text != text:
                if current is not None:
                    self._chars -= len(current.text)
                self._items[key] = index
                self._items.move_to_end(key)
                self._chars += len(text)
                while self._chars > self.max_chars and len(self._items) > 1:
                    _, old = self._items.popitem(last=False)
                    self._chars -= len(old.text)
            return self._items[key]

    def __len__(self) -> int:
        return len(self._items)


DEFAULT_CACHE = IndexCache()
