"""``engram reindex``: the operator's re-embedding, with the real local model.

The command runs as its own process, as an operator runs it (it configures logging
for the whole process, which must not leak into the other tests).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from engram.embeddings.providers import LOCAL_MODEL

pytestmark = pytest.mark.integration
ENGRAM = Path(sys.executable).parent / "engram"


async def _sql(dsn: str, statement: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(statement, *args))
    finally:
        await conn.close()


def sql(dsn: str, statement: str, *args: object) -> list[asyncpg.Record]:
    return asyncio.run(_sql(dsn, statement, *args))


@pytest.fixture
def org(stack_settings: dict[str, str]) -> Iterator[str]:
    """An org of its own with two active items and a disabled one, removed afterwards."""
    org, dsn, now = f"cli-{uuid.uuid4().hex[:8]}", stack_settings["DATABASE_URL"], datetime.now(UTC)
    for key, status in (("a", "active"), ("b", "active"), ("off", "disabled")):
        sql(
            dsn,
            "INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content, "
            "revision, created_by, created_at, updated_at) "
            "VALUES ($1, $2, 'shared', $3, 'fact', $4, $5, 1, $6, $7, $7)",
            f"{org}-{key}",
            org,
            f"{org}/shared",
            status,
            f"memory {key}",
            json.dumps({"org": org}),
            now,
        )
    yield org
    sql(dsn, "DELETE FROM indexer.vectors WHERE org = $1", org)
    sql(dsn, "DELETE FROM indexer.reindex_jobs WHERE org = $1", org)
    sql(dsn, "DELETE FROM memory.items WHERE org = $1", org)


def engram(*args: str, provider: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMORY_EMBEDDING_PROVIDER": provider}
    return subprocess.run(
        [str(ENGRAM), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_reindex_embeds_an_orgs_active_items_once_and_says_when_embeddings_are_off(
    stack_settings: dict[str, str], org: str
) -> None:
    first = engram("reindex", "--org", org, provider="local")
    assert first.returncode == 0, first.stderr
    assert f"{LOCAL_MODEL}: done, 2 embedded, 0 dropped of the 2 lacking one" in first.stdout
    rows = sql(
        stack_settings["DATABASE_URL"],
        "SELECT item_id, model FROM indexer.vectors WHERE org = $1 ORDER BY 1",
        org,
    )
    assert [(r["item_id"], r["model"]) for r in rows] == [
        (f"{org}-a", LOCAL_MODEL),
        (f"{org}-b", LOCAL_MODEL),
    ]

    again = engram("reindex", "--org", org, provider="local")
    assert again.returncode == 0 and "every active item has a current vector" in again.stdout

    off = engram("reindex", "--org", org, provider="off")
    assert off.returncode == 0 and "embeddings are off" in off.stdout
