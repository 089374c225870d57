"""Tokens: HS256 for development, RS256 with a configured public key; scopes from claims."""

from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from engram.auth import (
    AUDIENCE,
    ISSUER,
    AuthError,
    Principal,
    ScopeError,
    TokenVerifier,
    mint_token,
)
from engram.service import StartupRefused
from engram.settings import CommonSettings

SECRET = "a-development-secret-of-at-least-32-bytes"


def settings(**values: str) -> CommonSettings:
    return CommonSettings.model_validate(values)


def test_hs256_tokens_carry_org_member_and_optional_claims() -> None:
    verifier = TokenVerifier(settings(ENGRAM_JWT_SECRET=SECRET))
    token = mint_token(
        SECRET, org="acme", member="ana", agent="bot", project="apollo", roles=("admin",)
    )
    p = verifier.verify(token)
    assert (p.org, p.member, p.agent, p.project, p.roles) == (
        "acme",
        "ana",
        "bot",
        "apollo",
        ("admin",),
    )


@pytest.mark.parametrize(
    "bad",
    [
        mint_token("a different secret, 32 bytes or more as HS256 asks", org="acme", member="ana"),
        mint_token(SECRET, org="acme", member="ana", ttl_seconds=-10),
        jwt.encode(
            {"sub": "ana", "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60}, SECRET
        ),  # no org
        jwt.encode(
            {"sub": "ana", "org": "x", "iss": ISSUER, "aud": "other", "exp": time.time() + 60},
            SECRET,
        ),
        jwt.encode(
            {"sub": "ana", "org": "x", "iss": ISSUER, "aud": AUDIENCE, "exp": "tomorrow"},
            SECRET,
        ),
        "not a token",
    ],
)
def test_bad_tokens_are_refused(bad: str) -> None:
    with pytest.raises(AuthError):
        TokenVerifier(settings(ENGRAM_JWT_SECRET=SECRET)).verify(bad)


def test_a_token_counts_as_valid_at_the_time_given_never_later_than_now() -> None:
    verifier = TokenVerifier(settings(ENGRAM_JWT_SECRET=SECRET))
    expired = mint_token(SECRET, org="acme", member="ana", ttl_seconds=-10)
    # A command the broker appended a minute ago, while its token held: valid at that time.
    assert verifier.verify(expired, at=time.time() - 60).member == "ana"
    for at in (None, time.time() - 5, time.time() + 3600):  # now, after expiry, the future
        with pytest.raises(AuthError, match="expired"):
            verifier.verify(expired, at=at)
    fresh = mint_token(SECRET, org="acme", member="ana", ttl_seconds=60)
    assert verifier.verify(fresh).org == "acme"
    assert verifier.verify(fresh, at=time.time() + 3600).org == "acme"  # the future is now


def test_rs256_with_a_configured_public_key() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims = {
        "sub": "ana",
        "org": "acme",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": int(time.time()) + 60,
    }
    verifier = TokenVerifier(settings(ENGRAM_JWT_PUBLIC_KEY=public.decode()))
    assert verifier.verify(jwt.encode(claims, key, algorithm="RS256")).member == "ana"
    with pytest.raises(AuthError):  # an HS256 token signed with the public key is refused
        verifier.verify(jwt.encode(claims, SECRET, algorithm="HS256"))


def test_production_needs_a_configured_key() -> None:
    with pytest.raises(StartupRefused, match="production"):
        TokenVerifier(settings(ENGRAM_ENV="production"))


def test_a_request_can_only_choose_among_the_tokens_scopes() -> None:
    p = Principal(org="acme", member="ana", session="s1")
    assert p.scope("private") == "member:ana" and p.scope("session") == "session:s1"
    assert p.stream("shared") == "acme/shared"
    assert p.visible_scopes() == ["shared", "member:ana", "session:s1"]
    for choice in ("agent", "project", "member:bob"):
        with pytest.raises(ScopeError):
            p.scope(choice)


@pytest.mark.parametrize(
    ("claims", "named"),
    [
        ({"org": "", "sub": "ana"}, "org"),
        ({"org": "acme/evil", "sub": "ana"}, "org"),  # it would split the stream id
        ({"org": "acme", "sub": ""}, "sub"),
        ({"org": "acme", "sub": "a\u0000na"}, "sub"),
        ({"org": "acme", "sub": "a\udcff"}, "sub"),  # a lone surrogate Postgres cannot take
        ({"org": "acme", "sub": 7}, "(sub|Subject)"),  # PyJWT's own check says Subject
        ({"org": "acme", "sub": "ana", "agent": "x" * 201}, "agent"),
        ({"org": "acme", "sub": "ana", "session": ["s"]}, "session"),
        ({"org": "acme", "sub": "ana", "roles": "admin"}, "roles"),
    ],
)
def test_names_a_stream_id_is_made_of_are_checked(claims: dict[str, object], named: str) -> None:
    token = jwt.encode({**claims, "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60}, SECRET)
    with pytest.raises(AuthError, match=f"the {named} claim|{named} must be a string"):
        TokenVerifier(settings(ENGRAM_JWT_SECRET=SECRET)).verify(token)


def test_the_person_claim_is_the_member_in_person_in_the_agents_scope() -> None:
    verifier = TokenVerifier(settings(ENGRAM_JWT_SECRET=SECRET))
    owner = verifier.verify(mint_token(SECRET, org="acme", member="ana", agent="bot", person=True))
    assert (owner.is_agent, owner.person, owner.stream("agent")) == (False, True, "acme/agent:bot")
    assert verifier.verify(mint_token(SECRET, org="acme", member="ana", agent="bot")).is_agent
    claims = {"sub": "ana", "org": "acme", "iss": ISSUER, "aud": AUDIENCE, "exp": time.time() + 60}
    for bad in (
        {**claims, "person": True},  # no agent to be in person for
        {**claims, "agent": "bot", "person": "yes"},
    ):
        with pytest.raises(AuthError, match="person claim"):
            verifier.verify(jwt.encode(bad, SECRET))
    assert verifier.holder(mint_token(SECRET, org="acme", member="ana", ttl_seconds=-10))
    assert verifier.holder("not a token") is None and verifier.holder(None) is None
