"""The recall service's reads (and its one write: memory contexts)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from engram.auth import Principal
from engram.db import load_queries
from services.recall.core import Candidate

Q = load_queries(Path(__file__).parent.parent / "sql" / "queries.sql")


def _candidate(row: asyncpg.Record) -> Candidate:
    return Candidate(
        item_id=row["item_id"],
        revision=row["revision"],
        scope=row["scope"],
        kind=row["kind"],
        title=row["title"],
        content=row["content"] or "",
        pinned=row["pinned"],
        updated_at=float(row["updated_at"]),
    )


class RecallStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def full_text(self, p: Principal, tsquery: str, limit: int) -> list[Candidate]:
        if not tsquery:
            return []
        rows = await self._pool.fetch(Q["full_text"], p.org, p.visible_scopes(), tsquery, limit)
        return [_candidate(r) for r in rows]

    async def listing(self, query: str, p: Principal, limit: int) -> list[Candidate]:
        """``pinned``, ``preferences`` or ``newest``: the policies' unconditional lists."""
        rows = await self._pool.fetch(Q[query], p.org, p.visible_scopes(), limit)
        return [_candidate(r) for r in rows]

    async def generation(self, p: Principal) -> dict[str, int]:
        row = await self._pool.fetchrow(Q["generation"], p.org, f"member:{p.member}")
        assert row is not None
        return {"shared": row["shared"], "own": row["own"], "expired": row["expired"]}

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
        await self._pool.execute(
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

    async def context(self, p: Principal, context_id: str) -> asyncpg.Record | None:
        try:
            key = uuid.UUID(context_id)
        except ValueError:
            return None
        return await self._pool.fetchrow(Q["context"], key, p.org, p.member)

    async def current_of(self, p: Principal, item_ids: list[str]) -> dict[str, asyncpg.Record]:
        rows = await self._pool.fetch(Q["current_of"], item_ids, p.org)
        return {r["item_id"]: r for r in rows}

    async def get_item(self, p: Principal, item_id: str) -> asyncpg.Record | None:
        return await self._pool.fetchrow(Q["get_item"], item_id, p.org, p.visible_scopes())

    async def list_items(
        self, p: Principal, statuses: list[str], before: Any, before_id: str, limit: int
    ) -> list[asyncpg.Record]:
        return list(
            await self._pool.fetch(
                Q["list_items"], p.org, p.visible_scopes(), statuses, before, before_id, limit
            )
        )
