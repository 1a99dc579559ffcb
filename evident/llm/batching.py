"""Counting prompt tokens, and splitting retrieved documents into extraction batches.

Counting is configurable (`EvidentContext.token_counter`):

- "approx": ceil(characters / `chars_per_token`), 4 by default. No files, no network; it runs a
  little high on English prose for GPT-class tokenizers, which errs towards smaller batches.
- "tiktoken": the model's tiktoken encoding (o200k_base for an unknown model name). tiktoken
  downloads its BPE file on first use, which an offline machine cannot do; if loading fails, the
  approximate counter is used and a warning is logged once.
- "auto" (default): tiktoken when its BPE file is already in tiktoken's cache (`TIKTOKEN_CACHE_DIR`,
  else the system temp dir), so no request is ever made; otherwise "approx".

Any other tokenizer (a Hugging Face tokenizer of a local model, say) can be injected with
`build_graph(token_counter=lambda text: len(tok.encode(text)))`.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import re
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from evident.alignment import drops
from evident.alignment.models import SourceDocument
from evident.alignment.outline import heading_path
from evident.context import EvidentContext
from evident.llm.models import reply_cap
from evident.settings import environment_value

TokenCounter = Callable[[str], int]

log = logging.getLogger(__name__)
_BPE_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_DEFAULT_ENCODING = "o200k_base"
_lock = threading.Lock()
_encodings: dict[str, TokenCounter | None] = {}


def approx_counter(chars_per_token: float = 4.0) -> TokenCounter:
    def count(text: str) -> int:
        return math.ceil(len(text) / chars_per_token)

    return count


def _encoding_name(model: str | None) -> str:
    # start-up time: tiktoken (~15 ms) loads only when a model's tokens are counted
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(model or "")
    except KeyError:
        return _DEFAULT_ENCODING


def tiktoken_cached(encoding: str) -> bool:
    """Whether tiktoken can load `encoding` without the network (mirrors tiktoken's cache lookup)."""
    cache_dir = environment_value("TIKTOKEN_CACHE_DIR") or environment_value("DATA_GYM_CACHE_DIR")
    if cache_dir == "":
        return False
    base = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()) / "data-gym-cache"
    return (base / hashlib.sha1(_BPE_URL.format(encoding).encode()).hexdigest()).is_file()


def forget_encodings() -> None:
    """Drop the tiktoken encodings loaded so far, and the failures remembered: the next counter tries
    tiktoken again (after its cache changed, say)."""
    with _lock:
        _encodings.clear()


def _tiktoken_counter(encoding: str) -> TokenCounter | None:
    with _lock:
        if encoding in _encodings:
            return _encodings[encoding]
        try:
            # start-up time: tiktoken (~15 ms) loads only when a model's tokens are counted
            import tiktoken

            enc = tiktoken.get_encoding(encoding)
            found: TokenCounter | None = lambda text: len(enc.encode(text, disallowed_special=()))  # noqa: E731
        except Exception as exc:  # offline, or a corrupt cache: fall back, say so once
            log.warning("tiktoken encoding %s unavailable (%s); counting tokens as characters/4", encoding, exc)
            found = None
        _encodings[encoding] = found
        return found


def make_counter(ctx: EvidentContext) -> TokenCounter:
    """The token counter `ctx` asks for (see the module docstring)."""
    approx = approx_counter(ctx.chars_per_token)
    if ctx.token_counter == "approx":
        return approx
    try:
        encoding = _encoding_name(ctx.model)
    except ImportError:
        return approx
    if ctx.token_counter == "auto" and not tiktoken_cached(encoding):
        return approx
    return _tiktoken_counter(encoding) or approx


# -- batching -------------------------------------------------------------------------------------

# Cut points, best first: paragraph break, line break, sentence end, any whitespace.
_CUTS = (re.compile(r"\n[ \t]*\n"), re.compile(r"\n"), re.compile(r"(?<=[.!?。])\s+"), re.compile(r"\s+"))


