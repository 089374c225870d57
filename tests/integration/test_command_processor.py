"""The command consumer against the real broker, with stand-in writers:
- it keeps its group membership through a restore that outlasts the session timeout (the
  restore runs beside the consumer, its partitions paused, not in the rebalance callback,
  during which aiokafka sends no heartbeats);
- commands that arrive while a partition's transaction is in flight all go into its next
  one (group commit);
- a failed transaction gets a freshly restored writer, which reads the commands again from
  the committed offset;
- a command handed over in process goes to its partition's writer, and one dropped
  before it was decided (the writer failed) fails with NotApplied, so the gateway can
  publish it instead."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from aiokafka.errors import KafkaError

from contracts import topics
from contracts.envelope import CommandEnvelope, CommandReply
from engram.settings import CommonSettings
from services.command.adapters.batch import Cleanup, NotApplied, Submitted
from services.command.adapters.processor import CommandProcessor
from tests.integration.conftest import scratch_topic
from tests.support import eventually, send_commands

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 10  # aiokafka's default, which the processor keeps


@pytest.fixture
async def commands_topic(stack_settings: dict[str, str]) -> AsyncIterator[str]:
    """A private commands topic, partitioned as engram.commands: the stack's own command
    service never decides these tests' commands, and its pruner, which deletes what that
    service has decided, never deletes one before a test's writer reads it again."""
    bootstrap, partitions = stack_settings["KAFKA_BOOTSTRAP_SERVERS"], CommonSettings().partitions
    async with scratch_topic(bootstrap, "test.commands.", partitions) as name:
        yield name


class SlowWriter:
    """A writer whose restore takes longer than the session timeout."""

    def __init__(self, partition: int, log: dict[str, Any]) -> None:
        self.partition, self._log = partition, log

    async def start(self) -> None:
        self._log["starts"].append(self.partition)
        await asyncio.sleep(SESSION_TIMEOUT_S + 2)

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["seen"] += [r.value for r in records]
        return Cleanup()

    async def stop(self) -> None:
        pass


async def test_a_restore_longer_than_the_session_timeout_keeps_the_partitions(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    log: dict[str, Any] = {"starts": [], "seen": []}
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    group = f"test-processor-{uuid.uuid4().hex[:8]}"
    processor = CommandProcessor(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
        group,
        pool,
        None,  # type: ignore[arg-type]  # the slow writers never clean up keys
        lambda p: SlowWriter(p, log),  # type: ignore[arg-type,return-value]
        max_batch=100,
        partitions=CommonSettings().partitions,
        topic=commands_topic,
    )
    run = asyncio.create_task(processor.run())
    try:
        partitions = CommonSettings().partitions
        await eventually(
            lambda: _ready(processor, partitions), deadline=60, what="every writer ready"
        )
        marker = f"slow-restore-{uuid.uuid4()}"
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            [
                CommandEnvelope(
                    command_id=marker,
                    type="RememberMemory",
                    token="t",
                    stream_id=f"org-{uuid.uuid4().hex[:6]}/shared",
                    payload={"content": "x"},
                )
            ],
            commands_topic,
        )
        await eventually(
            lambda: _seen(log, marker), deadline=30, what="the command reached its writer"
        )
        # Each partition was restored once: no expulsion, no rebalance storm.
        assert sorted(log["starts"]) == list(range(partitions))
    finally:
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await pool.close()


async def _ready(processor: CommandProcessor, partitions: int) -> bool:
    return sorted(processor.writers) == list(range(partitions))


async def _seen(log: dict[str, Any], marker: str) -> bool:
    return any(marker.encode() in (value or b"") for value in log["seen"])


class GatedWriter:
    """A writer whose first batch waits for the test's signal; it logs its batches."""

    def __init__(self, partition: int, log: dict[str, Any], gate: asyncio.Event) -> None:
        self.partition, self._log, self._gate = partition, log, gate

    async def start(self) -> None:
        self._log["starts"].append(self.partition)

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["batches"].append((self.partition, _values(records)))
        await self._gate.wait()
        return Cleanup()

    async def stop(self) -> None:
        pass


class FailingOnceWriter(GatedWriter):
    """The first writer of its partition fails its first transaction, like a fenced or
    timed-out producer; every writer after it succeeds."""

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["batches"].append((self.partition, _values(records)))
        if not self._log["failed"]:
            self._log["failed"] = True
            raise KafkaError("the transaction failed")
        return Cleanup()


