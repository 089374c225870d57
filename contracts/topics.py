"""Topic names, their settings, and the partition-key rule.

``engram.commands`` and ``engram.events`` are co-partitioned: the same partition
count and the same key (``stream_id``), so every command and event of one scope
meets in one partition and therefore one writer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from aiokafka.partitioner import murmur2

COMMANDS = "engram.commands"
EVENTS = "engram.events"
REPLIES = "engram.replies"
CONVERSATIONS = "engram.conversations"
DLQ_PREFIX = "engram.dlq."

SERVICES = ("command", "projector", "indexer", "extractor", "recall")
DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int  # -1 keeps records forever

    def config(self) -> dict[str, str]:
        return {"retention.ms": str(self.retention_ms), "cleanup.policy": "delete"}


def dead_letter_topic(service: str) -> str:
    return f"{DLQ_PREFIX}{service}"


def topic_specs(partitions: int) -> list[TopicSpec]:
    """Every topic Engram needs; created by the set-up step, never by auto-creation."""
    return [
        TopicSpec(COMMANDS, partitions, 7 * DAY_MS),
        # The log is the source of truth: replay starts at offset 0, forever.
        TopicSpec(EVENTS, partitions, -1),
        TopicSpec(REPLIES, partitions, 1 * DAY_MS),
        TopicSpec(CONVERSATIONS, partitions, 7 * DAY_MS),
        *(TopicSpec(dead_letter_topic(s), 1, -1) for s in SERVICES),
    ]


def stream_id(org: str, scope: str) -> str:
    """The unit of consistency: one org's one scope."""
    return f"{org}/{scope}"


@functools.lru_cache(maxsize=65_536)  # murmur2 is pure Python: cache per stream
def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner (murmur2, positive, modulo), as Java clients do it."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions
