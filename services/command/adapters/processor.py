"""The command consumer: one ``PartitionWriter`` per assigned partition, each fed by its
own queue so that partitions commit independently and every transaction takes all the
commands that arrived while the previous one committed (group commit).

An assigned partition stays paused until its writer has restored its state, so no
command is read before that; the restore runs beside the consumer, not inside the
rebalance callback (no heartbeat is sent during the callback, and a restore longer
than the session timeout would cost the group membership, again and again).
Revocation waits for the partition's batch in flight, so two owners never write one
partition; commands queued but not yet decided are dropped and read again by the
next owner from the offset committed with the last transaction.

The HTTP gateway of this instance hands its commands over in process (``submit``) when
this instance writes their partition: no trip through ``engram.commands`` and
``engram.replies``, no offsets in the transaction. Such a command, dropped before it
was decided, fails with ``NotApplied``, and the gateway publishes it instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import asyncpg
from aiokafka import ConsumerRebalanceListener, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.kafka import consumer
from engram.keystore import KeyStore, shred
from engram.logging import get_logger
from services.command.adapters.batch import Cleanup, Record, Submitted
from services.command.adapters.worker import STUCK_AFTER, PartitionWorker
from services.command.adapters.writer import PartitionWriter

log = get_logger(__name__)
# How long the broker may hold the commands consumer's empty fetch. A partition resumed
# after a backlog (``worker.RESUME_AT``) cannot fetch until the fetch in flight for the
# others returns, so this bounds its wait; idle, it costs ten fetches a second.
COMMANDS_FETCH_WAIT_MS = 100


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
                worker = self._p.workers.pop(tp.partition, None)
                if worker:
                    await worker.close()
            log.info("partitions_revoked", partitions=[tp.partition for tp in revoked])

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        async with self._p.lock:
            fresh = [
                tp
                for tp in assigned
                if tp.partition not in self._p.workers and tp.partition not in self._p.starting
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
        partitions: int,
        topic: str = topics.COMMANDS,
    ) -> None:
        """``topic``: the commands it reads (tests read a private one, which the stack's own
        command service and its pruner never touch)."""
        self.lock = asyncio.Lock()
        self.workers: dict[int, PartitionWorker] = {}
        self.starting: dict[int, asyncio.Task[None]] = {}  # writers still restoring
        self.make_writer = make_writer
        self.max_batch = max_batch
        self.partitions = partitions
        self._pool = pool
        self._keys = keystore
        self._consumer = consumer(
            bootstrap,
            group_id=group_id,
            max_poll_records=max_batch,
            fetch_max_wait_ms=COMMANDS_FETCH_WAIT_MS,
        )
        self._topic = topic
        self.processed = 0

    @property
    def stuck(self) -> list[int]:
        """The partitions whose transactions have failed STUCK_AFTER times in a row: the
        same batch keeps failing, and no command of theirs is decided meanwhile."""
        return sorted(p for p, w in self.workers.items() if w.failures >= STUCK_AFTER)

    @property
    def writers(self) -> dict[int, PartitionWriter]:
        """The partitions this instance writes, with their writers."""
        return {p: w.writer for p, w in self.workers.items()}

    def submit(self, envelope: CommandEnvelope) -> asyncio.Future[CommandReply] | None:
        """Hand a command over in process when this instance writes its partition (its
        answer comes through the future); None: publish it on engram.commands."""
        worker = self.workers.get(topics.partition_for(envelope.stream_id, self.partitions))
        if worker is None:
            return None
        answer: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
        return answer if worker.submit(Submitted(envelope, answer)) else None

    async def close(self) -> None:
        """Stop the consumer its constructor made: for a start that fails before ``run``
        (which stops it when it ends). Safe before a start and after ``run`` stopped it."""
        await self._consumer.stop()

    async def run(self) -> None:
        self._consumer.subscribe([self._topic], listener=_Rebalance(self))
        try:
            # Inside the try: cancelled while the group assigns partitions (a stop during
            # the start), the consumer still leaves the group and writers still stop.
            await self._consumer.start()
            while True:
                batches = await self._consumer.getmany(timeout_ms=200, max_records=self.max_batch)
                for tp, records in batches.items():
                    self._dispatch(tp, records)
                self._raise_failures()
        finally:
            for task in self.starting.values():
                task.cancel()
            for worker in self.workers.values():
                await worker.close()
            await self._consumer.stop()

    def _dispatch(self, tp: TopicPartition, records: list[Record]) -> None:
        worker = self.workers.get(tp.partition)
        if worker is None:
            # Fetched before the assignment callback made its writer (or after a revoke):
            # never skip commands; fetch them again once a writer owns the partition.
            if tp in self._consumer.assignment():
                self._consumer.seek(tp, records[0].offset)
            return
        worker.put(records)

    def _raise_failures(self) -> None:
        for task in list(self.starting.values()):
            if task.done() and not task.cancelled() and task.exception():
                raise RuntimeError("a partition's writer failed to start") from task.exception()
        for worker in self.workers.values():
            if error := worker.failed:
                raise RuntimeError(f"partition {worker.tp.partition}'s writer failed") from error

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
                self.workers[tp.partition] = PartitionWorker(tp, writer, self._consumer, self)
                self._consumer.resume(tp)
                log.info("partition_ready", partition=tp.partition)
            else:
                await writer.stop()

    async def clean(self, cleanup: Cleanup) -> None:
        """Delete forgotten items' keys now (the projector does it too, idempotently),
        and the unused keys the gateway made for rejected commands."""
        if cleanup.shred:
            async with self._pool.acquire() as conn, conn.transaction():
                for item_id in cleanup.shred:
                    await shred(conn, item_id)
            for item_id in cleanup.shred:
                self._keys.forget_cached(item_id)
        if unused := cleanup.unused():
            await self._keys.discard(unused)
