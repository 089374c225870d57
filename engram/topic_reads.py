"""Reading a partition between two offsets, read committed: how many records lie there
(a transaction's commit marker, and an aborted record, take an offset but are none), and
the newest of them. ``engram lag`` and the dead-letter commands count with it, and the
command service asks it whether the projector has anything left to apply."""

from __future__ import annotations

import time
from collections import deque

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

COUNT_AT_MOST = 10_000  # records read to count a gap exactly; past it, offsets are shown
READ_SECONDS = 15.0  # how long one partition's read may take before it gives up


class OperateError(Exception):
    """A request an operator can correct: named service, offset or letter."""


async def records_between(
    kafka: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int
) -> tuple[int, bool]:
    """Records between two offsets, counted exactly when there are at most COUNT_AT_MOST
    offsets and they are read within READ_SECONDS; else the offsets, and False."""
    if end - start > COUNT_AT_MOST:
        return end - start, False
    count, done, _ = await scan(kafka, tp, start, end)
    return (count, True) if done else (end - start, False)


async def scan(
    kafka: AIOKafkaConsumer,
    tp: TopicPartition,
    start: int,
    end: int,
    keep: int = 0,
    *,
    at_most: int | None = None,
    seconds: float = READ_SECONDS,
) -> tuple[int, bool, list[ConsumerRecord[bytes, bytes]]]:
    """Read the records (committed ones, as the consumer was made) at ``start`` to
    ``end - 1``: how many there are (``at_most``: stop once that many were read), whether
    all were read within ``seconds``, and the last ``keep`` of them."""
    if end <= start:
        return 0, True, []
    kafka.assign([tp])
    kafka.seek(tp, start)
    count, kept = 0, deque[ConsumerRecord[bytes, bytes]](maxlen=keep)
    deadline = time.monotonic() + seconds
    # A fetch steps over markers and aborted records, so the position reaches the end.
    while await kafka.position(tp) < end and (at_most is None or count < at_most):
        left = deadline - time.monotonic()
        if left <= 0:
            return count, False, list(kept)
        batch = await kafka.getmany(
            tp, timeout_ms=int(min(1.0, left) * 1000), max_records=at_most or 1000
        )
        records = [r for r in batch.get(tp, []) if r.offset < end]
        count += len(records)
        kept.extend(records)
    return count, True, list(kept)
