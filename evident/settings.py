"""The deployment's settings, read by pydantic-settings: built-in defaults < `evident.toml` (`EVIDENT_CONFIG`,
else ./evident.toml when present) < environment variables < the caller.

A setting's environment variable is `EVIDENT_` and its name in capitals (`EVIDENT_TOP_N`; a section's as
`EVIDENT_OFFLINE__WINDOW_UNITS`), unless its field names others in `validation_alias` (`OPENAI_BASE_URL`,
`EVIDENT_INDEX`, ...). `evident.toml` takes the query settings flat or in the sections [model], [alignment],
[retrieval], [output] and [embeddings] (there, `name` is `model`, `provider` is `embeddings`, and another key is
the setting's name without the section's prefix: [model] `timeout_s` is `model_timeout_s`), [offline] the offline
engine's numbers, [[sources]] the federated sources, and [server] the server's own settings (`ServerSettings`).

This module is the only one that reads the process environment: the settings above and, through
`environment_value`, the credentials that settings name by variable (`api_key_env`, `token_env`, `dsn_env`, ...),
read where they are used so that none is kept in a settings object.
"""

from __future__ import annotations

import codecs
import copy
import difflib
import os
import threading
import tomllib
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NamedTuple, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)


class ConfigError(ValueError):
    """A setting is missing or invalid; the message names it."""


def first_problem(exc: ValidationError, *, tagged: bool = False, unknown: str = "unknown setting") -> tuple[str, str]:
    """(where, what) of the first error of a validation, as the writer of the input names things: `where`
    is the dotted key ('' for the whole object), `what` pydantic's message, or `unknown` for a key the
    model does not have. `tagged`: the model is a discriminated union, whose tag pydantic puts first in
    the location."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"][1 if tagged else 0:])
    return where, unknown if first["type"] == "extra_forbidden" else first["msg"]


def invalid_setting(exc: ValidationError) -> ConfigError:
    """The error for a setting the caller gave a bad value."""
    where, what = first_problem(exc)
    return ConfigError(f"invalid setting {where or 'settings'}: {what}")


def unknown_key(path: Path, key: str, known: Iterable[str], section: str | None = None) -> ConfigError:
    """The error for a key of `path` that no setting has: the file, the key (with its [section]) and
    the nearest valid key, since a misspelt key is the usual cause."""
    where = f" in [{section}]" if section else ""
    names = sorted(set(known))
    nearest = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f"did you mean {nearest[0]!r}?" if nearest else f"known keys: {', '.join(names)}"
    return ConfigError(f"{path}: unknown key {key!r}{where}; {hint}")


# -- the environment ---------------------------------------------------------------------------------------


def environment_value(name: str) -> str | None:
    """The environment variable `name` as the process has it (None when unset)."""
    return os.environ.get(name)


def process_environment() -> dict[str, str]:
    """A copy of the process environment, for a child process that starts from it (`evident serve`)."""
    return dict(os.environ)


def export_environment(name: str, value: str) -> None:
    """Set `name` for this process and its children: for a library that reads its settings from the
    environment at import (Aegra)."""
    os.environ[name] = value


def index_dir() -> Path:
    """Where indexes live when no path is configured: `EVIDENT_INDEX_DIR`, else ~/.cache/evident/indexes."""
    return Path(os.environ.get("EVIDENT_INDEX_DIR") or "~/.cache/evident/indexes").expanduser()


def log_file() -> Path:
    """Where a command's log goes (other libraries' warnings among it): `EVIDENT_LOG_FILE`, else
    ~/.cache/evident/evident.log."""
    return Path(os.environ.get("EVIDENT_LOG_FILE") or "~/.cache/evident/evident.log").expanduser()


ENV_PREFIX = "EVIDENT_"


def setting_variables(field: str, info: FieldInfo) -> list[str]:
    """The environment variables a setting is read from (`validation_alias` names them when not EVIDENT_NAME)."""
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices if str(choice).isupper()]
    return [f"{ENV_PREFIX}{field.upper()}"]


class _Environment(EnvSettingsSource):
    def _extract_field_info(
        self, field: FieldInfo, field_name: str, model_config: Any = None
    ) -> list[tuple[str, str, bool]]:
        # Only EVIDENT_<NAME> and the variables a field names in capitals (`OPENAI_BASE_URL`). A lower-case
        # alias is evident.toml's key (`database`, `base_url`): read as a variable too, an unrelated DATABASE
        # or BASE_URL in a container's environment would become a setting.
        # A value is given under the field's name (its first alias choice), so that an error names the setting.
        prefix = self._apply_case_sensitive(ENV_PREFIX)
        return [(field_name if key.isupper() else key, env, complex_)
                for key, env, complex_ in super()._extract_field_info(field, field_name, model_config)
                if key.isupper() or env.startswith(prefix)]

    def prepare_field_value(self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool) -> Any:
        # A list of paths, as PATH is written (`EVIDENT_CORPUS=docs:wiki`), rather than JSON.
        if field_name == "corpus" and isinstance(value, str):
            return [part for part in value.split(os.pathsep) if part]
        return super().prepare_field_value(field_name, field, value, value_is_complex)


# -- evident.toml --------------------------------------------------------------------------------------------

SERVER_SECTION = "server"
# Sections any query setting may stand in, and the key that names the section's own setting.
_QUERY_SECTIONS = ("model", "alignment", "retrieval", "output")
_OWN_KEY = {"model": "name", "embeddings": "provider"}
# [embeddings] holds the `embeddings_*` settings and this one only.
_EMBEDDINGS_ALSO = ("semantic_weight",)


def config_path(config: str | Path | None) -> Path:
    """The evident.toml that settings are read from: `config`, else `EVIDENT_CONFIG`, else ./evident.toml."""
    return Path(config or os.environ.get("EVIDENT_CONFIG") or "evident.toml")


class ConfigFile(NamedTuple):
    """A parsed evident.toml: the path as given (errors name it so), its folder (relative paths in it are
    relative to that), and its tables."""

    path: Path
    folder: Path
    data: dict[str, Any]


def _read_config_file(config: str | Path | None) -> ConfigFile | None:
    explicit = config is not None or "EVIDENT_CONFIG" in os.environ
    path = config_path(config)
    if not path.exists():
        if explicit:
            raise ConfigError(f"{path}: config file not found")
        return None
    try:
        return ConfigFile(path, path.resolve().parent, tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from None


_files_lock = threading.Lock()
_files: dict[str | None, ConfigFile | None | ConfigError] = {}


def read_config_file(config: str | Path | None, *, cached: bool = False) -> ConfigFile | None:
    """The parsed evident.toml (`config`, else `EVIDENT_CONFIG`, else ./evident.toml when present).

    `cached`: read once per path, because the LangGraph server builds a run's context inside its event loop,
    where reading a file is a blocking call it refuses. A broken file is reported by every query that needs it."""
    if not cached:
        return _read_config_file(config)
    key = str(config) if config is not None else os.environ.get("EVIDENT_CONFIG")
    with _files_lock:
        if key not in _files:
            try:
                _files[key] = _read_config_file(config)
            except ConfigError as exc:
                _files[key] = exc
        found = _files[key]
    if isinstance(found, ConfigError):
        raise found
    return found


def forget_file_defaults() -> None:
    """Read `evident.toml` again the next time (the file or `EVIDENT_CONFIG` changed)."""
    with _files_lock:
        _files.clear()
        _deployments.clear()


def section_field(section: str, key: str) -> str:
    """The setting a key of [model] or [embeddings] stands for: `name`/`provider` the section's own, else the
    section's prefix and the key (`timeout_s` in [model] is `model_timeout_s`)."""
    return section if _OWN_KEY.get(section) == key else f"{section}_{key}"


