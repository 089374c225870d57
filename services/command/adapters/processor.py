"""The command consumer: one ``PartitionWriter`` per assigned partition.

An assigned partition stays paused until its writer has restored its state, so no
command is read before that; the restore runs beside the consumer, not inside the
rebalance callback (no heartbeat is sent during the callback, and a restore longer
than the session timeout would cost the group membership, again and again).
Revocation waits for the batch in flight (the lock) so two owners never write one
partition.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import asyncpg
from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from contracts import topics
from engram.kafka import consumer
from engram.keystore import KeyStore, shred
from engram.logging import get_logger
from services.command.adapters.writer import Cleanup, PartitionWriter

log = get_logger(__name__)


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, processor: CommandProcessor) -> None:
        self._p = processor

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        async with self._p.lock:
            for tp in revoked:
                starting = self._p.starting.pop(tp.partition, None)
                if starting:
                    starting.cancel()
                    with contextlib.suppress(BaseException):
                        await starting
                writer = self._p.writers.pop(tp.partition, None)
                if writer:
                    await writer.stop()
            log.info("partitions_revoked", partitions=[tp.partition for tp in revoked])

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        async with self._p.lock:
            fresh = [
                tp
                for tp in assigned
                if tp.partition not in self._p.writers and tp.partition not in self._p.starting
            ]
            self._p.pause(fresh)
            for tp in fresh:
                self._p.starting[tp.partition] = asyncio.create_task(self._p.start_writer(tp))
            log.info("partitions_assigned", partitions=[tp.partition for tp in assigned])


class CommandProcessor:
    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        pool: asyncpg.Pool,
        keystore: KeyStore,
        make_writer: Callable[[int], PartitionWriter],
        max_batch: int,
    ) -> None:
        self.lock = asyncio.Lock()
        self.writers: dict[int, PartitionWriter] = {}
        self.starting: dict[int, asyncio.Task[None]] = {}  # writers still restoring
        self.make_writer = make_writer
        self._pool = pool
        self._keys = keystore
        self._max_batch = max_batch
        self._consumer = consumer(bootstrap, group_id=group_id, max_poll_records=max_batch)
        self.processed = 0

    async def run(self) -> None:
        self._consumer.subscribe([topics.COMMANDS], listener=_Rebalance(self))
        await self._consumer.start()
        try:
            while True:
                batches = await self._consumer.getmany(timeout_ms=200, max_records=self._max_batch)
                if batches:
                    await self._process(batches)
                for task in list(self.starting.values()):
                    if task.done() and not task.cancelled() and task.exception():
                        raise RuntimeError("a partition's writer failed to start") from (
                            task.exception()
                        )
        finally:
            for task in self.starting.values():
                task.cancel()
            await self._consumer.stop()
            for writer in self.writers.values():
                await writer.stop()

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._consumer.pause(*partitions)

    async def start_writer(self, tp: TopicPartition) -> None:
        """Restore the partition's writer, then let its commands flow."""
        writer = self.make_writer(tp.partition)
        try:
            await writer.start()
        except BaseException:
            await writer.stop()
            raise
        async with self.lock:
            self.starting.pop(tp.partition, None)
            if tp in self._consumer.assignment():
                self.writers[tp.partition] = writer
                self._consumer.resume(tp)
                log.info("partition_ready", partition=tp.partition)
            else:
                await writer.stop()

    async def _process(self, batches: dict[TopicPartition, list]) -> None:
        async with self.lock:
            results = await asyncio.gather(
                *(self._process_partition(tp, records) for tp, records in batches.items())
            )
        for cleanup in results:
            await self._clean(cleanup)

    async def _process_partition(self, tp: TopicPartition, records: list) -> Cleanup:
        writer = self.writers.get(tp.partition)
        if writer is None:
            # Fetched before the assignment callback made its writer (or after a revoke):
            # never skip commands; fetch them again once a writer owns the partition.
            if tp in self._consumer.assignment():
                self._consumer.seek(tp, records[0].offset)
            return Cleanup()
        try:
            cleanup = await writer.process(records)
        except KafkaError as exc:
            # The transaction aborted: our in-memory state may be ahead of the log.
            log.error("transaction_failed", partition=tp.partition, error=str(exc))
            await self._recover(tp, writer)
            return Cleanup()
        self.processed += len(records)
        return cleanup

    async def _recover(self, tp: TopicPartition, writer: PartitionWriter) -> None:
        await writer.stop()
        fresh = self.make_writer(tp.partition)
        await fresh.start()
        self.writers[tp.partition] = fresh
        committed = await self._consumer.committed(tp)
        self._consumer.seek(tp, committed or 0)

    async def _clean(self, cleanup: Cleanup) -> None:
        """Delete forgotten items' keys now (the projector does it too, idempotently),
        and the unused keys the gateway made for rejected commands."""
        if cleanup.shred:
            async with self._pool.acquire() as conn, conn.transaction():
                for item_id in cleanup.shred:
                    await shred(conn, item_id)
            for item_id in cleanup.shred:
                self._keys.forget_cached(item_id)
        if cleanup.discard:
            await self._keys.discard(cleanup.discard)
