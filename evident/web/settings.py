"""The server's own settings (`ServerSettings`, the [server] section of evident.toml and its environment
variables; evident/settings.py), read once per configuration, and the host names it answers to."""

from __future__ import annotations

import re
import threading

from evident.settings import DeployedServerSettings, ServerSettings, environment_value, setting_variables

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
# RFC 9110 `Host`: a bracketed IPv6 literal or a name of letters, digits, dots and hyphens, then an
# optional port. Nothing else is parsed leniently: `localhost:2024@evil.test` names no host at all.
_HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)"
                   r"(?::(?P<port>[0-9]{1,5}))?")


def host_name(host: str) -> str | None:
    """The host name of a `Host` header value, lower-cased, without its port; None when malformed."""
    match = _HOST.fullmatch(host.strip())
    if match is None or (match.group("port") is not None and not 0 < int(match.group("port")) < 65536):
        return None
    return match.group("name").lower()


def host_allowed(settings: ServerSettings, host: str) -> bool:
    """Whether a `Host` header names this server: a loopback name or an `allowed_hosts` entry."""
    name = host_name(host)
    return name is not None and (name in LOOPBACK_HOSTS or name in {h.lower() for h in settings.allowed_hosts})


_lock = threading.Lock()
_cached: dict[tuple[str | None, ...], ServerSettings] = {}
_VARIABLES = ["EVIDENT_CONFIG", *(var for name, info in ServerSettings.model_fields.items()
                                  for var in setting_variables(name, info))]


def server_settings() -> ServerSettings:
    """The settings of this server process, read once per configuration (a file read: not on the
    event loop of every request)."""
    key = tuple(environment_value(var) for var in _VARIABLES)
    with _lock:
        found = _cached.get(key)
        if found is None:
            found = _cached[key] = DeployedServerSettings.load()
    return found
