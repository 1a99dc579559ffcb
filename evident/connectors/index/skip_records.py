"""The files of one corpus path a refresh skipped, remembered in the index so that each is warned about once.

Every `evident ask` over a corpus folder refreshes its index. A skipped file has no documents to tell the
refresh it is unchanged, so without a record it would be read again and warned about again on every
question. Here a skip is kept with the file's stat, the reason and the loader settings it was read with;
while all three stay the same, the file is not read again and its skip goes to the log, not to the user.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from evident.connectors.index.corpus import CorpusLimits, SkipHandler

log = logging.getLogger(__name__)

Stat = tuple[int, int]  # (mtime_ns, size); (-1, -1) for a file that cannot be stat'ed


def file_stat(file: Path) -> Stat:
    try:
        info = os.lstat(file) if file.is_symlink() else os.stat(file)
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)


def settings_key(limits: CorpusLimits) -> str:
    """What the loader's settings are, in short: a file skipped under other settings is looked at again."""
    return hashlib.sha256(limits.model_dump_json().encode("utf-8")).hexdigest()[:16]


class SkipRecords:
    """The skips of one corpus path (`root`, resolved) in one refresh, against those of the last one.

    `report(file, reason)` is the refresh's skip handler: a skip the last refresh made of the same file,
    unchanged, for the same reason under the same settings is logged; any other reaches `user_skip`.
    `skipped_before(origin, stat)`: whether the file may be left unread. `save()` replaces the records.
    """

    def __init__(self, conn: sqlite3.Connection, root: str, limits: CorpusLimits, user_skip: SkipHandler,
                 origin_of: Callable[[Path], str], counted: Callable[[], None]) -> None:
        self._conn = conn
        self._root = root
        self._settings = settings_key(limits)
        self._user_skip = user_skip
        self._origin_of = origin_of
        self._counted = counted
        self._before: dict[str, tuple[int, int, str, str]] = {
            origin: (mtime_ns, size, reason, settings)
            for origin, mtime_ns, size, reason, settings in conn.execute(
                "SELECT origin, mtime_ns, size, reason, settings FROM skipped_files WHERE root = ?", (root,))
        }  # fmt: skip
        self._now: dict[str, tuple[int, int, str, str]] = {}

    def report(self, file: Path, reason: str) -> None:
        self._counted()
        try:
            origin = self._origin_of(file)
        except ValueError:  # a path the walk reported from outside the corpus path (a link's target)
            origin = str(file)
        record = (*file_stat(file), reason, self._settings)
        self._now[origin] = record
        if self._before.get(origin) == record:
            log.info("skipped %s: %s (as at the last refresh)", file, reason)
        else:
            self._user_skip(file, reason)

    def settled(self, origin: str, stat: Stat) -> bool:
        """Whether the file at `origin`, with this stat, was skipped by the last refresh under the same
        settings."""
        before = self._before.get(origin)
        return before is not None and before[:2] == stat and before[3] == self._settings

    def skipped_before(self, origin: str, stat: Stat) -> bool:
        """`settled`; and if so the file counts as skipped again, unread and unreported."""
        if not self.settled(origin, stat):
            return False
        before = self._before[origin]
        self._counted()
        self._now[origin] = before
        log.info("skipped %s: %s (as at the last refresh)", origin, before[2])
        return True

    def save(self) -> None:
        self._conn.execute("DELETE FROM skipped_files WHERE root = ?", (self._root,))
        self._conn.executemany(
            "INSERT OR REPLACE INTO skipped_files (root, origin, mtime_ns, size, reason, settings)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(self._root, origin, *record) for origin, record in self._now.items()],
        )
