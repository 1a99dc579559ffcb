"""Sources from configuration (`[[sources]]` in evident.toml, or dicts in `EvidentContext.sources`).

Every source is validated and built on its own: a source with an unknown type, a missing credential
or a bad setting becomes a configuration `SourceError` naming it, and the other sources still answer.
Credentials are never written in the configuration, only the names of the environment variables
that hold them (`token_env = "CONFLUENCE_TOKEN"`).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from evident.connectors.acl import AclError, DefaultAcl, parse_acl
from evident.connectors.remote.http import check_base_url, read_secret
from evident.connectors.source import Source, SourceConfigError
from evident.models import SourceError

SOURCE_TYPES = ("confluence", "docs", "langchain", "loader", "local", "mediawiki")


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
    follow_symlinks: bool = False  # as the top-level settings of the same names (docs/security.md)
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


class LangChainSettings(SourceSettings):
    type: Literal["langchain"]
    retriever: str = Field(description="'package.module:attribute': a BaseRetriever class, factory or instance")
    kwargs: dict[str, Any] = Field(default_factory=dict)
    kwargs_env: dict[str, str] = Field(default_factory=dict, description="keyword -> environment variable")


class LoaderSettings(SourceSettings):
    type: Literal["loader"]
    loader: str = Field(description="'package.module:attribute': a LangChain BaseLoader class, factory or instance")
    kwargs: dict[str, Any] = Field(default_factory=dict)
    kwargs_env: dict[str, str] = Field(default_factory=dict, description="keyword -> environment variable")
    url_template: str | None = Field(None, description="Document ids from metadata, e.g. 'https://wiki/{source}'")
    max_documents: int = Field(100_000, ge=1)
    index_path: str | None = None


_MODELS: dict[str, type[SourceSettings]] = {
    "local": LocalSettings, "mediawiki": MediaWikiSettings, "confluence": ConfluenceSettings,
    "docs": DocsSettings, "langchain": LangChainSettings, "loader": LoaderSettings,
}
_DEFAULT_SOURCE_TYPE = {"local": "", "mediawiki": "wiki", "confluence": "wiki", "docs": "docs", "langchain": "",
                        "loader": ""}


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


# -- building ------------------------------------------------------------------------------------


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
        source_type=settings.source_type if settings.source_type is not None else _DEFAULT_SOURCE_TYPE[settings.type],
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


def _secret(settings: SourceSettings, env: str | None, what: str, secrets: list[SecretStr]) -> SecretStr | None:
    value = read_secret(settings.name, env, what)
    if value is not None:
        secrets.append(value)
    return value


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
    key = (tuple(map(str, paths)), str(index), k, settings.name, limits.model_dump_json())
    with _local_lock:
        cached = _local_cache.get(key)
        if cached is None:
            try:
                cached = LocalCorpusRetriever.from_corpus(paths, index_path=index, k=k, source_name=settings.name,
                                                          limits=limits)
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
    username = _secret(settings, settings.username_env, "bot user name", [])
    password = _secret(settings, settings.password_env, "bot password", secrets)
    token = _secret(settings, settings.token_env, "OAuth access token", secrets)
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
    email = _secret(settings, settings.email_env, "account e-mail", [])
    username = _secret(settings, settings.username_env, "user name", [])
    token = _secret(settings, settings.token_env, "API token", secrets)
    password = _secret(settings, settings.password_env, "password", secrets)
    hint = " / ".join(e for e in (settings.email_env, settings.username_env, settings.token_env, settings.password_env) if e)
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


def crawl_settings(settings: DocsSettings) -> Any:
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
    return default_source_index("loader", settings.name, [settings.loader, json.dumps(settings.kwargs, sort_keys=True,
                                                                                        default=str)])


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
    assert isinstance(made, BaseRetriever)
    return made


def build_loader(settings: LoaderSettings) -> Any:
    """The configured LangChain `BaseLoader`, ready to `lazy_load()`."""
    from langchain_core.document_loaders import BaseLoader

    return construct(settings, settings.loader, settings.kwargs, settings.kwargs_env, BaseLoader, [])


def construct(settings: SourceSettings, path: str, raw_kwargs: dict[str, Any], kwargs_env: dict[str, str],
              kind: type, secrets: list[SecretStr]) -> Any:
    """The `kind` object at import path `path`: an instance as is, or a class or factory called with the
    kwargs (and the values of the kwargs_env variables, never shown in an error)."""
    target = load_object(settings.name, path)
    kwargs = dict(raw_kwargs)
    for key, env in kwargs_env.items():
        secret = _secret(settings, env, f"the {key!r} argument", secrets)
        assert secret is not None
        kwargs[key] = secret.get_secret_value()
    what = f"LangChain {kind.__name__}"
    if isinstance(target, kind):
        if kwargs:
            raise SourceConfigError(settings.name, f"{path} is a {kind.__name__} instance; it takes no kwargs")
        return target
    if not callable(target):
        raise SourceConfigError(settings.name, f"{path} is not a {what}, class or factory")
    try:
        made = target(**kwargs)
    except Exception as exc:  # noqa: BLE001 - a third-party constructor can raise anything
        message = f"{path}(...) failed: {type(exc).__name__}: {exc}"
        for secret in secrets:
            message = message.replace(secret.get_secret_value(), "***")
        raise SourceConfigError(settings.name, message) from None
    if not isinstance(made, kind):
        raise SourceConfigError(settings.name, f"{path} returned {type(made).__name__}, not a {what}")
    return made


def load_object(source: str, path: str) -> Any:
    """`package.module:attribute` (or `package.module.attribute`) imported."""
    module_name, sep, attribute = path.partition(":")
    if not sep:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise SourceConfigError(source, f"retriever must be 'package.module:attribute', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or whatever the module raises on import
        raise SourceConfigError(source, f"cannot import {module_name}: {type(exc).__name__}: {exc}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise SourceConfigError(source, f"{module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target


_BUILDERS = {"local": _local, "mediawiki": _mediawiki, "confluence": _confluence, "docs": _docs, "langchain": _langchain,
             "loader": _loader}


def environment_names(raw: dict[str, Any]) -> list[str]:
    """The environment variables a source's settings refer to (for `evident sources`)."""
    names = [v for k, v in raw.items() if k.endswith("_env") and isinstance(v, str)]
    names += [v for v in (raw.get("kwargs_env") or {}).values() if isinstance(v, str)]
    return [n for n in names if n] if all(isinstance(n, str) for n in names) else []


def missing_environment(raw: dict[str, Any]) -> list[str]:
    return [n for n in environment_names(raw) if not os.environ.get(n)]
