"""Which files of a corpus folder may be opened, and reading one without ever blocking or overrunning.

A corpus folder is untrusted input (a shared drive, a checked-out wiki): a link may lead outside it,
a named pipe would block the reader forever, a device never ends, a file may grow after it was checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evident.connectors.index.corpus import CorpusLimits, SkipHandler, too_large

LINK_OUTSIDE = "symbolic link to a place outside the corpus folder (set follow_symlinks to index it)"


def within(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # RuntimeError: a link loop
        return False


def unsafe(file: Path, root: Path, limits: CorpusLimits) -> str | None:
    """Why `file` (found in the folder `root`) must not be opened, or None when it may be."""
    try:
        if stat.S_ISLNK(os.lstat(file).st_mode) and not limits.follow_symlinks and not within(file, root):
            return LINK_OUTSIDE
        info = os.stat(file)
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc.__class__.__name__})"
    return not_readable(info, limits)


def not_readable(info: os.stat_result, limits: CorpusLimits) -> str | None:
    """Why a file with this `stat` must not be read: its type or its size."""
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        kind = ("a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")  # fmt: skip
        return f"{kind}, not a regular file (never opened)"
    if info.st_size > limits.max_file_bytes:
        return too_large(info.st_size, limits)
    return None


def read_bytes(path: Path, report: SkipHandler, limits: CorpusLimits) -> bytes | None:
    """The bytes of a regular file within the size limit; None (reported) otherwise."""
    # Non-blocking open, then the type check on the open file: a pipe swapped in after the folder
    # walk is still never read from, and the size read is the size checked.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError:
        report(path, "permission denied")
        return None
    except OSError as exc:
        report(path, f"cannot read ({exc.strerror or exc.__class__.__name__})")
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            problem = not_readable(os.fstat(handle.fileno()), limits)
            if problem is not None:
                report(path, problem)
                return None
            data = handle.read(limits.max_file_bytes + 1)
    except OSError as exc:
        report(path, f"cannot read ({exc.strerror or exc.__class__.__name__})")
        return None
    if len(data) > limits.max_file_bytes:  # grew since fstat
        report(path, too_large(len(data), limits))
        return None
    if not data.strip():
        report(path, "empty file")
        return None
    return data
