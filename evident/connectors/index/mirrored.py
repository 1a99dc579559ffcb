"""SQLite documents mirrored into a Tantivy index, kept consistent across threads, processes and damage.

SQLite stores the documents and is the truth; every write transaction that changes documents bumps a
generation, and the Tantivy directory beside the file (`<index>.tantivy/`) records which generation it
reflects. A mirror that is missing, stale or damaged is rebuilt from SQLite (or, opened read-only, left
to the FTS5 fallback). Writers take `<index>.lock`, so a second writer waits for the first.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from evident.connectors.index.ranking import MirrorError, TantivyMirror, tantivy_errors
from evident.connectors.index.store import IndexFileError, WriteLock, _transaction, connect, database_error
from evident.connectors.index.visible_ranking import CANDIDATE_POOL
from evident.connectors.visibility import document_tokens

log = logging.getLogger(__name__)

_LENGTHS_CACHED = 256  # (generation, visibility tokens) pairs whose summed document lengths are kept


class MirroredStore:
    """One SQLite connection (guarded by a lock, shared by this object's threads) and its Tantivy mirror.

    Other objects (threads or processes) may open the same file at the same time: WAL mode lets readers
    proceed while one writer writes. Writers take turns through `<index>.lock`, waiting up to
    `lock_timeout_s`.
    """

    def __init__(self, path: str | Path, *, read_only: bool, lock_timeout_s: float, title_weight: float,
                 candidate_pool: int = CANDIDATE_POOL) -> None:
        self.path = Path(path)
        self.candidate_pool = candidate_pool
        self.read_only = read_only
        self._lock = threading.RLock()
        self._write_lock = WriteLock(self.path, lock_timeout_s)
        if read_only:
            self._conn = connect(self.path, read_only=True)
        else:
            # Opening writable may create the schema, migrate it or switch the journal to WAL: writes that
            # SQLite can refuse at once ("database is locked", no busy wait) while another writer is busy.
            with self._write_lock.hold():
                self._conn = connect(self.path, read_only=False)
        self._mirror = TantivyMirror(Path(f"{self.path}.tantivy"), title_weight=title_weight)
        self._mirror_generation: int | None = None  # the SQLite generation the mirror reflects
        self._changed = False  # whether the current write transaction changed any document
        # (generation, visibility tokens) -> (their documents' `text` tokens together, how many documents)
        self._lengths: dict[tuple[int, frozenset[str]], tuple[int, int]] = {}
        with self._lock, self._guard():
            self._sync_mirror()

    def _mirror_hits(
        self, terms: list[str], k: int, weights: dict[str, float], visible: Sequence[str] | None
    ) -> list[tuple[str, float]] | None:
        """Tantivy's top k (url, score) among the documents holding a `visible` token (all when None),
        or None when the mirror cannot be trusted right now."""
        generation = self._generation()
        if generation != self._mirror_generation:
            # Another process wrote: trust its mirror commit only once its marker says it is done.
            marker = self._mirror.marker()
            if marker is None or marker[0] != generation:
                return None
            try:
                self._mirror.refresh()
            except (MirrorError, OSError, ValueError) as exc:
                log.warning("%s: Tantivy index unusable, searching with FTS5 (%s)", self.path, exc)
                return None
            self._mirror_generation = generation
        for attempt in (1, 2):
            try:
                with tantivy_errors(self._mirror.directory):
                    lengths = None if visible is None else (lambda: self.visible_lengths(visible))
                    return self._mirror.top(terms, k, weights, visible=visible, lengths=lengths, texts=self._text,
                                            generation=self._mirror_generation, pool=self.candidate_pool)
            except MirrorError as exc:
                if self.read_only or attempt == 2:
                    log.warning("%s: Tantivy search failed, searching with FTS5 (%s)", self.path, exc)
                    return None
                log.warning("%s: Tantivy index damaged, rebuilding it from SQLite (%s)", self.path, exc)
                self._sync_mirror(force=True)
                if self._mirror_generation is None:
                    return None
        return None

    def visible_lengths(self, visible: Sequence[str]) -> tuple[int, int]:
        """(the `text` tokens of the documents holding a `visible` token together, how many they are), as
        SQLite holds them at the mirror's generation; cached per generation and token set, since a
        filtered search needs them every time and they change only with the documents.

        Raises `MirrorError` when a document's length is missing (the mirror rebuild fills them)."""
        tokens = sorted(set(visible))
        key = (self._mirror_generation if self._mirror_generation is not None else -1, frozenset(tokens))
        if key in self._lengths:
            return self._lengths[key]
        marks = ", ".join("?" for _ in tokens)
        # One statement, one snapshot: the generation read is the one the sums belong to.
        generation, documents, measured, total = self._conn.execute(
            "SELECT (SELECT value FROM evident_meta WHERE key = 'generation'), COUNT(*), COUNT(text_tokens),"
            " COALESCE(SUM(text_tokens), 0) FROM documents WHERE id IN"
            f" (SELECT document_id FROM document_visibility WHERE token IN ({marks}))",
            tokens,
        ).fetchone()
        if measured != documents:
            raise MirrorError(f"{self.path}: {documents - measured} documents have no recorded length")
        found = (int(total), int(documents))
        # Another process may have written since the mirror was refreshed: such a sum is used once, not kept.
        if str(generation or 0) == str(key[0]):
            if len(self._lengths) >= _LENGTHS_CACHED:
                self._lengths.clear()
            self._lengths[key] = found
        return found

    @property
    def mirror(self) -> TantivyMirror:
        """The Tantivy index beside the file."""
        return self._mirror

    @property
    def mirror_generation(self) -> int | None:
        """The SQLite generation the mirror is trusted to reflect; None while searches fall back to FTS5."""
        return self._mirror_generation

    @property
    def generation(self) -> int:
        """SQLite's generation now (see the module's docstring)."""
        with self._reading():
            return self._generation()

    def _text(self, url: str) -> tuple[str, str] | None:
        """(title, content) of the document at `url`, None when there is none."""
        row = self._conn.execute("SELECT title, content FROM documents WHERE url = ?", (url,)).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def _delete(self, where: str, parameters: Sequence[Any]) -> int:
        """Delete the matching documents from SQLite and the mirror; returns how many."""
        urls = [row[0] for row in self._conn.execute(f"DELETE FROM documents {where} RETURNING url", parameters)]
        if urls:
            self._mirror_op(self._mirror.delete, urls)
        return len(urls)

    def _generation(self) -> int:
        # Bumped by every write transaction that changes documents; the mirror records which one
        # it reflects. Index files written before the mirror existed have none: generation 0.
        row = self._conn.execute("SELECT value FROM evident_meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row and str(row[0]).isdigit() else 0

    def _sync_mirror(self, *, force: bool = False) -> None:
        """Trust the mirror if it reflects SQLite undamaged, else rebuild it (writable) or leave it to FTS5.

        `force`: rebuild even if it looks in sync (a search found it damaged).
        """
        if not force and self._mirror_in_sync():
            return
        self._mirror_generation = None
        if not force and self._mirror.marker() == self._state():
            # Up to date by its marker, yet its files fail their checksums or document count.
            log.warning("%s: Tantivy index damaged, rebuilding it from SQLite", self.path)
        if self.read_only:
            log.warning("%s: Tantivy index missing, stale or damaged; searching with FTS5 until opened "
                        "writable", self.path)  # fmt: skip
            return
        try:
            with self._write_lock.hold():
                # Another writer may have rebuilt it while this one waited for the lock.
                if not force and self._mirror_in_sync():
                    return
                # Under SQLite's write lock too, so the rows read are exactly the generation recorded.
                with _transaction(self._conn):
                    generation, documents = self._state()
                    rows = self._conn.execute("SELECT id, url, title, content, metadata FROM documents")
                    # Measured again on every rebuild: a new MIRROR_FORMAT may count differently, and an
                    # index migrated from before the lengths has none.
                    lengths: list[tuple[int, int]] = []

                    def mirrored() -> Iterator[tuple[str, str, str, list[str]]]:
                        for document_id, url, title, content, metadata in rows:
                            lengths.append((self._mirror.text_tokens(title, content), document_id))
                            yield url, title, content, document_tokens(json.loads(metadata).get("acl"))

                    self._mirror.rebuild(mirrored(), generation, documents)
                    self._conn.executemany("UPDATE documents SET text_tokens = ? WHERE id = ?", lengths)
            self._mirror_generation = generation
        except (MirrorError, OSError, ValueError) as exc:
            log.warning("%s: cannot rebuild the Tantivy index, searching with FTS5 (%s)", self.path, exc)

    def _state(self) -> tuple[int, int]:
        """(generation, documents) of SQLite now."""
        return self._generation(), int(self._conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def _mirror_in_sync(self) -> bool:
        generation, documents = self._state()
        if self._mirror.in_sync(generation, documents):
            self._mirror_generation = generation
            return True
        return False

    def _mirror_op(self, operation: Callable[..., None], *arguments: Any) -> None:
        self._changed = True
        if self._mirror_generation is None:
            return  # stale mirror: rebuilt once the SQLite write has committed
        try:
            operation(*arguments)
        except (MirrorError, OSError, ValueError) as exc:
            log.warning("%s: Tantivy update failed, will rebuild (%s)", self.path, exc)
            self._mirror.rollback()
            self._mirror_generation = None

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One SQLite write transaction, mirrored into Tantivy once SQLite has committed it."""
        with self._lock, self._guard(), self._write_lock.hold():
            self._changed = False
            try:
                with _transaction(self._conn):
                    yield
                    if self._changed:
                        generation = self._generation() + 1
                        self._conn.execute(
                            "INSERT OR REPLACE INTO evident_meta VALUES ('generation', ?)", (str(generation),)
                        )
                        documents = int(self._conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
            except BaseException:
                self._mirror.rollback()
                raise
            if not self._changed:
                return
            if self._mirror_generation is not None:
                try:
                    self._mirror.commit(generation, documents)
                    self._mirror_generation = generation
                    return
                except (MirrorError, OSError, ValueError) as exc:
                    log.warning("%s: Tantivy commit failed, rebuilding (%s)", self.path, exc)
            self._sync_mirror()

    def _require_writable(self) -> None:
        if self.read_only:
            raise IndexFileError(self.path, "opened read-only")

    def close(self) -> None:
        with self._lock:
            self._mirror.close()
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        with self._lock, self._guard():
            yield

    @contextmanager
    def _guard(self) -> Iterator[None]:
        # Corruption can surface on any query, not only at open; callers get the same one-line error.
        try:
            yield
        except sqlite3.ProgrammingError as exc:
            raise IndexFileError(self.path, f"index is closed ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise database_error(self.path, exc) from None
