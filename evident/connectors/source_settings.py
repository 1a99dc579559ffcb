"""The settings of one configured source (`[[sources]]` in evident.toml), per source type, validated, and
the retriever each type builds from them.

The types form one discriminated union on `type` (`AnySourceSettings`): parsing picks the class, and
each class builds its own retriever (`build`). Credentials are never written in the configuration, only
the names of the environment variables that hold them (`token_env = "CONFLUENCE_TOKEN"`); sources with
their federation settings from these: `config`. The remote and PostgreSQL retrievers' modules are imported
in `build`, when a source of their type is configured: psycopg is an extra, and each connector costs start-up time.
"""

from __future__ import annotations

import json
import re
import threading
from abc import abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args
from urllib.parse import urlsplit

from langchain_core.document_loaders import BaseLoader
from langchain_core.retrievers import BaseRetriever
from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, ValidationError

from evident.connectors.acl import AclError, DefaultAcl, parse_acl
from evident.connectors.imported import construct, secret_setting
from evident.connectors.index.embedded import IndexFileError
from evident.connectors.index.loaders import CorpusError, CorpusLimits
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.remote.http import check_base_url
from evident.connectors.source import SourceConfigError
from evident.settings import CorpusFileSettings, first_problem

if TYPE_CHECKING:
    from evident.connectors.postgres.dsn import PostgresDsn
    from evident.connectors.remote.docs_site import CrawlSettings

class SourceSettings(BaseModel):
    """Settings every source type has."""

    # The `source_type` of this type's documents when the settings do not name one.
    default_source_type: ClassVar[str] = ""

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

    @abstractmethod
    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        """This source's retriever, asking for `k` documents within `timeout_s`; every credential it reads is
        appended to `secrets` (the federation scrubs them from errors). A `SourceConfigError` when the
        settings cannot work (a missing file, a credential not set, a bad URL)."""


class LocalSettings(SourceSettings, CorpusFileSettings):
    type: Literal["local"]
    paths: list[str] = Field(min_length=1)
    index_path: str | None = None
    candidate_pool: int = Field(
        200, ge=0,  # index.visible_ranking.CANDIDATE_POOL
        description="candidates a signed-in or filtered search ranks exactly at most, those of the highest upper "
                    "bounds (larger: fewer near-duplicates left out, slower; 0: no bound, exact, linear)")

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        paths = [self.path(p) for p in self.paths]
        for path in paths:
            if not path.exists():
                raise SourceConfigError(self.name, f"{path}: no such file or directory")
        index = self.path(self.index_path) if self.index_path else None
        limits = CorpusLimits.from_settings(self)
        # One retriever per corpus and settings for the process: opening an index reads its mirror and
        # its vectors, which a server must not repeat per request.
        key = (tuple(map(str, paths)), str(index), k, self.name, limits.model_dump_json(), self.candidate_pool)
        with _local_lock:
            cached = _local_cache.get(key)
            if cached is None:
                try:
                    cached = LocalCorpusRetriever.from_corpus(paths, index_path=index, k=k, source_name=self.name,
                                                              limits=limits, candidate_pool=self.candidate_pool)
                except (CorpusError, IndexFileError, OSError) as exc:
                    raise SourceConfigError(self.name, str(exc)) from None
                _local_cache[key] = cached
        return cached


_local_lock = threading.Lock()
_local_cache: dict[tuple[Any, ...], BaseRetriever] = {}


class PostgresSettings(SourceSettings, CorpusFileSettings):
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
        description="documents a search ranks at most, those holding the question's rarest words first; when "
                    "the rarest alone has more, those holding its rarest words together, else a sample of the "
                    "rarest word's (larger: more pages ranked, slower; 0: every match, exact, linear)")
    work_mem_mb: int = Field(
        64, ge=0, le=2_097_151,  # postgres.search.WORK_MEM_MB; the bound is PostgreSQL's own (2^31 - 1 kB)
        description="memory in MB a search may use per bitmap or sort (PostgreSQL's work_mem, set per search; "
                    "smaller bitmaps turn lossy past a few hundred thousand sections; 0: the server's setting)")

    def resolved_dsn(self) -> PostgresDsn:
        """The connection string from `dsn` or `dsn_env`, with its password kept out of every message."""
        require_psycopg(self.name)
        # optional dependency: psycopg, the [postgres] extra (checked just above)
        from evident.connectors.postgres.dsn import resolve_dsn

        return resolve_dsn(self.name, self.dsn, self.dsn_env)

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        dsn = self.resolved_dsn()
        # optional dependency: psycopg, the [postgres] extra (checked by resolved_dsn)
        from evident.connectors.postgres.retriever import build_retriever

        secrets.extend(dsn.secrets)
        return build_retriever(dsn, schema=self.db_schema, config=self.text_search_config, k=k,
                               source_name=self.name, timeout_s=timeout_s,
                               statement_timeout_ms=self.statement_timeout_ms,
                               candidate_pool=self.candidate_pool, work_mem_mb=self.work_mem_mb)


