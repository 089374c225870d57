"""The key store on real Postgres: a command's key that a writer discarded is not sealed
with again by a gateway in another process that still holds it (QA: the retry's text did
not open, and a changed body passed for a repeat)."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from engram.crypto import MasterKey, load_master_key
from engram.keystore import KeyStore
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
