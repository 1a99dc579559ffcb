"""One document file of a folder, by format: Markdown and plain text, HTML, PDF.

The text a loader produces is the text citations point into, so it never reformats what a human
wrote (Markdown stays Markdown) and always produces the same text from the same bytes. A file that
cannot be read as its format is skipped and reported, never indexed as mojibake.
"""

from __future__ import annotations

import codecs
import io
import logging
import re
from pathlib import Path
from typing import Any

from evident.alignment.models import SourceDocument
from evident.connectors.index.corpus import LOCAL_SOURCE, SkipHandler
from evident.connectors.index.doc_ids import DocumentIdError, validate_document_id
from evident.connectors.index.frontmatter import scalar, split_front_matter
from evident.connectors.index.html_text import declared_charset, parse_html

log = logging.getLogger(__name__)

_HEADING = re.compile(r"^#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")


def file_uri(path: Path) -> str:
    """The fallback URL of a local document: stable for as long as the file does not move."""
    return path.resolve().as_uri()


# A text file in a single-byte encoding decodes without error whatever it holds; one whose text is this share
# C0 control characters or more (tab, line and page breaks aside) is not text (an image, an archive) and is
# skipped. C1 controls are not counted: they are what cp1252's undefined bytes read as.
_CONTROL_SHARE = 0.01
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def _undefined_as_latin1(error: UnicodeError) -> tuple[str, int]:
    """A byte the fallback encoding leaves undefined (cp1252's 0x81, 0x8D, 0x8F, 0x90, 0x9D) read as latin-1
    reads it, as browsers do: the rest of the file is still that encoding."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return error.object[error.start : error.end].decode("latin-1"), error.end


codecs.register_error("evident-latin1", _undefined_as_latin1)


def _decode(path: Path, data: bytes, report: SkipHandler, fallback: str, *, declared: str | None = None) -> str | None:
    """The file's text: by its byte order mark, else UTF-8, else the charset the file `declared` (HTML), else
    the `fallback` encoding (the `fallback_encoding` setting). A file that is not text is skipped, never
    indexed as mojibake."""
    boms = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
    for bom, codec in boms:
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
    for encoding in (declared, fallback):
        if not encoding:
            continue
        try:
            text = data.decode(codecs.lookup(encoding).name, errors="evident-latin1")
        except (LookupError, UnicodeDecodeError):
            continue
        if len(_CONTROLS.findall(text)) >= _CONTROL_SHARE * len(text):
            break
        log.info("%s: not UTF-8, read as %s", path, codecs.lookup(encoding).name)
        return text
    report(path, f"not text in UTF-8 or {fallback} (binary, or set fallback_encoding to its encoding)")
    return None


def load_text(path: Path, data: bytes, relative: str, report: SkipHandler, fallback: str) -> SourceDocument | None:
    text = _decode(path, data, report, fallback)
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


def load_html(path: Path, data: bytes, relative: str, report: SkipHandler, fallback: str) -> SourceDocument | None:
    html = _decode(path, data, report, fallback, declared=declared_charset(data))
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


def load_pdf(path: Path, data: bytes, relative: str, report: SkipHandler, fallback: str) -> SourceDocument | None:
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