class FailingWhileGatedWriter(GatedWriter):
    """Every transaction fails until the test opens the gate: a batch that cannot be
    written (a dead letter too large for the broker, say)."""

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["batches"].append((self.partition, _values(records)))
        if not self._gate.is_set():
            raise KafkaError("the transaction failed")
        return Cleanup()


class GatedFailingWriter(GatedWriter):
    """The first writer of its partition fails its first transaction once the test
    opens the gate."""

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["batches"].append((self.partition, _values(records)))
        if not self._log["failed"]:
            await self._gate.wait()
            self._log["failed"] = True
            raise KafkaError("the transaction failed")
        return Cleanup()


class BrokenByOneWriter(GatedWriter):
    """A writer that breaks, with no transaction's fault, on any batch holding a poison
    command: a reply it cannot encode, say. It logs what it decides and what it refuses."""

    async def process(self, records: list[Any]) -> Cleanup:
        values = _values(records)
        self._log["batches"].append((self.partition, values))
        if any(b"poison" in v for v in values):
            raise ValueError("surrogates not allowed")
        self._log["decided"] += values
        return Cleanup()

    async def refuse(self, item: Any, why: str) -> Cleanup:
        self._log["refused"].append((_values([item])[0], why))
        return Cleanup()


class GatedBrokenByOneWriter(BrokenByOneWriter):
    """Its first batch waits for the test's signal; a handed-over command it decides is
    answered, as the real writer answers one once its transaction commits."""

    async def process(self, records: list[Any]) -> Cleanup:
        if not self._log["batches"]:
            self._log["batches"].append((self.partition, _values(records)))
            await self._gate.wait()
            return Cleanup()
        cleanup = await super().process(records)
        for r in records:
            if isinstance(r, Submitted) and not r.answer.done():
                r.answer.set_result(
                    CommandReply(
                        command_id=r.envelope.command_id, ok=True, stream_id=r.envelope.stream_id
                    )
                )
        return cleanup


class FlakyRestoreWriter(GatedWriter):
    """Its partition's first transaction fails; the next two restores meet a database
    that is starting up; then all goes well."""

    async def start(self) -> None:
        self._log["starts"].append(self.partition)
        if self._log["failed"] and self._log["restores_refused"] < 2:
            self._log["restores_refused"] += 1
            raise asyncpg.CannotConnectNowError("the database system is starting up")

    async def process(self, records: list[Any]) -> Cleanup:
        self._log["batches"].append((self.partition, _values(records)))
        if not self._log["failed"]:
            self._log["failed"] = True
            raise KafkaError("the transaction failed")
        return Cleanup()


def _values(records: list[Any]) -> list[bytes]:
    """A Kafka record's value; a handed-over command's id."""
    return [
        r.envelope.command_id.encode() if isinstance(r, Submitted) else r.value for r in records
    ]


async def _processor(
    stack_settings: dict[str, str], make: Any, topic: str
) -> tuple[CommandProcessor, asyncio.Task[None], asyncpg.Pool]:
    group = f"test-processor-{uuid.uuid4().hex[:8]}"
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    processor = CommandProcessor(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
        group,
        pool,
        None,  # type: ignore[arg-type]  # the stand-in writers never clean up keys
        make,
        max_batch=100,
        partitions=CommonSettings().partitions,
        topic=topic,
    )
    run = asyncio.create_task(processor.run())
    partitions = CommonSettings().partitions
    await eventually(lambda: _ready(processor, partitions), deadline=60, what="every writer ready")
    return processor, run, pool


async def _stop(run: asyncio.Task[None], pool: asyncpg.Pool) -> None:
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await pool.close()


def _commands(stream_id: str, markers: list[str]) -> list[CommandEnvelope]:
    return [
        CommandEnvelope(
            command_id=m, type="RememberMemory", token="t", stream_id=stream_id, payload={}
        )
        for m in markers
    ]


