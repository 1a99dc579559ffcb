"""The settings of one configured source (`[[sources]]` in evident.toml), per source type, validated.

Credentials are never written in the configuration, only the names of the environment variables
that hold them (`token_env = "CONFLUENCE_TOKEN"`); building sources from these settings: `config`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evident.connectors.acl import AclError, DefaultAcl, parse_acl
from evident.connectors.source import SourceConfigError

SOURCE_TYPES = ("confluence", "docs", "langchain", "loader", "local", "mediawiki", "postgres")


class SourceSettings(BaseModel):
    """Settings every source type has."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    type: str
    source_type: str | None = Field(None, description="wiki, docs, policy, ...; default per type")
    k: int | None = Field(None, ge=1, le=100, description="Documents asked from this source (default: k).")
    timeout_s: float | None = Field(None, gt=0, description="Deadline (default: retrieve_timeout_s).")
    weight: float = Field(1.0, gt=0)
    default_acl: DefaultAcl = "public"
    acl: Any = None
    verify_tls: bool | str = True
    trust_env: bool = False
    base_dir: str | None = Field(None, description="Set by the loader: relative paths are relative to it.")

    def path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() or not self.base_dir else Path(self.base_dir) / path


class LocalSettings(SourceSettings):
    type: Literal["local"]
    paths: list[str] = Field(min_length=1)
    index_path: str | None = None
    candidate_pool: int = Field(
        200, ge=0,  # index.visible_ranking.CANDIDATE_POOL
        description="candidates a signed-in or filtered search ranks exactly at most, those of the highest upper "
                    "bounds (larger: fewer near-duplicates left out, slower; 0: no bound, exact, linear)")
    follow_symlinks: bool = False  # as the top-level settings of the same names (docs/security.md)
    max_file_mb: float = Field(20.0, gt=0)
    section_chars: int = Field(100_000, ge=1000)


class PostgresSettings(SourceSettings):
    """A PostgreSQL database holding the documents of `paths` (evident/connectors/postgres)."""

    type: Literal["postgres"]
    dsn: str | None = Field(None, description="libpq connection string or URI (prefer dsn_env: it may hold a password)")
    dsn_env: str | None = Field(None, description="the environment variable holding the connection string")
    paths: list[str] = Field(min_length=1, description="folders and JSONL files, read as the embedded index reads them")
    db_schema: str = Field("evident", alias="schema", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                           description="the PostgreSQL schema of this source's tables")
    text_search_config: str = Field("english", pattern=r"^[a-z_][a-z0-9_]{0,62}$",
                                    description="the text search configuration of the tsvector and the query")
    statement_timeout_ms: int | None = Field(None, ge=1, description="per search; default: the source's timeout")
    candidate_pool: int = Field(
        10_000, ge=0,  # postgres.search.CANDIDATE_POOL
        description="documents a search ranks at most, those holding the question's rarest words first (larger: "
                    "more pages holding only common words are ranked, slower; 0: every match, exact, linear)")
    follow_symlinks: bool = False
    max_file_mb: float = Field(20.0, gt=0)
    section_chars: int = Field(100_000, ge=1000)


class MediaWikiSettings(SourceSettings):
    type: Literal["mediawiki"]
    url: str = Field(description="api.php URL")
    namespaces: list[int] = Field(default_factory=lambda: [0])
    text: Literal["extracts", "parse"] = "extracts"
    username_env: str | None = None
    password_env: str | None = None
    token_env: str | None = None
    check_read_rights: bool = False


class ConfluenceSettings(SourceSettings):
    type: Literal["confluence"]
    url: str
    deployment: Literal["cloud", "datacenter"] | None = None
    spaces: list[str] = Field(default_factory=list)
    content_types: list[str] = Field(default_factory=lambda: ["page"])
    cql: str = ""
    email_env: str | None = None
    username_env: str | None = None
    token_env: str | None = None
    password_env: str | None = None
    check_permissions: bool = False
    site_url: str | None = Field(None, description="Readable base of citation links, when url is the API gateway")


class DocsSettings(SourceSettings):
    type: Literal["docs"]
    sitemap: str | list[str] | None = None
    start_urls: list[str] = Field(default_factory=list)
    allowed_prefixes: list[str] = Field(default_factory=list)
    max_pages: int = Field(500, ge=1)
    rate_limit_per_s: float = Field(2.0, gt=0)
    index_path: str | None = None


class ImportedSettings(SourceSettings):
    """A source built from an imported object, called with these keyword arguments (`imported.construct`)."""

    kwargs: dict[str, Any] = Field(default_factory=dict)
    kwargs_env: dict[str, str] = Field(default_factory=dict, description="keyword -> environment variable")


class LangChainSettings(ImportedSettings):
    type: Literal["langchain"]
    retriever: str = Field(description="'package.module:attribute': a BaseRetriever class, factory or instance")


class LoaderSettings(ImportedSettings):
    type: Literal["loader"]
    loader: str = Field(description="'package.module:attribute': a LangChain BaseLoader class, factory or instance")
    url_template: str | None = Field(None, description="Document ids from metadata, e.g. 'https://wiki/{source}'")
    max_documents: int = Field(100_000, ge=1)
    index_path: str | None = None


_MODELS: dict[str, type[SourceSettings]] = {
    "local": LocalSettings, "mediawiki": MediaWikiSettings, "confluence": ConfluenceSettings,
    "docs": DocsSettings, "langchain": LangChainSettings, "loader": LoaderSettings, "postgres": PostgresSettings,
}
DEFAULT_SOURCE_TYPE = {"local": "", "mediawiki": "wiki", "confluence": "wiki", "docs": "docs", "langchain": "",
                       "loader": "", "postgres": ""}


def parse_settings(raw: Any, position: int) -> SourceSettings:
    """One source's settings, validated; a `SourceConfigError` naming the source otherwise."""
    if not isinstance(raw, dict):
        raise SourceConfigError(f"#{position}", "a source must be a table of settings")
    name = raw.get("name")
    label = name if isinstance(name, str) and name.strip() else f"#{position}"
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise SourceConfigError(label, f"missing 'type' (one of: {', '.join(SOURCE_TYPES)})")
    if kind not in _MODELS:
        raise SourceConfigError(label, f"unknown source type {kind!r} (expected one of: {', '.join(SOURCE_TYPES)})")
    try:
        settings = _MODELS[kind].model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "settings"
        message = "unknown setting" if first["type"] == "extra_forbidden" else first["msg"]
        raise SourceConfigError(label, f"{where}: {message}") from None
    try:
        parse_acl(settings.acl)
    except AclError as exc:
        raise SourceConfigError(settings.name, f"acl: {exc}") from None
    return settings


def environment_names(raw: dict[str, Any]) -> list[str]:
    """The environment variables a source's settings refer to (for `evident sources`)."""
    names = [v for k, v in raw.items() if k.endswith("_env") and isinstance(v, str)]
    names += [v for v in (raw.get("kwargs_env") or {}).values() if isinstance(v, str)]
    return [n for n in names if n] if all(isinstance(n, str) for n in names) else []


def missing_environment(raw: dict[str, Any]) -> list[str]:
    """The environment variables a source's settings refer to that are not set."""
    return [n for n in environment_names(raw) if not os.environ.get(n)]
