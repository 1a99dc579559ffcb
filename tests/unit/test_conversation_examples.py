"""examples/followups.jsonl: follow-up questions with their history, consistent with the example corpus.

Their gold evidence must be in the gold page's text as the loader produces it, or the follow-up
benchmark (benchmarks/followups.py) would measure nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from evident.connectors.index.loaders import load_corpus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_every_follow_up_has_a_history_a_gold_page_and_verbatim_evidence() -> None:
    pages = {d.url: _collapse(d.content) for d in load_corpus(EXAMPLES / "corpus")}
    rows = [json.loads(x) for x in (EXAMPLES / "followups.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    assert len(rows) >= 30
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        history = row["history"]
        assert history and len(history) % 2 == 0, row["id"]
        assert [t["role"] for t in history] == ["user", "assistant"] * (len(history) // 2), row["id"]
        assert all(isinstance(t["content"], str) and t["content"].strip() for t in history), row["id"]
        assert row["query"].strip() and row["answerable"] is True
        assert row["gold_urls"] and all(u in pages for u in row["gold_urls"]), row["id"]
        for evidence in row["gold_evidence"]:
            assert any(_collapse(evidence) in pages[u] for u in row["gold_urls"]), (row["id"], evidence)
