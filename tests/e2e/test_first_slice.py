"""The first slice: HTTP or Kafka command -> engram.events -> projector -> recall packet,
through the real broker, the real Postgres and the five services as processes."""

from __future__ import annotations

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope, EventEnvelope
from engram.kafka import partition_count
from services.recall.core import PREAMBLE
from tests.conftest import caller
from tests.support import eventually, new_command_id, read_replies, send_commands

pytestmark = pytest.mark.e2e


async def events_of(bootstrap: str, stream_id: str) -> list[EventEnvelope]:
    partitions = await partition_count(bootstrap, topics.EVENTS)
    tp = TopicPartition(topics.EVENTS, topics.partition_for(stream_id, partitions))
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        found: list[tuple[bytes, EventEnvelope]] = []
        while await consumer.position(tp) < end:
            for r in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                if r.key == stream_id.encode():
                    found.append((r.value or b"", EventEnvelope.model_validate_json(r.value)))
        return [env for _, env in found]
    finally:
        await consumer.stop()


async def test_http_remember_reaches_recall_through_kafka_and_postgres(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    text = f"The trip budget is 1500 EUR ({ana.org})."
    async with httpx.AsyncClient(timeout=30) as http:
        saved = await http.post(
            f"{services['command']}/v1/memories",
            headers=ana.headers,
            json={"content": text, "kind": "fact", "title": "Trip budget"},
        )
        assert saved.status_code == 201, saved.text
        item = saved.json()
        assert (item["revision"], item["status"], item["seq"]) == (1, "active", 1)

        stream = f"{ana.org}/member:ana"
        [event] = await eventually(
            lambda: events_of(stack_settings["KAFKA_BOOTSTRAP_SERVERS"], stream),
            what="the event on engram.events",
        )
        assert (event.type, event.seq, event.stream_id) == ("MemoryRemembered", 1, stream)
        assert "1500 EUR" not in event.model_dump_json()  # content travels sealed
        print(f"\nevent on {topics.EVENTS}: {event.event_id} seq={event.seq}")

        conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
        try:
            row = await eventually(
                lambda: conn.fetchrow(
                    "SELECT content, revision FROM memory.items WHERE item_id = $1", item["item_id"]
                ),
                what="the read-model row",
            )
        finally:
            await conn.close()
        assert (row["content"], row["revision"]) == (text, 1)

        packet = (
            await http.post(
                f"{services['recall']}/v1/recall",
                headers=ana.headers,
                json={"query": "how much is the trip budget?"},
            )
        ).json()
    assert [i["id"] for i in packet["items"]] == [item["item_id"]]
    assert packet["packet"].startswith(
        f"{PREAMBLE}\n\n[memory:{item['item_id']}@1; member:ana; fact]"
    )
    assert text in packet["packet"] and packet["context_id"]
    print(f"recall packet:\n{packet['packet']}")


async def test_a_command_published_on_kafka_takes_the_same_path(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    ana = caller()
    command_id = new_command_id()
    envelope = CommandEnvelope(
        command_id=command_id,
        type="RememberMemory",
        token=ana.token,
        stream_id=f"{ana.org}/shared",
        payload={"scope": "shared", "content": "Deploys happen on Tuesdays.", "kind": "decision"},
    )
    await send_commands(bootstrap, [envelope])
    [reply] = (await read_replies(bootstrap, {command_id}))[command_id]
    assert reply.ok and reply.result["revision"] == 1, reply

    async def recalled() -> list[str] | None:
        async with httpx.AsyncClient(timeout=10) as http:
            body = (
                await http.post(
                    f"{services['recall']}/v1/recall",
                    headers=ana.headers,
                    json={"query": "when do deploys happen"},
                )
            ).json()
        return [i["id"] for i in body["items"]] or None

    assert await eventually(recalled, what="recall of the Kafka command") == [
        reply.result["item_id"]
    ]

    # The same command again gets the first answer, and writes nothing new.
    await send_commands(bootstrap, [envelope])
    first, second = (await read_replies(bootstrap, {command_id}, per_command=2))[command_id]
    assert second.result["item_id"] == first.result["item_id"] == reply.result["item_id"]
    assert second.result["duplicate"] and not second.events
