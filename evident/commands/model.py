"""`evident model check`: probe the configured chat model and recommend the settings that suit it.

What it asks the server, in order: `/v1/models` (reachable; the model ids; llama-cpp-python's
`meta.n_ctx_train`), llama.cpp's `/props` (`n_ctx`, `total_slots`), then three chat calls on a
built-in sample: one extraction down the structured-output ladder (which rung works, is the reply
verbatim evidence), one call with a 16-token cap asking for a long reply (is the cap honoured), and
one generation over the verified sample passage (is it cited). Exit 2 when no model is configured
or the server cannot be reached; 1 when it answers but extraction or generation does not work.

The embeddings are checked first (`--embeddings`: only them): provider, model id, whether they load,
their dimension and the similarity of a sample pair, or why EvidenT works by words only. Exit 1 when
configured embeddings fail (a file not matching its sha256, a server down); words only by choice or
because the local model is not installed is not a failure.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape

from evident.alignment import align
from evident.alignment.aligner import drop_non_evidence
from evident.alignment.models import SourceDocument
from evident.citations.answer import render_answer, sentences_in
from evident.commands.common import fail, print_json, safe_text
from evident.context import EvidentContext
from evident.embeddings import EmbeddingsError, resolve_embeddings
from evident.llm.extraction import extract_with_model, forget_rungs
from evident.llm.failures import ModelFailure, describe_failure
from evident.llm.models import DEFAULT_REPLY_TOKENS, Models, ModelSettings
from evident.llm.replies import text_of
from evident.llm.servers import OPENAI_CONCURRENCY, is_openai, server_root
from evident.nodes.generate import generate_with_model
from evident.settings import ConfigError

COMMAND = "model check"
SAMPLE_URL = "https://evident.invalid/sample/expenses"
SAMPLE_TEXT = (
    "# Expense reports\n\n"
    "Expense reports must be submitted within 30 days of the end of a trip. "
    "Reports above 5,000 EUR need the approval of a director.\n"
)
SAMPLE_QUERY = "How many days do I have to submit an expense report?"
CAP_PROBE_TOKENS = 16
# The sample's replies are short: a small cap keeps a model that does not stop from taking minutes.
SAMPLE_REPLY_TOKENS = 256
_PROPS = "/props n_ctx"
CAP_PROMPT = "Count from 1 to 300, the numbers separated by spaces, and write nothing else."
# A question and the sentence that answers it in other words, and a sentence about something else.
EMBEDDINGS_QUERY = "After I rotate an API key, how long does the old key keep working?"
EMBEDDINGS_ANSWER = "The default grace period after a rotation is 24 hours."
EMBEDDINGS_UNRELATED = "Expense reports must be submitted within 30 days of the end of a trip."


class EmbeddingsReport(BaseModel):
    """What the embeddings check found; `state` "off" is words only by choice or install, "failed" a fault."""

    state: Literal["on", "off", "failed"]
    provider: str
    model_id: str | None = None
    dimension: int | None = None
    load_ms: float | None = None
    similarity_answer: float | None = None
    similarity_unrelated: float | None = None
    reason: str = ""


class Call(BaseModel):
    ok: bool = False
    latency_ms: float | None = None
    detail: str = ""


class ModelReport(BaseModel):
    """What the probe found; `recommended` is the evident.toml [model] section it suggests."""

    embeddings: EmbeddingsReport | None = None
    model: str
    base_url: str | None
    reachable: bool = False
    model_ids: list[str] = Field(default_factory=list)
    context_window: int | None = None
    context_window_from: str = ""
    slots: int | None = None
    structured_output: str | None = None
    cap_honoured: bool | None = None
    cap_reply_tokens: int | None = None
    extraction: Call = Field(default_factory=Call)
    generation: Call = Field(default_factory=Call)
    recommended: dict[str, Any] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


def _get_json(client: Any, url: str) -> dict[str, Any] | None:
    try:
        resp = client.get(url)
    except Exception:
        return None
    if resp.status_code != 200:
        return None
    try:
        body = resp.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _probe_server(report: ModelReport, base_url: str | None, key: str, timeout_s: float) -> None:
    """/v1/models and /props; sets `reachable` (fails the command when the server does not answer)."""
    root = base_url or "https://api.openai.com/v1"
    with httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {key}"}) as client:
        try:
            resp = client.get(root.rstrip("/") + "/models")
        except httpx.HTTPError as exc:
            fail(COMMAND, f"cannot reach the model server at {root}: {type(exc).__name__}: {exc}")
        report.reachable = True
        try:
            models = resp.json().get("data") or [] if resp.status_code == 200 else []
        except ValueError:
            models = []
        report.model_ids = [str(m.get("id")) for m in models if isinstance(m, dict) and m.get("id")]
        if report.model_ids and report.model not in report.model_ids and len(report.model_ids) > 1:
            report.problems.append(f"the server does not list the model {report.model!r}")
        for m in models:
            meta = m.get("meta") if isinstance(m, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get("n_ctx_train"), int):
                report.context_window = meta["n_ctx_train"]
                report.context_window_from = "/v1/models meta.n_ctx_train (the server may run a smaller n_ctx)"
        props = _get_json(client, server_root(root) + "/props") if base_url else None
        if props:
            settings = props.get("default_generation_settings") or {}
            n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
            n_ctx = n_ctx if isinstance(n_ctx, int) else props.get("n_ctx")
            if isinstance(n_ctx, int) and n_ctx > 0:
                report.context_window, report.context_window_from = n_ctx, _PROPS
            slots = props.get("total_slots")
            report.slots = slots if isinstance(slots, int) and slots > 0 else None


def _timed(call: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = call()
    return out, round((time.perf_counter() - started) * 1000, 1)


def _probe_calls(report: ModelReport, ctx: Any) -> None:
    models = Models()
    ctx = ctx.model_copy(update={"model_max_tokens": min(ctx.model_max_tokens or SAMPLE_REPLY_TOKENS,
                                                         SAMPLE_REPLY_TOKENS)})
    doc = SourceDocument(url=SAMPLE_URL, title="Expense reports", content=SAMPLE_TEXT, source_type="policy")
    forget_rungs()  # probe from the top of the ladder, whatever an earlier call found
    verified = []
    try:
        (passages, note, rung), ms = _timed(lambda: extract_with_model(models.get(ctx, "extract"), ctx,
                                                                       SAMPLE_QUERY, [doc]))
        decisions = [drop_non_evidence(d, ctx.min_evidence_tokens) for d in
                     align(passages, [doc], n=ctx.ngram_n, threshold=ctx.threshold)]
        verified = [d for d in decisions if d.verified]
        report.structured_output = rung
        report.extraction = Call(ok=bool(verified), latency_ms=ms,
                                 detail=f"{len(passages)} passage(s), {len(verified)} verified; {note}")
        if not verified:
            report.problems.append("the extraction reply held no passage that verifies against the sample")
    except Exception as exc:
        report.extraction = _failed(report, "extraction", describe_failure(exc, ctx).message)

    capped = ctx.model_copy(update={"model_max_tokens": CAP_PROBE_TOKENS})
    try:
        message, _ = _timed(lambda: models.get(capped, "generate").invoke(CAP_PROMPT))
        meta = getattr(message, "response_metadata", None) or {}
        used = (meta.get("token_usage") or {}).get("completion_tokens")
        report.cap_reply_tokens = used if isinstance(used, int) else None
        # Some servers count a token or two past the cap (an end-of-turn token): allow slack.
        report.cap_honoured = meta.get("finish_reason") == "length" or (
            isinstance(used, int) and used <= CAP_PROBE_TOKENS + 2 and len(text_of(message)) < 200)
        if not report.cap_honoured:
            report.problems.append(f"the output cap ({CAP_PROBE_TOKENS} tokens) was not honoured "
                                   f"({used} tokens came back)")
    except Exception as exc:
        report.problems.append(f"the output-cap probe failed: {describe_failure(exc, ctx).message}")

    if not verified:
        return
    try:
        state: Any = {"query": SAMPLE_QUERY, "verified": verified, "documents": [doc]}
        lines, ms = _timed(lambda: generate_with_model(models.get(ctx, "generate"), ctx, state))
        cited = any(SAMPLE_URL in sentence.urls for sentence in sentences_in(lines))
        report.generation = Call(ok=cited, latency_ms=ms, detail=render_answer(lines)[:300])
        if not cited:
            report.problems.append("the generated sentence cites no URL (verify re-cites what the passages support)")
    except Exception as exc:
        report.generation = _failed(report, "generation", describe_failure(exc, ctx).message)


def _failed(report: ModelReport, step: str, message: str) -> Call:
    """The record of a probe call that raised, its failure also listed among the report's problems."""
    report.problems.append(f"{step} failed: {message}")
    return Call(detail=message)


