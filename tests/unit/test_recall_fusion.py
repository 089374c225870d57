"""How deep each retriever's list goes into the rank fusion, which distance cut the
vector search gets, and what relevance feedback is given and does: through recall's own
``search``, over a store that returns two fixed lists and records what it was asked for."""

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
    def __init__(self, rescore: dict[str, float] | None = None) -> None:
        self.asked: dict[str, int] = {}
        self.cut: float | None = None
        self.rescore = rescore or {}
        self.fed: tuple[list[str], list[str], int, float] | None = None

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

    async def feedback_scores(
        self,
        p: Principal,
        query: str,
        feedback: list[str],
        pool: list[str],
        terms: int,
        weight: float,
    ) -> dict[str, float]:
        self.fed = (feedback, pool, terms, weight)
        return self.rescore


class Embedder:
    model, max_distance = "model@3", 0.25

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0] for _ in texts]


NO_FEEDBACK = RecallSettings(feedback_items=0)


async def ids(
    settings: RecallSettings, limit: int, store: TwoLists | None = None, retrieval: str = "hybrid"
) -> tuple[list[str], TwoLists]:
    store = store or TwoLists()
    request = SearchRequest.model_validate({"query": "q", "limit": limit, "retrieval": retrieval})
    found = await search(store, Embedder(), ANA, request, settings)  # type: ignore[arg-type]
    return [m.id for m in found.memories], store


async def test_each_list_enters_the_fusion_as_deep_as_the_answer() -> None:
    found, store = await ids(NO_FEEDBACK, 3)
    assert store.asked == {"full_text": 3, "vector": 3}
    assert found == ["t1", "v1", "t2"]  # each retriever's first answers, interleaved


async def test_the_seeds_deep_fusion_is_one_setting_away() -> None:
    found, store = await ids(RecallSettings(fusion_depth=30, feedback_items=0), 3)
    assert store.asked == {"full_text": 30, "vector": 30}
    # Two shares of a low place (2 / 64) outweigh one first place (1 / 61).
    assert found == ["s1", "s2", "s3"]


async def test_feedback_ranks_the_full_text_pool_again_before_the_fusion() -> None:
    store = TwoLists(rescore={"s2": 5.0, "t1": 1.0})
    found, store = await ids(RecallSettings(), 3, store)
    # The full-text list is read as deep as the feedback pool; vectors as deep as the answer.
    assert store.asked == {"full_text": 12, "vector": 3}
    assert store.fed is not None
    feedback, pool, terms, weight = store.fed
    # The feedback: the first five answers of a search for five, both lists fused.
    assert feedback == ["t1", "v1", "t2", "v2", "t3"]
    assert pool == [c.item_id for c in FULL_TEXT] and (terms, weight) == (10, 0.3)
    # Full text is now s2, t1, then the unscored in their old order (cut to 3: t2).
    assert found == ["s2", "v1", "t1"]


async def test_feedback_is_part_of_hybrid_search_only() -> None:
    for retrieval in ("full_text", "vector"):
        _, store = await ids(RecallSettings(), 3, TwoLists({"s2": 5.0}), retrieval)
        assert store.fed is None and set(store.asked.values()) == {3}, retrieval
    _, store = await ids(RecallSettings(full_text_ranking="ts_rank_cd"), 3, TwoLists({"s2": 5.0}))
    assert store.fed is None  # it scores with BM25, which ts_rank_cd's list is not ranked by
    _, store = await ids(NO_FEEDBACK, 3, TwoLists({"s2": 5.0}))
    assert store.fed is None


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
