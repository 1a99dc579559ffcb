"""Which embeddings a run uses, or why it uses none (then EvidenT works by words only).

Order: `embeddings = "none"` in the settings switches them off; else the `Embeddings` given to
`build_graph(embeddings=...)` (or its factory's result for the run's `EvidentContext`); else the
provider of the settings; with no provider set, the local model when it is installed.

A missing install in that last case is not a fault: the run says "embeddings: off (...)" and goes
on. Everything else that keeps configured embeddings from working (a file not matching its sha256,
a provider misconfigured, a factory that raised) is logged once as a warning and reported the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from evident.context import EmbeddingsProvider, EvidentContext
from evident.embeddings.failures import EmbeddingsUnavailable
from evident.embeddings.model_files import (
    INSTALL_MODELS,
    INSTALL_RUNTIME,
    installed_models,
    locate_model_files,
    missing_runtime,
)
from evident.settings import section_field

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from evident.embeddings.scorer import SemanticScorer

log = logging.getLogger(__name__)

EmbeddingsFactory = Callable[[EvidentContext], "Embeddings | None"]
NOT_INSTALLED = (f"words only: the local embeddings model is not installed ({INSTALL_RUNTIME}, then "
                 f"{INSTALL_MODELS})")
SWITCHED_OFF = "words only: embeddings = \"none\" in the settings"
Provider = EmbeddingsProvider | Literal["custom"]


class EmbeddingsSettings(BaseModel):
    """What the embeddings are built from: the `embeddings*` settings of `EvidentContext`, named as in
    `[embeddings]`; a key left out has the setting's default there, where each is described. `provider=None`
    means the default: local when installed. Deployment settings: `RequestSettings` does not list them, so a
    served request cannot choose a model, a server or a file."""

    model_config = ConfigDict(frozen=True)

    provider: EmbeddingsProvider | None
    model: str | None
    base_url: str | None
    api_key_env: str
    dimensions: int | None
    timeout_s: float
    batch_size: int
    model_file: str | None
    tokenizer_file: str | None
    threads: int | None  # None: the cores this process may use (`local.available_cores`)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = EvidentContext.model_fields
        return {**{key: fields[name].get_default(call_default_factory=True) for key, name in _IN_CONTEXT.items()},
                **data}

    @classmethod
    def from_context(cls, ctx: EvidentContext) -> EmbeddingsSettings:
        return cls(**{key: getattr(ctx, name) for key, name in _IN_CONTEXT.items()})


# Each key's setting in `EvidentContext` (`model` is `embeddings_model`), named once rather than on every query.
_IN_CONTEXT = {key: section_field("embeddings", key) for key in EmbeddingsSettings.model_fields}


@dataclass(frozen=True)
class ResolvedEmbeddings:
    """The run's embeddings, or None and `reason`; `fault` tells a problem from a choice."""

    embeddings: Embeddings | None
    provider: Provider
    model_id: str | None = None
    reason: str = ""
    fault: bool = False
    batch_size: int = 32
    _scorer: list[SemanticScorer] = field(default_factory=list, repr=False, compare=False)

    @property
    def on(self) -> bool:
        return self.embeddings is not None

    @property
    def scorer(self) -> SemanticScorer | None:
        """A `SemanticScorer` over these embeddings (one per resolution); None when they are off."""
        if self.embeddings is None:
            return None
        if not self._scorer:
            # start-up time: the scorer brings numpy (~50 ms), which importing the embeddings' settings must not
            from evident.embeddings.scorer import SemanticScorer

            self._scorer.append(SemanticScorer(self.embeddings, model_id=self.model_id, batch_size=self.batch_size))
        return self._scorer[0]


def embeddings_note(resolved: ResolvedEmbeddings) -> str | None:
    """The line a run's notes carry when it works by words only: "embeddings: off (reason)"."""
    return None if resolved.on else f"embeddings: off ({resolved.reason})"


def describe(resolved: ResolvedEmbeddings) -> str:
    """One line for a trace or a report: "on (model id)" or "off (reason)"."""
    return f"on ({resolved.model_id})" if resolved.on else f"off ({resolved.reason})"


def _off(provider: Provider, reason: str, *, fault: bool) -> ResolvedEmbeddings:
    return ResolvedEmbeddings(None, provider, reason=reason, fault=fault)


def build_embeddings(settings: EmbeddingsSettings) -> ResolvedEmbeddings:
    """The embeddings of `settings`, or why there are none (not cached, no warning: `GraphEmbeddings` does both)."""
    # start-up time: the scorer brings numpy (~50 ms), which importing the embeddings' settings must not
    from evident.embeddings.scorer import model_id_of

    provider = settings.provider
    if provider == "none":
        return _off("none", SWITCHED_OFF, fault=False)
    if provider is None and (missing_runtime() is not None or not installed_models()):
        return _off("local", NOT_INSTALLED, fault=False)
    try:
        embeddings: Embeddings
        if provider == "openai":
            # start-up time: the served client brings LangChain and langchain_openai; only provider "openai" needs it
            from evident.embeddings.remote import openai_embeddings

            embeddings = openai_embeddings(settings)
        else:
            # start-up time: the local model brings LangChain and numpy; only the local provider needs it
            from evident.embeddings.local import LocalEmbeddings

            problem = missing_runtime()
            if problem:
                raise EmbeddingsUnavailable(problem)
            files = locate_model_files(settings.model_file, settings.tokenizer_file)
            embeddings = LocalEmbeddings(files, threads=settings.threads, batch_size=settings.batch_size)
    except EmbeddingsUnavailable as exc:
        return _off(provider or "local", f"words only: {exc.message}", fault=True)
    return ResolvedEmbeddings(embeddings, provider or "local", model_id=model_id_of(embeddings),
                              batch_size=settings.batch_size)


class GraphEmbeddings:
    """Where a graph gets its embeddings: given to `build_graph`, or built from each run's settings.

    Resolutions are kept per settings, so a model is located, checked and loaded once per process.
    """

    def __init__(self, embeddings: Embeddings | EmbeddingsFactory | None = None) -> None:
        if embeddings is not None and not (_is_embeddings(embeddings) or callable(embeddings)):
            raise TypeError("embeddings must be a LangChain Embeddings or a callable EvidentContext -> Embeddings")
        self._injected = embeddings
        self._lock = threading.Lock()
        self._cache: dict[EmbeddingsSettings, ResolvedEmbeddings] = {}
        self._warned: set[str] = set()

    def resolve(self, ctx: EvidentContext) -> ResolvedEmbeddings:
        """The run's embeddings, or why there are none; never raises."""
        settings = EmbeddingsSettings.from_context(ctx)
        if settings.provider == "none":
            return _off("none", SWITCHED_OFF, fault=False)
        if self._injected is not None:
            found = self._given(ctx, settings)
        else:
            with self._lock:
                cached = self._cache.get(settings)
            found = cached or build_embeddings(settings)
            if cached is None:
                with self._lock:
                    found = self._cache.setdefault(settings, found)
        if found.fault:
            self._warn(found.reason)
        return found

    def _given(self, ctx: EvidentContext, settings: EmbeddingsSettings) -> ResolvedEmbeddings:
        # start-up time: the scorer brings numpy (~50 ms), which importing the embeddings' settings must not
        from evident.embeddings.scorer import model_id_of

        given: Any = self._injected
        if not _is_embeddings(given):
            try:
                given = given(ctx)
            except Exception as exc:  # the caller's factory: report, never crash the query
                return _off("custom", f"words only: the embeddings factory failed: {type(exc).__name__}: {exc}",
                            fault=True)
            if given is None:
                return _off("custom", "words only: the embeddings factory returned None for this run", fault=False)
            if not _is_embeddings(given):
                return _off("custom", f"words only: the embeddings factory returned a {type(given).__name__}, "
                            "not an Embeddings", fault=True)
        return ResolvedEmbeddings(given, "custom", model_id=model_id_of(given), batch_size=settings.batch_size)

    def _warn(self, reason: str) -> None:
        with self._lock:
            if reason in self._warned:
                return
            self._warned.add(reason)
        log.warning("evident: embeddings: off (%s)", reason)


def _is_embeddings(value: object) -> bool:
    # Duck-typed so that this module does not import LangChain; Embeddings requires both methods.
    return callable(getattr(value, "embed_documents", None)) and callable(getattr(value, "embed_query", None))


DEFAULT_EMBEDDINGS = GraphEmbeddings()
"""The embeddings of the default graph: built from each run's `EvidentContext`."""


def resolve_embeddings(ctx: EvidentContext, source: GraphEmbeddings | None = None) -> ResolvedEmbeddings:
    """The run's embeddings (from `source`, by default the settings alone), or None with the reason."""
    return (source or DEFAULT_EMBEDDINGS).resolve(ctx)
