"""The index-time rule for document ids (the `url` of a document, what a citation `[id]` names).

An id is any stable name of a document: an absolute `http(s)` URL, a URN, a `file:` URL (only for
documents read from a folder, where the loader itself makes it), or a plain id or relative path
(`KB-1042`, `hr/leave.md`, `3f9a1c0e77d2-1200-2400`, Unicode letters included). Anything else is
refused before it is stored, because ids are shown as links and written into answers:

- another scheme (`javascript:`, `data:`, `vbscript:`, `mailto:` ...) would make a citation link run
  code or leave the page;
- whitespace, control characters or square brackets would break the `[id]` citation syntax or hide
  a different id behind the one displayed.
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("http", "https", "urn", "file")
# RFC 3986 scheme syntax: anything shaped like `word:` at the start is a scheme, so `KB:1042` is one.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})  # controls, format (bidi, zero-width), unassigned
_JOINERS = frozenset({"\u200c", "\u200d"})  # zero-width (non-)joiners are part of how some scripts spell words
_URN = re.compile(r"^urn:[A-Za-z0-9][A-Za-z0-9\-]{0,31}:\S+$", re.IGNORECASE)


class DocumentIdError(ValueError):
    """An id that may not name a document; `str()` says why, in one line."""


def validate_document_id(doc_id: str, *, allow_file: bool = False) -> str:
    """Return `doc_id` unchanged if it is an acceptable document id, else raise `DocumentIdError`.

    `allow_file`: whether `file:` URLs are accepted (folder documents, whose fallback id is one).
    """
    if not doc_id:
        raise DocumentIdError("the id is empty")
    for char in doc_id:
        if char.isspace():
            raise DocumentIdError(f"id {_shown(doc_id)} contains whitespace")
        if unicodedata.category(char) in _HIDDEN and char not in _JOINERS:
            raise DocumentIdError(f"id {_shown(doc_id)} contains a control or invisible character")
        if char in "[]":
            raise DocumentIdError(f"id {_shown(doc_id)} contains a square bracket (it would break [id] citations)")
    match = _SCHEME.match(doc_id)
    if match is None:
        return doc_id  # a plain id or a relative path
    scheme = match.group(1).lower()
    allowed = ALLOWED_SCHEMES if allow_file else tuple(s for s in ALLOWED_SCHEMES if s != "file")
    if scheme not in allowed:
        raise DocumentIdError(
            f"id {_shown(doc_id)} has the scheme {scheme!r}; allowed are {', '.join(allowed)} "
            "or a plain id without a scheme"
        )
    if scheme in {"http", "https"} and not urlsplit(doc_id).netloc:
        raise DocumentIdError(f"id {_shown(doc_id)} is a {scheme} URL without a host")
    if scheme == "urn" and not _URN.match(doc_id):
        raise DocumentIdError(f"id {_shown(doc_id)} is not a URN (urn:<namespace>:<name>)")
    return doc_id


def _shown(doc_id: str) -> str:
    # repr() makes control characters visible in the error message instead of acting on a terminal.
    return repr(doc_id if len(doc_id) <= 80 else doc_id[:77] + "...")
