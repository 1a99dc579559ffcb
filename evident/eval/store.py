"""The resumable cache under `--out/cache`: append-only JSONL files keyed by record key.

A record's key is its query id plus a hash of everything its result depends on (the query, the
retrieved documents, the method's settings), so a second run reuses it and a changed setting
recomputes it. Each record is flushed as soon as it exists: an interrupted run loses at most the
query in progress, and a torn last line is ignored.
"""

from __future__ import annotations

import hashlib
import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from evident.alignment.models import SourceDocument
from evident.eval.records import MethodRecord, RetrievalRecord

# What a report is made of, not what answers are made of: editing these keeps the cache valid.
_NOT_ENGINE = ("eval/", "commands/", "web/", "cli.py")


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """A hash of the code that retrieves and answers (the `evident` package minus reporting and CLI), so a
    record made by other code (an upgrade, an edited extractor) is made again rather than reused."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(_NOT_ENGINE) and rel not in ("eval/methods.py", "eval/citations.py", "eval/retrieval.py"):
            continue
        digest.update(rel.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def settings_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by an interrupted run
        if isinstance(obj, dict):
            out.append(obj)
    return out


class Store:
    """Records of earlier runs in `folder` (None: this run only, nothing written)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self.documents: dict[str, SourceDocument] = {}
        self.retrievals: dict[str, RetrievalRecord] = {}
        self.records: dict[str, dict[str, MethodRecord]] = {}
        if folder is None:
            return
        folder.mkdir(parents=True, exist_ok=True)
        for obj in _read(folder / "documents.jsonl"):
            doc = SourceDocument.model_validate(obj)
            self.documents[doc.content_hash] = doc
        for obj in _read(folder / "retrieval.jsonl"):
            rec = RetrievalRecord.model_validate(obj)
            self.retrievals[rec.key] = rec
        for path in sorted(folder.glob("method-*.jsonl")):
            for obj in _read(path):
                mrec = MethodRecord.model_validate(obj)
                self.records.setdefault(mrec.method, {})[mrec.key] = mrec

    def _append(self, name: str, obj: Any) -> None:
        if self.folder is None:
            return
        with (self.folder / name).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def add_retrieval(self, rec: RetrievalRecord, docs: list[SourceDocument]) -> None:
        with self._lock:
            for d in docs:
                if d.content_hash not in self.documents:
                    self.documents[d.content_hash] = d
                    self._append("documents.jsonl", d.model_dump(mode="json"))
            self.retrievals[rec.key] = rec
            self._append("retrieval.jsonl", rec.model_dump(mode="json"))

    def docs_of(self, rec: RetrievalRecord) -> list[SourceDocument]:
        return [self.documents[h] for h in rec.hashes if h in self.documents]

    def record(self, method: str, key: str) -> MethodRecord | None:
        return self.records.get(method, {}).get(key)

    def add_record(self, rec: MethodRecord) -> None:
        with self._lock:
            self.records.setdefault(rec.method, {})[rec.key] = rec
            # A skipped method runs once a model is configured; a failed call (or an EvidenT answer that
            # fell back offline because its model failed) is retried next time.
            if rec.outcome not in ("skipped", "error") and not rec.degraded:
                self._append(f"method-{rec.method}.jsonl", rec.model_dump(mode="json"))
