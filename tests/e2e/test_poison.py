"""Nothing is dropped silently: poison records land on the dead-letter topics."""

from __future__ import annotations

import json
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from contracts import topics
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def dead_letters(bootstrap: str, service: str, marker: str) -> list[dict[str, object]]:
    topic = topics.dead_letter_topic(service)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed")
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        found = []
        while await consumer.position(tp) < end:
            for r in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                if marker.encode() in (r.value or b""):
                    found.append(json.loads(r.value or b"{}"))
        return found
    finally:
        await consumer.stop()


async def produce(bootstrap: str, topic: str, key: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=key.encode())
    finally:
        await producer.stop()


@pytest.mark.parametrize(("topic", "service"), [(topics.COMMANDS, "command"),
                                                (topics.EVENTS, "projector")])
async def test_undecodable_records_go_to_the_dead_letter_topic(
        services: dict[str, str], stack_settings: dict[str, str], topic: str,
        service: str) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    marker = f"poison-{uuid.uuid4().hex}"
    await produce(bootstrap, topic, f"poison/{marker}", f'{{"not": "{marker}"'.encode())
    [letter] = await eventually(lambda: dead_letters(bootstrap, service, marker),
                                what=f"{marker} on {topics.dead_letter_topic(service)}")
    assert letter["topic"] == topic and letter["service"] == service
    assert "undecodable" in str(letter["error"]) and marker in str(letter["value"])
