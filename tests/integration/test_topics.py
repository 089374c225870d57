"""The set-up step brings an existing topic's settings to what contracts.topics says:
a topic made by an older version gets the new settings without being recreated."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from contracts import topics
from engram.kafka import ensure_topics, topic_configs
from engram.settings import CommonSettings

pytestmark = pytest.mark.integration


async def test_set_up_restores_a_topics_settings(stack_settings: dict[str, str]) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    [spec] = [s for s in topics.topic_specs(1) if s.name == topics.COMMANDS]
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        # As an older version made it: a week's retention and the broker's segment age.
        older = {"retention.ms": spec.config()["retention.ms"], "cleanup.policy": "delete"}
        await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topics.COMMANDS, older)]
        )
        old = (await topic_configs(admin, [topics.COMMANDS]))[topics.COMMANDS]
        assert old["segment.ms"] != str(topics.PRUNED_SEGMENT_MS)
        assert old["message.timestamp.type"] == "CreateTime"

        created = await ensure_topics(bootstrap, CommonSettings().partitions)

        assert created == []
        now = (await topic_configs(admin, [topics.COMMANDS]))[topics.COMMANDS]
        assert {k: now[k] for k in spec.config()} == spec.config()
        assert now["segment.ms"] == str(topics.PRUNED_SEGMENT_MS)
        assert now["message.timestamp.type"] == "LogAppendTime"
    finally:
        await admin.close()


async def test_the_broker_stamps_each_command_as_it_appends_it(
    stack_settings: dict[str, str],
) -> None:
    """A producer's own timestamp is replaced by the append time: the writer checks a
    command's token against it, and no producer can set it back."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        before = time.time()
        # A roll marker: a record every writer of the topic commits and otherwise ignores.
        sent = await producer.send_and_wait(
            topics.COMMANDS,
            b"",
            partition=0,
            timestamp_ms=int((before - 86_400) * 1000),
            headers=[(topics.ROLL_MARKER_HEADER, b"1")],
        )
    finally:
        await producer.stop()
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await reader.start()
    try:
        tp = TopicPartition(topics.COMMANDS, 0)
        reader.assign([tp])
        reader.seek(tp, sent.offset)
        record = await asyncio.wait_for(reader.getone(), 30)
    finally:
        await reader.stop()
    assert record.timestamp_type == topics.LOG_APPEND_TIME
    assert before - 5 <= record.timestamp / 1000 <= time.time() + 5
