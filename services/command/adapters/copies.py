"""The source memories of a promotion or a fork, read from the read model.

The source is another stream (the token's session, or the session it forks), perhaps
another partition's, so the writer reads its active and retracted memories (disabled, or
archived since they were), in plain text,
from ``memory.items`` before deciding: the active ones first, each newest first, at most one
more than a command may copy (so that ``decide`` can refuse a source that holds too many).
A fork copies both (seed 002: a session's retracted facts are part of its history); a
promotion only the active ones. A move reads its one memory (``one``)."""

from __future__ import annotations

from collections.abc import Collection

import asyncpg

from contracts.commands import MAX_COPIES
from services.command.context import Copy

COLUMNS = (
    "item_id, kind, key, title, content, pinned, tags, sources, expires_at, status, revision, "
    "created_by ->> 'member' AS author, "
    # Read so, a projector that has not yet added the column (migration 019) reads none.
    "coalesce((to_jsonb(items) ->> 'inferred')::boolean, false) AS inferred"
)


class CopySources:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def copyable(self, stream_ids: Collection[str]) -> dict[str, tuple[Copy, ...]]:
        found: dict[str, tuple[Copy, ...]] = {}
        for stream_id in stream_ids:
            rows = await self._pool.fetch(
                # An expired memory is read by no one: it is not brought back as a copy. A
                # retracted one stays retracted, expired or not (QA: a fork left it out).
                f"SELECT {COLUMNS} FROM memory.items WHERE stream_id = $1 AND content IS NOT NULL "
                "AND ((status = 'active' AND (expires_at IS NULL OR expires_at > now())) "
                "OR status = 'disabled' OR (status = 'archived' AND archived_from = 'disabled')) "
                "ORDER BY status <> 'active', updated_at DESC, item_id LIMIT $2",
                stream_id,
                MAX_COPIES + 1,
            )
            found[stream_id] = tuple(_copy(r) for r in rows)
        return found

    async def one(self, stream_id: str, item_id: str) -> tuple[Copy, ...]:
        """A move's memory in whatever status (a forgotten one without its text), or none
        when its stream holds no such memory."""
        row = await self._pool.fetchrow(
            f"SELECT {COLUMNS} FROM memory.items WHERE stream_id = $1 AND item_id = $2",
            stream_id,
            item_id,
        )
        return () if row is None else (_copy(row),)


def _copy(r: asyncpg.Record) -> Copy:
    return Copy(
        item_id=r["item_id"],
        kind=r["kind"],
        key=r["key"],
        title=r["title"],
        content=r["content"] or "",  # a forgotten memory's is gone
        pinned=r["pinned"],
        tags=tuple(r["tags"]),
        sources=tuple(r["sources"]),
        expires_at=r["expires_at"],
        revision=r["revision"],
        author=r["author"],
        status=r["status"],
        inferred=r["inferred"],
    )
