"""The model server behind a base URL: whether it is OpenAI's, and how many requests it takes at once.

Servers differ (docs/llm.md has the table). Requests to one server are limited to
`model_concurrency` in flight (`server_slot`): the rest queue here, so each request's timeout
counts from the moment it is sent, not from when a one-slot server gets round to it. Without the
setting, a llama.cpp `llama-server` is asked how many slots it has (`/props`, once per process).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from evident.context import EvidentContext
from evident.settings import environment_value

DEFAULT_CONCURRENCY = 2  # a local server that does not say how many slots it has
OPENAI_CONCURRENCY = 4
_OPENAI_HOSTS = ("api.openai.com",)


def is_openai(base_url: str | None) -> bool:
    """OpenAI's own API (no base URL, or its host): the only server that needs no `max_tokens` twin."""
    return not base_url or any(h in base_url for h in _OPENAI_HOSTS)


def resolved_base_url(ctx: EvidentContext) -> str | None:
    return ctx.base_url or environment_value("OPENAI_BASE_URL") or None


def server_root(base_url: str) -> str:
    """The server's root URL: llama.cpp serves /props and /health beside /v1."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


_slots_lock = threading.Lock()
_slots: dict[str, tuple[int, threading.BoundedSemaphore]] = {}
_probed_slots: dict[str, int | None] = {}


def probe_slots(base_url: str, timeout_s: float = 2.0) -> int | None:
    """The parallel slots a llama.cpp `llama-server` reports on /props (`total_slots`); None when the
    server does not say (llama-cpp-python, vLLM, Ollama, OpenAI...). One request per base URL per process."""
    with _slots_lock:
        if base_url in _probed_slots:
            return _probed_slots[base_url]
    found: int | None = None
    try:
        resp = httpx.get(server_root(base_url) + "/props", timeout=timeout_s)
        value = resp.json().get("total_slots") if resp.status_code == 200 else None
        found = int(value) if isinstance(value, int) and value > 0 else None
    except Exception:  # any answer but a slot count means "unknown"
        found = None
    with _slots_lock:
        _probed_slots[base_url] = found
    return found


def concurrency(ctx: EvidentContext, base_url: str | None) -> int:
    """Requests in flight to one server: the setting, else its reported slots, else a small default."""
    if ctx.model_concurrency:
        return ctx.model_concurrency
    if is_openai(base_url):
        return OPENAI_CONCURRENCY
    return probe_slots(base_url or "") or DEFAULT_CONCURRENCY


def model_base_url(model: Any, ctx: EvidentContext) -> str | None:
    """Where `model` sends its requests: an injected ChatOpenAI's own base URL, else the settings'."""
    return getattr(model, "openai_api_base", None) or resolved_base_url(ctx)


@contextmanager
def server_slot(ctx: EvidentContext, model: Any) -> Iterator[None]:
    """Hold one of the server's request slots for one request (module docstring). Keyed by base URL:
    every model and purpose on one server shares its slots."""
    base_url = model_base_url(model, ctx)
    if base_url is None and not ctx.model:
        yield  # an injected non-OpenAI chat model: nothing to queue for
        return
    key = base_url or "openai"
    limit = concurrency(ctx, base_url)
    with _slots_lock:
        found = _slots.get(key)
        if found is None or found[0] != limit:
            found = (limit, threading.BoundedSemaphore(limit))
            _slots[key] = found
    with found[1]:
        yield
