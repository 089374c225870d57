"""The extractor's one-off upgrade of ``extractor.sources``: sources recorded before they
were kept as keyed hashes (migration 004) get their hashes in place of their ids."""

from __future__ import annotations

import asyncpg

from engram.crypto import MasterKey
from engram.logging import get_logger
from services.extractor.adapters.store import Q

log = get_logger(__name__)


async def rehash_sources(
    db: asyncpg.Pool | asyncpg.Connection, master: MasterKey, chunk: int = 5_000
) -> int:
    """Put the keyed hashes of the sources recorded before they were hashed (004) in place
    of their ids; how many rows. Once, at the start: no row of them is left after."""
    done = 0
    while rows := await db.fetch(Q["plain_sources"], chunk):
        hashes = [master.source_hash(r["org"], r["source_id"]) for r in rows]
        columns = [[r[name] for r in rows] for name in ("org", "source_id", "item_id")]
        await db.execute(Q["rehash_sources"], *columns, hashes)
        done += len(rows)
    if done:
        log.info("extractor_sources_hashed", rows=done)
    return done
