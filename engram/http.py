"""HTTP plumbing shared by the services: problem+json, bearer tokens, health, serving."""

from __future__ import annotations

import gc
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from http import HTTPStatus
from typing import Any, TypeVar

import structlog
import uvicorn
import uvloop
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.auth import AuthError, Principal, TokenVerifier
from engram.crypto import load_master_key
from engram.faults import MOMENT_KINDS, of_the_moment
from engram.logging import configure_logging, get_logger
from engram.service import StartupRefused, load_settings, require_reachable
from engram.settings import CommonSettings, ServiceSettings

PROBLEM = "application/problem+json"
S = TypeVar("S", bound=ServiceSettings)
log = get_logger(__name__)


class ProblemError(Exception):
    """An HTTP error rendered as RFC 9457 problem+json."""

    def __init__(self, status: int, title: str, detail: str, code: str, /, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.code, self.extra = (
            status,
            title,
            detail,
            code,
            extra,
        )


def problem(status: int, title: str, detail: str, code: str, /, **extra: Any) -> JSONResponse:
    """The problem's own members win over an ``extra`` of the same name (an error's
    details never change its status)."""
    body = {
        **extra,
        "type": f"https://engram.dev/problems/{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM)


class Problem(BaseModel):
    """A refusal's body (RFC 9457), as ``problem`` writes it; a refusal may name more."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    code: str  # a stable machine word: invalid, not_found, forbidden, conflict, ...
    errors: list[dict[str, Any]] | None = None  # the fields refused, for invalid input


# What a FastAPI router's OpenAPI says its refusals are (QA: it said FastAPI's 422 body,
# which no Engram service sends).
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {
        "description": "A refusal, as application/problem+json",
        "content": {PROBLEM: {"schema": Problem.model_json_schema()}},
    },
    "5XX": {
        "description": "503 unavailable (a database or the broker away for the moment: "
        "retry after Retry-After), 504 timeout (no answer in time: retry with the same "
        "Idempotency-Key), 500 internal (a bug, logged with the incident named), as "
        "application/problem+json",
        "content": {PROBLEM: {"schema": Problem.model_json_schema()}},
    },
}


# How a router's OpenAPI names its authentication: a bearer JWT (``principal_from`` checks
# it; this only documents it, and refuses nothing itself).
BEARER = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT",
    description="A token minted by `engram token` in development; HS256, RS256 or JWKS as "
    "configured.",
)


# No request to any service comes near this: a memory holds at most 4,000 characters.
MAX_BODY_BYTES = 1 << 20


class BodyLimit:
    """Refuses a request body over ``max_bytes`` with 413: by its Content-Length before
    anything is read, or, for a chunked body, as soon as the bytes read pass the limit
    (an HTTPException, which FastAPI's body parsing lets through)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = StarletteHTTPException(413, f"the body is over {self.max_bytes} bytes")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await http_problem(too_large)(scope, receive, send)
            return
        read = 0

        async def counted() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.max_bytes:
                raise too_large
            return message

        await self.app(scope, counted, send)


def http_problem(exc: StarletteHTTPException, request: Request | None = None) -> JSONResponse:
    """Starlette's own errors (no such route, a method the route does not take, a body
    too large, a body FastAPI could not parse: 422 like any bad body) as problem+json,
    with their headers (a 405's Allow)."""
    if exc.status_code == 400:  # FastAPI could not parse the body (JSON nested too deep)
        return problem(
            422,
            "Invalid request",
            f"the body is not JSON this service reads: "
            f"{str(exc.detail).lower()} (is it nested too deep?)",
            "invalid",
        )
    title, code = _HTTP_ERRORS.get(exc.status_code) or (HTTPStatus(exc.status_code).phrase, "")
    detail = str(exc.detail)
    if request is not None and exc.status_code == 404:
        detail = f"no route {request.method} {request.url.path}"
    headers = dict(exc.headers or {})
    if request is not None and exc.status_code == 405:
        # Starlette names the methods of the first route of the path only: a path served
        # by a GET route and a PUT route would say GET alone.
        headers["Allow"] = allowed = _methods_of(request) or headers.get("Allow", "")
        detail = f"{request.url.path} takes {allowed or 'other methods'}, not {request.method}"
    response = problem(exc.status_code, title, detail, code or title.lower().replace(" ", "_"))
    response.headers.update(headers)
    return response


def _methods_of(request: Request) -> str:
    """Every method some route of the request's path takes."""
    methods: set[str] = set()
    for route in _every_route(request.app.router.routes):
        if getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
            methods |= set(route.methods)
    return ", ".join(sorted(methods - {"HEAD"}))


def _every_route(routes: list[Any]) -> Iterator[Any]:
    """The routes, and those of the routers included among them: FastAPI keeps an included
    router's routes behind one entry of its own (QA: recall's 405 named GET alone for a
    path that takes PUT too)."""
    for route in routes:
        yield route
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _every_route(included.routes)


_HTTP_ERRORS = {
    404: ("Not found", "not_found"),
    405: ("Method not allowed", "method_not_allowed"),
    413: ("Request body too large", "too_large"),
}


def install_problem_handlers(app: FastAPI) -> None:
    """Every error a service answers is problem+json: its own, bad input, an unknown
    route or method, a body over ``MAX_BODY_BYTES`` and a bug (logged with an incident)."""
    app.add_middleware(BodyLimit)

    @app.exception_handler(ProblemError)
    async def _problem(_: Request, exc: ProblemError) -> JSONResponse:
        return problem(exc.status, exc.title, exc.detail, exc.code, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return http_problem(exc, request)

    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        if of_the_moment(exc):  # the database or the broker away: retry, nothing was done
            log.warning("unavailable_for_the_moment", error=repr(exc)[:300])
            answer = problem(
                503,
                "Try again shortly",
                "a database or broker Engram depends on is unavailable for the moment; "
                "retry (a command with the same Idempotency-Key gets its first answer if "
                "it was decided after all)",
                "unavailable",
            )
            answer.headers["Retry-After"] = "1"
            return answer
        # A bug, not bad input: log it whole, answer without internals.
        incident = uuid.uuid4().hex[:12]
        log.error("unhandled_error", incident=incident, error=repr(exc), exc_info=exc)
        return problem(
            500,
            "Internal error",
            f"an unexpected error occurred (incident {incident}); it has been logged",
            "internal",
            incident=incident,
        )

    # The kinds a fault of the moment is of get a handler of their own: Starlette answers
    # those in its ExceptionMiddleware, and the connection stays open. A handler for
    # Exception alone runs in ServerErrorMiddleware, which raises the error again once it
    # has answered: the server logged a traceback and closed the keep-alive connection,
    # so a client retrying on it met a reset (QA).
    for kind in MOMENT_KINDS:
        app.add_exception_handler(kind, _unexpected)
    app.add_exception_handler(Exception, _unexpected)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        kind = request.headers.get("content-type", "")
        media = kind.split(";", 1)[0].strip().lower()
        detail = "the request body or parameters are invalid"
        json_type = media == "application/json" or (
            media.startswith("application/") and media.endswith("+json")
        )  # what FastAPI reads as JSON (QA: "text/json" was told nothing)
        if any(e["loc"] == ["body"] for e in errors) and not json_type:
            # FastAPI reads no JSON from a body sent as another type, or as none (QA: a
            # curl -d without a header read as "a valid dictionary" expected).
            detail = (
                "the request body must be JSON, sent with Content-Type: application/json "
                f"(this one came as {kind or 'no content type'})"
            )
        return problem(422, "Invalid request", detail, "invalid", errors=errors)


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
            configure_logging(_service_name())  # a bad setting's line was not JSON)
        get_logger("engram.http").error("startup_refused", error=str(exc))
        raise SystemExit(1) from None


def _service_name() -> str:
    """The service a ``python -m services.<name>`` process runs, from its main module."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    parts = (getattr(spec, "name", "") or "").split(".")
    return parts[1] if len(parts) > 2 and parts[0] == "services" else "engram"


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