async def test_commands_that_wait_for_a_transaction_all_go_into_the_next_one(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    log: dict[str, Any] = {"starts": [], "batches": []}
    gate = asyncio.Event()
    processor, run, pool = await _processor(
        stack_settings, lambda p: GatedWriter(p, log, gate), commands_topic
    )
    try:
        bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        first = f"first-{uuid.uuid4()}"
        await send_commands(bootstrap, _commands(stream, [first]), commands_topic)
        await eventually(lambda: _batches(log, partition, 1), deadline=30, what="the first batch")
        # The first transaction is in flight: the next commands queue up behind it.
        later = [f"later-{n}-{uuid.uuid4()}" for n in range(5)]
        await send_commands(bootstrap, _commands(stream, later), commands_topic)
        worker = processor.workers[partition]
        await eventually(lambda: _queued(worker, 5), deadline=30, what="five commands queued")
        gate.set()
        await eventually(lambda: _batches(log, partition, 2), deadline=30, what="the next batch")
        batches = [values for p, values in log["batches"] if p == partition]
        assert [len(b) for b in batches] == [1, 5]
        assert all(m.encode() in v for m, v in zip(later, batches[1], strict=True))
    finally:
        gate.set()
        await _stop(run, pool)


async def test_a_failed_transaction_gets_a_fresh_writer_that_reads_the_commands_again(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    log: dict[str, Any] = {"starts": [], "batches": [], "failed": False}
    gate = asyncio.Event()
    gate.set()
    processor, run, pool = await _processor(
        stack_settings, lambda p: FailingOnceWriter(p, log, gate), commands_topic
    )
    try:
        partitions = CommonSettings().partitions
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, partitions)
        marker = f"again-{uuid.uuid4()}"
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"], _commands(stream, [marker]), commands_topic
        )
        # Seen twice: by the writer whose transaction failed, then by its replacement,
        # which restored (a second start) and read from the committed offset again.
        await eventually(lambda: _seen_times(log, marker, 2), deadline=60, what="a second read")
        assert log["starts"].count(partition) == 2
        assert sorted(log["starts"]) == sorted([*range(partitions), partition])
        assert processor.workers[partition].failed is None
    finally:
        await _stop(run, pool)


