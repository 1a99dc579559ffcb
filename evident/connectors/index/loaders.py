"""Load a corpus (a JSONL file, a folder of documents, or one document) into `SourceDocument`s.

Problems with one file in a folder are reported through `on_skip` and do not stop the load;
problems that make the corpus itself wrong (a broken JSONL line, a missing path) raise
`CorpusError`, because silently indexing half a dataset is worse than failing.

This module walks corpus paths and dispatches each file by format: `jsonl` (JSONL files), `formats`
(Markdown and text, HTML, PDF), `file_safety` (what may be opened: the walk never leaves the folder,
symbolic links that resolve outside it are skipped unless `follow_symlinks` is set, only regular
files within `max_file_bytes` are read); documents over `section_chars` become sections
(evident/connectors/index/sections.py); document ids must pass `validate_document_id`.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from evident.alignment.models import SourceDocument
from evident.connectors.index.corpus import (
    DEFAULT_LIMITS,
    FILE_SUFFIXES,
    FOLDER_SUFFIXES,
    HTML_SUFFIXES,
    JSONL_SUFFIXES,
    LOCAL_SOURCE,
    MB,
    PDF_SUFFIXES,
    TEXT_SUFFIXES,
    CorpusError,
    CorpusLimits,
    SkipHandler,
    one_document_per_url,
    url_conflict,
)
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.excluded import Exclusions, page_copies
from evident.connectors.index.file_safety import LINK_OUTSIDE, read_bytes, unsafe, within

__all__ = [
    "DEFAULT_LIMITS", "FILE_SUFFIXES", "FOLDER_SUFFIXES", "LOCAL_SOURCE", "MB", "CorpusError", "CorpusLimits",
    "SkipHandler", "copy_of", "corpus_files", "file_text", "load_corpus", "load_file", "log_skip", "relative_path",
]

log = logging.getLogger(__name__)

# (file, its bytes, its path relative to the corpus folder, the skip handler, the fallback encoding)
FormatLoader = Callable[[Path, bytes, str, SkipHandler, str], SourceDocument | None]


@functools.cache
def _formats() -> dict[str, FormatLoader]:
    """The reader of each file type we index, by suffix."""
    # Imported when a file is first read: refreshing an unchanged corpus (every `evident ask`) only
    # walks the folders, and the readers (an HTML parser among them) would cost it start-up time.
    from evident.connectors.index.formats import load_html, load_pdf, load_text

    return {**dict.fromkeys(PDF_SUFFIXES, load_pdf), **dict.fromkeys(HTML_SUFFIXES, load_html),
            **dict.fromkeys(TEXT_SUFFIXES, load_text)}


def log_skip(path: Path, reason: str) -> None:
    """The default `on_skip`: a skipped file is worth a warning, not an exception."""
    log.warning("skipped %s: %s", path, reason)


def load_corpus(
    path: str | Path, *, on_skip: SkipHandler | None = None, limits: CorpusLimits = DEFAULT_LIMITS
) -> Iterator[SourceDocument]:
    """Yield the documents of a JSONL file, a folder (recursively) or a single document file.

    URLs are unique in the result: two files (or JSONL lines, or a section of a long document and
    another file) claiming one URL raise `CorpusError` naming both. A page in two formats is read once
    (`excluded.page_copies`); the other file is reported as a copy. One file reached under two paths
    (a link inside the corpus) is read once; the repeat is reported through `on_skip`.
    """
    root = Path(path)
    report = on_skip if on_skip is not None else log_skip

    def repeat(doc: SourceDocument, file: Path, first_doc: SourceDocument, first: Path) -> None:
        if file.resolve() != first.resolve():
            raise url_conflict(file, doc, first, first_doc)
        report(file, f"the same file as {first} (url {doc.url})")

    files = corpus_files(root, on_skip=report, limits=limits)
    copies = page_copies(((relative_path(file, root), file) for file in files),
                         lambda file: file_text(file, root, limits))
    for file, kept in copies.items():
        report(file, copy_of(kept))
    found = ((doc, file) for file in files if file not in copies
             for doc in load_file(file, root=root, on_skip=report, limits=limits))
    yield from one_document_per_url(found, repeat)


def copy_of(kept: str) -> str:
    """The skip reason of a file that holds the page `kept` (a relative path) in another format."""
    return f"the same page as {kept}, in another format"


def file_text(file: Path, root: Path, limits: CorpusLimits) -> str:
    """The text of a corpus file's documents together ("" when it is skipped), for comparing pages."""
    return "\n\n".join(doc.content for doc in load_file(file, root=root, on_skip=lambda *_: None, limits=limits))


