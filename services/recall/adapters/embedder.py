"""Query embeddings with the model the indexer writes vectors with, behind an LRU cache."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from engram.budget import DailyBudget
from engram.embeddings.providers import EmbeddingProvider, open_provider
from engram.embeddings.settings import EmbeddingSettings
from services.recall.settings import RecallSettings


class CachedEmbedder:
    """The provider, with the vectors of recent queries kept: agents repeat queries often,
    and a remote embedding costs latency and a unit of the daily budget.

    Vectors are kept as float32 arrays (6 kB for 1,536 dimensions rather than ~48 kB of
    Python floats); the local model computes float32 anyway, and recall sends 7 digits.
    """

    def __init__(self, provider: EmbeddingProvider, size: int) -> None:
        self._provider, self._size = provider, size
        self._cache: OrderedDict[str, array[float]] = OrderedDict()

    @property
    def model(self) -> str:
        return self._provider.model

    @property
    def max_distance(self) -> float:
        return self._provider.max_distance

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        found = {t: v for t in texts if (v := self._lookup(t)) is not None}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:  # one provider call for all of them: one request, one budget unit
            vectors = await self._provider.embed_queries(missing)
            for text, vector in zip(missing, vectors, strict=True):
                found[text] = self._keep(text, vector)
        return [found[t].tolist() for t in texts]

    def _lookup(self, text: str) -> array[float] | None:
        vector = self._cache.get(text)
        if vector is not None:
            self._cache.move_to_end(text)
        return vector

    def _keep(self, text: str, vector: list[float]) -> array[float]:
        packed = array("f", vector)
        if self._size > 0:
            self._cache[text] = packed
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return packed


@asynccontextmanager
async def open_embedder(
    embedding: EmbeddingSettings, settings: RecallSettings, pool: asyncpg.Pool
) -> AsyncIterator[CachedEmbedder | None]:
    """The deployment's model (None when embeddings are off), its HTTP client closed after.

    Its ``model`` is ``model_id(embedding)``, the name the indexer records vectors under.
    Remote requests reserve from the shared daily budget through ``pool`` (the recall
    role may call ``ai.reserve_request``).
    """
    budget = DailyBudget(pool, embedding.daily_request_limit)
    async with open_provider(embedding, settings.tuning, budget) as provider:
        yield None if provider is None else CachedEmbedder(provider, settings.query_cache_size)
