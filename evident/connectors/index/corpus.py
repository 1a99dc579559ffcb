"""The vocabulary of corpus loading: limits, errors, skip reports, the file types a corpus may hold,
and the rule that a URL names one document."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from evident.alignment.models import SourceDocument
from evident.settings import CorpusFileSettings

Where = TypeVar("Where")

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

MB = 1_000_000


# The defaults are the settings' own (`EvidentContext`, a local or postgres source's settings).
_SETTINGS = CorpusFileSettings()


class IndexStats(BaseModel):
    """Document counts of one indexing run, an index's `add_corpus` or a PostgreSQL refresh (`skipped` counts
    skip reports, not documents)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0


class CorpusLimits(BaseModel):
    """What a corpus may make the loader do, and what of it is read and how (settings `follow_symlinks`,
    `max_file_mb`, `section_chars`, `exclude`, `fallback_encoding`)."""

    follow_symlinks: bool = Field(_SETTINGS.follow_symlinks,
                                  description="Follow symbolic links that leave the corpus folder.")
    max_file_bytes: int = Field(int(_SETTINGS.max_file_mb * MB), ge=1,
                                description="Larger files (JSONL: lines) are skipped.")
    section_chars: int = Field(_SETTINGS.section_chars, ge=1000,
                               description="Longer documents are indexed as sections.")
    exclude: tuple[str, ...] = Field(tuple(_SETTINGS.exclude),
                                     description="Globs of a folder's files and folders that are not indexed.")
    fallback_encoding: str = Field(_SETTINGS.fallback_encoding,
                                   description="How a text file that is not UTF-8 is read.")

    @classmethod
    def from_settings(cls, settings: CorpusFileSettings) -> CorpusLimits:
        """The limits of an `EvidentContext` (its `follow_symlinks`, `max_file_mb`, `section_chars`,
        `exclude`, `fallback_encoding`)."""
        return cls(follow_symlinks=settings.follow_symlinks, max_file_bytes=max(1, int(settings.max_file_mb * MB)),
                   section_chars=settings.section_chars, exclude=tuple(settings.exclude),
                   fallback_encoding=settings.fallback_encoding)


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


def too_large(size: int, limits: CorpusLimits) -> str:
    return (f"{size / MB:.1f} MB is over the {limits.max_file_bytes / MB:g} MB limit per file "
            "(raise max_file_mb to index it)")


def one_document_per_url(
    found: Iterable[tuple[SourceDocument, Where]],
    repeat: Callable[[SourceDocument, Where, SourceDocument, Where], None],
) -> Iterator[SourceDocument]:
    """The documents of `found` (each with where it was read), each URL at most once.

    A repeat calls `repeat(document, where, first_document, where_first)`, which raises `CorpusError`
    (two documents claiming one URL: neither may win, or one file could be cited under the URL of
    another, more trusted one) or returns to drop the repeat (the same file reached twice).
    """
    first: dict[str, tuple[SourceDocument, Where]] = {}
    for doc, where in found:
        if doc.url in first:
            repeat(doc, where, *first[doc.url])
            continue
        first[doc.url] = (doc, where)
        yield doc


def claimed(doc: SourceDocument) -> str:
    """How an error names the URL `doc` claims: a section's says which document it was cut from."""
    whole = doc.metadata.get("section_of")
    return f"url {doc.url} (a section of {whole})" if isinstance(whole, str) else f"url {doc.url}"


def url_conflict(file: str | Path, doc: SourceDocument, other: str | Path, other_doc: SourceDocument,
                 line: int | None = None) -> CorpusError:
    """The error for two files (or JSONL lines) claiming one URL, naming both."""
    also = "" if other_doc.url == doc.url and claimed(other_doc) == claimed(doc) else f" as {claimed(other_doc)}"
    return CorpusError(file, f"{claimed(doc)} is also claimed by {other}{also}; a url must name one document", line)
