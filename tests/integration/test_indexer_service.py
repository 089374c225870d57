"""``python -m services.indexer`` as a process: migrations at start, /health with lag,
JSON logs, offsets stored; with embeddings off it writes no vectors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from contracts.events import MemoryPinned
from tests.integration.test_indexer_pipeline import Stream, keys, pool, stream  # noqa: F401

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0


@pytest.fixture
def service(
    stream: Stream,  # noqa: F811 (the fixture imported above)
    stack_settings: dict[str, str],
    tmp_path: Path,
    unused_port: int,
) -> Iterator[tuple[str, Path]]:
    port, log = unused_port, tmp_path / "indexer.log"
    env = {
        **os.environ,
        **stack_settings,
        "ENGRAM_INDEXER_PORT": str(port),
        "ENGRAM_INDEXER_TOPIC": stream.topic,
        "ENGRAM_INDEXER_GROUP_ID": f"test-{stream.org}",
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


async def test_the_service_starts_reports_lag_and_consumes_with_embeddings_off(
    service: tuple[str, Path],
    stream: Stream,  # noqa: F811
    pool: asyncpg.Pool,  # noqa: F811
) -> None:
    url, log = service
    body = until_health(url)
    assert (body["provider"], body["model"], body["kafka"]) == ("off", None, True)
    await stream.remember(f"{stream.org}-a", "The trip budget is 1500 EUR.")
    last = await stream.publish_in_transaction(
        MemoryPinned(item_id=f"{stream.org}-a", revision=2, pinned=True)
    )
    # The commit marker after the last record takes an offset of its own: no lag for it.
    done = until_health(url, lambda b: b["positions"] == {"0": last + 1} and b["lag_total"] == 0)
    assert done["lag"] == {"0": 0}
    assert (
        await pool.fetchval("SELECT count(*) FROM indexer.vectors WHERE org = $1", stream.org) == 0
    )
    metrics = httpx.get(f"{url}/metrics", timeout=5).text
    assert 'engram_indexer_lag{partition="0"} 0.0' in metrics
    started = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(e.get("event") == "indexer_started" and e["service"] == "indexer" for e in started)
