"""Every drop reason in evident/alignment/drops.py is used where its drop happens and listed in
docs/alignment.md ("Where a passage gets dropped, and why")."""

from __future__ import annotations

import re
from pathlib import Path

from evident.alignment import drops

ROOT = Path(__file__).resolve().parents[2]
REASONS = sorted(name for name in vars(drops) if name.isupper())


def test_every_reason_is_referenced_at_its_drop() -> None:
    assert len(REASONS) >= 14
    sources = {
        path: path.read_text(encoding="utf-8")
        for path in (ROOT / "evident").rglob("*.py")
        if path.name != "drops.py" or path.parent.name != "alignment"
    }
    unreferenced = [
        name for name in REASONS
        if not any(re.search(rf"\bdrops\.{name}\b", text) for text in sources.values())
    ]
    assert unreferenced == []


def test_every_reason_is_in_the_docs_table() -> None:
    doc = (ROOT / "docs" / "alignment.md").read_text(encoding="utf-8")
    section = doc.split("## Where a passage gets dropped, and why", 1)[1].split("\n## ", 1)[0]
    in_table = set(re.findall(r"`([A-Z_]+)`", section))
    assert in_table == set(REASONS)

