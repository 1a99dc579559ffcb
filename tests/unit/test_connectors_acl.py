"""Document permissions: parsing every acl form, the defaults, and failing closed on doubt."""

from __future__ import annotations

from typing import Any

import pytest

from evident.connectors.acl import (
    Acl,
    AclError,
    PrincipalError,
    coerce_principal,
    filter_documents,
    is_anonymous,
    may_see,
    parse_acl,
)
from evident.models import Principal, SourceDocument

ALICE = Principal(user="alice", groups=["Engineering", "staff"])
BOB = Principal(user="bob", groups=["sales"])
GROUPS_ONLY = Principal(groups=["hr"])


@pytest.mark.parametrize(
    ("acl", "expected"),
    [
        ("public", Acl(public=True)),
        ("*", Acl(public=True)),
        ("authenticated", Acl(authenticated=True)),
        ("engineering", Acl(groups=frozenset({"engineering"}))),
        ("group:HR, user:Carol", Acl(users=frozenset({"carol"}), groups=frozenset({"hr"}))),
        (["user:alice", "group:finance"], Acl(users=frozenset({"alice"}), groups=frozenset({"finance"}))),
        ({"users": ["Alice"], "groups": "hr"}, Acl(users=frozenset({"alice"}), groups=frozenset({"hr"}))),
        ({"public": True}, Acl(public=True)),
        ([], Acl()),
        ({"users": [], "groups": []}, Acl()),
    ],
)
def test_every_acl_form_parses(acl: Any, expected: Acl) -> None:
    assert parse_acl(acl) == expected


@pytest.mark.parametrize("acl", [None, "", "   "])
def test_absent_acl_is_none(acl: Any) -> None:
    assert parse_acl(acl) is None


@pytest.mark.parametrize(
    "acl", [42, True, ["group:hr", 3], {"roles": ["x"]}, {}, "role:admin", "user:", {"public": "yes"}])
def test_unreadable_acls_raise_and_deny(acl: Any) -> None:
    with pytest.raises(AclError):
        parse_acl(acl)
    assert not may_see(ALICE, acl)
    assert not may_see(ALICE, acl, default="public")


def test_matching_rules() -> None:
    assert may_see(ALICE, "group:engineering")  # case-insensitive
    assert may_see(ALICE, "user:ALICE")
    assert not may_see(BOB, "group:engineering")
    assert may_see(GROUPS_ONLY, "hr")
    assert may_see(BOB, "authenticated") and not may_see(None, "authenticated")
    assert may_see(None, "public") and may_see(BOB, "public")
    assert not may_see(ALICE, [])  # an acl that grants nobody


def test_defaults_for_documents_without_acl() -> None:
    assert may_see(None, None)  # public by default
    assert not may_see(None, None, default="deny")
    assert not may_see(ALICE, None, default="deny")
    assert may_see(ALICE, "group:staff", default="deny")  # an explicit acl wins over the default


def test_missing_or_empty_principal_is_anonymous() -> None:
    assert is_anonymous(None) and is_anonymous(Principal()) and is_anonymous(Principal(user="  ", groups=[" "]))
    assert not may_see(Principal(), "group:staff")
    assert not may_see(Principal(user=" "), "user: ")  # blank names never match each other


def test_source_specific_user_ids() -> None:
    alice = Principal(user="alice", ids={"confluence": "5b10ac8d82e05b22cc7d4ef5"})
    acl = {"users": ["5b10ac8d82e05b22cc7d4ef5"]}
    assert may_see(alice, acl, source="confluence")
    assert not may_see(alice, acl, source="wiki")


def test_filter_documents_counts_and_uses_the_fallback() -> None:
    docs = [
        SourceDocument(url="u1", content="a", metadata={"acl": "group:engineering"}),
        SourceDocument(url="u2", content="b", metadata={"acl": "group:finance"}),
        SourceDocument(url="u3", content="c"),
        SourceDocument(url="u4", content="d", metadata={"acl": 7}),
    ]
    visible, dropped = filter_documents(docs, ALICE)
    assert [d.url for d in visible] == ["u1", "u3"] and dropped == 2
    visible, dropped = filter_documents(docs, BOB, fallback_acl="group:staff")
    assert [d.url for d in visible] == [] and dropped == 4
    visible, dropped = filter_documents(docs, None, default="deny")
    assert visible == [] and dropped == 4


def test_principal_coercion() -> None:
    assert coerce_principal(None) is None
    assert coerce_principal({"user": "a", "groups": ["g"]}) == Principal(user="a", groups=["g"])
    assert coerce_principal(ALICE) is ALICE
    with pytest.raises(PrincipalError, match="groups"):
        coerce_principal({"user": "a", "groups": "not-a-list"})
    with pytest.raises(PrincipalError, match="str"):
        coerce_principal("alice")
