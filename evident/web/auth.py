"""Who may call the served graph, what each caller sees, and what a request may set.

LangGraph custom auth (`auth.path` in langgraph.json): `authenticate` turns a request into an
identity, and the `@auth.on` handler runs before the server touches any thread, run, assistant,
cron or store item. Both servers that load it call these handlers, each its own way: `langgraph dev`
(and LangGraph's platform) pass `authenticate` the parameters it names (`headers`, `scope`) and
`@auth.on` a run's request under `kwargs`; Aegra passes one dict of headers, and a run's request
fields themselves. The handlers read either.

- **Identity.** With authentication configured (`[server]`, evident/settings.py), a request needs
  `Authorization: Bearer <token>`: a token of the tokens file (stored as SHA-256 digests, compared
  in constant time) or a JWT (HS256/RS256, key or JWKS from a file, expiry, issuer and audience
  checked, groups from a configurable claim). Without it, every caller is anonymous and only
  loopback clients are served (unless the deployment says `insecure`).
- **Ownership.** Threads, runs and assistants get `metadata.owner` = the caller's identity when
  created (a run's also `created_by`, so that its assistant's `created_by: system` never becomes the
  run's or a new thread's), and every read, search, update and delete is filtered by it: a caller never sees another
  caller's threads. The graph's own assistant (`created_by: system`) is readable by everyone.
  Crons and the store are refused: the graph uses neither.
- **Request settings.** A run's `context` (or `config.configurable`) and an assistant's context or
  config may hold only the `RequestSettings`; any other setting is refused here with a 4xx naming
  it, before a run exists. The graph checks again (`run_settings`, evident/request_settings.py), whatever the route.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

import jwt
from langchain_core.messages import convert_to_messages
from langgraph_sdk import Auth

from evident.context import EvidentContext
from evident.conversation.messages import size_of
from evident.conversation.rule import oversized, query_too_long
from evident.request_settings import ContextWithDefaults, RequestSettingsError, check_request_settings
from evident.settings import ConfigError, ServerSettings
from evident.web.admitted import admitted_client
from evident.web.bodies import OWNERSHIP_KEYS, json_size
from evident.web.settings import server_settings

ANONYMOUS = "anonymous"
OWNER_KEY = "owner"
CREATOR_KEY = "created_by"

auth = Auth()

T = TypeVar("T")


def _unauthorized(message: str) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=401, detail=message, headers={"WWW-Authenticate": "Bearer"})


class _FileCache:
    """A parsed file, re-read when it changes (tokens are rotated without a restart)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[tuple[int, int], object]] = {}

    def get(self, path: Path, kind: str, parse: Callable[[bytes], T]) -> T:
        try:
            stat = path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            with self._lock:
                entry = self._entries.get((str(path), kind))
                if entry is not None and entry[0] == stamp:
                    return cast(T, entry[1])  # stored by this call's `parse` for the same (path, kind)
            value = parse(path.read_bytes())
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        with self._lock:
            self._entries[(str(path), kind)] = (stamp, value)
        return value


_files = _FileCache()


# -- bearer tokens from a file -------------------------------------------------------------------------


def token_digest(token: str) -> str:
    """What the tokens file stores for `token`: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _parse_tokens(raw: bytes) -> list[dict[str, Any]]:
    data = json.loads(raw)
    entries = data.get("tokens") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ConfigError('the tokens file must be a JSON list (or {"tokens": [...]}) of {sha256, user, groups}')
    out = []
    for entry in entries:
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        user = entry.get("user") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or len(digest) != 64 or not isinstance(user, str) or not user:
            raise ConfigError("every entry of the tokens file needs a 64-hex-digit sha256 and a user")
        groups = entry.get("groups") or []
        out.append({"sha256": digest.lower(), "user": user, "groups": [str(g) for g in groups]})
    return out


def _token_identity(token: str, path: Path) -> dict[str, Any] | None:
    digest = token_digest(token)
    found = None
    for entry in _files.get(path, "tokens", _parse_tokens):
        # Every entry is compared, so the time taken does not tell which one nearly matched.
        if hmac.compare_digest(entry["sha256"], digest):
            found = entry
    return None if found is None else {"identity": found["user"], "groups": found["groups"]}


# -- JWTs ------------------------------------------------------------------------------------------


def _claim(claims: Mapping[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _groups(value: Any) -> list[str]:
    if isinstance(value, str):
        return [g for g in value.replace(",", " ").split() if g]
    if isinstance(value, (list, tuple)):
        return [str(g) for g in value if str(g).strip()]
    return []


def _jwt_key(token: str, settings: ServerSettings) -> Any:
    if settings.jwt_jwks_file is not None:
        jwks = _files.get(settings.jwt_jwks_file, "jwks", lambda raw: jwt.PyJWKSet.from_json(raw.decode("utf-8")))
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in jwks.keys if kid is None or k.key_id == kid]
        if not keys:
            raise jwt.InvalidTokenError("no key of the JWKS matches the token's kid")
        return keys[0].key
    assert settings.jwt_key_file is not None
    return _files.get(settings.jwt_key_file, "key", lambda raw: raw.decode("utf-8").strip())


def _jwt_identity(token: str, settings: ServerSettings) -> dict[str, Any]:
    required = ["exp"] + (["iss"] if settings.jwt_issuer else []) + (["aud"] if settings.jwt_audience else [])
    try:
        claims = jwt.decode(
            token, _jwt_key(token, settings), algorithms=list(settings.jwt_algorithms),
            audience=settings.jwt_audience, issuer=settings.jwt_issuer,
            options={"require": required, "verify_aud": settings.jwt_audience is not None}, leeway=30,
        )
    except jwt.ExpiredSignatureError:
        raise _unauthorized("the token has expired") from None
    except jwt.InvalidAudienceError:
        raise _unauthorized("the token is not meant for this server (audience)") from None
    except jwt.InvalidIssuerError:
        raise _unauthorized("the token's issuer is not trusted") from None
    except (jwt.InvalidTokenError, ValueError) as exc:
        raise _unauthorized(f"invalid token: {exc}") from None
    user = _claim(claims, settings.jwt_user_claim)
    if not isinstance(user, str) or not user:
        raise _unauthorized(f"the token has no {settings.jwt_user_claim!r} claim")
    return {"identity": user, "groups": _groups(_claim(claims, settings.jwt_groups_claim))}


def _looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2


def _loopback(client: Any) -> bool:
    host = client[0] if isinstance(client, (list, tuple)) and client else None
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Headers a reverse proxy adds. A request carrying one came through a proxy, so the loopback address it
# arrived from is the proxy's, not the caller's: without authentication it is not served as "this machine".
FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def direct_client(client: Any, headers: Mapping[Any, Any]) -> Any:
    """The client address to trust as the caller's: None (no address, never loopback) for a forwarded
    request, since a proxy on this machine would otherwise make every caller on the network local."""
    return None if any(header(headers, name) is not None for name in FORWARDING_HEADERS) else client


def identify(authorization: str | None, client: Any, settings: ServerSettings) -> dict[str, Any]:
    """The caller's identity (`identity`, `groups`) for these settings; raises 401/403 otherwise."""
    if not settings.auth_configured:
        if not settings.insecure and not _loopback(client):
            raise Auth.exceptions.HTTPException(
                status_code=403, detail="authentication is not configured: only this machine may call the server"
                " (directly: a request through a reverse proxy needs authentication)")
        return {"identity": ANONYMOUS, "groups": [], "is_authenticated": False}
    scheme, _, token = (authorization or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise _unauthorized("authentication required: send Authorization: Bearer <token>")
    try:
        if settings.jwt_configured and _looks_like_jwt(token):
            found: dict[str, Any] | None = _jwt_identity(token, settings)
        elif settings.tokens_file is not None:
            found = _token_identity(token, settings.tokens_file)
        else:
            found = None
    except ConfigError as exc:  # the deployment's files: the operator must fix them, the caller learns nothing
        raise Auth.exceptions.HTTPException(status_code=503, detail="authentication is unavailable") from exc
    if found is None:
        raise _unauthorized("invalid token")
    return {**found, "is_authenticated": True}


def header(headers: Mapping[Any, Any], name: str) -> str | None:
    """One header of `headers` (bytes keys and values from LangGraph's server, str from Aegra's)."""
    for key, value in headers.items():
        text = key.decode("latin-1") if isinstance(key, bytes) else str(key)
        if text.lower() == name:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return None


@auth.authenticate
async def authenticate(headers: Mapping[Any, Any], scope: dict[str, Any] | None = None) -> dict[str, Any]:
    """The caller's identity. LangGraph's server passes `headers` and the ASGI `scope` by name; Aegra
    passes the headers only, so the client address is the one the gate admitted this request from."""
    client = direct_client(scope.get("client"), headers) if scope is not None else admitted_client.get()
    # In a worker thread: reading the token files is a blocking call the dev server refuses on its loop.
    return await asyncio.to_thread(_authenticate, header(headers, "authorization"), client)


def _authenticate(authorization: str | None, client: Any) -> dict[str, Any]:
    try:
        settings = server_settings()
    except ConfigError as exc:
        raise Auth.exceptions.HTTPException(status_code=503, detail=str(exc)) from None
    return identify(authorization, client, settings)


# -- what each caller may do -----------------------------------------------------------------------------


def _configurable(value: Mapping[str, Any]) -> Any:
    config = value.get("config")
    return config.get("configurable") if isinstance(config, Mapping) else None


def _run_kwargs(value: Mapping[str, Any]) -> Mapping[str, Any]:
    kwargs = value.get("kwargs")
    return kwargs if isinstance(kwargs, Mapping) else {}


def _requested_settings(resource: str, action: str, value: Mapping[str, Any]) -> list[Any]:
    """The settings objects a request carries for this action, in either server's shape."""
    if resource == "threads" and action == "create_run":
        # LangGraph's server: under `kwargs`, where it has mirrored a sent `config.configurable` into
        # `context` and then added its own keys to `configurable`. Aegra: the request's own `context` and
        # `config.configurable` (it mirrors one into the other later). Each shape lacks the other's keys,
        # so reading all three places misses nothing in either.
        return [_run_kwargs(value).get("context"), value.get("context"), _configurable(value)]
    if resource == "assistants" and action in ("create", "update"):
        return [value.get("context"), _configurable(value)]
    return []


def _run_inputs(value: Mapping[str, Any]) -> list[Any]:
    """A run's input: under `kwargs` (LangGraph's server) or at the top (Aegra)."""
    return [_run_kwargs(value).get("input"), value.get("input")]


def oversized_input(value: Any, ctx: EvidentContext) -> str | None:
    """Why a run's input can never be taken, by size alone (None when it might): the deployment's bounds.

    The graph checks the whole conversation (the thread's earlier messages too) and answers a refused one
    with status `error`; an input that breaks a bound on its own is refused here already, as a 422, before
    a run starts or its text reaches the thread."""
    if not isinstance(value, Mapping):
        return None
    query = value.get("query")
    if isinstance(query, str) and (problem := query_too_long(query, ctx.max_query_chars)):
        return problem
    messages = value.get("messages")
    if not isinstance(messages, list):
        return None
    try:  # as the graph's `add_messages` will read them; a malformed one is the graph's to refuse
        sizes = [size_of(m) for m in convert_to_messages(messages)]
    except Exception:  # any malformed message: the graph refuses it with its reason, never a 500 here
        return None
    return oversized(sizes, max_messages=ctx.max_messages, max_chars=ctx.max_conversation_chars)


# Keys of a run's `context` that LangGraph and its server own: `__pregel_*` and the server's
# `__after_seconds__`-style markers, `langgraph_*` (identity, request id), the checkpointer's
# `checkpoint_*`, and the thread and run a run belongs to. A request that sets one is refused by name;
# passed through, they crash the run or point it at state that is not the caller's.
RESERVED_PREFIXES = ("__", "langgraph_", "checkpoint_")
RESERVED_KEYS = frozenset({"thread_id", "run_id"})


def _refuse(status: int, detail: str) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=status, detail=detail)


