"""A partition's queue: bounded by pausing its fetches, and resumed while enough is queued
to cover the fetch in flight for the other partitions (worker.PAUSE_ABOVE,
worker.RESUME_AT); a batch takes what arrives until the queue has been quiet for a few
turns of the event loop (worker._QUIET_ROUNDS)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition

from services.command.adapters.batch import Cleanup
from services.command.adapters.worker import PAUSE_ABOVE, RESUME_AT, PartitionWorker

MAX_BATCH = 10
TP = TopicPartition("engram.commands", 0)


class Consumer:
    """Records each pause and resume with the worker's queue length at that moment."""

    def __init__(self) -> None:
        self.worker: PartitionWorker | None = None
        self.calls: list[tuple[str, int]] = []

    def _queued(self) -> int:
        return self.worker.queued if self.worker is not None else 0

    def pause(self, tp: TopicPartition) -> None:
        assert tp == TP
        self.calls.append(("pause", self._queued()))

    def resume(self, tp: TopicPartition) -> None:
        assert tp == TP
        self.calls.append(("resume", self._queued()))


class Writer:
    """Takes a batch only when the test lets it (``step``); records the batch sizes."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.gate: asyncio.Queue[None] = asyncio.Queue()
        self.took: asyncio.Queue[None] = asyncio.Queue()

    async def process(self, batch: list[Any]) -> Cleanup:
        await self.gate.get()
        self.batches.append(len(batch))
        self.took.put_nowait(None)
        return Cleanup()

    async def step(self) -> None:
        self.gate.put_nowait(None)
        async with asyncio.timeout(5):
            await self.took.get()

    async def stop(self) -> None:
        return None


class Processor:
    max_batch = MAX_BATCH
    processed = 0

    async def clean(self, cleanup: Cleanup) -> None:
        return None


async def test_a_backlog_pauses_the_partition_and_resumes_it_before_the_queue_runs_dry() -> None:
    consumer, writer = Consumer(), Writer()
    worker = PartitionWorker(TP, writer, consumer, Processor())  # type: ignore[arg-type]
    consumer.worker = worker
    try:
        fetched = PAUSE_ABOVE * MAX_BATCH + 5
        worker.put([object()] * fetched)
        assert consumer.calls == [("pause", fetched)]

        while not any(call == "resume" for call, _ in consumer.calls):
            await writer.step()
        # Resumed once no more than RESUME_AT batches were queued, with at least one batch
        # still queued: the partition has work while its next fetch waits its turn.
        resumed_at = consumer.calls[-1][1]
        assert MAX_BATCH <= resumed_at <= RESUME_AT * MAX_BATCH
        assert worker.queued == resumed_at
        assert writer.batches == [MAX_BATCH] * len(writer.batches)
        assert sum(writer.batches) + resumed_at == fetched

        while worker.queued:
            await writer.step()
        assert sum(writer.batches) == fetched
        assert [call for call, _ in consumer.calls] == ["pause", "resume"]
    finally:
        writer.gate.put_nowait(None)  # a batch still waiting for its step finishes
        await worker.close()


async def test_a_queue_at_the_bound_does_not_pause() -> None:
    consumer, writer = Consumer(), Writer()
    worker = PartitionWorker(TP, writer, consumer, Processor())  # type: ignore[arg-type]
    consumer.worker = worker
    try:
        worker.put([object()] * (PAUSE_ABOVE * MAX_BATCH))
        assert consumer.calls == []
        while worker.queued:
            await writer.step()
        assert consumer.calls == []
    finally:
        writer.gate.put_nowait(None)  # a batch still waiting for its step finishes
        await worker.close()


async def _drip(worker: PartitionWorker, gaps: list[int]) -> None:
    """A command now, then one after each gap of event-loop turns."""
    worker.put([object()])
    for gap in gaps:
        for _ in range(gap):
            await asyncio.sleep(0)
        worker.put([object()])


async def test_commands_a_couple_of_turns_apart_join_one_batch() -> None:
    """A wave of requests reaches the queue a few turns apart; one quiet turn does not
    close the batch (worker._QUIET_ROUNDS)."""
    consumer, writer = Consumer(), Writer()
    worker = PartitionWorker(TP, writer, consumer, Processor())  # type: ignore[arg-type]
    try:
        await _drip(worker, [2, 1, 2])
        await writer.step()
        assert writer.batches == [4]
    finally:
        writer.gate.put_nowait(None)
        await worker.close()


async def test_a_command_after_a_long_quiet_waits_for_the_next_batch() -> None:
    consumer, writer = Consumer(), Writer()
    worker = PartitionWorker(TP, writer, consumer, Processor())  # type: ignore[arg-type]
    try:
        await _drip(worker, [10])
        await writer.step()
        await writer.step()
        assert writer.batches == [1, 1]
    finally:
        writer.gate.put_nowait(None)
        await worker.close()
