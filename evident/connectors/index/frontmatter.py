"""Front matter at the top of Markdown and text files.

Only the small YAML subset people actually write in docs front matter is understood: `key: value`
scalars (optionally quoted), inline lists `[a, b]` and block lists of `- item` lines. A full YAML
parser would be a dependency for little gain, and anything it could not map to our flat metadata
would be lost anyway. A block that is not in this subset is not treated as front matter at all, so
the file keeps its text (a Markdown horizontal rule on the first line must not eat the document).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FrontMatterValue = str | list[str]

_KEY_LINE = re.compile(r"^([A-Za-z0-9_][\w.\-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]+-[ \t]+(.*?)[ \t]*$|^-[ \t]+(.*?)[ \t]*$")
_OPEN = "---"
_CLOSE = ("---", "...")


@dataclass(frozen=True)
class FrontMatter:
    """Parsed front matter and the document body that follows it, as an exact suffix of the file."""

    fields: dict[str, FrontMatterValue] = field(default_factory=dict)
    body: str = ""
    present: bool = False
    lines: dict[str, int] = field(default_factory=dict)  # key -> its line number in the file (1-based)


def split_front_matter(text: str) -> FrontMatter:
    """Separate a leading `---` block from the body; the body is never reformatted."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != _OPEN:
        return FrontMatter(body=text)

    fields: dict[str, FrontMatterValue] = {}
    lines_of: dict[str, int] = {}
    open_list: list[str] | None = None  # the list that `- item` lines extend, if any
    implicit: set[str] = set()  # keys whose empty value started a list that may stay empty
    for index in range(1, len(lines)):
        line = lines[index].rstrip("\r\n")
        if line.rstrip() in _CLOSE:
            body = "".join(lines[index + 1 :])
            # Blank lines between the block and the text are layout, not content; dropping only
            # those keeps the body an exact suffix of the file.
            body = _strip_leading_blank_lines(body)
            for key in implicit:
                if fields[key] == []:
                    fields[key] = ""
            return FrontMatter(fields=fields, body=body, present=True, lines=lines_of)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = _LIST_ITEM.match(line)
        if item and open_list is not None:
            open_list.append(_unquote(item.group(1) if item.group(1) is not None else item.group(2)))
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            return FrontMatter(body=text)
        key, raw = match.group(1), (match.group(2) or "")
        value = _parse_value(raw)
        fields[key] = value
        lines_of[key] = index + 1
        open_list = value if raw == "" and isinstance(value, list) else None
        if open_list is not None:
            implicit.add(key)
    # No closing line: this was not front matter.
    return FrontMatter(body=text)


def _parse_value(raw: str) -> FrontMatterValue:
    if raw == "":
        # An empty value may be followed by `- item` lines; start a list that those fill.
        return []
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return [_unquote(part.strip()) for part in inner.split(",") if part.strip()] if inner else []
    return _unquote(raw)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _strip_leading_blank_lines(text: str) -> str:
    start = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            break
        start += len(line)
    return text[start:]


def scalar(value: FrontMatterValue | None) -> str:
    """A field as one string: lists of one item count as that item, empty lists as absent."""
    if value is None:
        return ""
    if isinstance(value, list):
        return value[0] if len(value) == 1 else ""
    return value
