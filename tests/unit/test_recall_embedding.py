"""Recall's query embeddings: a repeated query is embedded once, and a failing embedder
(budget used up, endpoint down) leaves the answer to full text, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from contracts.orgs import OrgPolicy
from engram.auth import Principal, TokenVerifier, mint_token
from engram.embeddings.errors import (
    BudgetExhaustedError,
    EmbeddingError,
    ProviderError,
    TransientEmbeddingError,
)
from engram.http import install_problem_handlers
from engram.settings import CommonSettings
from services.recall.adapters.embedder import CachedEmbedder
from services.recall.adapters.store import Opening
from services.recall.core import Candidate
from services.recall.handlers import router
from services.recall.settings import RecallSettings

SECRET = "a-development-secret-of-at-least-32-bytes"


def item(item_id: str, text: str) -> Candidate:
    return Candidate(
        item_id=item_id,
        revision=1,
        scope="shared",
        kind="fact",
        title=None,
        content=text,
        pinned=False,
    )


class FullTextStore:
    """The reads a packet and a search make, over one fixed full-text list."""

    def __init__(self, found: list[Candidate]) -> None:
        self.found, self.nearest_calls = found, 0

    @asynccontextmanager
    async def session(self, p: Principal) -> AsyncIterator[None]:
        yield None

    async def full_text(
        self, p: Principal, query: str, limit: int, *_: Any, **__: Any
    ) -> list[Candidate]:
        return self.found[:limit]

    async def nearest(self, *args: Any, **kwargs: Any) -> list[Candidate]:
        self.nearest_calls += 1
        return []

    async def entities(self, p: Principal) -> list[object]:
        return []  # the org names no entity

    async def account(self, p: Principal, fresh: bool = False) -> None:
        return None  # not metered (seed 004's holds)

    async def org_policy(self, p: Principal) -> OrgPolicy:
        return OrgPolicy()

    async def opening(self, p: Principal, *limits: Any) -> Opening:
        return Opening(await self.generation(p), OrgPolicy(), [])

    async def listing(self, query: str, p: Principal, limit: int) -> list[Candidate]:
        return []

    async def generation(self, p: Principal) -> dict[str, int]:
        return {"shared": 1, "own": 0, "expired": 0}

    async def save_context(self, *args: Any) -> str:
        return "context-1"


class FailingEmbedder:
    model, max_distance = "test-model@3", 0.4

    def __init__(self, error: ProviderError) -> None:
        self.error, self.calls = error, 0

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        raise self.error


class CountingProvider:
    """A provider whose vector encodes the text's length; it records every call."""

    model, dimensions, max_distance = "counting", 3, 0.4

    def __init__(self, fail_first: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail_first = fail_first

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail_first and len(self.calls) == 1:
            raise TransientEmbeddingError("HTTP 503")
        return [[float(len(t)), 0.5, 0.25] for t in texts]

    def heading(self, title: str | None) -> str | None:
        return title

    def pieces(self, title: str | None, passage: str) -> list[str]:
        return [passage]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("recall embeds queries, never memories")


def recall_app(store: FullTextStore, embedder: FailingEmbedder) -> FastAPI:
    """The recall routes over the given store and embedder (the lifespan opens real ones)."""
    app = FastAPI()
    install_problem_handlers(app)
    app.include_router(router)
    app.state.store, app.state.embedder, app.state.settings = store, embedder, RecallSettings()
    app.state.verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_SECRET": SECRET}))
    return app


@pytest.mark.parametrize(
    "error",
    [
        BudgetExhaustedError("today's remote AI requests are used up"),
        TransientEmbeddingError("HTTP 503"),
        EmbeddingError("HTTP 401: bad key"),
    ],
    ids=["budget", "endpoint-down", "refused"],
)
async def test_recall_and_search_answer_from_full_text_when_the_embedder_fails(
    error: ProviderError,
) -> None:
    store = FullTextStore([item("i1", "The trip budget is 1500 EUR.")])
    embedder = FailingEmbedder(error)
    headers = {"Authorization": f"Bearer {mint_token(SECRET, org='acme', member='ana')}"}
    transport = httpx.ASGITransport(app=recall_app(store, embedder))
    async with httpx.AsyncClient(transport=transport, base_url="http://recall") as http:
        packet = await http.post("/v1/recall", json={"query": "trip budget"}, headers=headers)
        found = await http.post("/v1/search", json={"query": "trip budget"}, headers=headers)

    assert packet.status_code == 200, packet.text
    assert [(i["id"], i["why"]) for i in packet.json()["items"]] == [("i1", ["full_text#1"])]
    assert "1500 EUR" in packet.json()["packet"]
    assert found.status_code == 200, found.text
    assert [m["id"] for m in found.json()["memories"]] == ["i1"]
    assert embedder.calls == 2 and store.nearest_calls == 0


async def test_a_repeated_query_is_embedded_once() -> None:
    provider = CountingProvider()
    embedder = CachedEmbedder(provider, size=8)

    first = await embedder.embed_queries(["trip budget"])
    again = await embedder.embed_queries(["trip budget"])

    assert again == first == [[11.0, 0.5, 0.25]]
    assert provider.calls == [["trip budget"]]
    assert embedder.model == "counting"


async def test_the_least_recently_used_query_is_forgotten_first() -> None:
    provider = CountingProvider()
    embedder = CachedEmbedder(provider, size=2)
    for text in ("a", "b", "a", "c", "a", "b"):  # "c" pushes out "b", not the reused "a"
        await embedder.embed_queries([text])
    assert provider.calls == [["a"], ["b"], ["c"], ["b"]]


async def test_misses_share_one_provider_call_and_answers_keep_the_order() -> None:
    provider = CountingProvider()
    embedder = CachedEmbedder(provider, size=8)
    await embedder.embed_queries(["a"])

    vectors = await embedder.embed_queries(["bb", "a", "ccc", "bb"])

    assert provider.calls[-1] == ["bb", "ccc"]
    assert [v[0] for v in vectors] == [2.0, 1.0, 3.0, 2.0]


async def test_a_failure_is_not_cached_and_size_zero_keeps_nothing() -> None:
    provider = CountingProvider(fail_first=True)
    embedder = CachedEmbedder(provider, size=0)
    with pytest.raises(TransientEmbeddingError):
        await embedder.embed_queries(["tea"])
    await embedder.embed_queries(["tea"])
    await embedder.embed_queries(["tea"])
    assert provider.calls == [["tea"]] * 3