def corpus_files(
    root: str | Path, *, on_skip: SkipHandler | None = None, limits: CorpusLimits = DEFAULT_LIMITS
) -> list[Path]:
    """The files a corpus path stands for, in a deterministic order.

    Hidden files and folders (name starting with '.') below the root are skipped: they are editor
    swap files, VCS metadata and the like; so are those the `exclude` globs of `limits` name
    (evident/connectors/index/excluded.py), without a report: leaving them out is the setting's point.
    Links that resolve outside the root, files that are not regular files and files over the size
    limit are reported through `on_skip`. Symlinked folders
    are followed only with `follow_symlinks`, and then each folder is walked once, so a link cycle
    cannot make the walk endless.
    """
    root = Path(root)
    if not root.exists():
        raise CorpusError(root, "no such file or directory")
    if root.is_file():
        if root.suffix.lower() not in FILE_SUFFIXES:
            expected = ", ".join(sorted(FILE_SUFFIXES))
            raise CorpusError(root, f"unsupported file type {root.suffix or '(none)'!r} (expected {expected})")
        return [root]
    if not root.is_dir():
        raise CorpusError(root, "not a regular file or folder")
    report = on_skip if on_skip is not None else log_skip

    def unlistable(error: OSError) -> None:
        report(Path(error.filename or root), f"cannot list folder ({error.strerror or error.__class__.__name__})")

    inside = root.resolve()
    excluded = Exclusions(limits.exclude)
    walked: set[tuple[int, int]] = set()
    found: list[tuple[tuple[str, ...], Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=unlistable, followlinks=limits.follow_symlinks):
        if limits.follow_symlinks:
            try:
                info = os.stat(dirpath)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in walked:  # a link cycle, or a folder reached twice
                dirnames[:] = []
                continue
            walked.add((info.st_dev, info.st_ino))
        here = Path(dirpath).relative_to(root).parts
        dirnames[:] = [name for name in dirnames if not name.startswith(".") and not excluded.matches((*here, name))]
        if not limits.follow_symlinks:
            for name in dirnames:
                folder = Path(dirpath, name)
                if folder.is_symlink() and not within(folder, inside):
                    report(folder, LINK_OUTSIDE)
        for name in filenames:
            if name.startswith(".") or Path(name).suffix.lower() not in FOLDER_SUFFIXES:
                continue
            if excluded.matches((*here, name)):
                continue
            file = Path(dirpath, name)
            problem = unsafe(file, inside, limits)
            if problem is not None:
                report(file, problem)
                continue
            found.append((file.relative_to(root).parts, file))
    # Sorting by path components (not by the joined string) keeps "a/b" before "a-b/c".
    return [file for _, file in sorted(found)]


def load_file(
    path: str | Path,
    *,
    root: str | Path | None = None,
    on_skip: SkipHandler | None = None,
    limits: CorpusLimits = DEFAULT_LIMITS,
) -> Iterator[SourceDocument]:
    """Yield the documents of one corpus file (several for JSONL or a long document, else at most one).

    `root` is the corpus path the file was found under; `metadata["path"]` is relative to it.
    """
    # Imported here for start-up time, as the formats are (see `_format_loader`).
    from evident.connectors.index.jsonl import load_jsonl
    from evident.connectors.index.sections import split_sections

    report = on_skip if on_skip is not None else log_skip
    path = Path(path)
    root = Path(root) if root is not None else path
    relative = relative_path(path, root)
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        yield from load_jsonl(path, relative, report, limits)
        return
    data = read_bytes(path, report, limits)
    if data is None:
        return
    load = _formats().get(suffix)
    if load is None:
        report(path, f"unsupported file type {suffix!r}")
        return
    doc = load(path, data, relative, report, limits.fallback_encoding)
    if doc is None:
        return
    try:
        validate_document_id(doc.url, allow_file=True)
    except DocumentIdError as exc:
        report(path, str(exc))
        return
    yield from split_sections(doc, limits.section_chars)


def relative_path(path: Path, root: Path) -> str:
    """`path` relative to the corpus path `root`, with '/' (its name when `root` is the file)."""
    if path == root or root.is_file():
        return path.name
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name
