"""The Postgres key store: wrapped data keys, fetched with a small cache."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

import asyncpg

from engram.crypto import KeyMissingError, MasterKey

ENSURE = """
WITH made AS (
    INSERT INTO keystore.data_keys (key_id, org, wrapped)
    SELECT k, o, w FROM unnest($1::text[], $2::text[], $3::bytea[]) AS t(k, o, w)
    WHERE NOT EXISTS (SELECT 1 FROM keystore.shredded s WHERE s.key_id = t.k)
    ON CONFLICT (key_id) DO NOTHING
    RETURNING key_id, wrapped)
SELECT key_id, wrapped FROM made
UNION ALL
SELECT key_id, wrapped FROM keystore.data_keys WHERE key_id = ANY($4)
"""


# How long a process keeps a data key it read: a forget deletes the key from Postgres and
# from the caches of the processes that decide and apply it; any other process that held
# it (a replica, a writer that lost the partition) forgets it within this (a security
# review: until its cache happened to drop it).
CACHE_SECONDS = 60.0


class KeyStore:
    def __init__(
        self,
        pool: asyncpg.Pool,
        master: MasterKey,
        cache_size: int = 50_000,
        cache_seconds: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._master = master
        self._cache: OrderedDict[str, tuple[bytes, float]] = OrderedDict()  # key, read at
        self._cache_size = cache_size
        self._cache_seconds = cache_seconds
        self._clock = clock

    @property
    def master(self) -> MasterKey:
        return self._master

    async def ensure(self, create: list[tuple[str, str]], fetch: set[str]) -> dict[str, bytes]:
        """Create keys for ``(key_id, org)`` pairs and fetch others, in one round trip.

        An existing key is reused (a replayed command must seal with the first key), and a
        shredded id never gets a new one: its old ciphertext must stay unreadable."""
        wanted = {k for k, _ in create} | set(fetch)
        now = self._clock()  # once a call: it is on every batch's path
        missing = {k for k in wanted if self._cached(k, now) is None}
        if missing:
            made = {k: (org, self._master.new_data_key()) for k, org in create if k in missing}
            wrapped = {k: self._master.wrap(k, key) for k, (_, key) in made.items()}
            async with self._pool.acquire() as conn:
                rows = await conn.fetch(
                    ENSURE,
                    list(made),
                    [org for org, _ in made.values()],
                    list(wrapped.values()),
                    list(missing),
                )
            for row in rows:
                key_id, stored = row["key_id"], row["wrapped"]
                # A key this call made is known as it is: unwrapping it again cost 2 µs.
                ours = stored == wrapped.get(key_id)
                self._remember(
                    key_id, made[key_id][1] if ours else self._master.unwrap(key_id, stored)
                )
        return {k: key for k in wanted if (key := self._cached(k, now)) is not None}

    async def create_many(self, keys: list[tuple[str, str]]) -> dict[str, bytes]:
        return await self.ensure(keys, set())

    async def create_current(self, keys: list[tuple[str, str]]) -> dict[str, bytes]:
        """As ``create_many``, but from Postgres even for keys this instance holds: another
        process may have deleted one since (a writer discards the key of a command that
        made nothing), and text sealed with the old one would not open (QA: a gateway
        re-sealed a retry with it)."""
        for key_id, _ in keys:
            self.forget_cached(key_id)
        return await self.ensure(keys, set())

    async def get_many(self, key_ids: set[str]) -> dict[str, bytes]:
        """Fetch many keys in one round trip; missing (shredded) ones are left out."""
        return await self.ensure([], key_ids)

    async def get(self, key_id: str) -> bytes:
        if (cached := self._cached(key_id, self._clock())) is not None:
            self._cache.move_to_end(key_id)
            return cached
        async with self._pool.acquire() as conn:
            wrapped = await conn.fetchval(
                "SELECT wrapped FROM keystore.data_keys WHERE key_id = $1", key_id
            )
        if wrapped is None:
            raise KeyMissingError(key_id)
        key = self._master.unwrap(key_id, wrapped)
        self._remember(key_id, key)
        return key

    async def discard(self, key_ids: list[str]) -> None:
        """Drop keys made for commands that were rejected (nothing was sealed for good)."""
        async with self._pool.acquire() as conn:
            await conn.execute("DELETE FROM keystore.data_keys WHERE key_id = ANY($1)", key_ids)
        for key_id in key_ids:
            self.forget_cached(key_id)

    def forget_cached(self, key_id: str) -> None:
        self._cache.pop(key_id, None)

    def _cached(self, key_id: str, now: float) -> bytes | None:
        """The key this process read within ``cache_seconds`` of ``now``, else None (and
        dropped)."""
        entry = self._cache.get(key_id)
        if entry is None:
            return None
        key, read_at = entry
        if now - read_at > self._cache_seconds:
            del self._cache[key_id]
            return None
        return key

    def _remember(self, key_id: str, key: bytes) -> None:
        self._cache[key_id] = (key, self._clock())
        self._cache.move_to_end(key_id)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


async def shred(conn: asyncpg.Connection, key_id: str) -> bool:
    """Delete a data key for good (in the caller's transaction); True if one existed."""
    org = await conn.fetchval(
        "DELETE FROM keystore.data_keys WHERE key_id = $1 RETURNING org", key_id
    )
    if org is not None:
        await conn.execute(
            "INSERT INTO keystore.shredded (key_id, org) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            key_id,
            org,
        )
    return org is not None
