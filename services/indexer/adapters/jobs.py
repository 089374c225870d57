"""Postgres adapter of re-embedding: candidates, resumable job rows, one pass at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from services.indexer.adapters.store import ItemText, Q, VectorRow, WriteResult, write_vectors


@dataclass
class Job:
    job_id: int
    cursor: str
    total: int
    embedded: int
    dropped: int


class ReindexJobs:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @asynccontextmanager
    async def exclusive(self, model: str, org: str | None) -> AsyncIterator[bool]:
        """True when this process holds the pass for (model, org); replicas skip it."""
        key = f"indexer.reindex:{model}:{org or ''}"
        async with self._pool.acquire() as conn:
            held = await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", key)
            try:
                yield bool(held)
            finally:
                if held:
                    await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", key)

    async def pending(self, model: str, org: str | None) -> int:
        return int(await self._pool.fetchval(Q["reindex_pending"], model, org))

    async def resume_or_start(self, model: str, org: str | None, pending: int) -> Job | None:
        """The unfinished pass to resume, else a new one when there is work (else None)."""
        row = await self._pool.fetchrow(Q["running_job"], model, org)
        if row is not None:
            return Job(row["job_id"], row["cursor"], row["total"], row["embedded"], row["dropped"])
        if pending == 0:
            return None
        job_id = await self._pool.fetchval(Q["start_job"], model, org, pending)
        return Job(job_id, "", pending, 0, 0)

    async def candidates(
        self, model: str, org: str | None, cursor: str, limit: int
    ) -> list[ItemText]:
        rows = await self._pool.fetch(Q["reindex_candidates"], model, cursor, org, limit)
        return [
            ItemText(r["item_id"], r["org"], r["scope"], r["revision"], r["title"], r["content"])
            for r in rows
        ]

    async def write(self, job: Job, cursor: str, rows: list[VectorRow]) -> WriteResult:
        """Vectors (rechecked) and the job's progress, in one transaction: a crash resumes."""
        async with self._pool.acquire() as conn, conn.transaction():
            result = await write_vectors(conn, rows)
            dropped = sum(result.dropped.values())
            await conn.execute(Q["job_progress"], job.job_id, cursor, result.written, dropped)
        job.cursor, job.embedded, job.dropped = (
            cursor,
            job.embedded + result.written,
            job.dropped + dropped,
        )
        return result

    async def finish(self, job: Job, model: str, org: str | None, prune: bool) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(Q["finish_job"], job.job_id)
            if prune:
                # Every active item now has this model's vector: the others no longer count.
                await conn.execute(Q["prune_other_models"], model, org)
