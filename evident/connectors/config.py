"""Sources from configuration (`[[sources]]` in evident.toml, or dicts in `EvidentContext.sources`).

Every source is validated (`source_settings`: one settings class per type, each building its retriever)
and built on its own: a source with an unknown type, a missing credential or a bad setting becomes a
configuration `SourceError` naming it, and the other sources still answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr

from evident.connectors.imported import construct, load_object
from evident.connectors.source import Source, SourceConfigError
from evident.connectors.source_settings import (
    SOURCE_TYPES,
    AnySourceSettings,
    ConfluenceSettings,
    DocsSettings,
    LangChainSettings,
    LoaderSettings,
    LocalSettings,
    MediaWikiSettings,
    PostgresSettings,
    SourceSettings,
    environment_names,
    gateway_base,
    parse_settings,
    require_psycopg,
)
from evident.context import EvidentContext
from evident.models import SourceError

if TYPE_CHECKING:
    from evident.connectors.postgres.dsn import PostgresDsn

__all__ = [
    "SOURCE_TYPES", "AnySourceSettings", "ConfluenceSettings", "Defaults", "DocsSettings", "LangChainSettings",
    "LoaderSettings", "LocalSettings", "MediaWikiSettings", "PostgresSettings", "SourceSettings", "build_source",
    "build_sources", "construct", "environment_names", "gateway_base", "load_object",
    "parse_settings", "postgres_dsn", "require_psycopg",
]


class Defaults(BaseModel):
    """What a source does not set comes from the query settings (`k`, `retrieve_timeout_s`)."""

    k: int = EvidentContext.model_fields["k"].default
    timeout_s: float = EvidentContext.model_fields["retrieve_timeout_s"].default


def build_source(settings: SourceSettings, defaults: Defaults) -> Source:
    k = settings.k or defaults.k
    timeout = settings.timeout_s or defaults.timeout_s
    secrets: list[SecretStr] = []
    retriever = settings.build(k, timeout, secrets)
    return Source(
        name=settings.name, retriever=retriever, k=k, timeout_s=timeout, weight=settings.weight,
        source_type=settings.source_type if settings.source_type is not None else settings.default_source_type,
        default_acl=settings.default_acl, acl=settings.acl, secrets=secrets,
    )


def build_sources(raw_sources: list[Any], defaults: Defaults) -> tuple[list[Source], list[SourceError]]:
    """Every buildable source, and a configuration error for each one that is not."""
    sources: list[Source] = []
    errors: list[SourceError] = []
    names: set[str] = set()
    for position, raw in enumerate(raw_sources, start=1):
        try:
            settings = parse_settings(raw, position)
            if settings.name in names:
                raise SourceConfigError(settings.name, "another source has the same name")
            names.add(settings.name)
            sources.append(build_source(settings, defaults))
        except SourceConfigError as exc:
            errors.append(SourceError(source=exc.source, kind="config", message=exc.message))
    return sources, errors


def postgres_dsn(settings: PostgresSettings) -> PostgresDsn:
    """The source's connection string (`PostgresSettings.resolved_dsn`)."""
    return settings.resolved_dsn()