def sources_list(value: Any) -> Any:
    """`[sources.wiki]` tables (name -> settings) as the list `[[sources]]` writes."""
    if isinstance(value, dict):
        return [{"name": name, **body} if isinstance(body, dict) else body for name, body in value.items()]
    return value


def _section_keys(path: Path, section: str, table: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """A [model] or [embeddings] table as settings; a key no setting has is named with the nearest one."""
    fields = set(fields)
    prefixed = {f.removeprefix(f"{section}_"): f for f in fields if f.startswith(f"{section}_")}
    known = {_OWN_KEY[section]: section, **prefixed}
    known.update({f: f for f in (fields if section in _QUERY_SECTIONS else _EMBEDDINGS_ALSO)})
    for key in table:
        if str(key) not in known:
            raise unknown_key(path, str(key), known, section)
    return {known[str(k)]: v for k, v in table.items()}


def query_file_settings(file: ConfigFile, fields: dict[str, FieldInfo]) -> dict[str, Any]:
    """evident.toml's query settings, flat (a flat file and the sections are both accepted)."""
    path, data = file.path, file.data
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key == SERVER_SECTION:
            continue
        if key in _OWN_KEY and isinstance(value, dict):
            flat.update(_section_keys(path, key, value, fields))
        elif key in _QUERY_SECTIONS and isinstance(value, dict):
            for name in value:
                if name not in fields:
                    raise unknown_key(path, str(name), fields, key)
            flat.update(value)
        elif key not in fields:
            raise unknown_key(path, str(key), [*fields, *_QUERY_SECTIONS, *_OWN_KEY, SERVER_SECTION])
        else:
            section = fields[key].annotation
            if isinstance(value, dict) and isinstance(section, type) and issubclass(section, BaseModel):
                for name in value:  # a misspelt key of [offline] is named as any other
                    if name not in section.model_fields:
                        raise unknown_key(path, str(name), section.model_fields, key)
            flat[key] = value
    if "sources" in flat:
        # Paths inside a source (local folders, index files) are relative to this file too.
        base_dir = str(file.folder)
        sources = sources_list(flat["sources"])
        if isinstance(sources, list):
            flat["sources"] = [{"base_dir": base_dir, **s} if isinstance(s, dict) else s for s in sources]
    return flat


class _TomlFile(InitSettingsSource):
    """evident.toml as settings: its section of them, relative paths resolved against its folder."""

    def __init__(self, settings_cls: type[DeploymentSettings], file: ConfigFile | None) -> None:
        values: dict[str, Any] = {}
        if file is not None:
            section = settings_cls.toml_section
            if section is None:
                values = query_file_settings(file, settings_cls.model_fields)
            else:
                values = file.data.get(section) or {}
                if not isinstance(values, dict):
                    raise ConfigError(f"{file.path}: [{section}] must be a table")
                for key in values:
                    if key not in settings_cls.model_fields:
                        raise unknown_key(file.path, str(key), settings_cls.model_fields, section)
            base = file.folder
            for key in settings_cls.file_paths & set(values):
                paths = values[key]
                values[key] = ([str(base / p) for p in paths] if isinstance(paths, list)
                               else str(base / paths) if isinstance(paths, str) else paths)
        super().__init__(settings_cls, values)


# The file a caller names (`--config`): pydantic-settings builds its sources in a class method, so the path
# of one construction reaches them here. Unset: `EVIDENT_CONFIG` or ./evident.toml, read once.
_config_file: ContextVar[tuple[str | Path | None, bool]] = ContextVar("evident_config_file", default=(None, True))


class DeploymentSettings(BaseSettings):
    """Settings read from defaults < evident.toml < environment < the caller (the keyword arguments)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", env_ignore_empty=True,
                                      extra="forbid")
    # The table of evident.toml this model reads (None: the query settings, flat and in their sections).
    toml_section: ClassVar[str | None] = None
    # Settings that are paths, relative to evident.toml's folder when written there.
    file_paths: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config, cached = _config_file.get()
        return (init_settings, _Environment(settings_cls),
                _TomlFile(cls, read_config_file(config, cached=cached)))

    @classmethod
    def load(cls, config: str | Path | None = None, *, cached: bool = False, **given: Any) -> Self:
        """The settings with `config` (else `EVIDENT_CONFIG`, else ./evident.toml) read now (`cached`: the file
        as first read); a `ConfigError` names a bad value where it was written: the file, the environment
        variable, or neither (the caller)."""
        token = _config_file.set((config, cached))
        try:
            return cls(**given)
        except SettingsError as exc:
            raise ConfigError(str(exc)) from None
        except ValidationError as exc:
            where, what = first_problem(exc)
            name = where.split(".")[0]
            origin = None
            if name in cls.model_fields and name not in given:
                env = [var for var in setting_variables(name, cls.model_fields[name]) if environment_value(var)]
                origin = f"${env[0]}" if env else str(config_path(config))
            raise cls.config_error(where, what, origin) from None
        finally:
            _config_file.reset(token)

    @classmethod
    def config_error(cls, where: str, what: str, origin: str | None = None) -> ConfigError:
        return ConfigError(f"{origin + ': ' if origin else ''}invalid setting {where or 'settings'}: {what}")

    @classmethod
    def deployment(cls, config: str | Path | None = None, *, cached: bool = False) -> dict[str, Any]:
        """The settings that evident.toml and the environment set (not the defaults), built once per
        configuration: reading every source costs milliseconds, and a run reads its settings in every node.
        `cached`: the file as first read, for the server's event loop, where even a `stat` is refused;
        otherwise a file changed since is read again."""
        file: tuple[Any, ...] = (config if config is not None else environment_value("EVIDENT_CONFIG"),)
        if not cached:  # ./evident.toml is another file in another folder
            try:
                found = config_path(config).stat()
                file += (os.getcwd(), found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size)
            except OSError:
                file += (os.getcwd(),)
        key = (cls, cached, file, frozenset(os.environ.items()))
        with _files_lock:
            values = _deployments.get(key)
        if values is None:
            settings = cls.load(config, cached=cached)
            values = {name: getattr(settings, name) for name in settings.model_fields_set}
            with _files_lock:
                if len(_deployments) >= 64:  # bounded: a test run goes through many configurations
                    _deployments.clear()
                _deployments[key] = values
        return copy.deepcopy(values)  # no two contexts share a list or a table


_deployments: dict[tuple[Any, ...], dict[str, Any]] = {}


# -- sections ------------------------------------------------------------------------------------------------


class CorpusFileSettings(BaseModel):
    """How corpus files are read: settings of a query's corpus and of each `local` or `postgres` source."""

    follow_symlinks: bool = Field(
        False, description="Index files reached through symbolic links that leave a corpus folder."
    )
    max_file_mb: float = Field(20.0, gt=0, description="Corpus files (JSONL: lines) larger than this are skipped.")
    section_chars: int = Field(
        100_000, ge=1000, description="Documents longer than this are indexed as sections (url#section-N)."
    )
    exclude: list[str] = Field(
        ["_sources", "_static"], max_length=200,
        description="Globs of files and folders a corpus folder holds that are not indexed, matched against "
        "the path relative to it; a glob without '/' matches any one name in that path (default: the page "
        "sources and static files of a Sphinx build, copies of its pages).",
    )
    fallback_encoding: str = Field(
        "cp1252", min_length=1, max_length=40,
        description="How a text or HTML file that is not UTF-8 (and has no byte order mark or declared charset) "
        "is read; cp1252 reads latin-1 too, and a byte it leaves undefined is read as latin-1.",
    )

    @field_validator("fallback_encoding")
    @classmethod
    def _text_encoding(cls, value: str) -> str:
        try:
            known = codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}") from None
        if not getattr(known, "_is_text_encoding", True):
            raise ValueError(f"{value!r} is not a text encoding")
        return known.name


