"""Assembling a packet under a policy: which lists to fetch, then the pure core."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

from contracts.orgs import OrgPolicy
from contracts.recall import CURLY, RecalledItem, RecallRequest, RecallResponse, phrases_of
from engram.auth import Principal
from services.recall.adapters.store import RecallStore
from services.recall.core import (
    Candidate,
    Ranked,
    build_packet,
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
from services.recall.vectors import QueryEmbedder, nearest

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
    feedback = _feeds_back(retrieval, settings)
    lists = await _first_lists(store, embedder, p, query, settings, limit, retrieval, feedback)
    if feedback and lists.get("full_text"):
        lists["full_text"] = (await feed_back(store, p, query, lists, settings))[:limit]
    if retrieval in ("hybrid", "full_text") and aliased is not None:
        # Seed 004's entity aliases: the same words with the other names of the entities
        # the query names (QA: the other names alone ranked a memory that only named the
        # entity level with the query's best match).
        lists["alias"] = await store.full_text(p, aliased, limit, settings.full_text_ranking)
    return await _exact(store, p, query, lists, limit, retrieval)


def _feeds_back(retrieval: Retrieval, settings: RecallSettings) -> bool:
    """Whether the full-text list is ranked again with relevance feedback."""
    return (
        retrieval == "hybrid"
        and settings.feedback_items > 0
        and settings.full_text_ranking == "bm25"
    )


async def _first_lists(
    store: RecallStore,
    embedder: QueryEmbedder | None,
    p: Principal,
    query: str,
    settings: RecallSettings,
    limit: int,
    retrieval: Retrieval,
    feedback: bool,
) -> dict[str, list[Candidate]]:
    """The full-text list and the vector list, which runs beside it in a task of its own
    (``feedback``: both come with their items' words, the full text deeper)."""
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
        await _cancel(vectors)  # never leave it running, nor its error unread
        raise
    if found is not None:
        lists["vector"] = found
    return lists


async def _cancel(task: asyncio.Task[list[Candidate] | None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def _exact(
    store: RecallStore,
    p: Principal,
    query: str,
    lists: dict[str, list[Candidate]],
    limit: int,
    retrieval: Retrieval,
) -> dict[str, list[Candidate]]:
    """Exact matching, for a query with phrases in double quotes: each list keeps only the
    memories that hold them, and a full-text search adds a list of those."""
    if not (phrases := phrases_of(query)):
        return lists
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
        items = _recalled(packet.entries)
        context_id = await _recorded(store, p, req, policy, generation, items)
        return RecallResponse(
            context_id=context_id,
            generation=generation,
            policy=policy,
            items=items,
            packet=packet.text,
            omitted=packet.omitted,
        )


def _recalled(entries: list[Ranked]) -> list[RecalledItem]:
    return [
        RecalledItem(
            id=e.item.item_id,
            revision=e.item.revision,
            scope=e.item.scope,
            kind=e.item.kind,
            why=e.why,
            score=round(e.score, 6),
        )
        for e in entries
    ]


async def _recorded(
    store: RecallStore,
    p: Principal,
    req: RecallRequest,
    policy: str,
    generation: str,
    items: list[RecalledItem],
) -> str | None:
    """The memory context the packet is recorded as; None for a preview, which records
    nothing."""
    if req.preview:
        return None
    entries = [{"item_id": i.id, "revision": i.revision, "why": i.why} for i in items]
    return await store.save_context(p, req.run_id, req.query, policy, generation, entries)
