"""``engram reindex``: the operator's re-embedding, with the real local model."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import asyncpg
import pytest
from typer.testing import CliRunner

from engram.cli import app
from engram.embeddings.providers import LOCAL_MODEL

pytestmark = pytest.mark.integration


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
            f"{org}-{key}", org, f"{org}/shared", status, f"memory {key}",
            json.dumps({"org": org}), now,
        )
    yield org
    sql(dsn, "DELETE FROM indexer.vectors WHERE org = $1", org)
    sql(dsn, "DELETE FROM indexer.reindex_jobs WHERE org = $1", org)
    sql(dsn, "DELETE FROM memory.items WHERE org = $1", org)


def test_reindex_embeds_an_orgs_active_items_once_and_says_when_embeddings_are_off(
    stack_settings: dict[str, str], org: str
) -> None:
    runner, local = CliRunner(), {"MEMORY_EMBEDDING_PROVIDER": "local"}

    first = runner.invoke(app, ["reindex", "--org", org], env=local)
    assert first.exit_code == 0, first.output
    assert f"{LOCAL_MODEL}: done, 2 embedded, 0 dropped, 2 to do" in first.stdout
    rows = sql(stack_settings["DATABASE_URL"],
               "SELECT item_id, model FROM indexer.vectors WHERE org = $1 ORDER BY 1", org)
    assert [(r["item_id"], r["model"]) for r in rows] == [
        (f"{org}-a", LOCAL_MODEL), (f"{org}-b", LOCAL_MODEL)]

    again = runner.invoke(app, ["reindex", "--org", org], env=local)
    assert again.exit_code == 0 and "every active item has a current vector" in again.stdout

    off = runner.invoke(app, ["reindex", "--org", org], env={"MEMORY_EMBEDDING_PROVIDER": "off"})
    assert off.exit_code == 0 and "embeddings are off" in off.stdout
