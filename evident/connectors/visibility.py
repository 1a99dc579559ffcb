"""Permissions as search terms: the visibility tokens an index stores per document and a caller matches.

A search that filters inside its query needs the acl as terms: each document is indexed with the
tokens of its acl (`document_tokens`), and a caller's search requires any of the tokens the caller
matches (`principal_tokens`). The two are built from `acl.parse_acl` and `acl.may_see`, so that

    set(document_tokens(acl)) & set(principal_tokens(principal, policy))  is non-empty
    exactly when  filter_documents([doc with acl], principal, default=..., fallback_acl=...)  keeps it;

`Acl.allows` stays the one definition of who sees what (tests/unit/test_visibility.py checks the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evident.connectors.acl import AclError, DefaultAcl, is_anonymous, may_see, parse_acl, user_ids
from evident.models import Principal

PUBLIC = "public"
AUTHENTICATED = "authenticated"
# No acl at all (absent, None or ""): the source's own `acl`, else its `default_acl`, decides at query time.
UNSTATED = "unstated"
# An acl of blanks ("  "): `filter_documents` does not replace it by the source's `acl`, `default_acl` decides.
BLANK = "blank"
# Every token `principal_tokens` may give a caller who is not signed in; a signed-in caller also holds
# AUTHENTICATED, so tokens outside this set mean a signed-in caller.
ANONYMOUS_TOKENS = frozenset({PUBLIC, UNSTATED, BLANK})


@dataclass(frozen=True)
class AclPolicy:
    """A source's permission settings, as `filter_documents` applies them to its hits."""

    default: DefaultAcl = "public"
    fallback_acl: Any = None  # the source-wide acl of documents that carry none
    source: str = ""  # the source's name: the key of the principal's `ids`


def document_tokens(acl: Any) -> list[str]:
    """The visibility tokens of a document whose `metadata["acl"]` is `acl`; none for "nobody"."""
    if acl is None or acl == "":
        return [UNSTATED]
    try:
        parsed = parse_acl(acl)
    except AclError:
        return []
    if parsed is None:
        return [BLANK]
    tokens = [PUBLIC] if parsed.public else []
    tokens += [AUTHENTICATED] if parsed.authenticated else []
    tokens += [f"user:{name}" for name in sorted(parsed.users)]
    tokens += [f"group:{name}" for name in sorted(parsed.groups)]
    return tokens


def principal_tokens(principal: Principal | None, policy: AclPolicy) -> list[str]:
    """The visibility tokens `principal` matches in a source with `policy`: any one of them admits a document."""
    tokens = [PUBLIC]
    if not is_anonymous(principal):
        assert principal is not None  # is_anonymous(None) is True
        tokens.append(AUTHENTICATED)
        tokens += sorted(f"user:{name}" for name in user_ids(principal, source=policy.source))
        tokens += sorted({f"group:{group.strip().casefold()}" for group in principal.groups if group.strip()})
    if may_see(principal, policy.fallback_acl, default=policy.default, source=policy.source):
        tokens.append(UNSTATED)
    if policy.default == "public":
        tokens.append(BLANK)
    return tokens
