"""A small embedded index built from JSONL records, for the ranking tests."""

from __future__ import annotations

import json
from pathlib import Path

from evident.connectors.index.embedded import LocalIndex


def build(tmp_path: Path, records: list[dict[str, str]]) -> LocalIndex:
    """An index over `records` ({"url", "title", "text"}), written as one JSONL corpus under `tmp_path`."""
    corpus = tmp_path / "c" / "docs.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    index = LocalIndex(tmp_path / "i.sqlite3")
    index.add_corpus(corpus)
    return index


def urls(index: LocalIndex, query: str) -> list[str]:
    """The urls of the 8 best pages for `query`, best first."""
    return [doc.url for doc, _ in index.search(query, 8)]
