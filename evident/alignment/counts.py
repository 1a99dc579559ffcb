"""How often each passage unit occurs in each document, and the overlaps that follow from it.

One Aho–Corasick automaton holds every unit (n-gram, or short segment) of every passage still
undecided, so each document's token string is scanned once in compiled code, whatever the number
of passages. Overlapping matches are reported, so a unit repeated in a document is counted every
time. Turning the counts into every passage's overlap with a document is vectorised (numpy): the
cost per document follows the number of units, not passages × documents in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ahocorasick_rs
import numpy as np

from evident.alignment.overlap import PassageUnits
from evident.alignment.tokenize import DocumentIndex


class UnitCounts:
    """Counts of the units of `passages` (keyed by any int) in the documents `index(i)` returns."""

    def __init__(self, passages: Mapping[int, PassageUnits], index: Callable[[int], DocumentIndex]) -> None:
        self._index = index
        ids: dict[str, int] = {}
        pat: list[int] = []
        row: list[int] = []
        mult: list[int] = []
        self._rows: dict[int, int] = {}
        self._unit_ids: list[tuple[list[str], np.ndarray[Any, Any]]] = []
        for r, (k, pu) in enumerate(passages.items()):
            self._rows[k] = r
            units = list(pu.units)
            for u in units:
                pat.append(ids.setdefault(u, len(ids)))
            row.extend([r] * len(units))
            mult.extend(pu.units.values())
            self._unit_ids.append((units, np.array(pat[len(pat) - len(units):], dtype=np.int64)))
        self._patterns = list(ids)
        self._automaton = ahocorasick_rs.AhoCorasick(self._patterns) if ids else None
        # One entry per (passage, unit): which unit, whose, and how often the passage has it.
        self._pat = np.array(pat, dtype=np.int64)
        self._row = np.array(row, dtype=np.int64)
        self._mult = np.array(mult, dtype=np.int64)
        self._totals = np.array([max(pu.total, 1) for pu in passages.values()], dtype=np.float64)
        self._overlaps: dict[int, np.ndarray[Any, Any]] = {}
        self._found: dict[int, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}

    def _sparse(self, doc: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """(unit ids, occurrences) of the units `doc` has, ids sorted: one scan per document."""
        found = self._found.get(doc)
        if found is None:
            if self._automaton is None:
                hit = np.zeros(0, dtype=np.int64)
            else:
                matches = self._automaton.find_matches_as_indexes(self._index(doc).tstring, overlapping=True)
                hit = np.fromiter((m[0] for m in matches), dtype=np.int64, count=len(matches))
            found = self._found[doc] = np.unique(hit, return_counts=True)
        return found

    def overlaps(self, doc: int) -> np.ndarray[Any, Any]:
        """overlap_n of every passage with `doc`, by the passages' order at construction."""
        found = self._overlaps.get(doc)
        if found is None:
            ids, n = self._sparse(doc)
            counts = np.zeros(len(self._patterns), dtype=np.int64)
            counts[ids] = n
            hits = np.minimum(counts[self._pat], self._mult)
            found = np.bincount(self._row, weights=hits, minlength=len(self._totals)) / self._totals
            self._overlaps[doc] = found
        return found

    def overlap(self, doc: int, key: int) -> float:
        return float(self.overlaps(doc)[self._rows[key]])

    def of_passage(self, doc: int, key: int) -> dict[str, int]:
        """How often `doc` has each unit of passage `key`."""
        units, ids = self._unit_ids[self._rows[key]]
        found, n = self._sparse(doc)
        if not len(found):
            return dict.fromkeys(units, 0)
        pos = np.minimum(np.searchsorted(found, ids), len(found) - 1)
        return dict(zip(units, np.where(found[pos] == ids, n[pos], 0).tolist(), strict=False))
