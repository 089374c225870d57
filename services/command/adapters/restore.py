"""Restore a partition's decision state: the last checkpoint plus the events after it.

A checkpoint is incremental: each stream's state is a row, rewritten only when the
stream changed since the previous checkpoint, and the partition's row names the event
offset all of them are valid at (they are written in one transaction).

The writer must not take a command before this finishes: deciding on a partial
state could accept a stale base revision or reuse a ``seq``.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from dataclasses import dataclass

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


@dataclass
class Restored:
    states: States
    next_offset: int
    replayed: int
    dirty: set[str]  # streams whose state differs from their checkpoint row


class Restorer:
    def __init__(self, pool: asyncpg.Pool, bootstrap: str) -> None:
        self._pool = pool
        self._bootstrap = bootstrap

    async def restore(self, partition: int) -> Restored:
        """The partition's states, the next event offset, what was replayed and changed."""
        started = time.monotonic()
        states, offset, dirty = await self._checkpoint(partition)
        offset, count, touched = await self._replay(partition, states, offset)
        log.info(
            "partition_restored",
            partition=partition,
            streams=len(states),
            events_replayed=count,
            next_offset=offset,
            seconds=round(time.monotonic() - started, 3),
        )
        return Restored(states, offset, count, dirty | touched)

    async def _checkpoint(self, partition: int) -> tuple[States, int, set[str]]:
        async with self._pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT next_offset, state FROM command.checkpoints WHERE events_partition = $1",
                partition,
            )
            if row is None:
                return {}, 0, set()
            if row["state"] is not None:  # a whole-partition checkpoint, from before rows
                states: States = await asyncio.to_thread(pickle.loads, row["state"])
                return states, row["next_offset"], set(states)
            rows = await conn.fetch(
                "SELECT stream_id, state FROM command.stream_states WHERE events_partition = $1",
                partition,
            )
        # Unpickling a large partition takes seconds: off the event loop, which keeps the
        # other partitions' writers and the consumer's heartbeats going meanwhile.
        states = await asyncio.to_thread(_unpickle, rows)
        return states, row["next_offset"], set()

    async def save(self, partition: int, states: States, dirty: set[str], next_offset: int) -> None:
        """Rewrite the changed streams' rows and the offset they are valid at, atomically."""
        # The writer awaits this before it takes another batch, so the states hold still.
        rows = await asyncio.to_thread(_pickle_rows, partition, states, dirty)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.executemany(
                """INSERT INTO command.stream_states (events_partition, stream_id, state)
                   VALUES ($1, $2, $3)
                   ON CONFLICT (events_partition, stream_id)
                   DO UPDATE SET state = EXCLUDED.state""",
                rows,
            )
            await conn.execute(
                """INSERT INTO command.checkpoints (events_partition, next_offset, state)
                   VALUES ($1, $2, NULL)
                   ON CONFLICT (events_partition) DO UPDATE
                   SET next_offset = EXCLUDED.next_offset, state = NULL, saved_at = now()""",
                partition,
                next_offset,
            )

    async def _replay(
        self, partition: int, states: States, offset: int
    ) -> tuple[int, int, set[str]]:
        """Fold the events after ``offset`` into ``states``: the next offset, how many
        events, and which streams they touched."""
        tp = TopicPartition(topics.EVENTS, partition)
        events = consumer(self._bootstrap)
        await events.start()
        count, touched = 0, set()
        try:
            events.assign([tp])
            events.seek(tp, offset)
            end = (await events.end_offsets([tp]))[tp]
            while await events.position(tp) < end:
                batch = await events.getmany(tp, timeout_ms=500, max_records=5000)
                for record in batch.get(tp, []):
                    stream_id = _fold(states, record.value or b"")
                    if stream_id is not None:
                        touched.add(stream_id)
                    count += 1
            return await events.position(tp), count, touched
        finally:
            await events.stop()


def _unpickle(rows: list[asyncpg.Record]) -> States:
    return {r["stream_id"]: pickle.loads(r["state"]) for r in rows}


def _pickle_rows(partition: int, states: States, dirty: set[str]) -> list[tuple[int, str, bytes]]:
    return [
        (partition, stream_id, pickle.dumps(states[stream_id], pickle.HIGHEST_PROTOCOL))
        for stream_id in sorted(dirty)
        if stream_id in states
    ]


def _fold(states: States, raw: bytes) -> str | None:
    """Fold one event; the stream it changed (None: not an event of this writer's)."""
    try:
        env = EventEnvelope.model_validate_json(raw)
        event = parse_event(env.type, env.schema_version, env.payload)
    except (ValidationError, KeyError, ValueError) as exc:
        # Not an event this writer wrote: the projector dead-letters it; skip it here.
        log.error("undecodable_event_skipped", error=str(exc)[:300])
        return None
    state = states.setdefault(env.stream_id, StreamState(env.stream_id))
    if env.seq != state.seq + 1:
        # Only the writer appends; a gap means the log and the writer disagree.
        raise RuntimeError(f"{env.stream_id}: seq {env.seq} follows {state.seq}")
    evolve(state, env.seq, env.command_id, event)
    return env.stream_id
