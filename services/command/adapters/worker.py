"""One partition's worker: the queue of its commands, a batch (one transaction) at a
time through its ``PartitionWriter``, and the recovery of a failed transaction (see
``processor``, which runs one per assigned partition)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition

from engram.faults import is_transient
from engram.logging import get_logger
from services.command.adapters.batch import Cleanup, Queued, Record, Submitted
from services.command.adapters.writer import PartitionWriter

if TYPE_CHECKING:
    from services.command.adapters.processor import CommandProcessor

log = get_logger(__name__)
_READY_ROUNDS = 20  # event-loop turns a batch waits, at most, for commands already here
# Turns in a row without a new command after which the batch is taken. Closed-loop writers
# send in waves (each after its last memory became visible), and a wave's requests reach
# the queue a few turns apart as the event loop parses them: taken after one quiet turn,
# a batch left some of its wave to a transaction of their own, a wave later.
_QUIET_ROUNDS = 3
# Transactions failed in a row after which a partition counts as stuck (health says so).
STUCK_AFTER = 3
# A partition's queue is bounded by pausing its fetches above PAUSE_ABOVE batches and
# resuming them at RESUME_AT batches or fewer. The queue must not run dry before the
# resumed fetch lands: the consumer keeps one fetch in flight to the broker, and while it
# waits (up to the commands consumer's COMMANDS_FETCH_WAIT_MS) for a partition with nothing
# new, a resumed one's fetch waits behind it. Resumed at one batch, a partition behind a
# backlog sat idle up to 500 ms each fetch (a 1 MiB fetch is ~1,300 commands) whenever the
# other partition had nothing: its rate fell from ~5,000 to ~3,100 commands/s.
PAUSE_ABOVE = 4
RESUME_AT = 2
# A restore that a fault of the moment stops is tried again after this, then twice as long
# each time, up to the most.
_RESTORE_RETRY_SECONDS = 0.5
_RESTORE_RETRY_MAX_SECONDS = 10.0


class PartitionWorker:
    """Decides one partition's queued commands, a batch (one transaction) at a time.

    The queue is bounded by pausing the partition when it holds more than PAUSE_ABOVE
    batches (resumed at RESUME_AT).
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
        if len(self._queue) > PAUSE_ABOVE * self._processor.max_batch and not self._paused:
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
        A lone writer waits for _QUIET_ROUNDS turns of the loop, microseconds when it
        has nothing else to run."""
        quiet = 0
        for _ in range(_READY_ROUNDS):
            queued = len(self._queue)
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._queue) == queued else 0
            if quiet == _QUIET_ROUNDS:
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
        resume_at = RESUME_AT * self._processor.max_batch
        if self._paused and len(self._queue) <= resume_at and not self._closing:
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