class OfflineSettings(BaseModel):
    """The offline engine's tunable numbers (`[offline]` in evident.toml), chosen on the development
    set's tune split by `benchmarks/offline_tuning.py`, which prints the search and the holdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # How a window of sentences is scored (evident/offline/scoring.py).
    rank_decay: float = Field(
        0.28, ge=0.0, le=5.0, description="A window of the k-th retrieved page (from 0) scores 1 / (1 + "
        "rank_decay * k): retrieval order is evidence too.")
    pair_bonus: float = Field(
        0.25, ge=0.0, le=2.0, description="Extra weight of two query words that stand next to each other in "
        "the text as in the question ('refund window'), as a share of their weights.")
    heading_decay: float = Field(
        0.5, ge=0.0, le=1.0, description="A section heading's (or above the first heading, the page title's) "
        "match counts for the first sentence under it, heading_decay times less for each further one.")
    long_unit_words: int = Field(
        40, ge=5, le=1000, description="Past this many words a sentence's score shrinks with its length (a "
        "run-on table row or an unpunctuated paragraph matches by sheer size).")
    name_miss: float = Field(
        0.5, ge=0.0, le=1.0, description="Share of its coverage left to a window whose page never mentions a "
        "name the question asks about (a capitalised word such as a product or a place).")
    window_units: int = Field(
        3, ge=1, le=10, description="Sentences (list items, table rows) a quoted window holds at most.")
    # How the answer is composed from the verified passages (evident/offline/selection.py, composer.py).
    max_sentences: int = Field(
        5, ge=1, le=20, description="Sentences an offline answer usually shows.")
    max_long_sentences: int = Field(
        6, ge=1, le=30, description="Sentences an offline answer may show when more sentences are as "
        "on-topic as the best one (`strong_relevance`) or the best passage is longer.")
    strong_relevance: float = Field(
        0.67, ge=0.0, le=2.0, description="A sentence this share as on-topic as the best one (by the "
        "question's words) lengthens the answer up to `max_long_sentences`.")
    passage_decay: float = Field(
        0.7, ge=0.0, le=1.0, description="When the answer must be cut, a sentence's relevance counts "
        "passage_decay ** k for the k-th passage (the extractor ranked passages on more than words).")


# The defaults, shared by the offline functions' signatures (the settings are frozen).
DEFAULT_OFFLINE = OfflineSettings()


Algorithm = Literal["HS256", "HS384", "HS512", "RS256", "RS384", "RS512"]
DATABASE_SCHEMES = ("postgresql://", "postgres://")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
# Comma-separated in the environment (`EVIDENT_CORS_ORIGINS=https://a.example,https://b.example`), not JSON.
CommaList = Annotated[list[str], NoDecode]


class ServerSettings(BaseModel):
    """`[server]`: how the served API authenticates callers, which browsers and host names it accepts, its
    limits, and where a production server keeps its threads and runs. The deployment's only: never a query
    setting, so a request cannot see or change them."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True)

    tokens_file: Path | None = Field(None, validation_alias=AliasChoices("tokens_file", "EVIDENT_AUTH_TOKENS_FILE"),
                                     description="JSON file of bearer tokens, stored as SHA-256 hex digests.")
    jwt_key_file: Path | None = Field(None, description="HS256 secret, or RS256 public key (PEM).")
    jwt_jwks_file: Path | None = Field(None, description="JSON Web Key Set of RS256 keys (chosen by `kid`).")
    jwt_algorithms: Annotated[list[Algorithm], NoDecode] = Field(
        default_factory=lambda: list[Algorithm](["RS256"]),
        description="Accepted algorithms (`HS256` for a secret).")
    jwt_issuer: str | None = Field(None, description="Required `iss`.")
    jwt_audience: str | None = Field(None, description="Required `aud`.")
    jwt_user_claim: str = Field("sub", description="Claim naming the user.")
    jwt_groups_claim: str = Field("groups", description="Claim listing the groups (dots for nesting).")
    cors_origins: CommaList = Field(
        default_factory=list, description="Browser origins besides the server's own that may call it.")
    allowed_hosts: CommaList = Field(
        default_factory=list, description="`Host` names accepted without authentication (loopback always).")
    insecure: bool = Field(False, description="Anonymous access from other machines (`evident serve --insecure`).")
    max_body_bytes: int = Field(1 << 20, ge=1024, le=1 << 30, description="The largest request body of any route.")
    max_metadata_bytes: int = Field(
        16 << 10, ge=256, le=1 << 24, description="The largest thread, run or assistant `metadata` (JSON).")
    max_json_depth: int = Field(32, ge=8, le=256, description="How deeply a request body may nest arrays and objects.")
    # Half of `evident serve`'s 8 jobs: one user never takes every worker.
    max_active_runs: int = Field(4, ge=1, le=100_000,
                                 description="Runs a user may have pending or running, per process.")
    database: str | None = Field(
        None, validation_alias=AliasChoices("database", "EVIDENT_DATABASE_URL"),
        description="PostgreSQL for threads, runs and checkpoints: `evident serve` runs Aegra.")
    redis: str | None = Field(None, validation_alias=AliasChoices("redis", "EVIDENT_REDIS_URL"),
                              description="Redis that the replicas of one database share their runs through.")

    @field_validator("jwt_algorithms", "cors_origins", "allowed_hosts", mode="before")
    @classmethod
    def _comma_separated(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [part.strip() for part in v.split(",") if part.strip()]
        return v

    @field_validator("cors_origins")
    @classmethod
    def _no_wildcard(cls, v: list[str]) -> list[str]:
        if any("*" in origin for origin in v):
            raise ValueError("list the origins that may call the server; a wildcard is not accepted")
        return [origin.rstrip("/") for origin in v]

    @field_validator("database")
    @classmethod
    def _postgresql(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(DATABASE_SCHEMES):
            raise ValueError("a PostgreSQL URL is needed: postgresql://USER:PASSWORD@HOST:PORT/DATABASE")
        return v

    @field_validator("redis")
    @classmethod
    def _redis(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(REDIS_SCHEMES):
            raise ValueError("a Redis URL is needed: redis://HOST:PORT/DB (rediss:// for TLS)")
        return v

    @field_validator("jwt_algorithms")
    @classmethod
    def _one_family(cls, v: list[str]) -> list[str]:
        # A public key accepted as an HMAC secret would let anyone sign tokens with it.
        if len({a[:2] for a in v}) > 1:
            raise ValueError("use HS* (a shared secret) or RS* (a public key), not both")
        return v

    @property
    def jwt_configured(self) -> bool:
        return self.jwt_key_file is not None or self.jwt_jwks_file is not None

    @property
    def auth_configured(self) -> bool:
        return self.tokens_file is not None or self.jwt_configured


class DeployedServerSettings(DeploymentSettings, ServerSettings):
    """`ServerSettings` from [server] of evident.toml (relative paths against its folder) and the environment."""

    model_config = SettingsConfigDict(extra="forbid", validate_by_name=True)

    toml_section: ClassVar[str | None] = SERVER_SECTION
    file_paths: ClassVar[frozenset[str]] = frozenset({"tokens_file", "jwt_key_file", "jwt_jwks_file"})

    @classmethod
    def config_error(cls, where: str, what: str, origin: str | None = None) -> ConfigError:
        return ConfigError(f"invalid server setting {where or SERVER_SECTION}: {what}")