def reserved_keys(values: Any) -> list[str]:
    """The reserved keys among a request's settings object (sorted), if it is one."""
    if not isinstance(values, Mapping):
        return []
    return sorted(str(k) for k in values if str(k).startswith(RESERVED_PREFIXES) or str(k) in RESERVED_KEYS)


def check_reserved(resource: str, action: str, value: Mapping[str, Any]) -> None:
    # A run's `context` is the request's alone: the server copies a sent `configurable` into it before
    # adding its own keys to `configurable`, and only then calls this handler.
    for requested in _requested_settings(resource, action, value):
        names = reserved_keys(requested)
        if names:
            raise _refuse(403, f"reserved setting{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} "
                          "may not be set by a request: LangGraph and the server set them")


def check_metadata(action: str, value: Mapping[str, Any], settings: ServerSettings) -> None:
    """Ownership keys are the server's; metadata is bounded (`max_metadata_bytes`)."""
    if action not in ("create", "create_run", "update"):
        return
    metadata = value.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise _refuse(422, "metadata must be an object")
    claimed = [key for key in OWNERSHIP_KEYS if key in metadata]
    if claimed:
        raise _refuse(403, f"metadata {', '.join(map(repr, claimed))} may not be set by a request: "
                      "the server sets who owns what")
    size = json_size(metadata)
    if size > settings.max_metadata_bytes:
        raise _refuse(422, f"the metadata is too large: {size} bytes (the limit is {settings.max_metadata_bytes})")


