"""HTTP plumbing shared by the services: bearer tokens, health, serving; and problem+json,
re-exported from ``engram.http_problems``, where it is written."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
import uvicorn
import uvloop
from asyncpg import InvalidAuthorizationSpecificationError
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engram.auth import AuthError, Principal, TokenVerifier
from engram.crypto import load_master_key
from engram.faults import of_the_moment
from engram.http_problems import (
    MAX_BODY_BYTES,
    PROBLEM,
    PROBLEM_RESPONSES,
    BodyLimit,
    Problem,
    ProblemError,
    http_problem,
    install_problem_handlers,
    problem,
)
from engram.logging import configure_logging, get_logger, process_service
from engram.service import StartupRefused, load_settings, require_reachable
from engram.settings import CommonSettings, ServiceSettings

__all__ = [
    "BEARER",
    "GC_THRESHOLDS",
    "MAX_BODY_BYTES",
    "PROBLEM",
    "PROBLEM_RESPONSES",
    "READY_TIMEOUT_SECONDS",
    "BodyLimit",
    "Problem",
    "ProblemError",
    "Unanswered",
    "ask_ready",
    "bearer_of",
    "bearer_token",
    "check_startup",
    "http_problem",
    "install_health",
    "install_problem_handlers",
    "principal_from",
    "problem",
    "run_main",
    "serve",
    "serve_service",
]

S = TypeVar("S", bound=ServiceSettings)
T = TypeVar("T")


# How a router's OpenAPI names its authentication: a bearer JWT (``principal_from`` checks
# it; this only documents it, and refuses nothing itself).
BEARER = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT",
    description="A token minted by `engram token` in development; HS256, RS256 or JWKS as "
    "configured.",
)


def bearer_token(request: Request) -> str:
    token = bearer_of(request.headers.get("authorization", ""))
    if token is None:
        raise ProblemError(
            401, "Not authenticated", "send Authorization: Bearer <token>", "unauthenticated"
        )
    return token


def bearer_of(header: str) -> str | None:
    """The token of an Authorization header's value, when it is a bearer's (the routes and
    the rate limit read it alike: QA, a limit that read it otherwise was got round)."""
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def principal_from(request: Request, verifier: TokenVerifier) -> Principal:
    try:
        return verifier.verify(bearer_token(request))
    except AuthError as exc:
        raise ProblemError(401, "Not authenticated", str(exc), "unauthenticated") from exc


def install_health(app: FastAPI, ready: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """``/health`` is 200 only when every part works (503 otherwise); ``/live`` always."""

    @app.get("/live")
    async def live() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/health")
    async def health() -> JSONResponse:
        detail = await ready()
        ok = all(v is not False for v in detail.values())
        return JSONResponse(
            {"status": "ok" if ok else "unavailable", **detail}, status_code=200 if ok else 503
        )

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest().decode(), media_type=CONTENT_TYPE_LATEST)


# How long a health check waits for a part (the database) before it says not ready.
READY_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Unanswered:
    """A part a health check asked gave no answer: none in time, a fault of the moment, or
    a login the database refused."""

    error: str


async def ask_ready(question: Awaitable[T]) -> T | Unanswered:
    """``question``'s answer within ``READY_TIMEOUT_SECONDS``; ``Unanswered`` when it has
    none in time or meets a fault of the moment (the database restarting, a connection
    cut): the service is then not ready. Any other error is a bug, not the part's state,
    and goes on up.

    A question past the bound is cancelled and left to end in the background: asyncpg's
    cancelled query gives its connection back only once the server acknowledges the
    cancel, which a hung server never does (``asyncio.wait_for`` waited for that too)."""
    task = asyncio.ensure_future(question)
    try:
        done, _ = await asyncio.wait({task}, timeout=READY_TIMEOUT_SECONDS)
    finally:
        if not task.done():
            task.cancel()
            _ENDING.add(task)
            task.add_done_callback(_ended)
    if not done:
        return Unanswered(f"no answer within {READY_TIMEOUT_SECONDS:g} s")
    try:
        return task.result()
    except Exception as exc:
        # A login the database refuses (a password rotated under a running service) is
        # the part's state too: health is where an operator looks for it.
        if not (of_the_moment(exc) or isinstance(exc, InvalidAuthorizationSpecificationError)):
            raise
        return Unanswered(repr(exc)[:300])


# Questions cancelled past the bound, held until they end (a task nobody holds may be
# collected before it ends).
_ENDING: set[asyncio.Future[Any]] = set()


def _ended(task: asyncio.Future[Any]) -> None:
    _ENDING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        get_logger(__name__).debug("ready_question_ended", error=repr(task.exception())[:300])


# The cyclic garbage collector runs after 50,000 net allocations, not Python's 700: with
# its default it was about a third of the command service's CPU in the sustained write
# benchmark (a writer's stream states are large and long-lived, and every command
# allocates many small objects), 13% of the projector's and 19% of the indexer's (perf).
# Reference counting still frees everything acyclic at once.
GC_THRESHOLDS = (50_000, 20, 20)


def check_startup(
    common: CommonSettings, *, kafka: bool = True, master_key: bool = False, tokens: bool = False
) -> None:
    """What a service needs before it starts: in production its configured secrets (the
    master key, the token key), then PostgreSQL and, unless it does without, Kafka.
    Each failure is a ``StartupRefused`` that says what to set or start."""
    if master_key:
        load_master_key(common)
    if tokens:
        TokenVerifier(common)
    require_reachable(common, kafka=kafka)


def serve_service(
    settings_model: type[S],
    create_app: Callable[[S, CommonSettings], FastAPI],
    *,
    kafka: bool = True,
    master_key: bool = False,
    tokens: bool = False,
    preflight: Callable[[], None] | None = None,
) -> None:
    """A service's ``__main__`` (inside ``run_main``): its settings and the shared ones,
    its app, then ``preflight`` and ``check_startup`` before it serves."""
    settings, common = load_settings(settings_model), load_settings(CommonSettings)

    def ready_to_start() -> None:
        if preflight is not None:
            preflight()
        check_startup(common, kafka=kafka, master_key=master_key, tokens=tokens)

    serve(create_app(settings, common), settings.host, settings.port, ready_to_start)


def run_main(main: Callable[[], None]) -> None:
    """Run a service's ``main``; a ``StartupRefused`` anywhere in it (a bad setting, a
    failed preflight) is logged as one line with what to do, and the process exits with
    status 1, where Python or uvicorn would print a traceback."""
    try:
        main()
    except StartupRefused as exc:
        if not structlog.is_configured():  # refused before its app set logging up (QA:
            configure_logging(process_service())  # a bad setting's line was not JSON)
        get_logger("engram.http").error("startup_refused", error=str(exc))
        raise SystemExit(1) from None


def serve(app: FastAPI, host: str, port: int, preflight: Callable[[], None] | None = None) -> None:
    """Run a service: uvicorn with its C HTTP parser, on uvloop (asyncpg and the event
    loop's own work cost noticeably less there than on the default loop).

    ``preflight`` runs first; a ``StartupRefused`` from it ends the start as ``run_main``
    describes."""
    if preflight is not None:
        run_main(preflight)
    gc.set_threshold(*GC_THRESHOLDS)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        http="httptools",
    )
    uvloop.run(uvicorn.Server(config).serve())
