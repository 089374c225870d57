"""Deletes from engram.commands what the command service has already decided.

A Kafka caller's command may carry its text in plain, and Kafka's log is immutable: a
forgotten memory's text would stay in the topic's segment files until retention (a week)
removed them. Once a command is decided its events hold the text sealed, so the record
is of no more use: every pass of the pruner, per partition,

1. advances the partition's log start to the group's committed offset (DeleteRecords);
   the broker deletes every segment wholly below it at its next retention check
   (``log.retention.check.interval.ms``) and the file a second later
   (the topic's ``file.delete.delay.ms``);
2. appends a roll marker (``contracts.topics.ROLL_MARKER_HEADER``) when commands were
   decided since the last one. A segment is deleted only once it is closed, and the
   broker closes the active one only when a record arrives after ``segment.ms``; the
   marker is that record. The writer commits its offset and does nothing else with it.

So a decided command is off the disk within about two passes plus the broker's check;
an undecided one is never deleted. Only the command service's own group is waited for:
the topic has no other reader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.errors import KafkaError

from contracts import topics
from engram.kafka import partition_count
from engram.logging import get_logger

log = get_logger(__name__)


class CommandLogPruner:
    def __init__(self, bootstrap: str, group_id: str) -> None:
        self._bootstrap = bootstrap
        self._group_id = group_id
        self._admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        self._pruned: dict[int, int] = {}  # partition -> log start this pruner set
        self._marked: dict[int, int] = {}  # partition -> offset after its last marker

    async def start(self) -> None:
        await self._admin.start()
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()
        await self._admin.close()

    async def all_partitions(self) -> list[int]:
        return list(range(await partition_count(self._bootstrap, topics.COMMANDS)))

    async def prune_once(self, partitions: Iterable[int]) -> dict[int, int]:
        """One pass over these partitions; returns each one's log start as set now."""
        tps = [TopicPartition(topics.COMMANDS, p) for p in partitions]
        if not tps:
            return {}
        committed = await self._admin.list_consumer_group_offsets(self._group_id, partitions=tps)
        decided = {tp.partition: c.offset for tp, c in committed.items() if c.offset >= 0}
        if deletable := {
            TopicPartition(topics.COMMANDS, p): RecordsToDelete(offset)
            for p, offset in decided.items()
            if offset > self._pruned.get(p, 0)
        }:
            started = await self._admin.delete_records(deletable)
            for tp, low in started.items():
                self._pruned[tp.partition] = low
        for p, offset in decided.items():
            if offset > self._marked.get(p, 0):
                sent = await self._producer.send_and_wait(
                    topics.COMMANDS,
                    b"",
                    partition=p,
                    headers=[(topics.ROLL_MARKER_HEADER, b"1")],
                )
                self._marked[p] = sent.offset + 1
        return {p: self._pruned[p] for p in decided if p in self._pruned}

    async def run(self, period: float, owned: Callable[[], Iterable[int]]) -> None:
        """A pass every ``period`` seconds over the partitions this instance writes. A
        failed pass is logged and the next one tries again: nothing is deleted that the
        group has not committed, so a missed pass only delays the deletion."""
        while True:
            await asyncio.sleep(period)
            try:
                if pruned := await self.prune_once(sorted(owned())):
                    log.debug("commands_pruned", log_start=pruned)
            except KafkaError as exc:
                log.warning("commands_prune_failed", error=str(exc))