def _pieces(text: str, start: int, end: int, budget: int, count: TokenCounter, level: int) -> list[tuple[int, int]]:
    """[start, end) cut into consecutive ranges of at most `budget` tokens, at the best cut points."""
    if count(text[start:end]) <= budget:
        return [(start, end)]
    if level >= len(_CUTS):
        # No cut point left (one enormous token run): cut by characters, proportionally.
        step = max(1, (end - start) * budget // max(1, count(text[start:end])))
        return [(i, min(i + step, end)) for i in range(start, end, step)]
    bounds = [start] + [m.end() for m in _CUTS[level].finditer(text, start, end) if start < m.end() < end] + [end]
    out: list[tuple[int, int]] = []
    cur_start, cur_tokens = bounds[0], 0
    for a, b in itertools.pairwise(bounds):
        size = count(text[a:b])
        if size > budget:
            if cur_tokens:
                out.append((cur_start, a))
            out.extend(_pieces(text, a, b, budget, count, level + 1))
            cur_start, cur_tokens = b, 0
        elif cur_tokens + size > budget:
            out.append((cur_start, a))
            cur_start, cur_tokens = a, size
        else:
            cur_tokens += size
    if cur_start < end:
        out.append((cur_start, end))
    return out


def split_document(doc: SourceDocument, budget: int, count: TokenCounter) -> list[SourceDocument]:
    """`doc` as one or more parts of at most `budget` tokens each, cut at paragraph boundaries if possible.

    Each part keeps the document's URL and its text is an exact substring of the document, so a
    passage copied from a part verifies against the whole document; its `heading_path` metadata names
    the headings its text starts under (they may lie in an earlier part).
    """
    ranges = _pieces(doc.content, 0, len(doc.content), budget, count, 0)
    if len(ranges) <= 1:
        return [doc]
    return [
        doc.model_copy(update={"content": doc.content[a:b], "content_hash": "",
                               "metadata": {**doc.metadata, "part": i + 1, "parts": len(ranges), "offset": a,
                                            "heading_path": heading_path(doc.content, a, doc.title)}})
        for i, (a, b) in enumerate(ranges)
    ]


def plan_batches(
    documents: Sequence[SourceDocument],
    *,
    budget: int,
    count: TokenCounter,
    render: Callable[[SourceDocument], str],
    max_batches: int,
) -> list[list[SourceDocument]]:
    """Documents (and parts of over-long ones) packed first-fit, in rank order, into batches whose
    rendered text stays within `budget` tokens. At most `max_batches`: the lowest-ranked text beyond
    that is left out (and logged)."""
    overhead = max(0, count(render(SourceDocument(url="", content=""))))
    batches: list[list[SourceDocument]] = []
    loads: list[int] = []
    for doc in documents:
        for part in split_document(doc, max(1, budget - overhead - count(doc.url) - count(doc.title)), count):
            size = count(render(part))
            slot = next((i for i, load in enumerate(loads) if load + size <= budget), None)
            if slot is None:
                if len(batches) >= max_batches:
                    log.warning(drops.BATCH_CAP, max_batches, part.url)
                    continue
                batches.append([])
                loads.append(0)
                slot = len(batches) - 1
            batches[slot].append(part)
            loads[slot] += size
    return batches


def extraction_budget(ctx: EvidentContext, count: TokenCounter) -> int:
    """Document tokens per extraction call: `context_budget_tokens`, lowered when the model's context
    window is known so that the instructions, the documents and the reply cap all fit in it. A tenth
    of the window is kept spare: counting is approximate unless the model's own tokenizer is injected."""
    if not ctx.context_window:
        return ctx.context_budget_tokens
    # start-up time: the extraction prompt brings LangChain's prompt templates, which the offline path never loads
    from evident.prompts.extraction import EXTRACTION_SYSTEM, EXTRACTION_USER

    instructions = count(EXTRACTION_SYSTEM + EXTRACTION_USER)
    room = ctx.context_window - reply_cap(ctx, "extract") - instructions - ctx.context_window // 10
    return max(256, min(ctx.context_budget_tokens, room))
