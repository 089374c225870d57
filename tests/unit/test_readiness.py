"""``/health`` waits a bounded time for the database, and says "not ready" (503) for a
database that hangs or meets a fault of the moment; any other error is a bug it does not
hide. The same in every service that asks the database (the command service's rule)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from engram import http as engram_http
from engram.embeddings.settings import EmbeddingSettings
from engram.http import install_health
from services.command import app as command_app
from services.indexer import app as indexer_app
from services.indexer.idle import Idle
from services.projector import app as projector_app
from services.recall import app as recall_app

Answer = Callable[[], Awaitable[Any]]


async def hang() -> Any:
    await asyncio.Event().wait()  # never set: no answer, ever


async def hang_past_cancel() -> Any:
    """A hung server as asyncpg meets it: a cancelled query still waits for the server to
    acknowledge the cancel, which it never does."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.sleep(30)
        raise


def raising(error: BaseException) -> Answer:
    async def answer() -> Any:
        raise error

    return answer


class Part:
    """The database (a pool) and the follower whose lag reads it: every question they are
    asked gets ``answer``'s answer."""

    applied = 0
    positions: dict[int, int] = {}  # noqa: RUF012 (read only)

    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    async def fetchval(self, query: str, *args: object) -> Any:
        return await self._answer()

    async def lag(self) -> Any:
        return await self._answer()

    async def broker_answers(self) -> bool:
        return True


def recall(part: Part) -> FastAPI:
    app = FastAPI()
    install_health(app, recall_app._readiness(app))
    app.state.pool, app.state.embedder = part, None
    return app


def command(part: Part) -> FastAPI:
    app = FastAPI()
    install_health(app, command_app._readiness(app))
    app.state.pool = part
    app.state.processor = SimpleNamespace(stuck=[], writers={})
    app.state.gateway = SimpleNamespace(healthy=True, broker_answers=part.broker_answers)
    return app


def projector(part: Part) -> FastAPI:
    app = FastAPI()
    install_health(app, projector_app._readiness(app))
    app.state.pool = app.state.follower = part
    return app


def indexer(part: Part) -> FastAPI:
    """The indexer's readiness asks the follower's lag (which reads the stored offsets)."""
    app = FastAPI()
    install_health(app, indexer_app._readiness(app, EmbeddingSettings()))
    app.state.follower, app.state.provider = part, None
    app.state.idle = Idle(True, part.lag, every_s=1.0)  # a model: it reads the log
    return app


def idle_indexer(part: Part) -> FastAPI:
    """An indexer with nothing to index reads no log: its readiness asks the database
    whether a vector is stored yet (idle.py)."""
    app = FastAPI()
    install_health(app, indexer_app._readiness(app, EmbeddingSettings()))
    app.state.follower, app.state.provider = part, None
    app.state.idle = Idle(False, part.lag, every_s=1.0)
    return app


Service = Callable[[Part], FastAPI]
SERVICES: list[Service] = [recall, command, projector, indexer, idle_indexer]
# What each service's answer says when the database does not answer.
NOT_READY: dict[Service, str] = {
    recall: "database",
    command: "database",
    projector: "database",
    indexer: "kafka",
    idle_indexer: "database",
}


async def health(app: FastAPI) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        return await client.get("/health")


@pytest.fixture
def short_bound(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(engram_http, "READY_TIMEOUT_SECONDS", 0.05)
    return 0.05


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.__name__)
async def test_a_database_that_hangs_is_not_ready_within_the_bound(
    service: Service, short_bound: float
) -> None:
    started = time.monotonic()
    async with asyncio.timeout(2.0):  # it once waited as long as the database did
        answer = await health(service(Part(hang)))
    assert time.monotonic() - started < 1.0
    assert answer.status_code == 503
    assert answer.json()["status"] == "unavailable"
    assert answer.json()[NOT_READY[service]] is False


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.__name__)
async def test_a_database_that_ignores_the_cancel_is_not_ready_within_the_bound(
    service: Service, short_bound: float
) -> None:
    started = time.monotonic()
    async with asyncio.timeout(2.0):  # asyncio.wait_for waited for the cancel to end
        answer = await health(service(Part(hang_past_cancel)))
    assert time.monotonic() - started < 1.0
    assert answer.status_code == 503


async def test_recall_waits_for_the_database_as_long_as_the_command_service() -> None:
    """The bound itself, unpatched: the command service's 2 s."""
    started = time.monotonic()
    async with asyncio.timeout(5.0):
        answer = await health(recall(Part(hang)))
    waited = time.monotonic() - started
    assert engram_http.READY_TIMEOUT_SECONDS == 2.0
    assert 1.9 <= waited < 4.0
    assert answer.status_code == 503
    assert answer.json()["database"] is False
    assert answer.json()["error"] == "no answer within 2 s"


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.__name__)
@pytest.mark.parametrize(
    "fault",
    [
        ConnectionRefusedError(111, "Connection refused"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.InvalidPasswordError('password authentication failed for user "postgres"'),
    ],
    ids=["refused", "starting-up", "connection-cut", "login-refused"],
)
async def test_a_fault_of_the_moment_is_not_ready(service: Service, fault: Exception) -> None:
    answer = await health(service(Part(raising(fault))))
    assert answer.status_code == 503
    assert answer.json()[NOT_READY[service]] is False


async def test_the_indexer_says_why_its_lag_is_unknown() -> None:
    """Its stored offsets are read from Postgres: "kafka": false alone would send an
    operator to the broker when the database is the cause."""
    fault = asyncpg.CannotConnectNowError("the database system is starting up")
    answer = await health(indexer(Part(raising(fault))))
    assert answer.status_code == 503
    assert "the database system is starting up" in answer.json()["error"]
    assert answer.json()["lag"] is None


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.__name__)
@pytest.mark.parametrize(
    "bug",
    [
        RuntimeError("a bug in the check"),
        asyncpg.UndefinedTableError('relation "projector.anomalies" does not exist'),
    ],
    ids=["python", "sql"],
)
async def test_any_other_error_is_not_swallowed(service: Service, bug: Exception) -> None:
    with pytest.raises(type(bug)):
        await health(service(Part(raising(bug))))


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.__name__)
async def test_a_database_that_answers_is_ready(service: Service) -> None:
    async def answers() -> Any:
        return {0: 0} if service is indexer else 0

    answer = await health(service(Part(answers)))
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "ok"


async def test_an_idle_indexer_says_so_and_why() -> None:
    async def no_vector() -> bool:
        return False

    answer = await health(idle_indexer(Part(no_vector)))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["idle"], body["database"], body["lag"], body["provider"]) == (
        True,
        True,
        None,
        "off",
    )
    assert "no embedding model and no vector stored" in body["why_idle"]
