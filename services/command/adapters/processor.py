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
from collections import deque
from collections.abc import Callable

import asyncpg
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.faults import is_transient
from engram.kafka import consumer
from engram.keystore import KeyStore, shred
from engram.logging import get_logger
from services.command.adapters.batch import Cleanup, Queued, Record, Submitted
from services.command.adapters.writer import PartitionWriter

log = get_logger(__name__)
_READY_ROUNDS = 20  # event-loop turns a batch waits, at most, for commands already here
# Transactions failed in a row after which a partition counts as stuck (health says so).
STUCK_AFTER = 3
# A restore that a fault of the moment stops is tried again after this, then twice as long
# each time, up to the most.
_RESTORE_RETRY_SECONDS = 0.5
_RESTORE_RETRY_MAX_SECONDS = 10.0


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


class PartitionWorker:
    """Decides one partition's queued commands, a batch (one transaction) at a time.

    The queue is bounded by pausing the partition when it holds more than two batches.
    A failed transaction leaves the writer's memory ahead of the log: the worker then
    drops its queue, restores a fresh writer and seeks back to the committed offset.
    """

    def __init__(
        self,
        tp: TopicPartition,
        writer: PartitionWriter,
        kafka: AIOKafkaConsumer,
        processor: CommandProcessor,
    ) -> None:
        self.tp, self.writer = tp, writer
        self._kafka, self._processor = kafka, processor
        self._queue: deque[Queued] = deque()
        self._wakeup = asyncio.Event()
        self._closing = False
        self._recovering = False
        self._paused = False
        self.failures = 0  # transactions failed in a row (a batch that keeps failing)
        self._task = asyncio.create_task(self._run(), name=f"command-partition-{tp.partition}")

    @property
    def queued(self) -> int:
        """Commands fetched and waiting for the next transaction."""
        return len(self._queue)

    @property
    def recovering(self) -> bool:
        """Between a failed transaction and its fresh writer: nothing is taken."""
        return self._recovering

    @property
    def failed(self) -> BaseException | None:
        if self._task.done() and not self._task.cancelled():
            return self._task.exception()
        return None

    def put(self, records: list[Record]) -> None:
        if self._closing or self._recovering:
            return  # read again from the committed offset once a writer owns it
        self._queue.extend(records)
        self._wakeup.set()
        if len(self._queue) > 2 * self._processor.max_batch and not self._paused:
            self._paused = True
            self._kafka.pause(self.tp)

    def submit(self, item: Submitted) -> bool:
        """Queue a command handed over in process; False when this worker takes none."""
        if self._closing or self._recovering or self._task.done():
            return False
        self._queue.append(item)
        self._wakeup.set()
        return True

    def _drop_queue(self, reason: str) -> None:
        for item in self._queue:
            if isinstance(item, Submitted):
                item.fail(reason)
        self._queue.clear()

    async def close(self) -> None:
        """Finish the batch in flight, drop the rest, stop the writer."""
        self._closing = True
        self._drop_queue("the partition was revoked")
        self._wakeup.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.writer.stop()

    async def _gather(self) -> None:
        """Let the commands that have already arrived join the batch before it is taken,
        as a group commit does: their HTTP handlers may be ready to run on the event loop
        behind this task. A Kafka transaction costs the broker and this service
        milliseconds of CPU whatever it holds, so fuller ones leave more CPU to the rest.
        A lone writer waits for nothing: the queue stops growing at once."""
        for _ in range(_READY_ROUNDS):
            queued = len(self._queue)
            await asyncio.sleep(0)
            if len(self._queue) == queued:
                return

    async def _run(self) -> None:
        while not self._closing:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue and not self._closing:
                await self._gather()
                if self._closing or not self._queue:  # closed (queue dropped) meanwhile
                    break
                batch = [
                    self._queue.popleft()
                    for _ in range(min(len(self._queue), self._processor.max_batch))
                ]
                self._maybe_resume()
                try:
                    cleanup = await self.writer.process(batch)
                except Exception as exc:
                    if is_transient(exc):
                        await self._failed(exc)
                    else:  # a fault of the batch's own: find its command
                        log.exception("batch_not_decidable", partition=self.tp.partition)
                        await self._isolate(batch)
                    continue
                self.failures = 0
                self._processor.processed += len(batch)
                await self._clean(cleanup)

    async def _clean(self, cleanup: Cleanup) -> None:
        """Shred and discard keys after a commit; a fault of the moment leaves them (the
        projector shreds a forgotten item's key too, and an unused key seals nothing kept)."""
        try:
            await self._processor.clean(cleanup)
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("keys_not_cleaned", partition=self.tp.partition, error=repr(exc))

    async def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        log.error(
            "transaction_failed",
            partition=self.tp.partition,
            in_a_row=self.failures,
            error=str(exc),
        )
        await self._recover()

    async def _isolate(self, batch: list[Queued]) -> None:
        """Decide a batch that broke the writer one command at a time: on a freshly
        restored writer (the failed one's memory may be ahead of the log), each command
        in its own transaction (a handed-over one answered as it is decided), and a command
        that breaks it alone is refused undecided and dead-lettered (on another fresh
        writer) while the rest go on (QA: a reply that could not be encoded stopped the
        service, and the restarted one on the same record). Commands queued meanwhile wait
        behind the batch; a fault of the moment meanwhile has the rest read again."""
        n = 0
        try:
            await self._fresh_writer()
            for n, item in enumerate(batch):
                if self._closing:  # revoked: the next owner reads the records again
                    _fail_handed_over(batch[n:], "the partition was revoked")
                    return
                try:
                    cleanup = await self.writer.process([item])
                except Exception as exc:
                    if is_transient(exc):
                        raise
                    log.exception("command_not_decidable", partition=self.tp.partition)
                    await self._fresh_writer()
                    cleanup = await self.writer.refuse(item, f"{type(exc).__name__}: {exc}")
                else:
                    self._processor.processed += 1
                await self._clean(cleanup)
        except Exception as exc:
            if not is_transient(exc):
                raise
            _fail_handed_over(batch[n:], f"the batch failed: {exc!r}")
            await self._failed(exc)
            return
        self.failures = 0

    async def _fresh_writer(self) -> None:
        """Replace the writer by one restored from its checkpoint and the log; while a
        fault of the moment prevents it (the broker or the database down), try again,
        less and less often, counting failures (health names the partition stuck) until
        it succeeds or the partition is closed (QA: one failed restore stopped the
        service)."""
        delay = _RESTORE_RETRY_SECONDS
        while True:
            with contextlib.suppress(Exception):
                await self.writer.stop()
            self.writer = self._processor.make_writer(self.tp.partition)
            try:
                await self.writer.start()
                return
            except Exception as exc:
                if not is_transient(exc) or self._closing:
                    raise
                self.failures += 1
                log.warning(
                    "writer_restore_failed",
                    partition=self.tp.partition,
                    in_a_row=self.failures,
                    retry_in_seconds=delay,
                    error=repr(exc),
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RESTORE_RETRY_MAX_SECONDS)

    def _maybe_resume(self) -> None:
        if self._paused and len(self._queue) <= self._processor.max_batch and not self._closing:
            self._paused = False
            self._kafka.resume(self.tp)

    async def _recover(self) -> None:
        self._recovering = True
        self._drop_queue("the partition's writer is recovering")
        self._kafka.pause(self.tp)
        await self._fresh_writer()
        committed = await self._kafka.committed(self.tp)
        self._kafka.seek(self.tp, committed or 0)  # put() dropped what came meanwhile
        self._recovering = self._paused = False
        if not self._closing:
            self._kafka.resume(self.tp)


def _fail_handed_over(items: list[Queued], reason: str) -> None:
    """Handed-over commands not decided: their gateway publishes them."""
    for item in items:
        if isinstance(item, Submitted):
            item.fail(reason)


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
        self._consumer = consumer(bootstrap, group_id=group_id, max_poll_records=max_batch)
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

    async def run(self) -> None:
        self._consumer.subscribe([self._topic], listener=_Rebalance(self))
        await self._consumer.start()
        try:
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
