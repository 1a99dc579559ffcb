"""The server's own settings: authentication, browser origins, allowed host names, and where a
production server keeps its threads and runs.

They come from the deployment only: the `[server]` section of `evident.toml` (relative paths are
relative to that file) and environment variables, which win. They are never a query setting, so a
request cannot see or change them.

| evident.toml `[server]` | environment | meaning |
|---|---|---|
| `tokens_file` | `EVIDENT_AUTH_TOKENS_FILE` | JSON file of bearer tokens, stored as SHA-256 hex digests |
| `jwt_key_file` | `EVIDENT_JWT_KEY_FILE` | HS256 secret, or RS256 public key (PEM) |
| `jwt_jwks_file` | `EVIDENT_JWT_JWKS_FILE` | JSON Web Key Set of RS256 keys (chosen by `kid`) |
| `jwt_algorithms` | `EVIDENT_JWT_ALGORITHMS` | accepted algorithms (default `RS256`; `HS256` for a secret) |
| `jwt_issuer` | `EVIDENT_JWT_ISSUER` | required `iss` |
| `jwt_audience` | `EVIDENT_JWT_AUDIENCE` | required `aud` |
| `jwt_user_claim` | `EVIDENT_JWT_USER_CLAIM` | claim naming the user (default `sub`) |
| `jwt_groups_claim` | `EVIDENT_JWT_GROUPS_CLAIM` | claim listing the groups (default `groups`; dots for nesting) |
| `cors_origins` | `EVIDENT_CORS_ORIGINS` | browser origins besides the server's own that may call it |
| `allowed_hosts` | `EVIDENT_ALLOWED_HOSTS` | `Host` names accepted without authentication (loopback always) |
| `insecure` | `EVIDENT_INSECURE` | anonymous access from other machines (`evident serve --insecure`) |
| `max_body_bytes` | `EVIDENT_MAX_BODY_BYTES` | the largest request body of any route (default 1 MiB) |
| `max_metadata_bytes` | `EVIDENT_MAX_METADATA_BYTES` | the largest thread, run or assistant `metadata` (JSON; 16 KiB) |
| `max_json_depth` | `EVIDENT_MAX_JSON_DEPTH` | how deeply a request body may nest arrays and objects (default 32) |
| `max_active_runs` | `EVIDENT_MAX_ACTIVE_RUNS` | runs a user may have pending or running, per process (default 4) |
| `database` | `EVIDENT_DATABASE_URL` | PostgreSQL for threads, runs and checkpoints: `evident serve` runs Aegra |
| `redis` | `EVIDENT_REDIS_URL` | Redis that the replicas of one database share their runs through |
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evident.context import SERVER_SECTION, ConfigError, environment_value, first_problem, read_config_file, unknown_key

Algorithm = Literal["HS256", "HS384", "HS512", "RS256", "RS384", "RS512"]
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
# RFC 9110 `Host`: a bracketed IPv6 literal or a name of letters, digits, dots and hyphens, then an
# optional port. Nothing else is parsed leniently: `localhost:2024@evil.test` names no host at all.
_HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)"
                   r"(?::(?P<port>[0-9]{1,5}))?")
DATABASE_SCHEMES = ("postgresql://", "postgres://")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
DEFAULT_MAX_BODY_BYTES = 1 << 20
DEFAULT_MAX_METADATA_BYTES = 16 << 10
DEFAULT_MAX_JSON_DEPTH = 32
DEFAULT_MAX_ACTIVE_RUNS = 4  # half of `evident serve`'s 8 jobs: one user never takes every worker

_ENV = {
    "EVIDENT_AUTH_TOKENS_FILE": "tokens_file",
    "EVIDENT_JWT_KEY_FILE": "jwt_key_file",
    "EVIDENT_JWT_JWKS_FILE": "jwt_jwks_file",
    "EVIDENT_JWT_ALGORITHMS": "jwt_algorithms",
    "EVIDENT_JWT_ISSUER": "jwt_issuer",
    "EVIDENT_JWT_AUDIENCE": "jwt_audience",
    "EVIDENT_JWT_USER_CLAIM": "jwt_user_claim",
    "EVIDENT_JWT_GROUPS_CLAIM": "jwt_groups_claim",
    "EVIDENT_CORS_ORIGINS": "cors_origins",
    "EVIDENT_ALLOWED_HOSTS": "allowed_hosts",
    "EVIDENT_INSECURE": "insecure",
    "EVIDENT_MAX_BODY_BYTES": "max_body_bytes",
    "EVIDENT_MAX_METADATA_BYTES": "max_metadata_bytes",
    "EVIDENT_MAX_JSON_DEPTH": "max_json_depth",
    "EVIDENT_MAX_ACTIVE_RUNS": "max_active_runs",
    "EVIDENT_DATABASE_URL": "database",
    "EVIDENT_REDIS_URL": "redis",
}
_PATHS = ("tokens_file", "jwt_key_file", "jwt_jwks_file")
_LISTS = ("jwt_algorithms", "cors_origins", "allowed_hosts")


class ServerSettings(BaseModel):
    """How the served API authenticates callers and which browsers and host names it accepts."""

    model_config = ConfigDict(extra="forbid")

    tokens_file: Path | None = None
    jwt_key_file: Path | None = None
    jwt_jwks_file: Path | None = None
    jwt_algorithms: list[Algorithm] = Field(default_factory=lambda: list[Algorithm](["RS256"]))
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_user_claim: str = "sub"
    jwt_groups_claim: str = "groups"
    cors_origins: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(default_factory=list)
    insecure: bool = False
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024, le=1 << 30)
    max_metadata_bytes: int = Field(DEFAULT_MAX_METADATA_BYTES, ge=256, le=1 << 24)
    max_json_depth: int = Field(DEFAULT_MAX_JSON_DEPTH, ge=8, le=256)
    max_active_runs: int = Field(DEFAULT_MAX_ACTIVE_RUNS, ge=1, le=100_000)
    database: str | None = None
    redis: str | None = None

    @field_validator(*_LISTS, mode="before")
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

    def host_allowed(self, host: str) -> bool:
        """Whether a `Host` header names this server: a loopback name or an `allowed_hosts` entry."""
        name = host_name(host)
        return name is not None and (name in LOOPBACK_HOSTS or name in {h.lower() for h in self.allowed_hosts})


def host_name(host: str) -> str | None:
    """The host name of a `Host` header value, lower-cased, without its port; None when malformed."""
    match = _HOST.fullmatch(host.strip())
    if match is None or (match.group("port") is not None and not 0 < int(match.group("port")) < 65536):
        return None
    return match.group("name").lower()


def load_server_settings(config: str | Path | None = None) -> ServerSettings:
    """`[server]` of evident.toml, then the environment; a clear `ConfigError` when invalid."""
    values: dict[str, Any] = {}
    found = read_config_file(config)
    if found is not None:
        path, data = found
        section = data.get(SERVER_SECTION) or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: [{SERVER_SECTION}] must be a table")
        for key in section:
            if key not in ServerSettings.model_fields:
                raise unknown_key(path, str(key), ServerSettings.model_fields, SERVER_SECTION)
        values.update(section)
        base = path.resolve().parent
        for key in _PATHS:
            if isinstance(values.get(key), str):
                values[key] = str(base / values[key])
    for var, key in _ENV.items():
        value = environment_value(var)
        if value:
            values[key] = value
    try:
        return ServerSettings(**values)
    except ValidationError as exc:
        where, what = first_problem(exc)
        raise ConfigError(f"invalid server setting {where or SERVER_SECTION}: {what}") from None


_lock = threading.Lock()
_cached: dict[tuple[str | None, ...], ServerSettings] = {}


def server_settings() -> ServerSettings:
    """The settings of this server process, read once per configuration (a file read: not on the
    event loop of every request)."""
    key = (environment_value("EVIDENT_CONFIG"), *(environment_value(var) for var in _ENV))
    with _lock:
        found = _cached.get(key)
        if found is None:
            found = _cached[key] = load_server_settings()
    return found
