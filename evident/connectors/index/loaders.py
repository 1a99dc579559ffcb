"""Load a corpus (a JSONL file, a folder of documents, or one document) into `SourceDocument`s.

The text a loader produces is the text citations point into, so loaders never reformat what a
human wrote (Markdown stays Markdown) and always produce the same text from the same bytes.
Problems with one file in a folder are reported through `on_skip` and do not stop the load;
problems that make the corpus itself wrong (a broken JSONL line, a missing path) raise
`CorpusError`, because silently indexing half a dataset is worse than failing.

A corpus folder is untrusted input (a shared drive, a checked-out wiki), so the walk never leaves
it: symbolic links that resolve outside the folder are skipped unless `follow_symlinks` is set;
only regular files are opened (a named pipe would block the reader forever, a device never ends);
files over `max_file_bytes` are skipped; documents over `section_chars` become sections
(evident/connectors/index/sections.py); document ids must pass `validate_document_id`.
"""

from __future__ import annotations

import codecs
import io
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evident.alignment.models import SourceDocument
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.frontmatter import scalar, split_front_matter
from evident.connectors.index.html_text import declared_charset, parse_html
from evident.connectors.index.sections import split_sections

log = logging.getLogger(__name__)

SkipHandler = Callable[[Path, str], None]

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
PDF_SUFFIXES = frozenset({".pdf"})
JSONL_SUFFIXES = frozenset({".jsonl"})
# JSONL is only accepted as the corpus path itself: a folder may hold other JSONL files (queries,
# evaluation sets) that are not documents.
FOLDER_SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES
FILE_SUFFIXES = FOLDER_SUFFIXES | JSONL_SUFFIXES

LOCAL_SOURCE = "local"
_HEADING = re.compile(r"^#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")


MB = 1_000_000


class CorpusLimits(BaseModel):
    """What a corpus may make the loader do (settings `follow_symlinks`, `max_file_mb`, `section_chars`)."""

    follow_symlinks: bool = Field(False, description="Follow symbolic links that leave the corpus folder.")
    max_file_bytes: int = Field(20 * MB, ge=1, description="Larger files (JSONL: lines) are skipped.")
    section_chars: int = Field(100_000, ge=1000, description="Longer documents are indexed as sections.")

    @classmethod
    def from_settings(cls, settings: Any) -> CorpusLimits:
        """The limits of an `EvidentContext` (its `follow_symlinks`, `max_file_mb`, `section_chars`)."""
        return cls(follow_symlinks=settings.follow_symlinks, max_file_bytes=max(1, int(settings.max_file_mb * MB)),
                   section_chars=settings.section_chars)


DEFAULT_LIMITS = CorpusLimits()


class CorpusError(ValueError):
    """A corpus that cannot be loaded as given; `str()` is one line naming the file (and line)."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return f"{where}: {self.message}"


def log_skip(path: Path, reason: str) -> None:
    """The default `on_skip`: a skipped file is worth a warning, not an exception."""
    log.warning("skipped %s: %s", path, reason)


def load_corpus(
    path: str | Path, *, on_skip: SkipHandler | None = None, limits: CorpusLimits = DEFAULT_LIMITS
) -> Iterator[SourceDocument]:
    """Yield the documents of a JSONL file, a folder (recursively) or a single document file.

    URLs are unique in the result: a later document with an already-seen URL is reported through
    `on_skip` and dropped, so the first one (in sorted path order) wins.
    """
    root = Path(path)
    report = on_skip if on_skip is not None else log_skip
    first_seen: dict[str, Path] = {}
    for file in corpus_files(root, on_skip=report, limits=limits):
        for doc in load_file(file, root=root, on_skip=report, limits=limits):
            if doc.url in first_seen:
                report(file, f"duplicate url {doc.url} (first in {first_seen[doc.url]})")
                continue
            first_seen[doc.url] = file
            yield doc


def corpus_files(
    root: str | Path, *, on_skip: SkipHandler | None = None, limits: CorpusLimits = DEFAULT_LIMITS
) -> list[Path]:
    """The files a corpus path stands for, in a deterministic order.

    Hidden files and folders (name starting with '.') below the root are skipped: they are editor
    swap files, VCS metadata and the like. Links that resolve outside the root, files that are not
    regular files and files over the size limit are reported through `on_skip`. Symlinked folders
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
        dirnames[:] = [name for name in dirnames if not name.startswith(".")]
        if not limits.follow_symlinks:
            for name in dirnames:
                folder = Path(dirpath, name)
                if folder.is_symlink() and not _within(folder, inside):
                    report(folder, _LINK_OUTSIDE)
        for name in filenames:
            if name.startswith(".") or Path(name).suffix.lower() not in FOLDER_SUFFIXES:
                continue
            file = Path(dirpath, name)
            problem = _unsafe(file, inside, limits)
            if problem is not None:
                report(file, problem)
                continue
            found.append((file.relative_to(root).parts, file))
    # Sorting by path components (not by the joined string) keeps "a/b" before "a-b/c".
    return [file for _, file in sorted(found)]


