"""Per-document indexes, built once per content and shared across queries and threads."""

from __future__ import annotations

import threading
from collections import OrderedDict

from evident.alignment.tokenize import DocumentIndex


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

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._items)


DEFAULT_CACHE = IndexCache()
