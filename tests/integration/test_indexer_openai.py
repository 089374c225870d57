"""The OpenAI-compatible provider against a real HTTP server on 127.0.0.1.

The server is a small FastAPI app run by uvicorn in this process; a script of
answers (200, 429, 500, a hang) drives it. The request budget is the real
Postgres one, on a day of its own so the tests never touch today's count.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from engram.budget import DailyBudget
from engram.embeddings.errors import (
    BudgetExhaustedError,
    EmbeddingError,
    TransientEmbeddingError,
)
from engram.embeddings.providers import OpenAIProvider
from engram.embeddings.settings import EmbeddingSettings
from services.indexer.adapters.store import create_vector_pool
from services.indexer.settings import IndexerSettings

pytestmark = pytest.mark.integration
DEADLINE = 10.0


def fake_vector(text: str, dimensions: int) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i % len(digest)] / 255.0 for i in range(dimensions)]


@dataclass
class EmbeddingServer:
    """An OpenAI-compatible /v1/embeddings endpoint that answers from a script."""

    script: list[Any] = field(default_factory=list)  # 200, 429, 500, 400, "hang", "short"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            step = self.script.pop(0) if self.script else 200
            if step == "hang":
                await asyncio.sleep(1.0)  # longer than the client waits
            if isinstance(step, int) and step != 200:
                return JSONResponse(
                    {"error": {"message": f"scripted {step}"}},
                    step,
                    headers={"Retry-After": "0"} if step == 429 else None,
                )
            dims = body.get("dimensions", 4) - (1 if step == "short" else 0)
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(t, dims)}
                for i, t in reversed(list(enumerate(body["input"])))
            ]
            return JSONResponse({"object": "list", "data": data, "model": body["model"]})

        return app


@pytest.fixture
async def server() -> AsyncIterator[EmbeddingServer]:
    fake = EmbeddingServer()
    config = uvicorn.Config(
        fake.app(), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
    )
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    deadline = time.monotonic() + DEADLINE
    while not uv.started:
        assert time.monotonic() < deadline, "the embedding server did not start"
        await asyncio.sleep(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    fake.url = f"http://127.0.0.1:{port}/v1"
    yield fake
    uv.should_exit = True
    await task


@pytest.fixture(scope="module")
async def pool(stack_settings: dict[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_vector_pool(stack_settings["DATABASE_URL"])
    yield pool
    await pool.close()


@pytest.fixture
async def day(pool: asyncpg.Pool) -> AsyncIterator[date]:
    """A budget day no one else uses (far in the past), removed afterwards."""
    the_day = date(1900, 1, 1) + timedelta(days=uuid.uuid4().int % 30_000)  # before 1983
    yield the_day
    await pool.execute("DELETE FROM ai.daily_requests WHERE day = $1", the_day)


def provider(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date, *, limit: int = 100, **indexer: Any
) -> tuple[OpenAIProvider, DailyBudget, httpx.AsyncClient]:
    embedding = EmbeddingSettings(
        MEMORY_EMBEDDING_PROVIDER="openai",
        MEMORY_EMBEDDING_URL=server.url,
        MEMORY_EMBEDDING_MODEL="test-embed",
        MEMORY_EMBEDDING_DIMENSIONS=6,
        MEMORY_AI_API_KEY="sk-test",
        MEMORY_AI_DAILY_REQUEST_LIMIT=limit,
    )
    settings = IndexerSettings(
        **{"retry_base_s": 0.01, "retry_max_s": 0.05, "request_timeout_s": 1.0, **indexer}
    )
    budget = DailyBudget(pool, embedding.daily_request_limit, today=lambda: day)
    client = httpx.AsyncClient(timeout=settings.request_timeout_s)
    return OpenAIProvider(client, embedding, settings.tuning, budget), budget, client


async def test_texts_come_back_as_vectors_in_order_with_model_dimensions_and_key(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date
) -> None:
    embedder, budget, client = provider(server, pool, day)
    async with client:
        vectors = await embedder.embed(["The trip budget is 1500 EUR.", "tea"])
    assert vectors == [fake_vector("The trip budget is 1500 EUR.", 6), fake_vector("tea", 6)]
    assert server.requests == [
        {"model": "test-embed", "input": ["The trip budget is 1500 EUR.", "tea"], "dimensions": 6}
    ]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert (embedder.model, embedder.dimensions) == ("test-embed@6", 6)
    assert await budget.used() == 1


async def test_429_and_500_are_retried_and_every_attempt_is_charged(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date
) -> None:
    server.script = [429, 500, 503, 200]
    embedder, budget, client = provider(server, pool, day)
    async with client:
        [vector] = await embedder.embed(["tea"])
    assert vector == fake_vector("tea", 6)
    assert len(server.requests) == 4
    assert await budget.used() == 4


async def test_a_timeout_is_retried(server: EmbeddingServer, pool: asyncpg.Pool, day: date) -> None:
    server.script = ["hang", 200]
    embedder, _, client = provider(server, pool, day, request_timeout_s=0.3)
    async with client:
        assert await embedder.embed(["tea"]) == [fake_vector("tea", 6)]
    assert len(server.requests) == 2


async def test_after_five_retries_the_failure_is_raised(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date
) -> None:
    server.script = [500] * 10
    embedder, budget, client = provider(server, pool, day)
    async with client:
        with pytest.raises(TransientEmbeddingError, match="HTTP 500"):
            await embedder.embed(["tea"])
    assert len(server.requests) == 6  # the first attempt and five retries
    assert await budget.used() == 6


@pytest.mark.parametrize("step", [400, "short"])
async def test_a_refusal_or_a_wrong_answer_is_not_retried(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date, step: Any
) -> None:
    server.script = [step]
    embedder, _, client = provider(server, pool, day)
    async with client:
        with pytest.raises(EmbeddingError) as err:
            await embedder.embed(["tea"])
    assert not isinstance(err.value, TransientEmbeddingError)
    assert len(server.requests) == 1


async def test_when_the_budget_reaches_zero_no_request_leaves(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date
) -> None:
    embedder, budget, client = provider(server, pool, day, limit=2)
    async with client:
        await embedder.embed(["one"])
        await embedder.embed(["two"])
        with pytest.raises(BudgetExhaustedError):
            await embedder.embed(["three"])
    assert [r["input"] for r in server.requests] == [["one"], ["two"]]
    assert await budget.used() == 2


async def test_retries_stop_when_the_budget_runs_out(
    server: EmbeddingServer, pool: asyncpg.Pool, day: date
) -> None:
    server.script = [500] * 10
    embedder, _, client = provider(server, pool, day, limit=3)
    async with client:
        with pytest.raises(BudgetExhaustedError):
            await embedder.embed(["tea"])
    assert len(server.requests) == 3


async def test_replicas_share_the_budget_and_never_overspend_it(
    pool: asyncpg.Pool, day: date
) -> None:
    budgets = [DailyBudget(pool, 5, today=lambda: day) for _ in range(3)]

    taken = await asyncio.gather(*(budgets[i % 3].reserve() for i in range(20)))
    assert sum(taken) == 5
    assert await budgets[0].used() == 5


def test_a_daily_limit_of_zero_turns_remote_ai_off() -> None:
    settings = EmbeddingSettings(
        MEMORY_EMBEDDING_PROVIDER="openai",
        MEMORY_EMBEDDING_URL="http://127.0.0.1:9/v1",
        MEMORY_AI_DAILY_REQUEST_LIMIT=0,
    )
    assert settings.effective_provider == "off"