def _recommend(report: ModelReport, ctx: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if report.structured_output:
        out["structured_output"] = report.structured_output
    if report.context_window and report.context_window_from == _PROPS:
        out["context_window"] = report.context_window  # the training context may exceed the server's
    # A local server that does not report its slots is assumed to run one request at a time.
    out["concurrency"] = report.slots or (OPENAI_CONCURRENCY if is_openai(report.base_url) else 1)
    out["max_tokens"] = ctx.model_max_tokens or DEFAULT_REPLY_TOKENS["extract"]
    if report.extraction.latency_ms:
        # The sample prompt is about 700 tokens; a full batch is up to the context window.
        scale = (report.context_window or 8192) / 700
        out["timeout_s"] = max(60, math.ceil(report.extraction.latency_ms / 1000 * scale * 1.5))
    return out


def check_embeddings(ctx: Any) -> EmbeddingsReport:
    """Resolve the run's embeddings and embed the sample pair with them (a real call, a real model)."""
    resolved = resolve_embeddings(ctx)
    scorer = resolved.scorer
    if scorer is None:
        return EmbeddingsReport(state="failed" if resolved.fault else "off", provider=resolved.provider,
                                reason=resolved.reason)
    report = EmbeddingsReport(state="on", provider=resolved.provider, model_id=resolved.model_id)
    try:
        query, ms = _timed(lambda: scorer.embed_query(EMBEDDINGS_QUERY))
        scores = scorer.similarities(query, [EMBEDDINGS_ANSWER, EMBEDDINGS_UNRELATED])
    except EmbeddingsError as exc:
        return report.model_copy(update={"state": "failed", "reason": f"words only: {exc.message}"})
    return report.model_copy(update={"dimension": int(query.shape[0]), "load_ms": ms,
                                     "similarity_answer": round(float(scores[0]), 3),
                                     "similarity_unrelated": round(float(scores[1]), 3)})


def _print_embeddings(report: EmbeddingsReport) -> None:
    out = Console(highlight=False, soft_wrap=True)
    if report.state != "on":
        label = "[yellow]embeddings:[/]" if report.state == "failed" else "[bold]embeddings:[/]"
        out.print(f"{label} off ({escape(safe_text(report.reason))})")
        return
    out.print(f"[bold]embeddings:[/] {escape(safe_text(report.provider))}, {escape(safe_text(report.model_id or ''))}")
    out.print(f"[bold]embeddings dimension:[/] {report.dimension}; first call {report.load_ms:.0f} ms (with loading)")
    out.print(f"[bold]embeddings sample:[/] {report.similarity_answer:.3f} for an answer in other words, "
              f"{report.similarity_unrelated:.3f} for an unrelated sentence")


def check(ctx: Any) -> ModelReport:
    if not ctx.model:
        fail(COMMAND, "no model is configured: set EVIDENT_MODEL (or [model] name in evident.toml)")
    try:
        settings = ModelSettings.from_context(ctx)
    except ModelFailure as exc:
        fail(COMMAND, exc.message)
    report = ModelReport(model=ctx.model, base_url=settings.base_url)
    _probe_server(report, settings.base_url, settings.api_key.get_secret_value(), min(ctx.model_timeout_s, 10.0))
    _probe_calls(report, ctx)
    report.recommended = _recommend(report, ctx)
    return report


def _print(report: ModelReport) -> None:
    out = Console(highlight=False, soft_wrap=True)

    def line(label: str, value: Any) -> None:
        out.print(f"[bold]{label}:[/] {escape(safe_text(str(value)))}")

    line("model", f"{report.model} at {report.base_url or 'OpenAI'}")
    line("server lists", ", ".join(report.model_ids) or "(nothing)")
    line("context window", f"{report.context_window} ({report.context_window_from})" if report.context_window
         else "unknown (the server does not say)")
    line("parallel slots", report.slots or "unknown (the server does not say)")
    line("structured output", report.structured_output or "none works")
    line("output cap honoured", {True: "yes", False: "no", None: "unknown"}[report.cap_honoured])
    for name, call in (("extraction", report.extraction), ("generation", report.generation)):
        took = f" in {call.latency_ms:.0f} ms" if call.latency_ms is not None else ""
        line(name, f"{'ok' if call.ok else 'FAILED'}{took}: {call.detail}")
    for problem in report.problems:
        out.print(f"[yellow]warning:[/] {escape(safe_text(problem))}")
    out.print(escape("\nRecommended evident.toml settings:\n[model]"))
    for key, value in report.recommended.items():
        out.print(escape(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}"))


def run(config: Any, *, json_out: bool = False, embeddings_only: bool = False) -> int:
    try:
        ctx = EvidentContext.from_env(config, mode="llm")
    except ConfigError as exc:
        fail(COMMAND, str(exc))
    embeddings = check_embeddings(ctx)
    embeddings_code = 1 if embeddings.state == "failed" else 0
    if embeddings_only:
        if json_out:
            print_json({"embeddings": embeddings.model_dump(mode="json")})
        else:
            _print_embeddings(embeddings)
        return embeddings_code
    if not json_out:
        _print_embeddings(embeddings)  # before the chat model's probe, which may end the command
    report = check(ctx)
    report.embeddings = embeddings
    if json_out:
        print_json(report.model_dump(mode="json"))
    else:
        _print(report)
    return max(embeddings_code, 0 if report.extraction.ok and report.generation.ok else 1)
