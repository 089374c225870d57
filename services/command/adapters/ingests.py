"""The requests ingests were first sent with under their Idempotency-Key
(``command.ingest_requests``): what tells a retry from another request under a used key."""

from __future__ import annotations

import asyncpg

from engram.crypto import MasterKey
from engram.http import ProblemError

KEPT_DAYS = 7

CLAIM = """
INSERT INTO command.ingest_requests AS r (stream_id, key_hash, digest)
VALUES ($1, $2, $3)
ON CONFLICT (stream_id, key_hash) DO UPDATE SET digest = r.digest
RETURNING digest, xmax = 0 AS inserted
"""
RELEASE = "DELETE FROM command.ingest_requests WHERE stream_id = $1 AND key_hash = $2"
PRUNE = "DELETE FROM command.ingest_requests WHERE created_at < now() - make_interval(days => $1)"


async def first_request(
    pool: asyncpg.Pool, stream_id: str, key_hash: str, digest: str
) -> tuple[str, bool]:
    """The digest of the request the key was first sent with in the stream (``digest``
    itself when this is the first, then kept, or a retry of it), and whether this call
    kept it. Rows past ``KEPT_DAYS`` go first, in the same transaction."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(PRUNE, KEPT_DAYS)
        row = await conn.fetchrow(CLAIM, stream_id, key_hash, digest)
        return str(row["digest"]), bool(row["inserted"])


async def release(pool: asyncpg.Pool, stream_id: str, key_hash: str) -> None:
    """Give the key back: the ingest that just kept it was refused whole, the key being a
    save's (whose retry must still get its first answer)."""
    await pool.execute(RELEASE, stream_id, key_hash)


USED = (
    "SELECT EXISTS (SELECT 1 FROM command.ingest_requests WHERE stream_id = $1 AND key_hash = $2"
    " AND created_at > now() - make_interval(days => $3))"
)


async def ingest_key_used(pool: asyncpg.Pool, stream_id: str, key_hash: str) -> bool:
    """Whether an ingest was sent under this key in the stream (within ``KEPT_DAYS``)."""
    return bool(await pool.fetchval(USED, stream_id, key_hash, KEPT_DAYS))


def key_hash(master: MasterKey, key: str) -> str:
    """How the table keeps a key: a keyed hash, never the key."""
    return master.digest(key.encode()).hex()


def key_reused(key: str, what: str) -> ProblemError:
    """The refusal of a key sent again with another request (``what`` says which)."""
    return ProblemError(
        422,
        "Idempotency-Key reused",
        f"Idempotency-Key {key!r} was used for {what} in this scope: send this request "
        "with a new key",
        "idempotency_key_reused",
    )
