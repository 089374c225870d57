"""Items' texts (``core.embedding_texts``) into vector rows: consecutive parts of a batch,
one provider call each, for the event path and the re-embedding pass alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

from engram.embeddings.errors import EmbeddingError
from engram.embeddings.providers import EmbeddingProvider
from services.indexer import metrics
from services.indexer.adapters.store import VectorRow, vector_rows
from services.indexer.core import Text, embedding_texts


class Item(Protocol):
    @property
    def item_id(self) -> str: ...
    @property
    def revision(self) -> int: ...
    @property
    def org(self) -> str: ...
    @property
    def scope(self) -> str: ...


ItemT = TypeVar("ItemT", bound=Item)


async def texts_of(
    provider: EmbeddingProvider, plain: Sequence[tuple[str | None, str]]
) -> list[list[Text]]:
    """Each (title, content)'s texts, in a worker thread: the model's tokenizer cuts the
    slices, and a batch of long memories would hold the event loop (and /health)."""
    return await asyncio.to_thread(
        lambda: [embedding_texts(title, content, provider) for title, content in plain]
    )


def parts(
    pending: list[tuple[ItemT, list[Text]]], texts: int
) -> Iterator[list[tuple[ItemT, list[Text]]]]:
    """Consecutive parts of at most ``texts`` texts a provider call (a remote endpoint
    takes so many inputs a request); an item's texts stay together, alone if need be."""
    part: list[tuple[ItemT, list[Text]]] = []
    size = 0
    for item, its in pending:
        if part and size + len(its) > texts:
            yield part
            part, size = [], 0
        part.append((item, its))
        size += len(its)
    if part:
        yield part


async def embedded(
    provider: EmbeddingProvider, part: list[tuple[ItemT, list[Text]]], path: str
) -> list[VectorRow]:
    """One provider call for the part's texts; each item's vectors, in its texts' order."""
    texts = [t.text for _, its in part for t in its]
    vectors = await provider.embed(texts)
    if len(vectors) != len(texts):  # never pair a vector with another text's
        raise EmbeddingError(f"{len(vectors)} vectors came for {len(texts)} texts")
    metrics.EMBEDDED.labels(provider.model, path).inc(len(vectors))
    flat, model = iter(vectors), provider.model
    return [
        row
        for item, its in part
        for row in vector_rows(item.item_id, item.revision, model, item.org, item.scope, flat, its)
    ]
