"""Sources from configuration (`[[sources]]` in evident.toml, or dicts in `EvidentContext.sources`).

Every source is validated (`source_settings`) and built on its own: a source with an unknown type,
a missing credential or a bad setting becomes a configuration `SourceError` naming it, and the other
sources still answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from langchain_core.document_loaders import BaseLoader
from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, SecretStr

from evident.connectors.imported import construct, load_object, secret_setting
from evident.connectors.remote.http import check_base_url
from evident.connectors.source import Source, SourceConfigError
from evident.connectors.source_settings import (
    DEFAULT_SOURCE_TYPE,
    SOURCE_TYPES,
    ConfluenceSettings,
    DocsSettings,
    LangChainSettings,
    LoaderSettings,
    LocalSettings,
    MediaWikiSettings,
    PostgresSettings,
    SourceSettings,
    environment_names,
    missing_environment,
    parse_settings,
)
from evident.models import SourceError

if TYPE_CHECKING:
    from evident.connectors.postgres.dsn import PostgresDsn
    from evident.connectors.remote.docs_site import CrawlSettings

__all__ = [
    "SOURCE_TYPES", "ConfluenceSettings", "Defaults", "DocsSettings", "LangChainSettings", "LoaderSettings",
    "LocalSettings", "MediaWikiSettings", "PostgresSettings", "SourceSettings", "build_loader", "build_source",
    "build_sources", "construct", "crawl_settings", "docs_index_path", "environment_names", "gateway_base",
    "load_object", "loader_index_path", "missing_environment", "parse_settings", "postgres_dsn", "require_psycopg",
]


class Defaults(BaseModel):
    """What a source does not set comes from the query settings."""

    k: int = 8
    timeout_s: float = 15.0


def build_source(settings: SourceSettings, defaults: Defaults) -> Source:
    k = settings.k or defaults.k
    timeout = settings.timeout_s or defaults.timeout_s
    secrets: list[SecretStr] = []
    retriever = _BUILDERS[settings.type](settings, k, timeout, secrets)
    return Source(
        name=settings.name, retriever=retriever, k=k, timeout_s=timeout, weight=settings.weight,
        source_type=settings.source_type if settings.source_type is not None else DEFAULT_SOURCE_TYPE[settings.type],
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


def _local(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    from evident.connectors.index.embedded import IndexFileError
    from evident.connectors.index.loaders import CorpusError, CorpusLimits
    from evident.connectors.index.retriever import LocalCorpusRetriever

    assert isinstance(settings, LocalSettings)
    paths = [settings.path(p) for p in settings.paths]
    for path in paths:
        if not path.exists():
            raise SourceConfigError(settings.name, f"{path}: no such file or directory")
    index = settings.path(settings.index_path) if settings.index_path else None
    limits = CorpusLimits.from_settings(settings)
    key = (tuple(map(str, paths)), str(index), k, settings.name, limits.model_dump_json(), settings.candidate_pool)
    with _local_lock:
        cached = _local_cache.get(key)
        if cached is None:
            try:
                cached = LocalCorpusRetriever.from_corpus(paths, index_path=index, k=k, source_name=settings.name,
                                                          limits=limits, candidate_pool=settings.candidate_pool)
            except (CorpusError, IndexFileError, OSError) as exc:
                raise SourceConfigError(settings.name, str(exc)) from None
            _local_cache[key] = cached
    return cached


_local_lock = threading.Lock()
_local_cache: dict[tuple[Any, ...], BaseRetriever] = {}


def _mediawiki(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    from evident.connectors.remote.mediawiki import MediaWikiRetriever

    assert isinstance(settings, MediaWikiSettings)
    url = check_base_url(settings.name, settings.url, "url")
    if bool(settings.username_env) != bool(settings.password_env):
        raise SourceConfigError(settings.name, "username_env and password_env go together (a bot password)")
    username = secret_setting(settings, settings.username_env, "bot user name", [])
    password = secret_setting(settings, settings.password_env, "bot password", secrets)
    token = secret_setting(settings, settings.token_env, "OAuth access token", secrets)
    hint = " / ".join(e for e in (settings.username_env, settings.password_env, settings.token_env) if e)
    return MediaWikiRetriever(
        source_name=settings.name, api_url=url, k=k, timeout_s=timeout, namespaces=settings.namespaces,
        text=settings.text, username=username.get_secret_value() if username else None, password=password,
        token=token, credential_hint=hint, check_read_rights=settings.check_read_rights,
        verify_tls=settings.verify_tls, trust_env=settings.trust_env,
    )


def _confluence(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    from evident.connectors.remote.confluence import ConfluenceRetriever

    assert isinstance(settings, ConfluenceSettings)
    url = check_base_url(settings.name, settings.url, "url")
    gateway = gateway_base(url)
    if gateway is not None:
        if settings.deployment == "datacenter":
            raise SourceConfigError(settings.name, "the api.atlassian.com gateway serves Confluence Cloud only")
        url = gateway
    site_url = check_base_url(settings.name, settings.site_url, "site_url") if settings.site_url else None
    deployment = settings.deployment or ("cloud" if gateway or ".atlassian.net" in url.lower() else "datacenter")
    if settings.check_permissions and deployment != "cloud":
        raise SourceConfigError(settings.name, "check_permissions needs Confluence Cloud (Data Center has no "
                                               "permission-check API); page restrictions are applied either way")
    if deployment == "cloud" and bool(settings.email_env) != bool(settings.token_env):
        raise SourceConfigError(settings.name, "Confluence Cloud needs both email_env and token_env (an API token)")
    email = secret_setting(settings, settings.email_env, "account e-mail", [])
    username = secret_setting(settings, settings.username_env, "user name", [])
    token = secret_setting(settings, settings.token_env, "API token", secrets)
    password = secret_setting(settings, settings.password_env, "password", secrets)
    names = (settings.email_env, settings.username_env, settings.token_env, settings.password_env)
    hint = " / ".join(e for e in names if e)
    return ConfluenceRetriever(
        source_name=settings.name, base_url=url, deployment=deployment, k=k, timeout_s=timeout,
        spaces=settings.spaces, content_types=settings.content_types, extra_cql=settings.cql,
        email=email.get_secret_value() if email else None, username=username.get_secret_value() if username else None,
        token=token, password=password, credential_hint=hint, check_permissions=settings.check_permissions,
        site_url=site_url, verify_tls=settings.verify_tls, trust_env=settings.trust_env,
    )


def gateway_base(url: str) -> str | None:
    """The REST base of a Confluence Cloud API gateway URL (`https://api.atlassian.com/ex/confluence/{cloudId}`,
    which scoped API tokens must use), or None for a site URL. The gateway serves the REST API under `/wiki`."""
    parts = urlsplit(url)
    match = re.fullmatch(r"(/ex/confluence/[^/]+)(/wiki)?/?", parts.path)
    if match is None:
        return None
    return f"{parts.scheme}://{parts.netloc}{match.group(1)}/wiki"


def crawl_settings(settings: DocsSettings) -> CrawlSettings:
    from evident.connectors.remote.docs_site import CrawlSettings

    sitemaps = [settings.sitemap] if isinstance(settings.sitemap, str) else list(settings.sitemap or [])
    if not sitemaps and not settings.start_urls:
        raise SourceConfigError(settings.name, "give a sitemap or start_urls")
    for url in [*sitemaps, *settings.start_urls, *settings.allowed_prefixes]:
        check_base_url(settings.name, url, "URL")
    return CrawlSettings(
        source_name=settings.name, sitemaps=sitemaps, start_urls=settings.start_urls,
        allowed_prefixes=settings.allowed_prefixes, max_pages=settings.max_pages,
        rate_limit_per_s=settings.rate_limit_per_s, timeout_s=settings.timeout_s or 15.0,
        source_type=settings.source_type or "docs", verify_tls=settings.verify_tls, trust_env=settings.trust_env,
    )


def docs_index_path(settings: DocsSettings) -> Path:
    from evident.connectors.remote.docs_index import default_docs_index

    if settings.index_path:
        return settings.path(settings.index_path)
    return default_docs_index(settings.name, crawl_settings(settings))


def _docs(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    assert isinstance(settings, DocsSettings)
    return _indexed(settings, docs_index_path(settings), k, "the site has not been crawled yet")


def loader_index_path(settings: LoaderSettings) -> Path:
    from evident.connectors.remote.docs_index import default_source_index

    if settings.index_path:
        return settings.path(settings.index_path)
    kwargs = json.dumps(settings.kwargs, sort_keys=True, default=str)
    return default_source_index("loader", settings.name, [settings.loader, kwargs])


def _loader(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    assert isinstance(settings, LoaderSettings)
    return _indexed(settings, loader_index_path(settings), k, "the loader has not been run yet")


def _indexed(settings: SourceSettings, index: Path, k: int, problem: str) -> BaseRetriever:
    from evident.connectors.index.retriever import LocalCorpusRetriever

    if not index.exists():
        raise SourceConfigError(settings.name, f"{problem} ({index} does not exist): "
                                               "run `evident index --config <evident.toml>`")
    return LocalCorpusRetriever(index_path=index, k=k, source_name=settings.name)


def _langchain(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    assert isinstance(settings, LangChainSettings)
    made = construct(settings, settings.retriever, settings.kwargs, settings.kwargs_env, BaseRetriever, secrets)
    assert isinstance(made, BaseRetriever)  # construct checked it
    return made


def _postgres(settings: SourceSettings, k: int, timeout: float, secrets: list[SecretStr]) -> BaseRetriever:
    assert isinstance(settings, PostgresSettings)
    require_psycopg(settings.name)
    from evident.connectors.postgres.retriever import build_retriever

    dsn = postgres_dsn(settings)
    secrets.extend(dsn.secrets)
    return build_retriever(dsn, schema=settings.db_schema, config=settings.text_search_config, k=k,
                           source_name=settings.name, timeout_s=timeout,
                           statement_timeout_ms=settings.statement_timeout_ms,
                           candidate_pool=settings.candidate_pool)


def require_psycopg(source: str) -> None:
    """A configuration error, not an ImportError, when the `postgres` extra is not installed."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise SourceConfigError(source, "type 'postgres' needs psycopg: pip install 'evident-rag[postgres]'") from None


def postgres_dsn(settings: PostgresSettings) -> PostgresDsn:
    require_psycopg(settings.name)
    from evident.connectors.postgres.dsn import resolve_dsn

    return resolve_dsn(settings.name, settings.dsn, settings.dsn_env)


def build_loader(settings: LoaderSettings) -> BaseLoader:
    """The configured LangChain `BaseLoader`, ready to `lazy_load()`."""
    made = construct(settings, settings.loader, settings.kwargs, settings.kwargs_env, BaseLoader, [])
    assert isinstance(made, BaseLoader)  # construct checked it
    return made


_BUILDERS: dict[str, Callable[[SourceSettings, int, float, list[SecretStr]], BaseRetriever]] = {
    "local": _local, "mediawiki": _mediawiki, "confluence": _confluence, "docs": _docs, "langchain": _langchain,
    "loader": _loader, "postgres": _postgres,
}