def check_settings(resource: str, action: str, value: Mapping[str, Any]) -> None:
    check_reserved(resource, action, value)
    for requested in _requested_settings(resource, action, value):
        try:
            check_request_settings(requested)
        except RequestSettingsError as exc:
            raise Auth.exceptions.HTTPException(status_code=exc.status, detail=str(exc)) from None
    if resource == "threads" and action == "create_run":
        try:
            deployment = ContextWithDefaults()
        except ConfigError as exc:
            raise Auth.exceptions.HTTPException(status_code=503, detail=str(exc)) from None
        for run_input in _run_inputs(value):
            problem = oversized_input(run_input, deployment)
            if problem is not None:
                raise Auth.exceptions.HTTPException(status_code=422, detail=problem)


def owner_filter(resource: str, action: str, identity: str, value: dict[str, Any]) -> dict[str, Any] | bool:
    """Stamp the owner on what is created; the filter every other action is limited by."""
    if resource in ("crons", "store"):
        return False
    if action in ("create", "create_run", "update"):
        metadata = value.get("metadata")
        if isinstance(metadata, dict):
            metadata[OWNER_KEY] = identity  # in place: the server keeps this very dict
        elif action != "update":
            metadata = value["metadata"] = {OWNER_KEY: identity}
        if action == "create_run" and isinstance(metadata, dict):
            # A run's metadata is merged over its assistant's, and `langgraph dev` makes it a new thread's:
            # the deployment's assistant's `created_by: system` must not become the run's or the thread's.
            metadata[CREATOR_KEY] = identity
    if resource == "assistants" and action in ("read", "search"):
        # `created_by` cannot come from a request (`check_metadata`): only the deployment's own
        # assistants, which the server creates at start-up, carry it.
        return {"$or": [{OWNER_KEY: identity}, {"created_by": "system"}]}
    return {OWNER_KEY: identity}


@auth.on
async def owned(ctx: Auth.types.AuthContext, value: Any) -> Any:
    try:
        settings = server_settings()
    except ConfigError as exc:
        raise _refuse(503, str(exc)) from None
    check_metadata(ctx.action, value if isinstance(value, Mapping) else {}, settings)
    check_settings(ctx.resource, ctx.action, value if isinstance(value, Mapping) else {})
    return owner_filter(ctx.resource, ctx.action, str(ctx.user.identity),
                        value if isinstance(value, dict) else {})
