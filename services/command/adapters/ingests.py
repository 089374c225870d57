"""The requests ingests were first sent with under their Idempotency-Key
(``command.ingest_requests``): what tells a retry from another request under a used key."""

from __future__ import annotations

import asyncpg

KEPT_DAYS = 7

CLAIM = """
INSERT INTO command.ingest_requests AS r (stream_id, key_hash, digest)
VALUES ($1, $2, $3)
ON CONFLICT (stream_id, key_hash) DO UPDATE SET digest = r.digest
RETURNING digest
"""
PRUNE = "DELETE FROM command.ingest_requests WHERE created_at < now() - make_interval(days => $1)"


async def first_request(pool: asyncpg.Pool, stream_id: str, key_hash: str, digest: str) -> str:
    """The digest of the request the key was first sent with in the stream: ``digest``
    itself when this is the first (then kept), or a retry of it. Rows past ``KEPT_DAYS``
    go first, in the same transaction."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(PRUNE, KEPT_DAYS)
        return str(await conn.fetchval(CLAIM, stream_id, key_hash, digest))
