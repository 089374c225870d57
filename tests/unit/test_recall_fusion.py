"""How deep each retriever's list goes into the rank fusion, and which distance cut the
vector search gets: through recall's own ``search``, over a store that returns two
fixed lists and records what it was asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from structlog.testing import capture_logs

from contracts.recall import SearchRequest
from engram.auth import Principal
from services.recall.app import _check_cut
from services.recall.core import Candidate
from services.recall.packets import search
from services.recall.settings import RecallSettings

ANA = Principal(org="acme", member="ana")


def item(item_id: str) -> Candidate:
    return Candidate(item_id, 1, "shared", "fact", None, f"memory {item_id}", False)


# Each retriever's best three are its own; both rank s1..s3 lower, in fourth to sixth place.
FULL_TEXT = [item(i) for i in ("t1", "t2", "t3", "s1", "s2", "s3")]
VECTORS = [item(i) for i in ("v1", "v2", "v3", "s1", "s2", "s3")]


class TwoLists:
    def __init__(self) -> None:
        self.asked: dict[str, int] = {}
        self.cut: float | None = None

    @asynccontextmanager
    async def session(self, p: Principal) -> AsyncIterator[None]:
        yield None

    alongside = session

    async def full_text(self, p: Principal, query: str, limit: int, *_: Any) -> list[Candidate]:
        self.asked["full_text"] = limit
        return FULL_TEXT[:limit]

    async def nearest(
        self, p: Principal, vector: list[float], model: str, cut: float, limit: int
    ) -> list[Candidate]:
        self.asked["vector"], self.cut = limit, cut
        return VECTORS[:limit]


class Embedder:
    model, max_distance = "model@3", 0.25

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]


async def ids(settings: RecallSettings, limit: int) -> tuple[list[str], TwoLists]:
    store = TwoLists()
    request = SearchRequest(query="q", limit=limit)
    found = await search(store, Embedder(), ANA, request, settings)  # type: ignore[arg-type]
    return [m.id for m in found.memories], store


async def test_each_list_enters_the_fusion_as_deep_as_the_answer() -> None:
    found, store = await ids(RecallSettings(), 3)
    assert store.asked == {"full_text": 3, "vector": 3}
    assert found == ["t1", "v1", "t2"]  # each retriever's first answers, interleaved


async def test_the_seeds_deep_fusion_is_one_setting_away() -> None:
    found, store = await ids(RecallSettings(fusion_depth=30), 3)
    assert store.asked == {"full_text": 30, "vector": 30}
    # Two shares of a low place (2 / 64) outweigh one first place (1 / 61).
    assert found == ["s1", "s2", "s3"]


async def test_the_vector_cut_is_the_models_unless_configured() -> None:
    _, store = await ids(RecallSettings(), 3)
    assert store.cut == Embedder.max_distance
    configured = RecallSettings.model_validate({"MEMORY_SEMANTIC_MAX_DISTANCE": 0.5})
    _, store = await ids(configured, 3)
    assert store.cut == 0.5


def test_a_cut_chosen_for_another_model_is_warned_about_at_start() -> None:
    with capture_logs() as logs:
        _check_cut(0.6, "e5-small-v2-int8", 0.2)  # MiniLM's advice, kept after an upgrade
        _check_cut(0.25, "e5-small-v2-int8", 0.2)
        _check_cut(None, "e5-small-v2-int8", 0.2)
    assert [entry["event"] for entry in logs] == ["semantic_cut_far_above_model"]
    assert logs[0]["model_cut"] == 0.2 and logs[0]["configured"] == 0.6