_LINK_OUTSIDE = "symbolic link to a place outside the corpus folder (set follow_symlinks to index it)"


def _within(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # RuntimeError: a link loop
        return False


def _unsafe(file: Path, root: Path, limits: CorpusLimits) -> str | None:
    """Why `file` (found in the folder `root`) must not be opened, or None when it may be."""
    try:
        if stat.S_ISLNK(os.lstat(file).st_mode) and not limits.follow_symlinks and not _within(file, root):
            return _LINK_OUTSIDE
        info = os.stat(file)
    except OSError as exc:
        return f"cannot read ({exc.strerror or exc.__class__.__name__})"
    return _not_readable(info, limits)


def _not_readable(info: os.stat_result, limits: CorpusLimits) -> str | None:
    """Why a file with this `stat` must not be read: its type or its size."""
    mode = info.st_mode
    if not stat.S_ISREG(mode):
        kind = ("a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")  # fmt: skip
        return f"{kind}, not a regular file (never opened)"
    if info.st_size > limits.max_file_bytes:
        return _too_large(info.st_size, limits)
    return None


def _too_large(size: int, limits: CorpusLimits) -> str:
    return (f"{size / MB:.1f} MB is over the {limits.max_file_bytes / MB:g} MB limit per file "
            "(raise max_file_mb to index it)")


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
    report = on_skip if on_skip is not None else log_skip
    path = Path(path)
    root = Path(root) if root is not None else path
    relative = _relative(path, root)
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        for doc in _load_jsonl(path, relative, report, limits):
            yield from split_sections(doc, limits.section_chars)
        return
    data = _read(path, report, limits)
    if data is None:
        return
    if suffix in PDF_SUFFIXES:
        doc = _load_pdf(path, data, relative, report)
    elif suffix in HTML_SUFFIXES:
        doc = _load_html(path, data, relative, report)
    elif suffix in TEXT_SUFFIXES:
        doc = _load_text(path, data, relative, report)
    else:
        report(path, f"unsupported file type {suffix!r}")
        return
    if doc is None:
        return
    try:
        validate_document_id(doc.url, allow_file=True)
    except DocumentIdError as exc:
        report(path, str(exc))
        return
    yield from split_sections(doc, limits.section_chars)


def _relative(path: Path, root: Path) -> str:
    if path == root or root.is_file():
        return path.name
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def file_uri(path: Path) -> str:
    """The fallback URL of a local document: stable for as long as the file does not move."""
    return path.resolve().as_uri()


def _read(path: Path, report: SkipHandler, limits: CorpusLimits) -> bytes | None:
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
            problem = _not_readable(os.fstat(handle.fileno()), limits)
            if problem is not None:
                report(path, problem)
                return None
            data = handle.read(limits.max_file_bytes + 1)
    except OSError as exc:
        report(path, f"cannot read ({exc.strerror or exc.__class__.__name__})")
        return None
    if len(data) > limits.max_file_bytes:  # grew since fstat
        report(path, _too_large(len(data), limits))
        return None
    if not data.strip():
        report(path, "empty file")
        return None
    return data


def _decode(path: Path, data: bytes, report: SkipHandler, *, fallback_charset: str | None = None) -> str | None:
    """Strict decoding: a file that is not text must be skipped, not indexed as mojibake."""
    for bom, codec in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError:
                report(path, f"not valid {codec} text despite its byte order mark")
                return None
    if b"\x00" in data:
        report(path, "binary file (contains NUL bytes)")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    if fallback_charset:
        try:
            return data.decode(codecs.lookup(fallback_charset).name)
        except (LookupError, UnicodeDecodeError):
            pass
    report(path, "not UTF-8 text (binary or unknown encoding)")
    return None


def _load_text(path: Path, data: bytes, relative: str, report: SkipHandler) -> SourceDocument | None:
    text = _decode(path, data, report)
    if text is None:
        return None
    front = split_front_matter(text)
    if not front.body.strip():
        report(path, "no text after the front matter" if front.present else "empty file")
        return None
    reserved = {"url", "title", "source_type"}
    metadata: dict[str, Any] = {key: value for key, value in front.fields.items() if key not in reserved}
    metadata["path"] = relative
    url = scalar(front.fields.get("url")).strip()
    if url:
        try:
            validate_document_id(url, allow_file=True)
        except DocumentIdError as exc:
            report(path, f"line {front.lines.get('url', 1)}: {exc}")
            return None
    return SourceDocument(
        url=url or file_uri(path),
        title=scalar(front.fields.get("title")).strip() or _first_heading(front.body) or path.stem,
        content=front.body,
        source=LOCAL_SOURCE,
        source_type=scalar(front.fields.get("source_type")).strip() or LOCAL_SOURCE,
        metadata=metadata,
    )


def _first_heading(text: str) -> str:
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence and (match := _HEADING.match(line)):
            return match.group(1).strip()
    return ""


def _load_html(path: Path, data: bytes, relative: str, report: SkipHandler) -> SourceDocument | None:
    html = _decode(path, data, report, fallback_charset=declared_charset(data))
    if html is None:
        return None
    page = parse_html(html)
    if not page.text.strip():
        report(path, "no readable text in the page")
        return None
    url = page.canonical_url
    if url:
        try:
            validate_document_id(url, allow_file=True)
        except DocumentIdError as exc:
            # The page's text is fine; only its canonical link is not an id: the file names it.
            log.warning("%s: canonical link ignored: %s", path, exc)
            url = ""
    return SourceDocument(
        url=url or file_uri(path),
        title=page.title or path.stem,
        content=page.text,
        source=LOCAL_SOURCE,
        source_type=page.source_type or LOCAL_SOURCE,
        metadata={**page.meta, "path": relative},
    )


def _load_pdf(path: Path, data: bytes, relative: str, report: SkipHandler) -> SourceDocument | None:
    # Imported here: pypdf is only needed for PDFs and costs import time for everything else.
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            reader.decrypt("")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        info = reader.metadata
        title = str(info.title).strip() if info is not None and info.title else ""
    # pypdf raises many exception types on malformed files (its own, ValueError, KeyError, ...);
    # any of them means "this PDF cannot be read", which is a skip, never a crash of the load.
    except Exception as exc:  # noqa: BLE001
        report(path, f"PDF could not be parsed ({exc.__class__.__name__}: {exc})".replace("\n", " "))
        return None
    text = "\n\n".join(page for page in pages if page)
    if not text:
        report(path, "PDF has no extractable text (scanned images need OCR)")
        return None
    return SourceDocument(
        url=file_uri(path),
        title=title or path.stem,
        content=text,
        source=LOCAL_SOURCE,
        source_type=LOCAL_SOURCE,
        metadata={"path": relative, "pages": len(pages)},
    )


def _load_jsonl(path: Path, relative: str, report: SkipHandler, limits: CorpusLimits) -> Iterator[SourceDocument]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        # The corpus file itself is unreadable: nothing can be loaded, so this is not a skip.
        raise CorpusError(path, f"cannot read ({exc.strerror or exc.__class__.__name__})") from exc
    first_line: dict[str, int] = {}
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            if not raw.strip():
                continue
            if len(raw) > limits.max_file_bytes:
                report(path, f"line {number}: {_too_large(len(raw), limits)}")
                continue
            doc = _jsonl_document(path, number, raw, relative)
            if doc.url in first_line:
                report(path, f"line {number}: duplicate url {doc.url} (first at line {first_line[doc.url]})")
                continue
            first_line[doc.url] = number
            yield doc


def _jsonl_document(path: Path, number: int, raw: bytes, relative: str) -> SourceDocument:
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorpusError(path, "not valid UTF-8", number) from None
    except json.JSONDecodeError as exc:
        raise CorpusError(path, f"invalid JSON ({exc.msg})", number) from None
    if not isinstance(record, dict):
        raise CorpusError(path, f"expected a JSON object, got {type(record).__name__}", number)
    url = record.get("url")
    if not isinstance(url, str) or not url.strip():
        raise CorpusError(path, "missing or empty 'url'", number)
    try:
        validate_document_id(url.strip())
    except DocumentIdError as exc:
        raise CorpusError(path, str(exc), number) from None
    text = record.get("text", record.get("content"))
    if not isinstance(text, str) or not text.strip():
        raise CorpusError(path, "missing or empty 'text'", number)
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise CorpusError(path, "'metadata' must be a JSON object", number)
    title = record.get("title") or ""
    source_type = record.get("source_type") or LOCAL_SOURCE
    if not isinstance(title, str) or not isinstance(source_type, str):
        raise CorpusError(path, "'title' and 'source_type' must be strings", number)
    return SourceDocument(
        url=url.strip(),
        title=title.strip(),
        content=text,
        source=LOCAL_SOURCE,
        source_type=source_type,
        # No line number in metadata: inserting one line would then "change" every later document.
        metadata={**metadata, "path": relative},
    )
