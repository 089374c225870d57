"""Bearer tokens: who is calling, and which scopes that grants.

A principal comes only from a verified token, never from a request argument.
Development uses HS256 with a secret generated into the state folder;
production configures a secret, a public key or a JWKS URL (RS256).
"""

from __future__ import annotations

import functools
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jwt

from contracts.envelope import Actor
from contracts.text import is_unicode
from contracts.topics import stream_id
from engram.jwks import JwksKeySource
from engram.service import StartupRefused
from engram.settings import CommonSettings, dev_secret_file

ISSUER = "engram"
AUDIENCE = "engram"


# A claim that names an org, member, agent, session or project: it becomes part of a
# stream id (``<org>/<scope>``, so an org holds no '/') and of Postgres text.
MAX_NAME = 200
_CONTROL = frozenset(chr(c) for c in range(32)) | {"\x7f"}


def name_problem(claim: str, value: Any) -> str | None:
    """Why a value cannot be a token's org, member (``sub``), agent, session or project;
    None when it can (the services refuse such a token, and ``engram token`` such a name)."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= MAX_NAME
        or not _CONTROL.isdisjoint(value)
        or not is_unicode(value)
        or (claim == "org" and "/" in value)
    ):
        extra = ", without '/'" if claim == "org" else ""
        return (
            f"the {claim} claim must be a string of 1 to {MAX_NAME} characters{extra}, "
            "without control characters or lone surrogates"
        )
    return None


def _check_name(claim: str, value: Any, required: bool) -> None:
    if value is None and not required:
        return
    if (problem := name_problem(claim, value)) is not None:
        raise AuthError(f"invalid bearer token: {problem}")


class AuthError(Exception):
    """The bearer token is missing, malformed, expired or not ours."""


class ScopeError(Exception):
    """The token does not grant the scope the command asks for."""


@dataclass(frozen=True)
class Principal:
    org: str
    member: str
    agent: str | None = None
    session: str | None = None
    project: str | None = None
    roles: tuple[str, ...] = field(default=())
    # The session this token's session was forked from (its memory can be copied in).
    fork_of: str | None = None
    # The member in person, in the agent's scope (the ``person`` claim): the member
    # accountable for the agent, who confirms, dismisses and brings back its memories
    # (seeds 002, 004). The issuer gives it only to that member.
    person: bool = False

    def scope(self, choice: str) -> str:
        """Resolve a scope choice ("private", "shared", …) against this token."""
        resolved = {
            "shared": "shared",
            "private": f"member:{self.member}",
            "agent": f"agent:{self.agent}" if self.agent else None,
            "session": f"session:{self.session}" if self.session else None,
            "project": f"project:{self.project}" if self.project else None,
        }.get(choice)
        if resolved is None:
            raise ScopeError(f"the token grants no {choice!r} scope")
        return resolved

    def stream(self, choice: str) -> str:
        return stream_id(self.org, self.scope(choice))

    def visible_scopes(self) -> list[str]:
        """Shared, its own private scope, and its agent, session and project scopes."""
        return list(self.scopes)

    @functools.cached_property
    def scopes(self) -> tuple[str, ...]:
        """``visible_scopes``, built once (a verified token's principal is cached)."""
        scopes = ["shared", f"member:{self.member}"]
        scopes += [
            f"{k}:{v}"
            for k, v in (
                ("agent", self.agent),
                ("session", self.session),
                ("project", self.project),
            )
            if v
        ]
        return tuple(scopes)

    @property
    def is_agent(self) -> bool:
        """An agent acts (its saves wait for the run's user message, it proposes but
        never confirms); a token that names an agent with the ``person`` claim is its
        accountable member's, acting in person in the agent's scope."""
        return self.agent is not None and not self.person

    def actor(self) -> Actor:
        return Actor(
            org=self.org,
            member=self.member,
            agent=self.agent,
            session=self.session,
            project=self.project,
            roles=self.roles,
        )


def dev_secret() -> str:
    """The development signing secret, generated once into the state folder."""
    return dev_secret_file("jwt-hs256", lambda: secrets.token_urlsafe(48))


class TokenVerifier:
    def __init__(self, settings: CommonSettings) -> None:
        self._jwks = JwksKeySource(settings.jwt_jwks_url) if settings.jwt_jwks_url else None
        self._public_key = settings.jwt_public_key
        self._secret = settings.jwt_secret
        self._cache: dict[str, tuple[Principal, float]] = {}
        if not (self._jwks or self._public_key or self._secret):
            if settings.environment == "production":
                raise StartupRefused(
                    "production needs ENGRAM_JWT_SECRET, ENGRAM_JWT_PUBLIC_KEY or "
                    "ENGRAM_JWT_JWKS_URL"
                )
            self._secret = dev_secret()

    def verify(self, token: str, at: float | None = None) -> Principal:
        """Verify a token that must be unexpired at ``at`` (epoch seconds; now by default,
        never later than now): a command read late from the log counts from the time the
        broker appended it, not from when its writer got to it. A token seen before is
        answered from a small cache (the writer sees the same caller's token on every
        command)."""
        now = time.time()
        at = now if at is None else min(at, now)
        cached = self._cache.get(token)
        if cached is None:
            cached = self._verify(token)
            if len(self._cache) >= 10_000:
                self._cache.clear()
            self._cache[token] = cached
        principal, expires = cached
        if expires <= at:
            raise AuthError("invalid bearer token: Signature has expired")
        return principal

    def holder(self, token: object) -> Principal | None:
        """Whom a token shows its sender to be: its signature, audience, issuer and claims
        checked, not its expiry (a caller whose token has expired is still the caller).
        None for anything that is not such a token."""
        if not isinstance(token, str) or not token:
            return None
        try:
            return self.verify(token, at=float("-inf"))
        except AuthError:
            return None

    def _verify(self, token: str) -> tuple[Principal, float]:
        """The token's principal and expiry, its signature, audience and issuer checked; its
        expiry is ``verify``'s to check, against the time it must hold at."""
        try:
            claims = jwt.decode(
                token,
                self._key(token),
                algorithms=self._algorithms(),
                audience=AUDIENCE,
                issuer=ISSUER,
                options={"require": ["exp", "org", "sub"], "verify_exp": False},
            )
        except jwt.PyJWTError as exc:
            raise AuthError(f"invalid bearer token: {exc}") from exc
        if isinstance(claims["exp"], bool) or not isinstance(claims["exp"], int | float):
            raise AuthError("invalid bearer token: Expiration Time claim (exp) must be a number")
        for name in ("org", "sub", "agent", "session", "project", "fork_of"):
            _check_name(name, claims.get(name), required=name in ("org", "sub"))
        roles = claims.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise AuthError("invalid bearer token: the roles claim must be a list of strings")
        person = claims.get("person", False)
        if not isinstance(person, bool) or (person and not claims.get("agent")):
            raise AuthError(
                "invalid bearer token: the person claim is true or false, and true only "
                "beside an agent claim (the member in person, in that agent's scope)"
            )
        principal = Principal(
            org=claims["org"],
            member=claims["sub"],
            agent=claims.get("agent"),
            session=claims.get("session"),
            project=claims.get("project"),
            roles=tuple(roles),
            fork_of=claims.get("fork_of"),
            person=person,
        )
        return principal, float(claims["exp"])

    def _key(self, token: str) -> Any:
        if self._jwks:
            return self._jwks.key(token)
        return self._public_key or self._secret

    def close(self) -> None:
        """Stop reading the key set in the background."""
        if self._jwks:
            self._jwks.close()

    def _algorithms(self) -> list[str]:
        return ["RS256"] if (self._jwks or self._public_key) else ["HS256"]


def mint_token(
    secret: str,
    *,
    org: str,
    member: str,
    agent: str | None = None,
    session: str | None = None,
    project: str | None = None,
    roles: tuple[str, ...] = (),
    ttl_seconds: int = 3600,
    fork_of: str | None = None,
    person: bool = False,
) -> str:
    now = int(time.time())
    claims: dict[str, object] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": member,
        "org": org,
        "iat": now,
        "exp": now + ttl_seconds,
        "roles": list(roles),
    }
    for name, value in (
        ("agent", agent),
        ("session", session),
        ("project", project),
        ("fork_of", fork_of),
    ):
        if value:
            claims[name] = value
    if person:
        claims["person"] = True
    return jwt.encode(claims, secret, algorithm="HS256")