async def test_a_partition_whose_batch_keeps_failing_counts_as_stuck_until_it_succeeds(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    log: dict[str, Any] = {"starts": [], "batches": [], "failed": False}
    gate = asyncio.Event()  # closed: every transaction fails
    processor, run, pool = await _processor(
        stack_settings, lambda p: FailingWhileGatedWriter(p, log, gate), commands_topic
    )
    try:
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
        await send_commands(bootstrap, _commands(stream, ["poison-record-1"]), commands_topic)

        async def stuck() -> bool:
            return processor.stuck == [partition]

        await eventually(stuck, deadline=60, what="the partition counted as stuck")
        gate.set()  # the next try succeeds

        async def going() -> bool:
            return processor.stuck == []

        await eventually(going, deadline=60, what="the partition writing again")
    finally:
        await _stop(run, pool)


async def _batches(log: dict[str, Any], partition: int, n: int) -> bool:
    return sum(1 for p, _ in log["batches"] if p == partition) >= n


async def _queued(worker: Any, n: int) -> bool:
    """At least ``n`` commands wait in the worker's queue (roll markers aside)."""
    return len(_values(list(worker._queue))) >= n


async def _seen_times(log: dict[str, Any], marker: str, n: int) -> bool:
    seen = sum(1 for _, values in log["batches"] for v in values if marker.encode() in v)
    return seen >= n


async def test_a_handed_over_command_reaches_its_partitions_writer(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    log: dict[str, Any] = {"starts": [], "batches": []}
    gate = asyncio.Event()
    gate.set()
    processor, run, pool = await _processor(
        stack_settings, lambda p: GatedWriter(p, log, gate), commands_topic
    )
    try:
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        [envelope] = _commands(stream, [f"handed-{uuid.uuid4()}"])
        assert processor.submit(envelope) is not None
        await eventually(lambda: _batches(log, partition, 1), deadline=30, what="its batch")
        [values] = [v for p, v in log["batches"] if p == partition]
        assert values == [envelope.command_id.encode()]
    finally:
        await _stop(run, pool)


async def test_a_handed_over_command_dropped_by_a_failed_writer_fails_with_not_applied(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    log: dict[str, Any] = {"starts": [], "batches": [], "failed": False}
    gate = asyncio.Event()
    processor, run, pool = await _processor(
        stack_settings, lambda p: GatedFailingWriter(p, log, gate), commands_topic
    )
    try:
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
            _commands(stream, [f"first-{uuid.uuid4()}"]),
            commands_topic,
        )
        await eventually(lambda: _batches(log, partition, 1), deadline=30, what="the first batch")
        # Queued behind the transaction that is about to fail: never decided.
        [envelope] = _commands(stream, [f"queued-{uuid.uuid4()}"])
        answer = processor.submit(envelope)
        assert answer is not None
        gate.set()
        with pytest.raises(NotApplied):
            await asyncio.wait_for(answer, 30)
        # The fresh writer takes hand-overs again.
        await eventually(
            lambda: _worker_ready(processor, partition), deadline=60, what="the fresh writer"
        )
        assert processor.submit(_commands(stream, [f"later-{uuid.uuid4()}"])[0]) is not None
    finally:
        await _stop(run, pool)


async def _worker_ready(processor: CommandProcessor, partition: int) -> bool:
    worker = processor.workers.get(partition)
    return worker is not None and not worker.recovering


async def test_a_command_that_breaks_the_writer_is_refused_alone_and_the_rest_are_decided(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    """QA: a fault that is no transaction's (a reply that could not be encoded) stopped the
    service, and the restarted one stopped on the same record, for good."""
    log: dict[str, Any] = {"starts": [], "batches": [], "decided": [], "refused": []}
    gate = asyncio.Event()
    gate.set()
    processor, run, pool = await _processor(
        stack_settings, lambda p: BrokenByOneWriter(p, log, gate), commands_topic
    )
    try:
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        tag = uuid.uuid4().hex[:8]
        markers = [f"good-{n}-{tag}" for n in range(3)]
        markers.insert(1, f"poison-{tag}")
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"], _commands(stream, markers), commands_topic
        )

        async def settled() -> bool:
            return len(log["refused"]) == 1 and sum(tag.encode() in v for v in log["decided"]) == 3

        await eventually(settled, deadline=60, what="the good decided, the poison refused")
        [(refused, why)] = log["refused"]
        assert b"poison" in refused and why == "ValueError: surrogates not allowed"
        assert processor.workers[partition].failed is None and processor.stuck == []
        # A fresh writer for the batch taken alone, and another after the poison broke it.
        assert log["starts"].count(partition) >= 3
        later = f"later-{tag}"
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"], _commands(stream, [later]), commands_topic
        )

        async def next_decided() -> bool:
            return any(later.encode() in v for v in log["decided"])

        await eventually(next_decided, deadline=30, what="the next command decided")
    finally:
        await _stop(run, pool)


async def test_a_handed_over_command_beside_a_breaking_one_gets_its_own_answer(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    """QA: the batch's failure failed every handed-over command, whose gateways published
    them again, while the batch taken apart decided them too: each caller got a repeat's
    answer (200, duplicate) to a command sent once."""
    log: dict[str, Any] = {"starts": [], "batches": [], "decided": [], "refused": []}
    gate = asyncio.Event()
    processor, run, pool = await _processor(
        stack_settings, lambda p: GatedBrokenByOneWriter(p, log, gate), commands_topic
    )
    try:
        bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        tag = uuid.uuid4().hex[:8]
        await send_commands(bootstrap, _commands(stream, [f"first-{tag}"]), commands_topic)
        await eventually(lambda: _batches(log, partition, 1), deadline=30, what="the first batch")
        await send_commands(bootstrap, _commands(stream, [f"poison-{tag}"]), commands_topic)
        worker = processor.workers[partition]
        await eventually(lambda: _queued(worker, 1), deadline=30, what="the poison queued")
        [handed] = _commands(stream, [f"handed-{tag}"])
        answer = processor.submit(handed)
        assert answer is not None
        gate.set()  # the next batch holds both, and breaks
        reply = await asyncio.wait_for(answer, 30)
        assert reply.ok and reply.command_id == handed.command_id  # its own, not NotApplied
        await eventually(lambda: _refused(log, 1), deadline=30, what="the poison refused")
        assert [b"poison" in v for v, _ in log["refused"]] == [True]
    finally:
        gate.set()
        await _stop(run, pool)


async def _refused(log: dict[str, Any], n: int) -> bool:
    return len(log["refused"]) >= n


async def test_a_restore_stopped_by_a_fault_of_the_moment_is_tried_again(
    stack_settings: dict[str, str], commands_topic: str
) -> None:
    """QA: a restore that met the database restarting stopped the worker, and the service."""
    log: dict[str, Any] = {"starts": [], "batches": [], "failed": False, "restores_refused": 0}
    gate = asyncio.Event()
    processor, run, pool = await _processor(
        stack_settings, lambda p: FlakyRestoreWriter(p, log, gate), commands_topic
    )
    try:
        stream = f"org-{uuid.uuid4().hex[:6]}/shared"
        partition = topics.partition_for(stream, CommonSettings().partitions)
        marker = f"again-{uuid.uuid4()}"
        await send_commands(
            stack_settings["KAFKA_BOOTSTRAP_SERVERS"], _commands(stream, [marker]), commands_topic
        )
        await eventually(lambda: _seen_times(log, marker, 2), deadline=60, what="a second read")
        assert log["restores_refused"] == 2
        assert processor.workers[partition].failed is None
    finally:
        await _stop(run, pool)
