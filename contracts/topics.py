"""Topic names, their settings, and the partition-key rule.

``engram.commands`` and ``engram.events`` are co-partitioned: the same partition
count and the same key (``stream_id``), so every command and event of one scope
meets in one partition and therefore one writer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka.partitioner import murmur2

COMMANDS = "engram.commands"
EVENTS = "engram.events"
REPLIES = "engram.replies"
CONVERSATIONS = "engram.conversations"
DLQ_PREFIX = "engram.dlq."

# A record on engram.commands or engram.conversations with this header (and no value) is
# their reader's own roll marker: it closes the partition's segment so that the records
# before it can be deleted from disk (engram/log_pruner.py). It is no command and no turn:
# it gets no reply, is never dead-lettered, and its offset is committed like a record's.
ROLL_MARKER_HEADER = "engram-roll"
# How old a segment of those two topics may grow before the next record starts a new one;
# their pruners roll and delete at this pace.
PRUNED_SEGMENT_MS = 60_000
# Kafka's id of a record timestamp that the broker set as it appended the record (the
# topic's message.timestamp.type=LogAppendTime), which no producer can set back.
LOG_APPEND_TIME = 1

SERVICES = ("command", "projector", "indexer", "extractor", "recall")
DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int  # -1 keeps records forever
    extra: tuple[tuple[str, str], ...] = ()  # more topic settings, as the broker names them

    def config(self) -> dict[str, str]:
        return {
            "retention.ms": str(self.retention_ms),
            "cleanup.policy": "delete",
            **dict(self.extra),
        }


def is_roll_marker(headers: Iterable[tuple[str, bytes]] | None, value: bytes | None) -> bool:
    """Whether a record of engram.commands or engram.conversations is a roll marker: the
    header and no value (a record with a value is a command, a turn, or poison, whatever
    headers its producer set)."""
    return not value and any(key == ROLL_MARKER_HEADER for key, _ in headers or ())


def dead_letter_topic(service: str) -> str:
    return f"{DLQ_PREFIX}{service}"


def topic_specs(partitions: int) -> list[TopicSpec]:
    """Every topic Engram needs; created by the set-up step, never by auto-creation."""
    return [
        # Kafka callers' commands may carry text in plain. Retention keeps what is not yet
        # decided through a long outage; what is decided the command service deletes
        # (DeleteRecords up to its committed offset, segments rolled every minute, files
        # removed a second after), so forgotten text does not wait out the week on disk.
        # The broker stamps each command as it appends it: the writer checks a command's
        # token against that time, so one that waited out an outage is still decided.
        TopicSpec(
            COMMANDS,
            partitions,
            7 * DAY_MS,
            (
                ("segment.ms", str(PRUNED_SEGMENT_MS)),
                ("file.delete.delay.ms", "1000"),
                ("message.timestamp.type", "LogAppendTime"),
            ),
        ),
        # The log is the source of truth: replay starts at offset 0, forever.
        TopicSpec(EVENTS, partitions, -1),
        TopicSpec(REPLIES, partitions, 1 * DAY_MS),
        # A turn may carry a person's words too: once the extractor has handled it, it
        # deletes it as the command service deletes a decided command (the same pruner).
        TopicSpec(
            CONVERSATIONS,
            partitions,
            7 * DAY_MS,
            (
                ("segment.ms", str(PRUNED_SEGMENT_MS)),
                ("file.delete.delay.ms", "1000"),
                # The broker's time rolls its segments: a producer's clock (a turn's
                # CreateTime) could hold one open.
                ("message.timestamp.type", "LogAppendTime"),
            ),
        ),
        *(TopicSpec(dead_letter_topic(s), 1, -1) for s in SERVICES),
    ]


def stream_id(org: str, scope: str) -> str:
    """The unit of consistency: one org's one scope."""
    return f"{org}/{scope}"


@functools.lru_cache(maxsize=65_536)  # murmur2 is pure Python: cache per stream
def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner (murmur2, positive, modulo), as Java clients do it."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions
