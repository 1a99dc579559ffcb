"""What a served request may set (`RequestSettings`), the graph's `context_schema` (`ContextWithDefaults`)
and how a run reads its settings (`run_settings`).

A served request is not the owner: it may set only the `RequestSettings` (bounded, harmless); sources, paths,
models, endpoints, keys and limits come from the deployment alone (docs/security.md). A run the LangGraph
server started is a request: every node reads its settings through `run_settings`, so a refused setting never
reaches a retriever, a model or a file, whatever the route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field, GetJsonSchemaHandler, PrivateAttr, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from evident.context import DeployedContext, EvidentContext
from evident.settings import ConfigError, invalid_setting, query_file_settings, read_config_file

if TYPE_CHECKING:  # the CLI reads settings without loading LangGraph
    from langgraph.runtime import Runtime


# What a served request may set for its own run, each with the bound a request must stay within (None: the
# field's own bounds already are harmless). Default, type, lower bound and description are the field's in
# `EvidentContext`: a request setting is that setting, only capped, so nothing is written twice.
REQUEST_BOUNDS: dict[str, int | None] = {
    "top_n": 50, "k": 50, "ngram_n": 12, "threshold": None, "drift": None, "bridge": 8, "unsupported": None,
    "sentence_threshold": None, "max_passages": 20,
}


def _request_field(name: str, cap: int | None) -> tuple[Any, Any]:
    owner = EvidentContext.model_fields[name]
    if cap is None:
        return owner.annotation, owner
    return owner.annotation, FieldInfo.merge_field_infos(
        owner, Field(le=cap, description=f"{owner.description} A request: at most {cap}."))


_REQUEST_FIELDS: dict[str, Any] = {name: _request_field(name, cap) for name, cap in REQUEST_BOUNDS.items()}
RequestSettings = create_model(
    "RequestSettings",
    __config__=ConfigDict(extra="forbid", title="EvidentContext"),
    __doc__="What a served request (run `context` or `config.configurable`, an assistant's context or config) "
    "may set for its own run. Each value is bounded so that no request can make the server do unbounded work; "
    "everything else is the deployment's (`evident.toml`, environment).",
    **_REQUEST_FIELDS,
)


REQUEST_SETTINGS = frozenset(RequestSettings.model_fields)

# Keys the LangGraph server itself puts into `configurable` (ids, headers, tracing): not settings.
_SERVER_KEYS = frozenset({"thread_id", "run_id", "assistant_id", "graph_id", "user_id", "cron_id",
                          "checkpoint_id", "checkpoint_ns", "checkpoint_map", "user-agent"})
_SERVER_PREFIXES = ("langgraph_", "__", "x-", "langsmith")


class RequestSettingsError(ConfigError):
    """A request named a setting it may not set (`status` 403) or gave an out-of-bounds value (422)."""

    def __init__(self, setting: str, message: str, status: int) -> None:
        super().__init__(message)
        self.setting = setting
        self.status = status


def split_request_settings(values: Any) -> tuple[dict[str, Any], list[RequestSettingsError]]:
    """A request's settings: the accepted ones, and one error per refused setting (in name order).

    `None` values count as not given (forms send them for every field); the LangGraph server's
    own keys are left to it."""
    if values is None:
        return {}, []
    if not isinstance(values, dict):
        return {}, [RequestSettingsError("context", "the request's settings must be an object", 422)]
    errors = [RequestSettingsError(str(k), f"setting {str(k)!r} may not be set by a request: the server "
                                   "sets it from authentication", 403)
              for k in values if str(k).startswith("langgraph_auth")]
    given = {str(k): v for k, v in values.items() if v is not None
             and str(k) not in _SERVER_KEYS and not str(k).startswith(_SERVER_PREFIXES)}
    for name in sorted(set(given) - REQUEST_SETTINGS):
        errors.append(RequestSettingsError(
            name, f"setting {name!r} may not be set by a request: it comes from the deployment "
            f"(evident.toml, environment); a request may set only {', '.join(sorted(REQUEST_SETTINGS))}", 403))
    allowed = {k: v for k, v in given.items() if k in REQUEST_SETTINGS}
    try:
        RequestSettings.model_validate(allowed)
    except ValidationError as exc:
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "context"
            errors.append(RequestSettingsError(name, f"setting {name!r} of the request: {err['msg']}", 422))
            allowed.pop(name, None)
    errors.sort(key=lambda e: e.setting)
    return allowed, errors


def check_request_settings(values: Any) -> dict[str, Any]:
    """The request's settings if every one is allowed and in bounds; else the first problem, raised."""
    allowed, errors = split_request_settings(values)
    if errors:
        raise errors[0]
    return allowed


def served(runtime: Runtime[EvidentContext] | None) -> bool:
    """Whether the LangGraph server started this run (it sets the assistant and graph it runs)."""
    return getattr(runtime, "server_info", None) is not None


def configured_settings(runtime: Runtime[EvidentContext] | None) -> tuple[dict[str, Any], list[RequestSettingsError]]:
    """The request settings of a local run's `config["configurable"]`, checked against a served request's
    bounds: the accepted values and the refused ones. Other keys are left alone: `configurable` is shared with
    LangGraph and with the graph around EvidenT (an agent's own settings), and a deployment-only setting
    never comes from it. A served run has none here (the server has moved `configurable` into its context)."""
    if runtime is None or served(runtime):
        return {}, []
    try:
        from langgraph.config import get_config  # here: the CLI reads settings without loading LangGraph

        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return {}, []
    allowed, errors = split_request_settings({k: v for k, v in configurable.items() if k in REQUEST_SETTINGS})
    return RequestSettings.model_validate(allowed).model_dump(include=set(allowed)), errors


def refused_settings(runtime: Runtime[EvidentContext] | None) -> list[RequestSettingsError]:
    """The settings a served run's request may not set, or a local run's `configurable` gave out of bounds
    (none for the owner's `context`)."""
    if not served(runtime):
        return configured_settings(runtime)[1]
    ctx = getattr(runtime, "context", None)
    if isinstance(ctx, ContextWithDefaults):
        return ctx.refused
    return split_request_settings(dict(ctx))[1] if isinstance(ctx, Mapping) else []


def run_settings(runtime: Runtime[EvidentContext] | None) -> EvidentContext:
    """The run's `EvidentContext`; `evident.toml` and environment defaults when none was passed.

    For a served run, only the request's allowed settings apply over the deployment's: a refused
    one is left out here (and reported by `retrieve`, which ends the query). A local run's precedence,
    lowest first: defaults < `evident.toml` < environment < the request settings of `configurable` <
    what `context` sets (a dict's keys, an `EvidentContext`'s `model_fields_set`)."""
    ctx: object = getattr(runtime, "context", None)
    if served(runtime):
        if isinstance(ctx, ContextWithDefaults):
            return ctx.as_request()  # checked once, when LangGraph built the run's context
        if isinstance(ctx, Mapping):
            return ContextWithDefaults(**split_request_settings(dict(ctx))[0])
    configured = configured_settings(runtime)[0]
    if isinstance(ctx, EvidentContext):
        given = ctx.requested if isinstance(ctx, ContextWithDefaults) else ctx.model_fields_set
        update = {name: value for name, value in configured.items() if name not in given}
        return ctx.model_copy(update=update) if update else ctx
    if isinstance(ctx, Mapping):
        return EvidentContext.from_env(**{**configured, **ctx})
    return EvidentContext.from_env(**configured)


def file_defaults() -> dict[str, Any]:
    """The query settings of `evident.toml` (or `EVIDENT_CONFIG`), read once per config path: call it before
    a server's event loop runs, where reading a file is a blocking call."""
    found = read_config_file(None, cached=True)
    return query_file_settings(found, EvidentContext.model_fields) if found else {}


class ContextWithDefaults(EvidentContext):
    """`EvidentContext` whose unset fields come from `evident.toml` and the environment: the graph's
    `context_schema`. LangGraph builds a run's context from a dict with `context_schema(**dict)` (how the
    server hands over every request's `context`): the deployment's settings (`DeployedContext`, read by
    pydantic-settings once per configuration) lie under the request's, which are checked against a served
    request's bounds once, here. `requested` keeps the given
    values, `refused` the settings a served request may not set. Its JSON schema, which the server publishes
    (and filters requests by), is the `RequestSettings`."""

    model_config = ConfigDict(title="EvidentContext")
    _requested: dict[str, Any] = PrivateAttr(default_factory=dict)
    _allowed: dict[str, Any] = PrivateAttr(default_factory=dict)
    _refused: list[RequestSettingsError] = PrivateAttr(default_factory=list)
    _as_request: ContextWithDefaults | None = PrivateAttr(None)

    def __init__(self, **data: Any) -> None:
        given = {k: v for k, v in data.items() if v is not None}
        try:
            super().__init__(**{**DeployedContext.deployment(cached=True), **given})
        except ValidationError as exc:
            raise invalid_setting(exc) from None
        self._requested = given
        self._allowed, self._refused = split_request_settings(given)

    @property
    def requested(self) -> dict[str, Any]:
        return dict(self._requested)

    @property
    def refused(self) -> list[RequestSettingsError]:
        return list(self._refused)

    def as_request(self) -> ContextWithDefaults:
        """These settings as a served run reads them: the deployment's, and only the request's allowed ones."""
        if not self._refused:
            return self
        if self._as_request is None:
            self._as_request = ContextWithDefaults(**self._allowed)
        return self._as_request

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # The same schema wherever this class is shown: `model_json_schema` (the graph's context schema) and
        # inside another schema (the server's config schema, the type of `configurable`).
        return handler(RequestSettings.__pydantic_core_schema__)
