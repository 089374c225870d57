"""The key store on real Postgres: a command's key that a writer discarded is not sealed
with again by a gateway in another process that still holds it (QA: the retry's text did
not open, and a changed body passed for a repeat)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from engram.crypto import KeyMissingError, MasterKey, load_master_key
from engram.keystore import KeyStore, shred
from engram.settings import CommonSettings

pytestmark = pytest.mark.integration


async def test_a_gateway_seals_a_retry_with_the_key_postgres_holds_now(
    pool: asyncpg.Pool,
) -> None:
    master = MasterKey(load_master_key(CommonSettings()))
    gateway, writer = KeyStore(pool, master), KeyStore(pool, master)
    key_id, org = f"ks-{uuid.uuid4()}", "ks-org"
    try:
        first = (await gateway.create_many([(key_id, org)]))[key_id]  # sealed, published
        assert (await writer.get_many({key_id}))[key_id] == first
        await writer.discard([key_id])  # the command made nothing: its key goes

        again = (await gateway.create_current([(key_id, org)]))[key_id]  # the retry
        assert again != first  # a new key, not the one this gateway held
        assert (await writer.create_many([(key_id, org)]))[key_id] == again  # the writer's
    finally:
        await pool.execute("DELETE FROM keystore.data_keys WHERE key_id = $1", key_id)


async def test_a_key_shredded_by_another_process_leaves_this_ones_cache_in_time(
    pool: asyncpg.Pool,
) -> None:
    """A security review: a process that had read a key (a replica, a writer that lost
    the partition) kept it in memory after a forget elsewhere, until its cache dropped it."""
    master = MasterKey(load_master_key(CommonSettings()))
    clock = {"now": 1000.0}
    replica = KeyStore(pool, master, cache_seconds=60.0, clock=lambda: clock["now"])
    key_id = f"ks-{uuid.uuid4()}"
    try:
        made = (await KeyStore(pool, master).create_many([(key_id, "ks-org")]))[key_id]
        assert (await replica.get_many({key_id}))[key_id] == made
        async with pool.acquire() as conn:
            await shred(conn, key_id)  # the forget, decided in another process
        clock["now"] += 30
        assert key_id in await replica.get_many({key_id})  # within the minute, cached
        clock["now"] += 31
        assert await replica.get_many({key_id}) == {}  # then read again: gone
        with pytest.raises(KeyMissingError):
            await replica.get(key_id)
    finally:
        await pool.execute("DELETE FROM keystore.data_keys WHERE key_id = $1", key_id)
