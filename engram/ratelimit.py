"""Limits on a caller's rate over HTTP (seed 004: "rate limits protect the shared service").

Each caller (a token's org, member, agent and person claim) has a bucket of ``burst`` requests that
refills at ``rate`` a second; a request finding it empty is refused with 429
``rate_limited`` and a ``Retry-After``, before its route runs, so it costs the service
next to nothing and changes nothing. Each service instance counts on its own. A request
without a token its service can verify is not counted here: its route refuses it (401).
Commands on Kafka are not limited: the log is their queue."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable

from fastapi import FastAPI
from prometheus_client import Counter
from starlette.types import ASGIApp, Receive, Scope, Send

from engram.auth import TokenVerifier
from engram.http import bearer_of, problem
from engram.settings import CommonSettings

REFUSED = Counter("engram_rate_limited_total", "HTTP requests refused by a caller's rate limit")

# Callers whose buckets are kept at once: a bucket left idle until full is forgotten first
# (forgetting it changes nothing), so only this many callers each sending within the last
# ``burst / rate`` seconds could make one be forgotten early.
MAX_CALLERS = 100_000
# What a probe or a client reads about the service, not its memory: never limited (QA: a
# caller's health check with its token was refused once its bucket ran dry).
UNLIMITED = frozenset({"/health", "/live", "/metrics", "/openapi.json", "/docs", "/redoc"})


class Buckets:
    """Token buckets by caller; ``now`` is the caller's clock (monotonic seconds)."""

    def __init__(self, rate: float, burst: int, max_callers: int = MAX_CALLERS) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs a rate above 0 and a burst of at least 1")
        self.rate, self.burst, self.max_callers = rate, float(burst), max_callers
        self._held: dict[Hashable, tuple[float, float]] = {}  # caller -> (tokens, at)

    def take(self, caller: Hashable, now: float) -> float:
        """0 when the caller may go ahead (one request taken from its bucket), else the
        seconds until its bucket holds a request again."""
        # Taken out and put back: the dict's order is the callers' last use, so the ones
        # forgotten first when it is full are those longest idle (review).
        tokens, at = self._held.pop(caller, (self.burst, now))
        tokens = min(self.burst, tokens + max(0.0, now - at) * self.rate)
        if tokens < 1:
            self._held[caller] = (tokens, now)
            return (1 - tokens) / self.rate
        if len(self._held) >= self.max_callers:
            self._forget_full(now)
        self._held[caller] = (tokens - 1, now)
        return 0.0

    def __len__(self) -> int:
        return len(self._held)

    def _forget_full(self, now: float) -> None:
        refill = self.burst / self.rate  # a bucket idle this long is full again
        self._held = {k: v for k, v in self._held.items() if now - v[1] < refill}
        if len(self._held) >= self.max_callers:  # every caller busy: the idlest half goes
            self._held = dict(list(self._held.items())[len(self._held) // 2 :])


class RateLimit:
    """ASGI middleware: refuses a verified caller over its rate with 429 problem+json.

    The service's ``TokenVerifier`` is read from ``app.state.verifier`` at each request
    (a service builds it when it starts); its cache answers a token seen before."""

    def __init__(
        self,
        app: ASGIApp,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app, self.clock = app, clock
        self.buckets = Buckets(rate, burst) if rate > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.buckets is not None and scope["type"] == "http":
            caller = _caller(scope)
            wait = self.buckets.take(caller, self.clock()) if caller else 0.0
            if wait > 0:
                REFUSED.inc()
                await _refuse(send, wait, self.buckets.rate)
                return
        await self.app(scope, receive, send)


def _caller(scope: Scope) -> tuple[str, str, str | None, bool] | None:
    """Who sends the request, as its route will verify it: the first Authorization header's
    bearer token, as Starlette's ``headers.get`` reads it (QA: a second, made-up header
    read here instead let a caller past its limit). A person in an agent's scope (the
    ``person`` claim) has a bucket of its own beside the agent's."""
    verifier = getattr(getattr(scope.get("app"), "state", None), "verifier", None)
    if not isinstance(verifier, TokenVerifier) or scope.get("path") in UNLIMITED:
        return None
    header = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
    token = bearer_of(header.decode("latin-1"))
    if token is None:
        return None
    principal = verifier.holder(token)
    if principal is None:
        return None
    return principal.org, principal.member, principal.agent, principal.person


def install_rate_limit(app: FastAPI, common: CommonSettings) -> None:
    """Every request a verified caller sends counts (``ENGRAM_RATE_LIMIT_PER_SECOND``, 0
    for none, and ``ENGRAM_RATE_LIMIT_BURST``, the bucket's size)."""
    app.add_middleware(RateLimit, rate=common.rate_limit_per_second, burst=common.rate_limit_burst)


async def _refuse(send: Send, wait: float, rate: float) -> None:
    answer = problem(
        429,
        "Too many requests",
        f"this caller sent more than its {rate:g} requests a second (and its burst); "
        f"retry after {max(wait, 0.001):.3f} s",
        "rate_limited",
        retry_after_seconds=round(wait, 3),
    )
    answer.headers["Retry-After"] = str(max(1, math.ceil(wait)))
    await answer({"type": "http"}, _nothing, send)


async def _nothing() -> dict[str, object]:
    return {"type": "http.disconnect"}
