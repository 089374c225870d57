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
from services.recall.core import Candidate, TermStats
from services.recall.entities import Entity, entity_of
from services.recall.search import search
from services.recall.settings import RecallSettings

ANA = Principal(org="acme", member="ana")


def item(item_id: str) -> Candidate:
    return Candidate(item_id, 1, "shared", "fact", None, f"memory {item_id}", False)


# Each retriever's best three are its own; both rank s1..s3 lower, in fourth to sixth place.
FULL_TEXT = [item(i) for i in ("t1", "t2", "t3", "s1", "s2", "s3")]
VECTORS = [item(i) for i in ("v1", "v2", "v3", "s1", "s2", "s3")]


class TwoLists:
    def __init__(self, lists: tuple[list[Candidate], list[Candidate]] | None = None) -> None:
        self.asked: dict[str, int] = {}
        self.words: dict[str, bool] = {}  # whether each list was asked for its words
        self.cut: float | None = None
        self.full_text_list, self.vector_list = lists or (FULL_TEXT, VECTORS)
        self.fed: list[str] | None = None
        self.groups: list[Entity] = []  # the org's entity aliases
        self.queries: list[str] = []  # what each full-text search was asked

    async def entities(self, p: Principal) -> list[Entity]:
        return self.groups

    @asynccontextmanager
    async def session(self, p: Principal) -> AsyncIterator[None]:
        yield None

    alongside = session

    async def full_text(
        self, p: Principal, query: str, limit: int, *_: Any, words: bool = False
    ) -> list[Candidate]:
        self.asked["full_text"] = limit
        self.words["full_text"] = words
        self.queries.append(query)
        return self.full_text_list[:limit]

    async def nearest(
        self,
        p: Principal,
        vector: list[float],
        model: str,
        cut: float,
        limit: int,
        *,
        words: bool = False,
    ) -> list[Candidate]:
        self.asked["vector"], self.cut = limit, cut
        self.words["vector"] = words
        return self.vector_list[:limit]

    async def term_stats(self, p: Principal, query: str, words: list[str]) -> TermStats:
        self.fed = words
        return TermStats(items=100, avgdl=3.0, docs={w: 2 for w in words}, query=frozenset())


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


def worded(item_id: str, score: float, *words: str) -> Candidate:
    terms = {w: 1 for w in words}
    return Candidate(item_id, 1, "shared", "fact", None, item_id, False, score=score, terms=terms)


# The vectors' first answer shares "kayak" and "trip" with the full-text list's third,
# which the first two outscore; "lake" only the vector answer holds: it lends nothing.
WORDED = (
    [worded("t1", 3.0, "trip"), worded("t2", 2.0, "trip"), worded("t3", 1.9, "kayak", "trip")],
    [worded("v1", 0.0, "kayak", "lake", "trip")],
)


async def test_feedback_ranks_the_full_text_pool_again_before_the_fusion() -> None:
    store = TwoLists(WORDED)
    found, store = await ids(RecallSettings(), 2, store)
    # The full-text list is read as deep as the feedback pool (a packet's 12).
    assert store.asked == {"full_text": 12, "vector": 2}
    assert store.fed == ["kayak", "trip"]  # shared with the pool: not "lake"
    assert store.words == {"full_text": True, "vector": True}  # both lists lend words
    assert found == ["t1", "v1"]
    # "trip" lifts all three; "kayak" lifts t3 past t2 as well.
    plain, store = await ids(NO_FEEDBACK, 3, TwoLists(WORDED))
    assert store.fed is None and plain == ["t1", "v1", "t2"]
    assert store.words == {"full_text": False, "vector": False}  # no words read for nothing
    fed, _ = await ids(RecallSettings(), 3, TwoLists(WORDED))
    assert fed == ["t1", "v1", "t3"]


async def test_feedback_is_part_of_hybrid_search_only() -> None:
    for retrieval in ("full_text", "vector"):
        _, store = await ids(RecallSettings(), 2, TwoLists(WORDED), retrieval)
        assert store.fed is None and set(store.asked.values()) == {2}, retrieval
        assert not any(store.words.values()), retrieval
    settings = RecallSettings(full_text_ranking="ts_rank_cd")
    _, store = await ids(settings, 2, TwoLists(WORDED))
    assert store.fed is None  # it scores with BM25, which ts_rank_cd's list is not ranked by


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


async def test_an_entity_the_query_names_adds_a_list_of_its_other_names() -> None:
    """Seed 004's entity aliases: a search naming "kube" looks for Kubernetes and k8s too."""
    store = TwoLists()
    store.groups = [entity_of(["Kubernetes", "k8s", "kube"]), entity_of(["Lisbon", "LIS"])]
    request = SearchRequest.model_validate({"query": "where does kube run?", "limit": 3})
    found = await search(store, Embedder(), ANA, request, NO_FEEDBACK)  # type: ignore[arg-type]
    assert store.queries == ["where does kube run?", "Kubernetes k8s where does kube run?"]
    assert any(why.startswith("alias#") for m in found.memories for why in m.why)
    plain = TwoLists()
    plain.groups = store.groups
    await search(
        plain,  # type: ignore[arg-type]
        Embedder(),
        ANA,
        SearchRequest.model_validate({"query": "q"}),
        NO_FEEDBACK,
    )
    assert plain.queries == ["q"]  # names no entity: no list of aliases


async def test_a_search_shows_the_passage_its_vector_found_for_that_revision_only() -> None:
    """The vector list reads in a transaction of its own (QA: a correction in between
    paired revision 2's text with revision 1's passage)."""
    parts = [f"Part {n} is about subject number {n}. " * 30 for n in range(3)]
    text = "\n".join(p.strip() for p in parts)

    def long(revision: int, passage: int | None = None) -> Candidate:
        return Candidate("m", revision, "shared", "fact", None, text, False, passage=passage)

    request = SearchRequest.model_validate({"query": "part 0 subject", "retrieval": "hybrid"})
    same = TwoLists(([long(2)], [long(2, passage=2)]))
    [hit] = (await search(same, Embedder(), ANA, request, NO_FEEDBACK)).memories  # type: ignore[arg-type]
    assert hit.truncated and hit.memory.startswith("Part 2 is about")  # the vector's passage
    older = TwoLists(([long(2)], [long(1, passage=2)]))
    [hit] = (await search(older, Embedder(), ANA, request, NO_FEEDBACK)).memories  # type: ignore[arg-type]
    assert hit.memory.startswith("Part 0 is about")  # by the query's words instead
