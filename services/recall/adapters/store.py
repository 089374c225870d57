"""The recall store: what a packet and a search read (the opening, the ranked lists, the
statistics that rank one again) and the memory context a packet records; the other reads
are ``RecallReads``'s."""

from __future__ import annotations

import json
import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import asyncpg

from contracts.orgs import OrgPolicy
from engram.auth import Principal
from services.recall.adapters.reads import Q, RecallReads
from services.recall.adapters.scoped import apart, as_principal
from services.recall.core import Candidate, Ranking, TermStats, or_query


@dataclass(frozen=True)
class Opening:
    """What a packet reads first."""

    generation: dict[str, int]
    policy: OrgPolicy
    pinned: list[Candidate]  # newest first


def _candidate(row: asyncpg.Record | dict[str, Any]) -> Candidate:
    return Candidate(
        item_id=row["item_id"],
        revision=row["revision"],
        scope=row["scope"],
        kind=row["kind"],
        title=row["title"],
        content=row["content"] or "",
        pinned=row["pinned"],
        updated_at=float(row["updated_at"]),
        score=float(row.get("score") or 0.0),
        terms=dict(zip(row["lexemes"], row["tfs"], strict=True))
        if row.get("lexemes") is not None
        else None,
        passage=row.get("passage"),
    )


class RecallStore(RecallReads):
    """Every read of the service, in one store: the routes and packets are given one."""

    def session(self, p: Principal) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """One transaction for all the reads (and the context write) of a request."""
        return as_principal(self._pool, p)

    def alongside(self, p: Principal) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """A second transaction for the same principal (``scoped.apart``)."""
        return apart(self._pool, p)

    async def full_text(
        self,
        p: Principal,
        query: str,
        limit: int,
        ranking: Ranking = "bm25",
        *,
        words: bool = False,
    ) -> list[Candidate]:
        """Items matching any of the query's words: BM25 over the term index, or
        ``ts_rank_cd`` over every match (the seed's ranking, slower on large scopes).
        ``words``: BM25's candidates come with their words (for relevance feedback)."""
        text = query if ranking == "bm25" else or_query(query)
        if not text.strip():
            return []
        async with as_principal(self._pool, p) as conn:
            if ranking == "bm25":
                rows = await conn.fetch(Q["bm25"], text, limit, words)
            else:
                rows = await conn.fetch(Q["full_text"], text, limit)
        return [_candidate(r) for r in rows]

    async def exact(
        self, p: Principal, phrases: list[str], patterns: list[str], limit: int
    ) -> list[Candidate]:
        """The memories that hold every phrase as written (its ``patterns``, case aside),
        newest first."""
        async with as_principal(self._pool, p) as conn:
            rows = await conn.fetch(Q["exact"], phrases, patterns, limit)
        return [_candidate(r) for r in rows]

    async def term_stats(self, p: Principal, query: str, words: list[str]) -> TermStats:
        """How many items of the visible streams hold each word, their totals, and which
        words are the query's own."""
        async with as_principal(self._pool, p) as conn:
            rows = await conn.fetch(Q["term_stats"], query, words)
        docs = {r["lexeme"]: r["docs"] for r in rows}
        totals = next((r for r in rows if r["lexeme"] == ""), None)
        items = totals["docs"] if totals else 0
        return TermStats(
            items=items,
            avgdl=totals["length"] / items if totals and items else 0.0,
            docs=docs,
            query=frozenset(r["lexeme"] for r in rows if r["in_query"]),
        )

    async def nearest(
        self,
        p: Principal,
        vector: list[float],
        model: str,
        max_distance: float,
        limit: int,
        *,
        words: bool = False,
    ) -> list[Candidate]:
        """The nearest current vectors' items; ``words``: with their words, as in
        ``full_text``."""
        literal = "[" + ",".join(f"{x:.7g}" for x in vector) + "]"
        async with as_principal(self._pool, p) as conn:
            rows = await conn.fetch(Q["nearest"], model, literal, max_distance, limit, words)
        return [_candidate(r) for r in rows]

    async def listing(self, query: str, p: Principal, limit: int) -> list[Candidate]:
        """``preferences`` or ``newest``: the policies' unconditional lists (the pinned
        items come with the ``opening``)."""
        async with as_principal(self._pool, p) as conn:
            rows = await conn.fetch(Q[query], p.org, p.visible_scopes(), limit)
        return [_candidate(r) for r in rows]

    async def generation(self, p: Principal) -> dict[str, int]:
        return (await self.opening(p)).generation

    async def opening(
        self, p: Principal, items: int | None = 0, policy: str | None = None, default: int = 0
    ) -> Opening:
        """The generation, the org's policy and the newest pinned items, in one round trip:
        as many as the packet holds (``items``, else the org's limit, else ``default``),
        none under the newest_first policy (``policy``, else the org's)."""
        async with as_principal(self._pool, p) as conn:
            scopes = p.visible_scopes()
            own = [s for s in scopes if s != "shared"]
            row = await conn.fetchrow(Q["opening"], p.org, own, scopes, items, policy, default)
        assert row is not None
        generation = {"shared": row["shared"], "own": row["own"], "expired": row["expired"]}
        org_policy = (
            OrgPolicy()
            if row["policy"] is None
            else OrgPolicy(
                policy=row["policy"],
                max_items=row["max_items"],
                max_chars=row["max_chars"],
                memory=row["memory"],
            )
        )
        pinned = [_candidate(c) for c in json.loads(row["pinned"])]
        return Opening(generation, org_policy, pinned)

    async def save_context(
        self,
        p: Principal,
        run_id: str | None,
        query: str,
        policy: str,
        generation: str,
        entries: list[dict[str, Any]],
    ) -> str:
        context_id = uuid.uuid4()
        async with as_principal(self._pool, p) as conn:
            await conn.execute(
                Q["save_context"],
                context_id,
                p.org,
                p.member,
                run_id,
                query,
                policy,
                generation,
                json.dumps(entries),
            )
        return str(context_id)
