"""problem+json (RFC 9457): every error a service answers, its own or Starlette's, bad
input, a body too large and a bug, in one shape. ``engram.http`` re-exports these."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.faults import MOMENT_KINDS, of_the_moment
from engram.logging import get_logger

PROBLEM = "application/problem+json"
log = get_logger(__name__)


class ProblemError(Exception):
    """An HTTP error rendered as RFC 9457 problem+json."""

    def __init__(self, status: int, title: str, detail: str, code: str, /, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail = status, title, detail
        self.code, self.extra = code, extra


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
        if self._declared_over(scope):
            await http_problem(too_large)(scope, receive, send)
            return
        await self.app(scope, self._counted(receive, too_large), send)

    def _declared_over(self, scope: Scope) -> bool:
        length = dict(scope["headers"]).get(b"content-length")
        return length is not None and length.isdigit() and int(length) > self.max_bytes

    def _counted(self, receive: Receive, too_large: StarletteHTTPException) -> Receive:
        read = 0

        async def counted() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.max_bytes:
                raise too_large
            return message

        return counted


def http_problem(exc: StarletteHTTPException, request: Request | None = None) -> JSONResponse:
    """Starlette's own errors (no such route, a method the route does not take, a body
    too large, a body FastAPI could not parse: 422 like any bad body) as problem+json,
    with their headers (a 405's Allow)."""
    if exc.status_code == 400:  # FastAPI could not parse the body (JSON nested too deep)
        return _unparsed(exc)
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


def _unparsed(exc: StarletteHTTPException) -> JSONResponse:
    detail = f"the body is not JSON this service reads: {str(exc.detail).lower()}"
    return problem(422, "Invalid request", f"{detail} (is it nested too deep?)", "invalid")


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
    app.exception_handler(ProblemError)(_own)
    app.exception_handler(StarletteHTTPException)(_starlettes)
    # The kinds a fault of the moment is of get a handler of their own: Starlette answers
    # those in its ExceptionMiddleware, and the connection stays open. A handler for
    # Exception alone runs in ServerErrorMiddleware, which raises the error again once it
    # has answered: the server logged a traceback and closed the keep-alive connection,
    # so a client retrying on it met a reset (QA).
    for kind in MOMENT_KINDS:
        app.add_exception_handler(kind, _unexpected)
    app.add_exception_handler(Exception, _unexpected)
    app.exception_handler(RequestValidationError)(_invalid)


async def _own(_: Request, exc: ProblemError) -> JSONResponse:
    return problem(exc.status, exc.title, exc.detail, exc.code, **exc.extra)


async def _starlettes(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    return http_problem(exc, request)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    if of_the_moment(exc):  # the database or the broker away: retry, nothing was done
        log.warning("unavailable_for_the_moment", error=repr(exc)[:300])
        return _unavailable()
    # A bug, not bad input: log it whole, answer without internals.
    incident = uuid.uuid4().hex[:12]
    log.error("unhandled_error", incident=incident, error=repr(exc), exc_info=exc)
    detail = f"an unexpected error occurred (incident {incident}); it has been logged"
    return problem(500, "Internal error", detail, "internal", incident=incident)


def _unavailable() -> JSONResponse:
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


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    kind = request.headers.get("content-type", "")
    detail = "the request body or parameters are invalid"
    if any(e["loc"] == ["body"] for e in errors) and not _read_as_json(kind):
        # FastAPI reads no JSON from a body sent as another type, or as none (QA: a
        # curl -d without a header read as "a valid dictionary" expected).
        detail = (
            "the request body must be JSON, sent with Content-Type: application/json "
            f"(this one came as {kind or 'no content type'})"
        )
    return problem(422, "Invalid request", detail, "invalid", errors=errors)


def _read_as_json(content_type: str) -> bool:
    """Whether FastAPI reads a body sent as ``content_type`` as JSON (QA: "text/json" was
    told nothing)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )
