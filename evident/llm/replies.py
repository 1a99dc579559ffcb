"""Reading a model's replies: an extraction reply, however it came back (strictly first, then
tolerantly), and the text or refusal of any chat reply.

An extraction reply may be valid JSON that fails the schema (other field names, ids as numbers), JSON wrapped in
prose or a Markdown fence, or JSON cut off by the output-token limit. `read_extraction` salvages
every complete passage object it can find and never raises. Passages it returns still go through
alignment like any other, so salvaging can only lose evidence, never let unverified text through.
Framework-free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal, overload

from pydantic import BaseModel, Field, ValidationError

from evident.alignment.models import Passage

_TEXT_KEYS = ("content", "passage", "text", "quote", "passage_content", "documentContent")
_URL_KEYS = ("url", "document_url", "documentUrl", "source_url", "source", "link")
_ID_KEYS = ("passage_id", "id", "passageId")
_LIST_KEYS = ("collected_passages", "passages", "collectedPassages", "results")
# Decoding from every brace of a long, broken reply would be quadratic; real replies start early.
_MAX_DECODE_STARTS = 32
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class ExtractedPassage(BaseModel):
    passage_id: str
    url: str
    content: str = Field(min_length=1)


class ExtractionReply(BaseModel):
    """The reply the extraction prompt asks for (paper §3.2)."""

    collected_passages: list[ExtractedPassage]


class Extraction(BaseModel):
    """What could be read from one reply. `passages` is None when nothing usable was found at all
    (as opposed to a well-formed empty list: "no relevant passage")."""

    passages: list[Passage] | None
    strict: bool = False  # the reply validated against the schema as it was
    note: str = ""


def _item(obj: Any, index: int) -> Passage | None:
    if not isinstance(obj, dict):
        return None
    text = next((obj[k] for k in _TEXT_KEYS if isinstance(obj.get(k), str) and obj[k].strip()), None)
    if text is None:
        return None  # drops.NO_TEXT
    url = next((obj[k] for k in _URL_KEYS if isinstance(obj.get(k), str)), "")
    pid = next((obj[k] for k in _ID_KEYS if isinstance(obj.get(k), (str, int)) and not isinstance(obj.get(k), bool)),
               index + 1)
    # A passage without a URL still reaches alignment, which can relink it to the document holding it.
    return Passage(passage_id=str(pid), url=url.strip(), content=text)


def _from_object(obj: Any) -> list[Passage] | None:
    """Passages from decoded JSON of any of the shapes models produce; None if it has no list of them."""
    items: Any = None
    if isinstance(obj, dict):
        items = next((obj[k] for k in _LIST_KEYS if isinstance(obj.get(k), list)), None)
        if items is None:
            lists = [v for v in obj.values() if isinstance(v, list)]
            items = lists[0] if len(lists) == 1 else None
        if items is None and _item(obj, 0) is not None:
            items = [obj]
    elif isinstance(obj, list):
        items = obj
    if items is None:
        return None
    found = [p for i, o in enumerate(items) if (p := _item(o, i)) is not None]
    if items and not found:
        return None  # a list, but of nothing we recognise
    return found


def _strict(obj: Any) -> list[Passage] | None:
    try:
        reply = ExtractionReply.model_validate(obj)
    except ValidationError:
        return None
    return [Passage(passage_id=p.passage_id, url=p.url, content=p.content) for p in reply.collected_passages]


def _salvage_array(text: str) -> list[Any]:
    """The complete elements of the passage array in a cut-off JSON text, in order."""
    decoder = json.JSONDecoder()
    key = next((m for k in _LIST_KEYS if (m := re.search(rf'"{k}"\s*:\s*\[', text))), None)
    start = key.end() if key else text.find("[") + 1
    if start <= 0:
        return []
    out: list[Any] = []
    pos = start
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return out  # drops.CUT_OFF: the element the reply was cut off in
        out.append(value)


def _candidates(text: str) -> list[str]:
    fenced = [m.group(1) for m in _FENCE.finditer(text)]
    return [*fenced, text]


def read_extraction(reply: Any) -> Extraction:
    """Passages from a parsed object (dict/list) or from raw reply text. Never raises."""
    if reply is None:
        return Extraction(passages=None, note="empty reply")
    if not isinstance(reply, str):
        strict = _strict(reply)
        if strict is not None:
            return Extraction(passages=strict, strict=True)
        loose = _from_object(reply)
        return Extraction(passages=loose, note="reply did not match the schema; read tolerantly")
    text = reply.strip()
    if not text:
        return Extraction(passages=None, note="empty reply")
    for candidate in _candidates(text):
        candidate = candidate.strip()
        try:
            read = read_extraction(json.loads(candidate))
        except json.JSONDecodeError:
            read = _read_broken(candidate)
        if read.passages is not None:
            return read
    return Extraction(passages=None, note="no passage list found in the reply")


def _read_broken(text: str) -> Extraction:
    """Text that is not one JSON value: a passage list cut off by the token limit, or JSON in prose."""
    salvaged = _from_object(_salvage_array(text))
    if salvaged:
        return Extraction(passages=salvaged, note="reply was cut off; kept its complete passages")
    decoder = json.JSONDecoder()
    for attempt, m in enumerate(re.finditer(r"[\[{]", text)):
        if attempt >= _MAX_DECODE_STARTS:
            break
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        read = read_extraction(obj)
        if read.passages is not None:
            return read
    return Extraction(passages=None)


# -- any chat reply -------------------------------------------------------------------------------


def _part_text(part: Any) -> str | None:
    """The text of one content part; None for any other kind (an image, a file, a tool call part)."""
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
        return str(part["text"])
    return None


@overload
def text_of(message: Any) -> str: ...
@overload
def text_of(message: Any, *, strict: Literal[True]) -> str | None: ...


def text_of(message: Any, *, strict: bool = False) -> str | None:
    """The text of a chat message, whatever content shape its provider used: its text parts joined.

    A model's reply may mix in other parts (tool calls, images), which are skipped. With `strict`
    (a conversation's messages, which must be text), a message holding anything else gives None.
    """
    content = getattr(message, "content", None if strict else message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            text = _part_text(part)
            if text is None:
                if strict:
                    return None
                continue
            parts.append(text)
        return "".join(parts)
    if strict:
        return None
    return "" if content is None else str(content)


def refusal_of(message: Any) -> str | None:
    """The refusal text of a chat message, if the model declined (an OpenAI `refusal` field)."""
    refusal = (getattr(message, "additional_kwargs", None) or {}).get("refusal")
    if refusal:
        return str(refusal)
    finish = (getattr(message, "response_metadata", None) or {}).get("finish_reason")
    if finish == "content_filter":
        return "the output was stopped by a content filter"
    return None
