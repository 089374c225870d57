"""Assembling a packet under a policy: which lists to fetch, then the pure core."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal, Protocol

from contracts.orgs import OrgPolicy
from contracts.recall import (
    CURLY,
    RecalledItem,
    RecallRequest,
    RecallResponse,
    SearchHit,
    SearchRequest,
    SearchResponse,
    phrases_of,
)
from engram.auth import Principal
from engram.embeddings.errors import ProviderError
from engram.logging import get_logger
from services.recall.adapters.store import RecallStore
from services.recall.core import (
    Candidate,
    Ranked,
    bound,
    build_packet,
    excerpt,
    fed_back,
    feedback_items,
    fuse,
    holds,
    in_order,
    lendable,
    phrase_pattern,
)
from services.recall.entities import other_names
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


Retrieval = Literal["hybrid", "full_text", "vector"]


async def matches(
    store: RecallStore,
    embedder: QueryEmbedder | None,
    p: Principal,
    query: str,
    settings: RecallSettings,
    top: int,
    retrieval: Retrieval = "hybrid",
    aliased: str | None = None,
) -> dict[str, list[Candidate]]:
    """The ranked lists to fuse, each as deep as the fusion takes (see ``fusion_depth``):
    full text (any of the words, BM25 or ts_rank_cd) and, when embeddings are configured,
    the nearest vectors of the current revisions. A query with phrases in double quotes
    keeps in each list only the memories that hold them as written, and adds a list of
    those memories, newest first (seed 004's exact matching). ``aliased``: the query with
    the other names of the org's entities it names (``with_aliases``), searched as one
    more full-text list (``alias``); None when it names none.

    The vector list (embedding the query, then the nearest-vector search) runs beside
    the full-text search, in a second transaction for the same principal. A hybrid
    search then ranks its full-text list again with relevance feedback (``feed_back``)."""
    query = query.translate(CURLY)  # a curly quote is a quote (QA: it lost the full text)
    limit = depth(settings, top)
    feedback = (
        retrieval == "hybrid"
        and settings.feedback_items > 0
        and settings.full_text_ranking == "bm25"
    )
    vectors: asyncio.Task[list[Candidate] | None] | None = None
    if retrieval in ("hybrid", "vector") and embedder is not None and query.strip():
        vectors = asyncio.create_task(
            nearest(store, embedder, p, query, settings, limit, words=feedback)
        )
    lists: dict[str, list[Candidate]] = {}
    try:
        if retrieval in ("hybrid", "full_text"):
            deep = max(limit, settings.feedback_pool) if feedback else limit
            lists["full_text"] = await store.full_text(
                p, query, deep, settings.full_text_ranking, words=feedback
            )
        found = await vectors if vectors is not None else None
    except BaseException:
        if vectors is not None:  # never leave it running, nor its error unread
            vectors.cancel()
            with contextlib.suppress(BaseException):
                await vectors
        raise
    if found is not None:
        lists["vector"] = found
    if feedback and lists.get("full_text"):
        lists["full_text"] = (await feed_back(store, p, query, lists, settings))[:limit]
    if retrieval in ("hybrid", "full_text") and aliased is not None:
        # Seed 004's entity aliases: the same words with the other names of the entities
        # the query names (QA: the other names alone ranked a memory that only named the
        # entity level with the query's best match).
        ranking = settings.full_text_ranking
        lists["alias"] = await store.full_text(p, aliased, limit, ranking)
    if phrases := phrases_of(query):  # exact matching: only the memories that hold them
        patterns = [phrase_pattern(phrase) for phrase in phrases]
        lists = {name: [c for c in got if holds(c, patterns)] for name, got in lists.items()}
        if retrieval in ("hybrid", "full_text"):
            lists["exact"] = await store.exact(p, phrases, patterns, limit)
    return lists


async def with_aliases(store: RecallStore, p: Principal, query: str) -> str | None:
    """The other names of the org's entities the query names, then the query (first, so
    that a passage is chosen by them too: ``excerpt`` reads a query's first words), or
    None when it names none."""
    others = other_names(query, await store.entities(p))
    return f"{' '.join(others)} {query}" if others else None


async def feed_back(
    store: RecallStore,
    p: Principal,
    query: str,
    lists: dict[str, list[Candidate]],
    settings: RecallSettings,
) -> list[Candidate]:
    """Relevance feedback: the first pass's best answers (both lists fused) lend their
    strongest other words to the query, and the full-text list is ranked again with
    them: an answer that shares few words with the question often shares many with the
    answers found first."""
    pool = lists["full_text"]
    lent = lendable(feedback_items(lists, settings.feedback_items), pool)
    if not lent:
        return pool
    stats = await store.term_stats(p, query, sorted(lent))
    return fed_back(pool, lent, stats, settings.feedback_terms, settings.feedback_weight)


def depth(settings: RecallSettings, top: int) -> int:
    """How many of each retriever's best enter the fusion for an answer of ``top``."""
    return max(top, settings.fusion_depth or 0)


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


def generation_text(gen: dict[str, int]) -> str:
    return f"{gen['shared']}:{gen['own']}:{gen['expired']}"


async def rank(
    store: RecallStore,
    embedder: QueryEmbedder | None,
    p: Principal,
    req: RecallRequest,
    org: OrgPolicy,
    pinned: list[Candidate],
    settings: RecallSettings,
) -> tuple[list[Ranked], int, bool]:
    """Entries in packet order, the character budget, and whether to stop at a misfit
    (``pinned``: the newest pinned items, as many as the packet holds). Every policy holds
    at most ``top`` items: the request's, else the org's, else the packet's default."""
    policy = req.policy or org.policy
    top = req.max_items or org.max_items or settings.packet_items
    chars = req.max_chars or org.max_chars or settings.packet_chars
    if policy == "newest_first":  # seed 002: newest first, pinned or not, 8,000 characters
        newest = await store.listing("newest", p, top)
        return in_order("newest", newest, top), req.max_chars or org.max_chars or 8000, True
    if policy == "preferences_first":  # seed 001: pinned, preferences, then keyword matches
        text = await store.full_text(p, req.query, depth(settings, top), settings.full_text_ranking)
        prefs = await store.listing("preferences", p, top)
        lists = {"preference": prefs, "full_text": text}
        ranked = fuse(lists, pinned, 10_000)
        always = [r for r in ranked if r.item.pinned or r.item.kind == "preference"]
        rest = [r for r in ranked if r not in always]
        return (always + rest)[:top], chars, True
    aliased = await with_aliases(store, p, req.query)
    lists = await matches(store, embedder, p, req.query, settings, top, aliased=aliased)
    return fuse(lists, pinned, top), chars, True


async def recall(
    store: RecallStore,
    embedder: QueryEmbedder | None,
    p: Principal,
    req: RecallRequest,
    settings: RecallSettings,
) -> RecallResponse:
    async with store.session(p):  # one transaction for every read and the context
        opening = await store.opening(p, req.max_items, req.policy, settings.packet_items)
        org, generation = opening.policy, generation_text(opening.generation)
        policy = req.policy or org.policy
        # Memory off, for this run or for the org (seed 004's memory capability): nothing
        # supplied, nothing recorded.
        if not req.use_memory or not org.memory:
            return RecallResponse(
                context_id=None, generation=generation, policy=policy, items=[], packet=""
            )
        entries, chars, stop = await rank(store, embedder, p, req, org, opening.pinned, settings)
        packet = build_packet(entries, chars, stop_at_first_misfit=stop)
        items = [
            RecalledItem(
                id=e.item.item_id,
                revision=e.item.revision,
                scope=e.item.scope,
                kind=e.item.kind,
                why=e.why,
                score=round(e.score, 6),
            )
            for e in packet.entries
        ]
        context_id = (
            None
            if req.preview  # a preview records nothing
            else await store.save_context(
                p,
                req.run_id,
                req.query,
                policy,
                generation,
                [{"item_id": i.id, "revision": i.revision, "why": i.why} for i in items],
            )
        )
        return RecallResponse(
            context_id=context_id,
            generation=generation,
            policy=policy,
            items=items,
            packet=packet.text,
            omitted=packet.omitted,
        )


async def search(
    store: RecallStore,
    embedder: QueryEmbedder | None,
    p: Principal,
    req: SearchRequest,
    settings: RecallSettings,
) -> SearchResponse:
    """The search form: ranked like a packet but without pinned-first, each memory whole
    or as its matching passage, the whole result bounded with an ``omitted`` count."""
    aliased = await with_aliases(store, p, req.query)
    async with store.session(p):
        lists = await matches(
            store, embedder, p, req.query, settings, req.limit, req.retrieval, aliased
        )
    ranked = fuse(lists, [], req.limit)
    # A memory's passage is the one with most of the query's words, its aliases' too (QA:
    # an alias's hit showed a passage without it).
    words = aliased or req.query
    hits = []
    for r in ranked:
        part = excerpt(r.item.content, words)
        hits.append(
            SearchHit(
                id=r.item.item_id,
                revision=r.item.revision,
                scope=r.item.scope,
                kind=r.item.kind,
                title=r.item.title,
                memory=part.text,
                truncated=part.truncated,
                full_length=part.full_length,
                score=round(r.score, 6),
                why=r.why,
            )
        )
    kept = bound([len(h.memory) for h in hits], settings.search_chars)
    return SearchResponse(memories=hits[:kept], omitted=len(hits) - kept)
