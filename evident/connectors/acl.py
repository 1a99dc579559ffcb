"""Document permissions: who may see a retrieved document.

A document may carry `metadata["acl"]`. The accepted forms, all case-insensitive:

- `"public"` or `"*"`: everyone, anonymous callers included;
- `"authenticated"`: any caller with a user id or a group;
- `"user:alice"`, `"group:hr"`, or a bare name (a group), alone, comma-separated in one string,
  or as a list of such strings;
- `{"public": bool, "authenticated": bool, "users": [...], "groups": [...]}`.

Rules, chosen so that every doubt denies:

- no `acl` (absent, `None` or `""`): the source's `default_acl` decides, `"public"` unless the source
  is configured `default_acl = "deny"`;
- an acl that grants nobody (`[]`, `{"users": [], "groups": []}`) or that cannot be read (a number,
  unknown keys, an unknown prefix such as `role:x`): nobody sees the document;
- no principal, or a principal with neither user nor groups: anonymous, sees only public documents.

The principal is whoever the caller says it is: in a server deployment it must come from the
authentication layer, never from the request body (docs/sources.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from evident.models import Principal, SourceDocument
from evident.settings import first_problem

DefaultAcl = Literal["public", "deny"]

_PUBLIC_WORDS = frozenset({"public", "*"})
_AUTHENTICATED_WORDS = frozenset({"authenticated"})
_DICT_KEYS = frozenset({"public", "authenticated", "users", "groups"})


class AclError(ValueError):
    """An acl value that cannot be interpreted (treated as "nobody may see this")."""


class PrincipalError(ValueError):
    """A principal in the graph input that is not `{user, groups}`."""


@dataclass(frozen=True)
class Acl:
    """A parsed acl; names are case-folded."""

    public: bool = False
    authenticated: bool = False
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def allows(self, principal: Principal | None, *, source: str = "") -> bool:
        if self.public:
            return True
        if principal is None or is_anonymous(principal):
            return False
        if self.authenticated:
            return True
        if self.users & user_ids(principal, source=source):
            return True
        return bool(self.groups & {_fold(group) for group in principal.groups if group.strip()})


PUBLIC = Acl(public=True)


def _fold(name: str) -> str:
    # Directory services compare names case-insensitively (AD, LDAP, Confluence groups).
    return name.strip().casefold()


def is_anonymous(principal: Principal | None) -> bool:
    return principal is None or (not principal.user.strip() and not any(g.strip() for g in principal.groups))


def user_ids(principal: Principal, *, source: str = "") -> set[str]:
    """The principal's user ids to match against an acl: EvidenT's, and its id in `source`."""
    ids = {_fold(principal.user)} if principal.user.strip() else set()
    other = principal.ids.get(source) if source else None
    if other and other.strip():
        ids.add(_fold(other))
    return ids


def coerce_principal(value: Any) -> Principal | None:
    """The graph input's `principal` as a `Principal` (None for anonymous); raises `PrincipalError`."""
    if value is None or isinstance(value, Principal):
        return value
    if isinstance(value, dict):
        try:
            return Principal.model_validate(value)
        except ValidationError as exc:
            where, what = first_problem(exc, unknown="unknown field")
            raise PrincipalError(f"invalid principal: {where or 'principal'}: {what}") from None
    raise PrincipalError(f"invalid principal: expected an object with user and groups, got {type(value).__name__}")


def parse_acl(value: Any) -> Acl | None:
    """The `Acl` of a metadata value; None when the document states no acl at all."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return _from_entries(value.split(","))
    if isinstance(value, (list, tuple)):
        if not all(isinstance(entry, str) for entry in value):
            raise AclError("acl list entries must be strings")
        return _from_entries(value)
    if isinstance(value, dict):
        return _from_dict(value)
    raise AclError(f"acl must be a string, a list or an object, not {type(value).__name__}")


def _from_entries(entries: Iterable[str]) -> Acl:
    public = authenticated = False
    users: set[str] = set()
    groups: set[str] = set()
    for raw in entries:
        entry = _fold(raw)
        if not entry:
            continue
        if entry in _PUBLIC_WORDS:
            public = True
        elif entry in _AUTHENTICATED_WORDS:
            authenticated = True
        elif ":" in entry:
            kind, _, name = entry.partition(":")
            name = name.strip()
            if kind.strip() == "user" and name:
                users.add(name)
            elif kind.strip() == "group" and name:
                groups.add(name)
            else:
                # `role:x`, `user:` ... : a typo here must not widen access.
                raise AclError(f"unknown acl entry {raw.strip()!r}")
        else:
            groups.add(entry)
    return Acl(public=public, authenticated=authenticated, users=frozenset(users), groups=frozenset(groups))


def _from_dict(value: dict[Any, Any]) -> Acl:
    unknown = set(value) - _DICT_KEYS
    if unknown or not value:
        raise AclError(f"acl object needs public/authenticated/users/groups keys, got {sorted(map(str, value))}")
    flags = {key: value.get(key, False) for key in ("public", "authenticated")}
    if not all(isinstance(flag, bool) for flag in flags.values()):
        raise AclError("acl 'public' and 'authenticated' must be true or false")
    names: dict[str, frozenset[str]] = {}
    for key in ("users", "groups"):
        items = value.get(key) or []
        if isinstance(items, str):
            items = [items]
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise AclError(f"acl '{key}' must be a list of strings")
        names[key] = frozenset(_fold(item) for item in items if item.strip())
    return Acl(public=flags["public"], authenticated=flags["authenticated"], users=names["users"],
               groups=names["groups"])


def may_see(
    principal: Principal | None,
    acl: Any,
    *,
    default: DefaultAcl = "public",
    source: str = "",
) -> bool:
    """Whether `principal` may see a document whose metadata acl is `acl`."""
    try:
        parsed = parse_acl(acl)
    except AclError:
        return False
    if parsed is None:
        return default == "public"
    return parsed.allows(principal, source=source)


def filter_documents(
    docs: Iterable[SourceDocument],
    principal: Principal | None,
    *,
    default: DefaultAcl = "public",
    fallback_acl: Any = None,
) -> tuple[list[SourceDocument], int]:
    """The documents `principal` may see, in order, and how many were dropped.

    `fallback_acl` applies to documents that carry no acl of their own (a source-wide acl).
    """
    visible: list[SourceDocument] = []
    dropped = 0
    for doc in docs:
        acl = doc.metadata.get("acl")
        if acl is None or acl == "":
            acl = fallback_acl
        if may_see(principal, acl, default=default, source=doc.source):
            visible.append(doc)
        else:
            dropped += 1
    return visible, dropped