def require_psycopg(source: str) -> None:
    """A configuration error, not an ImportError, when the `postgres` extra is not installed."""
    try:
        # optional dependency: only to see whether the [postgres] extra is installed
        import psycopg  # noqa: F401
    except ImportError:
        raise SourceConfigError(source, "type 'postgres' needs psycopg: pip install 'evident-rag[postgres]'") from None


class MediaWikiSettings(SourceSettings):
    default_source_type: ClassVar[str] = "wiki"

    type: Literal["mediawiki"]
    url: str = Field(description="api.php URL")
    namespaces: list[int] = Field(default_factory=lambda: [0])
    text: Literal["extracts", "parse"] = "extracts"
    username_env: str | None = None
    password_env: str | None = None
    token_env: str | None = None
    check_read_rights: bool = False

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        # start-up time: a source type loads its connector (~10 ms each) only when one is configured
        from evident.connectors.remote.mediawiki import MediaWikiRetriever

        url = check_base_url(self.name, self.url, "url")
        if bool(self.username_env) != bool(self.password_env):
            raise SourceConfigError(self.name, "username_env and password_env go together (a bot password)")
        username = secret_setting(self.name, self.username_env, "bot user name", [])
        password = secret_setting(self.name, self.password_env, "bot password", secrets)
        token = secret_setting(self.name, self.token_env, "OAuth access token", secrets)
        hint = " / ".join(e for e in (self.username_env, self.password_env, self.token_env) if e)
        return MediaWikiRetriever(
            source_name=self.name, api_url=url, k=k, timeout_s=timeout_s, namespaces=self.namespaces,
            text=self.text, username=username.get_secret_value() if username else None, password=password,
            token=token, credential_hint=hint, check_read_rights=self.check_read_rights,
            verify_tls=self.verify_tls, trust_env=self.trust_env,
        )


class ConfluenceSettings(SourceSettings):
    default_source_type: ClassVar[str] = "wiki"

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

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        # start-up time: a source type loads its connector (~10 ms each) only when one is configured
        from evident.connectors.remote.confluence import ConfluenceRetriever

        url = check_base_url(self.name, self.url, "url")
        gateway = gateway_base(url)
        if gateway is not None:
            if self.deployment == "datacenter":
                raise SourceConfigError(self.name, "the api.atlassian.com gateway serves Confluence Cloud only")
            url = gateway
        site_url = check_base_url(self.name, self.site_url, "site_url") if self.site_url else None
        deployment = self.deployment or ("cloud" if gateway or ".atlassian.net" in url.lower() else "datacenter")
        if self.check_permissions and deployment != "cloud":
            raise SourceConfigError(self.name, "check_permissions needs Confluence Cloud (Data Center has no "
                                               "permission-check API); page restrictions are applied either way")
        if deployment == "cloud" and bool(self.email_env) != bool(self.token_env):
            raise SourceConfigError(self.name, "Confluence Cloud needs both email_env and token_env (an API token)")
        email = secret_setting(self.name, self.email_env, "account e-mail", [])
        username = secret_setting(self.name, self.username_env, "user name", [])
        token = secret_setting(self.name, self.token_env, "API token", secrets)
        password = secret_setting(self.name, self.password_env, "password", secrets)
        names = (self.email_env, self.username_env, self.token_env, self.password_env)
        hint = " / ".join(e for e in names if e)
        return ConfluenceRetriever(
            source_name=self.name, base_url=url, deployment=deployment, k=k, timeout_s=timeout_s,
            spaces=self.spaces, content_types=self.content_types, extra_cql=self.cql,
            email=email.get_secret_value() if email else None,
            username=username.get_secret_value() if username else None, token=token, password=password,
            credential_hint=hint, check_permissions=self.check_permissions, site_url=site_url,
            verify_tls=self.verify_tls, trust_env=self.trust_env,
        )


def gateway_base(url: str) -> str | None:
    """The REST base of a Confluence Cloud API gateway URL (`https://api.atlassian.com/ex/confluence/{cloudId}`,
    which scoped API tokens must use), or None for a site URL. The gateway serves the REST API under `/wiki`."""
    parts = urlsplit(url)
    match = re.fullmatch(r"(/ex/confluence/[^/]+)(/wiki)?/?", parts.path)
    if match is None:
        return None
    return f"{parts.scheme}://{parts.netloc}{match.group(1)}/wiki"


