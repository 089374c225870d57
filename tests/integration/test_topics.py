"""The set-up step brings an existing topic's settings to what contracts.topics says:
a topic made by an older version gets the new settings without being recreated."""

from __future__ import annotations

import pytest
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
            [ConfigResource(ConfigResourceType.TOPIC, topics.COMMANDS, older)])
        old = (await topic_configs(admin, [topics.COMMANDS]))[topics.COMMANDS]
        assert old["segment.ms"] != str(topics.COMMANDS_SEGMENT_MS)

        created = await ensure_topics(bootstrap, CommonSettings().partitions)

        assert created == []
        now = (await topic_configs(admin, [topics.COMMANDS]))[topics.COMMANDS]
        assert {k: now[k] for k in spec.config()} == spec.config()
        assert now["segment.ms"] == str(topics.COMMANDS_SEGMENT_MS)
    finally:
        await admin.close()
