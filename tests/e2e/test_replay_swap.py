"""`engram replay --swap` (DESIGN §8): a damaged read model is rebuilt from the log into a
shadow database and swapped in atomically, while the projector keeps running and commands
keep arriving; nothing written meanwhile is lost."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaProducer
from typer.testing import CliRunner

from contracts import topics
from contracts.envelope import Actor, EventEnvelope
from engram.cli import app
from engram.crypto import MasterKey, load_master_key
from engram.kafka import partition_count
from engram.settings import CommonSettings
from services.projector.replay import replay
from services.projector.swap import SwapError, swap
from tests.conftest import caller
from tests.support import eventually, shadow_database

pytestmark = pytest.mark.e2e


async def test_a_damaged_read_model_is_rebuilt_and_swapped_in_while_writes_go_on(
    services: dict[str, str],
    stack_settings: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ana, common = caller(), CommonSettings()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a dump would go
    async with httpx.AsyncClient(timeout=10) as http:

        async def remember(text: str) -> str:
            r = await http.post(
                f"{services['command']}/v1/memories", headers=ana.headers, json={"content": text}
            )
            assert r.status_code == 201, r.text
            return str(r.json()["item_id"])

        async def content(item_id: str) -> Any:
            r = await http.get(f"{services['recall']}/v1/memories/{item_id}", headers=ana.headers)
            return r.json().get("content") if r.status_code == 200 else None

        kept = await remember("The office closes at 6 pm on Fridays.")
        other = await remember("Parking passes are renewed in March.")
        await http.post(
            f"{services['command']}/v1/memories/{kept}/link",
            headers=ana.headers,
            json={"target_id": other},
        )
        assert await eventually(lambda: content(other), what="the second memory") is not None

        # Damage the live read model as a faulty projector release might.
        live = await asyncpg.connect(stack_settings["DATABASE_URL"])
        try:
            await live.execute(
                "UPDATE memory.items SET content = 'garbled' WHERE item_id = $1", kept
            )
            await live.execute("DELETE FROM memory.items WHERE item_id = $1", other)
            await live.execute("DELETE FROM memory.links WHERE source_id = $1", kept)
        finally:
            await live.close()
        assert await content(kept) == "garbled" and await content(other) is None

        # The swap runs while this caller keeps saving (the projector is not stopped).
        name = f"engram_swap_{ana.org[4:]}"
        async with shadow_database(common.database_url, name):  # dropped afterwards
            swap = asyncio.create_task(
                asyncio.to_thread(CliRunner().invoke, app, ["replay", "--into", name, "--swap"])
            )
            during: list[str] = []
            while not swap.done():
                during.append(await remember(f"Saved during the swap, number {len(during)}."))
                await asyncio.sleep(0.05)  # a steady trickle, not a flood
            result = await swap
        assert result.exit_code == 0, result.output
        said = " ".join(result.output.split())  # as the console wrapped it
        assert "swapped" in said and "live checksum now" in said, said
        # The rows went from database to database through memory: no file of memories'
        # text was left behind for a killed swap to strand.
        assert list(tmp_path.iterdir()) == []

        assert await content(kept) == "The office closes at 6 pm on Fridays."
        assert await content(other) == "Parking passes are renewed in March."
        links = await http.get(
            f"{services['recall']}/v1/memories/{kept}/links", headers=ana.headers
        )
        assert [x["target_id"] for x in links.json()["links"]] == [other]
        for item_id in during:  # whatever was written during the swap is there after it
            assert await eventually(partial(content, item_id), what=f"{item_id}")

    # And the live read model now equals a fresh replay of the log.
    async with shadow_database(common.database_url, f"engram_check_{ana.org[4:]}") as shadow:
        report = await replay(
            common.database_url,
            shadow,
            common.kafka_bootstrap_servers,
            MasterKey(load_master_key(common)),
            org_pattern=ana.org,
        )
    assert report.matches


def test_a_swap_of_one_orgs_replay_is_refused(stack_settings: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["replay", "--org", "acme", "--swap"])
    assert result.exit_code == 2
    assert "--swap needs the whole log" in result.output
    empty = CliRunner().invoke(app, ["replay", "--org", ""])  # QA: replayed nothing, "match"
    assert empty.exit_code == 2 and "--org" in empty.output


async def test_a_shadow_of_one_org_is_never_swapped_in(stack_settings: dict[str, str]) -> None:
    common, org = CommonSettings(), caller().org
    master = MasterKey(load_master_key(common))
    async with shadow_database(common.database_url, f"engram_part_{org[4:]}") as shadow:
        await replay(
            common.database_url, shadow, common.kafka_bootstrap_servers, master, org_pattern=org
        )
        with pytest.raises(SwapError, match="no whole replay"):
            await swap(common.database_url, shadow, common.kafka_bootstrap_servers, master)


async def test_a_replay_skips_and_reports_an_event_postgres_refuses_as_the_projector_does(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """QA: an event that decodes but holds a value Postgres refuses (a time before year 1 in
    UTC) is dead-lettered by the live projector; a replay died on it with DataError, and
    counted poison among the events it replayed."""
    ana, common = caller(), CommonSettings()
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            f"{services['command']}/v1/memories",
            headers=ana.headers,
            json={"content": "The gate code changes monthly."},
        )
        assert r.status_code == 201, r.text
        saved = r.json()
    stream_id = saved["stream_id"]
    forged = EventEnvelope(
        event_id=str(uuid.uuid4()),
        type="MemoryPinned",
        stream_id=stream_id,
        seq=2,
        command_id=str(uuid.uuid4()),
        actor=Actor(org=ana.org, member=ana.member),
        occurred_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        payload={"item_id": saved["item_id"], "revision": 2, "pinned": True},
    )
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    partitions = await partition_count(bootstrap, topics.EVENTS)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            topics.EVENTS,
            forged.model_dump_json().encode(),
            key=stream_id.encode(),
            partition=topics.partition_for(stream_id, partitions),
        )
    finally:
        await producer.stop()

    name = f"engram_unstorable_{ana.org[4:]}"
    async with shadow_database(common.database_url, name) as shadow:
        report = await replay(
            common.database_url,
            shadow,
            bootstrap,
            MasterKey(load_master_key(common)),
            org_pattern=ana.org,
        )
    assert report.events == 1, report  # the save; the forged pin is skipped, not counted
    assert len(report.poison) == 1 and "not storable" in report.poison[0], report.poison
    assert report.matches, "the live projector let the same event go"
