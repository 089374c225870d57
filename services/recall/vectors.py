"""A search's vector list: the query embedded, then its nearest current vectors, read in
a second transaction beside the full-text search (``packets.matches``)."""

from __future__ import annotations

from typing import Protocol

from engram.auth import Principal
from engram.embeddings.errors import ProviderError
from engram.logging import get_logger
from services.recall.adapters.store import RecallStore
from services.recall.core import Candidate
from services.recall.settings import RecallSettings

log = get_logger(__name__)


class QueryEmbedder(Protocol):
    """Embeds the query with the model the indexer writes vectors with."""

    @property
    def model(self) -> str: ...

    @property
    def max_distance(self) -> float:
        """The model's own cut, when MEMORY_SEMANTIC_MAX_DISTANCE is not set."""

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of queries (the model's query form)."""


async def nearest(
    store: RecallStore,
    embedder: QueryEmbedder,
    p: Principal,
    query: str,
    settings: RecallSettings,
    limit: int,
    *,
    words: bool = False,
) -> list[Candidate] | None:
    """The query's nearest vectors, or None when the query could not be embedded
    (``words``: with the items' words, for relevance feedback)."""
    vector = await query_vector(embedder, query)
    if vector is None:
        return None
    async with store.alongside(p):
        cut = settings.semantic_max_distance or embedder.max_distance
        return await store.nearest(p, vector, embedder.model, cut, limit, words=words)


async def query_vector(embedder: QueryEmbedder, query: str) -> list[float] | None:
    """The query's embedding, or None when the provider fails (budget used up, endpoint
    down): recall then answers from full text alone rather than not at all."""
    try:
        [vector] = await embedder.embed_queries([query])
    except ProviderError as exc:
        log.warning(
            "query_embedding_failed", model=embedder.model, error=f"{type(exc).__name__}: {exc}"
        )
        return None
    return vector
