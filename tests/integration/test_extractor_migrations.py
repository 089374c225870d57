"""The extractor's migrations 003 and 004 on real Postgres: turns handled per stream and
author, sources suppressed per stream and kept as keyed hashes, and the rows written
before keeping their meaning."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import asyncpg
import pytest

from engram.crypto import MasterKey
from engram.db import apply_migrations, migrate_shared
from services.extractor.adapters.sources import rehash_sources
from services.extractor.adapters.store import Q
from services.extractor.app import SQL_DIR
from services.extractor.core import author
from services.extractor.handlers import looked_up
from tests.support import shadow_database

pytestmark = pytest.mark.integration
MASTER = MasterKey(bytes(32))

ANA, BOB = author("ana"), author("bob")
PRIVATE, SHARED = "acme/member:ana", "acme/shared"


async def _before_003(dsn: str, tmp_path: Path) -> None:
    """The schema as the extractor had it before 003."""
    for name in ("001_extractor.sql", "002_shared_ai_budget.sql"):
        shutil.copy(SQL_DIR / name, tmp_path / name)
    await migrate_shared(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await apply_migrations(conn, "extractor", tmp_path)
        await conn.execute(
            "INSERT INTO extractor.turns (org, turn_id, method, proposals) "
            "VALUES ('acme', 'old-turn', 'rules', 1)"
        )
        await conn.execute(
            "INSERT INTO extractor.sources (org, source_id, item_id, suppressed) "
            "VALUES ('acme', 'msg-old', 'item-old', true)"
        )
    finally:
        await conn.close()


async def test_turns_and_sources_count_per_stream_and_author_and_old_rows_still_count(
    stack_settings: dict[str, str], tmp_path: Path
) -> None:
    name = f"extractor_migrations_{uuid.uuid4().hex[:8]}"
    async with shadow_database(stack_settings["DATABASE_URL"], name) as dsn:
        await _before_003(dsn, tmp_path)
        conn = await asyncpg.connect(dsn)
        try:
            assert await apply_migrations(conn, "extractor", SQL_DIR) == [
                "003_turns_per_author.sql",
                "004_hashed_sources.sql",
                "005_processed.sql",
                "006_processed_visible.sql",
                "007_processed_in_order.sql",
                "008_processed_own.sql",
            ]
            # The sources recorded before are hashed when the extractor starts (004).
            assert await rehash_sources(conn, MASTER) == 1
            assert await rehash_sources(conn, MASTER) == 0  # once
            assert await conn.fetchval(
                "SELECT source_id FROM extractor.sources WHERE item_id = 'item-old'"
            ) == MASTER.source_hash("acme", "msg-old")

            async def handled(turn_id: str, stream: str, who: str) -> str | None:
                method: str | None = await conn.fetchval(
                    Q["turn_method"], "acme", turn_id, stream, who
                )
                return method

            # A row from before names no stream or author: it still counts for every
            # one of the org's turns of that id (a replay proposes nothing twice).
            assert await handled("old-turn", PRIVATE, ANA) == "rules"
            assert await handled("old-turn", SHARED, BOB) == "rules"

            # Ana's turn-1 is not Bob's, nor Ana's turn-1 into another stream.
            await conn.execute(Q["turn_done"], "acme", "turn-1", SHARED, ANA, "ai", 2)
            assert await handled("turn-1", SHARED, ANA) == "ai"
            assert await handled("turn-1", SHARED, BOB) is None
            assert await handled("turn-1", PRIVATE, ANA) is None
            await conn.execute(Q["turn_done"], "acme", "turn-1", SHARED, BOB, "rules", 1)
            await conn.execute(Q["turn_done"], "acme", "turn-1", SHARED, ANA, "rules-fallback", 1)
            rows = await conn.fetch(
                "SELECT author, method FROM extractor.turns WHERE turn_id = 'turn-1' "
                "ORDER BY author"
            )
            assert [(r["author"], r["method"]) for r in rows] == [
                (ANA, "rules-fallback"),
                (BOB, "rules"),
            ]

            # Sources: a forgotten item suppresses its own stream's turns only; rows from
            # before (stream unknown) and forgotten items' own ids suppress org-wide.
            msg_7 = MASTER.source_hash("acme", "msg-7")
            await conn.execute(Q["record_sources"], "acme", [msg_7], "item-a", PRIVATE)
            await conn.execute(Q["suppress_sources"], "acme", "item-a")
            await conn.execute(Q["suppress_item_id"], "acme", "item-a")

            async def suppressed(source: str, stream: str) -> bool:
                ids = looked_up(MASTER, "acme", [source])  # as the extractor looks a turn up
                return bool(await conn.fetchval(Q["suppressed"], "acme", ids, stream))

            assert await suppressed("msg-7", PRIVATE)
            assert not await suppressed("msg-7", "acme/member:bob")
            assert await suppressed("item-a", "acme/member:bob")
            assert await suppressed("msg-old", "acme/member:bob")
        finally:
            await conn.close()
