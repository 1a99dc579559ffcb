"""Model settings, retry policy, token counting and the support measure, checked alone (no server)."""

from __future__ import annotations

import email.utils
import hashlib
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from evident.alignment.models import AlignmentDecision
from evident.citations.support import GeneratedSentenceSupport, token_support
from evident.context import EvidentContext
from evident.llm.batching import approx_counter, forget_encodings, make_counter, tiktoken_cached
from evident.llm.failures import ModelFailure, backoff_delay, call_with_retries, describe_failure, is_retryable
from evident.llm.models import Models, ModelSettings
from evident.prompts import BASELINE_PROMPTS, EXTRACTION_PROMPT, GENERATION_PROMPT, render_numbered_documents


def _status_error(cls: type[openai.APIStatusError], status: int, headers: dict[str, str] | None = None) -> Any:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return cls(f"HTTP {status}", response=response, body=None)


def test_settings_resolve_the_key_and_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-1")
    s = ModelSettings.from_context(EvidentContext(model="m", api_key_env="MY_KEY"))
    assert s.api_key.get_secret_value() == "sk-1" and s.temperature == 0.0
    assert "sk-1" not in repr(s)
    local = ModelSettings.from_context(EvidentContext(model="llama3.1", base_url="http://127.0.0.1:11434/v1"))
    assert local.api_key.get_secret_value() == "not-needed"  # Ollama & co. ignore it; the client needs one
    with pytest.raises(ModelFailure, match="OPENAI_API_KEY"):
        ModelSettings.from_context(EvidentContext(model="gpt-4o-mini"))
    with pytest.raises(ModelFailure, match="no model is configured"):
        ModelSettings.from_context(EvidentContext(mode="llm"))


def test_models_are_cached_per_settings_and_purpose() -> None:
    models = Models()
    ctx = EvidentContext(model="m", base_url="http://127.0.0.1:9/v1", api_key="k", model_timeout_s=3)
    a, b = models.get(ctx, "extract"), models.get(ctx, "extract")
    g = models.get(ctx, "generate")
    assert a is b and a is not g
    assert a.disable_streaming is True and g.disable_streaming is False
    assert a.max_retries == 0 and a.request_timeout == 3 and a.temperature == 0


def test_retry_policy() -> None:
    ctx = EvidentContext(model_backoff_s=0.5, model_backoff_max_s=4, model_max_retries=3)
    assert [backoff_delay(i, ctx) for i in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert backoff_delay(0, ctx, _status_error(openai.RateLimitError, 429, {"retry-after": "2"})) == 2.0
    assert backoff_delay(0, ctx, _status_error(openai.RateLimitError, 429, {"retry-after": "60"})) == 4.0
    assert backoff_delay(0, ctx, _status_error(openai.RateLimitError, 429, {"retry-after-ms": "20"})) == 0.02
    soon = email.utils.formatdate(time.time() + 2.5, usegmt=True)
    assert 1.0 <= backoff_delay(0, ctx, _status_error(openai.RateLimitError, 429, {"retry-after": soon})) <= 2.5
    # An unreadable Retry-After is no hint: the backoff, never an exception in the middle of a retry.
    assert backoff_delay(1, ctx, _status_error(openai.RateLimitError, 429, {"retry-after": "soon"})) == 1.0
    assert is_retryable(_status_error(openai.RateLimitError, 429))
    assert is_retryable(_status_error(openai.InternalServerError, 503))
    assert not is_retryable(_status_error(openai.BadRequestError, 400))
    assert not is_retryable(openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1")))

    calls: list[int] = []
    sleeps: list[float] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise _status_error(openai.RateLimitError, 429)
        return "ok"

    assert call_with_retries(flaky, ctx, sleep=sleeps.append) == "ok"
    assert sleeps == [0.5, 1.0]
    with pytest.raises(openai.BadRequestError):
        call_with_retries(lambda: (_ for _ in ()).throw(_status_error(openai.BadRequestError, 400)), ctx,
                          sleep=sleeps.append)
    failure = describe_failure(_status_error(openai.RateLimitError, 429), ctx)
    assert failure.kind == "model" and "429" in failure.message and "3 retries" in failure.message


def test_token_counting_never_reaches_the_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    ctx = EvidentContext(model="gpt-4o-mini")
    assert not tiktoken_cached("o200k_base")
    count = make_counter(ctx)  # "auto" without a cached BPE file: the approximation, no download
    assert count("x" * 400) == 100 == approx_counter(4.0)("y" * 400)
    assert make_counter(EvidentContext(token_counter="approx", chars_per_token=2))("abcd") == 2

    url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"cached")
    assert tiktoken_cached("o200k_base")

    import tiktoken

    def offline(name: str) -> Any:
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    forget_encodings()  # an encoding loaded by an earlier test would not reach the network at all
    try:
        # Explicit tiktoken that cannot load: the approximation, never an exception.
        assert make_counter(EvidentContext(model="gpt-4o-mini", token_counter="tiktoken"))("x" * 40) == 10
    finally:
        forget_encodings()  # the failure remembered here is this test's alone


def test_generated_sentence_measure() -> None:
    quote = "Expense reports must be submitted in Ledgerly within 30 days of the trip's end date."
    d = AlignmentDecision(passage_id="p1", action="kept", url="u", original_url="u", overlap=1.0, quote=quote)
    m = GeneratedSentenceSupport(0.8)
    assert m.passes(m.score("You must submit your expense report in Ledgerly within 30 days after the trip ends.", d))
    assert m.score("Expense reports must be submitted in Ledgerly within 45 days of the trip's end date.", d) == 0.0
    assert not m.passes(m.score("Managers approve expense reports every Friday.", d))
    assert token_support("", quote) == 0.0
    # Negations: added, dropped, or borrowed from another clause of the passage, all flip the claim.
    two = quote + " Receipts must not be shared with vendors."
    assert token_support("Expense reports must not be submitted in Ledgerly.", quote) == 0.0
    assert token_support("Expense reports must not be submitted in Ledgerly.", two) == 0.0
    assert token_support("Receipts must be shared with vendors.", two) == 0.0
    assert token_support("Receipts must never be shared with vendors.", two) == 1.0


def test_prompts_are_templates_naming_their_paper_section() -> None:
    import evident.prompts.baselines as baselines
    import evident.prompts.extraction as extraction
    import evident.prompts.generation as generation

    assert "§3.2" in (extraction.__doc__ or "") and "D.1" in (extraction.__doc__ or "")
    assert "§3.4" in (generation.__doc__ or "") and "D.2" in (generation.__doc__ or "")
    assert "Appendix B" in (baselines.__doc__ or "") and "C.1" in (baselines.__doc__ or "")
    assert set(EXTRACTION_PROMPT.input_variables) == {"documents", "query"}
    assert set(GENERATION_PROMPT.input_variables) == {"passages", "query"}
    for name, prompt in BASELINE_PROMPTS.items():
        assert set(prompt.input_variables) == {"documents", "query"}, name
        text = "\n".join(m.content for m in prompt.format_messages(documents=render_numbered_documents([]), query="q"))
        assert "References" in text
    ges = "\n".join(m.content for m in BASELINE_PROMPTS["ges"].format_messages(documents="", query="q"))
    direct = "\n".join(m.content for m in BASELINE_PROMPTS["direct"].format_messages(documents="", query="q"))
    assert "Every sentence of the answer must be backed" in ges and "Every sentence of the answer" not in direct
    pilot = "\n".join(m.content for m in BASELINE_PROMPTS["pilot"].format_messages(documents="", query="q"))
    assert "Not sufficient information to answer." in pilot
