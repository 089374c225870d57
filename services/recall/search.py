"""``POST /v1/search``'s answer: the lists ``packets.matches`` fetches, fused, each memory
given whole or as its passage."""

from __future__ import annotations

from contracts.recall import SearchHit, SearchRequest, SearchResponse
from engram.auth import Principal
from services.recall.adapters.store import RecallStore
from services.recall.core import bound, excerpt, fuse
from services.recall.packets import matches, with_aliases
from services.recall.settings import RecallSettings
from services.recall.vectors import QueryEmbedder


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
    # A memory's passage is the one its vector was found by (the chunk the ranking
    # scored); one found by its words alone, the one with most of the query's words, its
    # aliases' too (QA: an alias's hit showed a passage without it).
    # The vector list reads in a transaction of its own: its passage counts only for the
    # revision the answer shows (QA: a correction between the two reads paired revision
    # 2's text with revision 1's passage).
    found_by = {(c.item_id, c.revision): c.passage for c in lists.get("vector", [])}
    words = aliased or req.query
    hits = []
    for r in ranked:
        passage = found_by.get((r.item.item_id, r.item.revision))
        part = excerpt(r.item.content, words, passage=passage)
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
