"""Restore a partition's decision state: the last checkpoint plus the events after it.

The writer must not take a command before this finishes: deciding on a partial
state could accept a stale base revision or reuse a ``seq``.
"""

from __future__ import annotations

import pickle
import time

import asyncpg
from aiokafka import TopicPartition
from pydantic import ValidationError

from contracts import topics
from contracts.envelope import EventEnvelope
from contracts.events import parse_event
from engram.kafka import consumer
from engram.logging import get_logger
from services.command.state import StreamState, evolve

log = get_logger(__name__)
States = dict[str, StreamState]


class Restorer:
    def __init__(self, pool: asyncpg.Pool, bootstrap: str) -> None:
        self._pool = pool
        self._bootstrap = bootstrap

    async def restore(self, partition: int) -> tuple[States, int, int]:
        """The partition's states, the next event offset, and how many events were replayed."""
        started = time.monotonic()
        states, offset = await self._checkpoint(partition)
        states, offset, count = await self._replay(partition, states, offset)
        log.info(
            "partition_restored",
            partition=partition,
            streams=len(states),
            events_replayed=count,
            next_offset=offset,
            seconds=round(time.monotonic() - started, 3),
        )
        return states, offset, count

    async def _checkpoint(self, partition: int) -> tuple[States, int]:
        row = await self._pool.fetchrow(
            "SELECT next_offset, state FROM command.checkpoints WHERE events_partition = $1",
            partition,
        )
        if row is None:
            return {}, 0
        return pickle.loads(row["state"]), row["next_offset"]

    async def save(self, partition: int, states: States, next_offset: int) -> None:
        await self._pool.execute(
            """INSERT INTO command.checkpoints (events_partition, next_offset, state)
               VALUES ($1, $2, $3)
               ON CONFLICT (events_partition) DO UPDATE
               SET next_offset = EXCLUDED.next_offset, state = EXCLUDED.state, saved_at = now()""",
            partition,
            next_offset,
            pickle.dumps(states, protocol=pickle.HIGHEST_PROTOCOL),
        )

    async def _replay(self, partition: int, states: States, offset: int) -> tuple[States, int, int]:
        tp = TopicPartition(topics.EVENTS, partition)
        events = consumer(self._bootstrap)
        await events.start()
        count = 0
        try:
            events.assign([tp])
            events.seek(tp, offset)
            end = (await events.end_offsets([tp]))[tp]
            while await events.position(tp) < end:
                batch = await events.getmany(tp, timeout_ms=500, max_records=5000)
                for record in batch.get(tp, []):
                    _fold(states, record.value or b"")
                    count += 1
            return states, await events.position(tp), count
        finally:
            await events.stop()


def _fold(states: States, raw: bytes) -> None:
    try:
        env = EventEnvelope.model_validate_json(raw)
        event = parse_event(env.type, env.schema_version, env.payload)
    except (ValidationError, KeyError, ValueError) as exc:
        # Not an event this writer wrote: the projector dead-letters it; skip it here.
        log.error("undecodable_event_skipped", error=str(exc)[:300])
        return
    state = states.setdefault(env.stream_id, StreamState(env.stream_id))
    if env.seq != state.seq + 1:
        # Only the writer appends; a gap means the log and the writer disagree.
        raise RuntimeError(f"{env.stream_id}: seq {env.seq} follows {state.seq}")
    evolve(state, env.seq, env.command_id, event)