class DocsSettings(SourceSettings):
    default_source_type: ClassVar[str] = "docs"

    type: Literal["docs"]
    sitemap: str | list[str] | None = None
    start_urls: list[str] = Field(default_factory=list)
    allowed_prefixes: list[str] = Field(default_factory=list)
    max_pages: int = Field(500, ge=1)
    rate_limit_per_s: float = Field(2.0, gt=0)
    index_path: str | None = None

    def crawl_settings(self) -> CrawlSettings:
        """What `evident index` crawls for this site."""
        # start-up time: a source type loads its connector (~10 ms each) only when one is configured
        from evident.connectors.remote.docs_site import CrawlSettings

        sitemaps = [self.sitemap] if isinstance(self.sitemap, str) else list(self.sitemap or [])
        if not sitemaps and not self.start_urls:
            raise SourceConfigError(self.name, "give a sitemap or start_urls")
        for url in [*sitemaps, *self.start_urls, *self.allowed_prefixes]:
            check_base_url(self.name, url, "URL")
        return CrawlSettings(
            source_name=self.name, sitemaps=sitemaps, start_urls=self.start_urls,
            allowed_prefixes=self.allowed_prefixes, max_pages=self.max_pages,
            rate_limit_per_s=self.rate_limit_per_s, timeout_s=self.timeout_s or 15.0,
            source_type=self.source_type or "docs", verify_tls=self.verify_tls, trust_env=self.trust_env,
        )

    def index_file(self) -> Path:
        """The index the crawl fills: `index_path`, or one per site and crawl settings."""
        # start-up time: a source type loads its connector (~10 ms each) only when one is configured
        from evident.connectors.remote.docs_index import default_docs_index

        if self.index_path:
            return self.path(self.index_path)
        return default_docs_index(self.name, self.crawl_settings())

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        return _indexed(self, self.index_file(), k, "the site has not been crawled yet")


def _indexed(settings: SourceSettings, index: Path, k: int, problem: str) -> BaseRetriever:
    if not index.exists():
        raise SourceConfigError(settings.name, f"{problem} ({index} does not exist): "
                                               "run `evident index --config <evident.toml>`")
    # Only `evident index --config` writes this index: a question leaves an embedding it started to it.
    return LocalCorpusRetriever(index_path=index, k=k, source_name=settings.name, embed_up_to=0)


class ImportedSettings(SourceSettings):
    """A source built from an imported object, called with these keyword arguments (`imported.construct`)."""

    kwargs: dict[str, Any] = Field(default_factory=dict)
    kwargs_env: dict[str, str] = Field(default_factory=dict, description="keyword -> environment variable")


class LangChainSettings(ImportedSettings):
    type: Literal["langchain"]
    retriever: str = Field(description="'package.module:attribute': a BaseRetriever class, factory or instance")

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        # mypy takes an abstract class for no valid `type[T]`; construct checks isinstance against it.
        return construct(self.name, self.retriever, self.kwargs, self.kwargs_env, BaseRetriever,  # type: ignore[type-abstract]
                         secrets)


class LoaderSettings(ImportedSettings):
    type: Literal["loader"]
    loader: str = Field(description="'package.module:attribute': a LangChain BaseLoader class, factory or instance")
    url_template: str | None = Field(None, description="Document ids from metadata, e.g. 'https://wiki/{source}'")
    max_documents: int = Field(100_000, ge=1)
    index_path: str | None = None

    def index_file(self) -> Path:
        """The index `evident index` fills from the loader: `index_path`, or one per loader and arguments."""
        # start-up time: a source type loads its connector (~10 ms each) only when one is configured
        from evident.connectors.remote.docs_index import default_source_index

        if self.index_path:
            return self.path(self.index_path)
        kwargs = json.dumps(self.kwargs, sort_keys=True, default=str)
        return default_source_index("loader", self.name, [self.loader, kwargs])

    def loader_object(self) -> BaseLoader:
        """The configured LangChain `BaseLoader`, ready to `lazy_load()`."""
        return construct(self.name, self.loader, self.kwargs, self.kwargs_env, BaseLoader, [])

    def build(self, k: int, timeout_s: float, secrets: list[SecretStr]) -> BaseRetriever:
        return _indexed(self, self.index_file(), k, "the loader has not been run yet")


AnySourceSettings = Annotated[
    LocalSettings | PostgresSettings | MediaWikiSettings | ConfluenceSettings | DocsSettings | LangChainSettings
    | LoaderSettings,
    Field(discriminator="type"),
]
_ANY_SOURCE: TypeAdapter[AnySourceSettings] = TypeAdapter(AnySourceSettings)
SOURCE_TYPES: tuple[str, ...] = tuple(sorted(
    get_args(model.model_fields["type"].annotation)[0] for model in get_args(get_args(AnySourceSettings)[0])
))


def parse_settings(raw: Any, position: int) -> AnySourceSettings:
    """One source's settings, validated; a `SourceConfigError` naming the source otherwise."""
    if not isinstance(raw, dict):
        raise SourceConfigError(f"#{position}", "a source must be a table of settings")
    name = raw.get("name")
    label = name if isinstance(name, str) and name.strip() else f"#{position}"
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise SourceConfigError(label, f"missing 'type' (one of: {', '.join(SOURCE_TYPES)})")
    if kind not in SOURCE_TYPES:
        raise SourceConfigError(label, f"unknown source type {kind!r} (expected one of: {', '.join(SOURCE_TYPES)})")
    try:
        settings = _ANY_SOURCE.validate_python(raw)
    except ValidationError as exc:
        where, what = first_problem(exc, tagged=True)
        raise SourceConfigError(label, f"{where or 'settings'}: {what}") from None
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

