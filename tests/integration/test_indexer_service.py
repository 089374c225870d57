"""``python -m services.indexer`` as a process: migrations at start, /health with lag,
JSON logs, offsets stored; with embeddings off it writes no vectors, and reads the log only
once a vector is stored (idle.py): then it folds everything since, a forget voiding its
item's vector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from contracts.events import MemoryForgotten, MemoryPinned
from engram.db import migrate, migrate_shared
from services.indexer.app import SQL_DIR
from tests.integration.test_indexer_pipeline import Stream, keys, pool, stream  # noqa: F401
from tests.support import shadow_database

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


@pytest.fixture
async def database(stack_settings: dict[str, str], stream: Stream) -> AsyncIterator[str]:  # noqa: F811
    """A database of the indexer's own, migrated: no other test's vector in it, so that an
    indexer without a model has nothing to index there until the test stores one."""
    async with shadow_database(stack_settings["DATABASE_URL"], f"indexer_{stream.org[4:]}") as dsn:
        await migrate_shared(dsn)
        await migrate(dsn, "indexer", SQL_DIR)
        yield dsn


@pytest.fixture
def service(
    stream: Stream,  # noqa: F811 (the fixture imported above)
    database: str,
    stack_settings: dict[str, str],
    tmp_path: Path,
    unused_port: int,
) -> Iterator[tuple[str, Path]]:
    port, log = unused_port, tmp_path / "indexer.log"
    env = {
        **os.environ,
        **stack_settings,
        "DATABASE_URL": database,
        "ENGRAM_INDEXER_PORT": str(port),
        "ENGRAM_INDEXER_TOPIC": stream.topic,
        "ENGRAM_INDEXER_GROUP_ID": f"test-{stream.org}",
        "ENGRAM_INDEXER_IDLE_CHECK_S": "0.2",
        "MEMORY_EMBEDDING_PROVIDER": "off",
    }
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.indexer"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(timeout=30)


Health = dict[str, Any]


def health(url: str) -> Health | None:
    try:
        response = httpx.get(f"{url}/health", timeout=5)
    except httpx.TransportError:
        return None
    body: Health = response.json()
    return body if response.status_code == 200 else None


def until_health(url: str, check: Callable[[Health], bool] = lambda _: True) -> Health:
    deadline = time.monotonic() + DEADLINE
    while True:
        body = health(url)
        if body is not None and check(body):
            return body
        assert time.monotonic() < deadline, f"no healthy answer from {url}: {body}"
        time.sleep(0.2)


async def test_with_embeddings_off_it_is_idle_until_a_vector_is_stored_then_catches_up(
    service: tuple[str, Path],
    stream: Stream,  # noqa: F811
    database: str,
) -> None:
    url, log = service
    body = until_health(url)
    assert (body["provider"], body["model"], body["idle"], body["database"]) == (
        "off",
        None,
        True,
        True,
    )
    kept, gone = f"{stream.org}-a", f"{stream.org}-b"
    await stream.remember(kept, "The trip budget is 1500 EUR.")
    await stream.remember(gone, "The door code is 4711.")
    await stream.publish(MemoryPinned(item_id=kept, revision=2, pinned=True))
    await stream.publish(MemoryForgotten(item_id=gone, revisions=1))
    db = await asyncpg.connect(database)
    try:
        assert until_health(url)["idle"] is True  # the events wait in the log
        assert "engram_indexer_idle 1.0" in httpx.get(f"{url}/metrics", timeout=5).text
        assert await db.fetchval("SELECT count(*) FROM indexer.items") == 0
        assert await db.fetchval("SELECT count(*) FROM indexer.offsets") == 0
        # As `engram reindex` run with a model would, before the pin and the forget.
        await db.executemany(
            "INSERT INTO indexer.vectors (item_id, model, revision, org, scope, embedding) "
            "VALUES ($1, 'test-model', 1, $2, 'shared', '[1, 0, 0]')",
            [(kept, stream.org), (gone, stream.org)],
        )
        last = await stream.publish_in_transaction(
            MemoryPinned(item_id=kept, revision=3, pinned=False)
        )
        # The commit marker after the last record takes an offset of its own: no lag for it.
        done = until_health(
            url, lambda b: b["positions"] == {"0": last + 1} and b.get("lag_total") == 0
        )
        assert ("idle" not in done, done["kafka"], done["lag"]) == (True, True, {"0": 0})
        vectors = await db.fetch("SELECT item_id, revision FROM indexer.vectors")
        assert [tuple(v) for v in vectors] == [(kept, 3)]  # the forgotten one's is void
        views = {
            r["item_id"]: (r["status"], r["revision"], r["content"] is None)
            for r in await db.fetch("SELECT item_id, status, revision, content FROM indexer.items")
        }
        assert views == {kept: ("active", 3, False), gone: ("forgotten", 1, True)}
    finally:
        await db.close()
    metrics = httpx.get(f"{url}/metrics", timeout=5).text
    assert 'engram_indexer_lag{partition="0"} 0.0' in metrics
    assert "engram_indexer_idle 0.0" in metrics
    logged = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert [e["event"] for e in logged if e["event"] in ("indexer_idle", "indexer_woken")] == [
        "indexer_idle",
        "indexer_woken",
    ]
    assert any(e["event"] == "indexer_started" and e["service"] == "indexer" for e in logged)
