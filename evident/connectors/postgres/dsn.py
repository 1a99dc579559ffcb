"""A PostgreSQL connection string from the deployment, held so that its password cannot be shown.

The string comes from `dsn` in evident.toml or from the environment variable `dsn_env` names. Only
`where` (host, port, database, user) ever appears in a message; the password, and the whole string in
case a message quotes it, are listed in `secrets` so that `source_call.redact` removes them from any
error message someone else wrote.
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict
from pydantic import SecretStr

from evident.connectors.source import SourceConfigError
from evident.settings import environment_value


class PostgresDsn:
    """A parsed connection string: `where` is safe to show, `value()` is what libpq gets."""

    __slots__ = ("_value", "env", "secrets", "where")

    def __init__(self, source: str, value: str, *, env: str | None = None) -> None:
        try:
            parts = conninfo_to_dict(value)
        except psycopg.ProgrammingError:
            # libpq's message quotes the string it could not parse: say only which setting holds it.
            holder = f"environment variable {env}" if env else "dsn"
            raise SourceConfigError(source, f"{holder}: not a valid PostgreSQL connection string "
                                            "(key=value pairs or a postgresql:// URI)") from None
        self._value = SecretStr(value)
        self.env = env
        password = parts.get("password")
        self.secrets = [SecretStr(str(password))] if password else []
        self.secrets.append(self._value)
        host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
        port = str(parts.get("port") or "5432")
        target = f"{host}:{port}" if not host.startswith("/") else f"{host} (unix socket, port {port})"
        database = parts.get("dbname") or parts.get("user") or ""
        self.where = f"PostgreSQL at {target}, database {database!r}" + (f", user {parts['user']!r}"
                                                                         if parts.get("user") else "")

    def value(self) -> str:
        return self._value.get_secret_value()

    def hint(self) -> str:
        """Where to fix the credentials: the setting that holds them."""
        return f"check the credentials in {self.env}" if self.env else "check the credentials in the dsn setting"

    def __repr__(self) -> str:
        return f"PostgresDsn({self.where})"


def resolve_dsn(source: str, dsn: str | None, dsn_env: str | None) -> PostgresDsn:
    """The configured connection string: exactly one of `dsn` and `dsn_env` must be set."""
    if bool(dsn) == bool(dsn_env):
        raise SourceConfigError(source, "set exactly one of dsn and dsn_env (the environment variable holding it)")
    if dsn_env:
        value = environment_value(dsn_env)
        if not value:
            raise SourceConfigError(source, f"missing credential: environment variable {dsn_env} "
                                            "(PostgreSQL connection string) is not set")
        return PostgresDsn(source, value, env=dsn_env)
    assert dsn is not None
    return PostgresDsn(source, dsn)
