"""The index-time rule for document ids (the `url` of a document, what a citation `[id]` names).

An id is any stable name of a document: an absolute `http(s)` URL, a URN, a `file:` URL (only for
documents read from a folder, where the loader itself makes it), or a plain id or relative path
(`KB-1042`, `hr/leave.md`, `3f9a1c0e77d2-1200-2400`, Unicode letters included). Anything else is
refused before it is stored, because ids are shown as links and written into answers:

- another scheme (`javascript:`, `data:`, `vbscript:`, `mailto:` ...) would make a citation link run
  code or leave the page;
- whitespace, control characters or square brackets would break the `[id]` citation syntax or hide
  a different id behind the one displayed;
- a plain id starting with `//`, `/\\` or `\\` is, to a browser, a link to another host (a
  scheme-relative URL, or a UNC path `\\\\host\\share`); a backslash in a URL is read as `/`;
- userinfo in a URL (`https://user:pass@host/`) shows one host while the link may name another, and
  puts credentials into every citation;
- HTML character references or `%`-escapes that decode into a scheme (`jav&#x61;script:`,
  `javascript&colon;`, `javascript%3A`) pass a check made on the raw text and become the scheme once a
  renderer decodes them.
"""

from __future__ import annotations

import html
import re
import unicodedata
from pathlib import PureWindowsPath
from urllib.parse import quote, unquote, urlsplit

ALLOWED_SCHEMES = ("http", "https", "urn", "file")
# RFC 3986 scheme syntax: anything shaped like `word:` at the start is a scheme, so `KB:1042` is one.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})  # controls, format (bidi, zero-width), unassigned
_JOINERS = frozenset({"\u200c", "\u200d"})  # zero-width (non-)joiners are part of how some scripts spell words
# What a browser's URL parser drops before reading a scheme: tab and newlines anywhere, and leading
# C0 controls and spaces (a decoded reference may produce them).
_URL_IGNORED = re.compile(r"[\t\n\r]|^[\x00-\x20]+")
_DECODE_ROUNDS = 4  # `&amp;#x61;` and `%2561` are references to references: decode until stable
_URN = re.compile(r"^urn:[A-Za-z0-9][A-Za-z0-9\-]{0,31}:\S+$", re.IGNORECASE)
_WINDOWS_PATH = re.compile(r"^[A-Za-z]:[\\/]")


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
    hidden = _decoded_scheme(doc_id)
    if hidden is not None and (match is None or match.group(1).lower() != hidden):
        raise DocumentIdError(
            f"id {_shown(doc_id)} holds HTML character references or %-escapes that decode to the scheme {hidden!r}"
        )
    if match is None:
        if doc_id.startswith(("//", "/\\")):
            raise DocumentIdError(f"id {_shown(doc_id)} starts with {doc_id[:2]!r}: a browser reads it as a link to "
                                  "another host")
        if doc_id.startswith("\\"):
            raise DocumentIdError(f"id {_shown(doc_id)} starts with a backslash: a UNC path, or a link a browser "
                                  "reads as one to another host")
        return doc_id  # a plain id or a relative path
    scheme = match.group(1).lower()
    allowed = ALLOWED_SCHEMES if allow_file else tuple(s for s in ALLOWED_SCHEMES if s != "file")
    if scheme not in allowed:
        raise DocumentIdError(
            f"id {_shown(doc_id)} has the scheme {scheme!r}; allowed are {', '.join(allowed)} "
            "or a plain id without a scheme"
        )
    # Checked as written and as a renderer shows it: `&#64;` and `&#92;` become `@` and a backslash there.
    rendered = _rendered(doc_id)
    if scheme in {"http", "https", "file"} and "\\" in rendered:
        raise DocumentIdError(f"id {_shown(doc_id)} contains a backslash: a browser reads it as '/', so the link "
                              "may not go where it shows")
    netloc = urlsplit(doc_id).netloc
    if scheme in {"http", "https"} and not netloc:
        raise DocumentIdError(f"id {_shown(doc_id)} is a {scheme} URL without a host")
    if "@" in netloc or "@" in urlsplit(rendered).netloc:
        raise DocumentIdError(f"id {_shown(doc_id)} has userinfo (user@ or user:password@) before its host: it "
                              "hides the real host and would put credentials into citations")
    if scheme == "urn" and not _URN.match(doc_id):
        raise DocumentIdError(f"id {_shown(doc_id)} is not a URN (urn:<namespace>:<name>)")
    return doc_id


def safe_document_id(name: str) -> str:
    """A file path or a document's name (LangChain's `metadata["source"]`) as a document id: a Windows path
    (`C:\\docs\\a.pdf`) becomes its `file:` URL; whitespace, control or invisible characters, square
    brackets and backslashes are %-escaped (`Travel Policy.pdf` → `Travel%20Policy.pdf`), everything else
    is kept (Unicode letters too). The result still has to pass `validate_document_id`: a name that is a
    link elsewhere (`javascript:…`, `//host`) stays refused."""
    name = name.strip()
    if _WINDOWS_PATH.match(name):
        return PureWindowsPath(name).as_uri()
    return "".join(quote(char, safe="") if _escaped(char) else char for char in name)


def _escaped(char: str) -> bool:
    hidden = unicodedata.category(char) in _HIDDEN and char not in _JOINERS
    return char.isspace() or hidden or char in "[]\\"


def _decoded_scheme(doc_id: str) -> str | None:
    """The scheme (lowercased) `doc_id` names once HTML references and %-escapes are decoded, as a
    renderer or a browser would; None when decoding changes nothing or names none. (Only the scheme
    is compared: a decoded query string, `?a=1&copy=2`, may differ harmlessly.)"""
    decoded = doc_id
    for _ in range(_DECODE_ROUNDS):
        step = unquote(_rendered(decoded))
        if step == decoded:
            break
        decoded = step
    if decoded == doc_id:
        return None
    match = _SCHEME.match(_URL_IGNORED.sub("", decoded))
    return match.group(1).lower() if match else None


def _rendered(text: str) -> str:
    """`text` with its HTML character references decoded, as an HTML renderer would show it."""
    for _ in range(_DECODE_ROUNDS):
        step = html.unescape(text)
        if step == text:
            break
        text = step
    return text


def _shown(doc_id: str) -> str:
    # repr() makes control characters visible in the error message instead of acting on a terminal.
    return repr(doc_id if len(doc_id) <= 80 else doc_id[:77] + "...")
