"""Restore a partition's decision state: the last checkpoint plus the events after it.

A checkpoint is incremental: each stream's state without its items and answers is a row
(``command.stream_states``), rewritten only when the stream changed since the previous
checkpoint; each item is a row of its own (``command.stream_items``), written only when it
is new or changed; and the answers a stream gave since the last checkpoint are a row, a run
of them (``command.stream_answers``), deleted when the stream keeps none of them any more.
The partition's row names the event offset all of them are valid at (they are written in
one transaction). So a stream's rows are its whole state unless the stream has events after
that offset.

A restore therefore loads only the rows of the streams the replay touches; the writer
loads any other stream's row when a command for it arrives (``load``). The writer must
not take a command before the restore finishes: deciding on a partial state could
accept a stale base revision or reuse a ``seq``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import asyncpg
from aiokafka import TopicPartition
from pydantic import ValidationError

from contracts import topics
from contracts.envelope import EventHeader
from contracts.events import Event, MemoryRemembered, decode_event
from engram.crypto import MasterKey
from engram.kafka import consumer
from engram.logging import get_logger
from services.command.adapters.stored_rows import (
    CheckpointRows,
    States,
    answers_from_header,
    hash_keys,
    loads,
    rows_to_save,
    states_from_rows,
)
from services.command.adapters.stored_rows import UnsafeRow as UnsafeRow
from services.command.fold import evolve
from services.command.state import StreamState

log = get_logger(__name__)
UNPICKLE_INLINE_BYTES = 1 << 20  # more than this is unpickled in a thread
_checkpoint_rows = rows_to_save  # bench/bench_stream_size.py times it by this name

SAVE_HEADERS = """INSERT INTO command.stream_states (events_partition, stream_id, state)
                   VALUES ($1, $2, $3)
                   ON CONFLICT (events_partition, stream_id)
                   DO UPDATE SET state = EXCLUDED.state"""
SAVE_NEW_ITEMS = """INSERT INTO command.stream_items
                           (events_partition, stream_id, item_id, position, item)
                       SELECT $1, s, i, p, r
                       FROM unnest($2::text[], $3::text[], $4::integer[], $5::bytea[])
                            AS u(s, i, p, r)
                       ON CONFLICT (events_partition, stream_id, item_id)
                       DO UPDATE SET position = EXCLUDED.position, item = EXCLUDED.item"""
SAVE_CHANGED_ITEMS = """UPDATE command.stream_items t SET item = u.r
                       FROM unnest($2::text[], $3::text[], $4::bytea[]) AS u(s, i, r)
                       WHERE t.events_partition = $1 AND t.stream_id = u.s
                         AND t.item_id = u.i"""
DROP_ANSWERS = """DELETE FROM command.stream_answers a
                  USING unnest($2::text[], $3::bigint[], $4::boolean[], $5::bigint[])
                        AS u(s, below, whole, replaced)
                  WHERE a.events_partition = $1 AND a.stream_id = u.s
                    AND (a.last < u.below OR u.whole OR a.position >= u.replaced)"""
SAVE_ANSWERS = """INSERT INTO command.stream_answers
                         (events_partition, stream_id, position, last, answers)
                  SELECT $1, s, p, l, r
                  FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bytea[])
                       AS u(s, p, l, r)
                  ON CONFLICT (events_partition, stream_id, position)
                  DO UPDATE SET last = EXCLUDED.last, answers = EXCLUDED.answers"""
# One checkpoint write of a partition at a time (the partition's row may not exist yet).
LOCK_CHECKPOINT = "SELECT pg_advisory_xact_lock(hashtext('command.checkpoints'), $1)"
STORED_OFFSET = "SELECT next_offset FROM command.checkpoints WHERE events_partition = $1"
SAVE_OFFSET = """INSERT INTO command.checkpoints (events_partition, next_offset, state)
                   VALUES ($1, $2, NULL)
                   ON CONFLICT (events_partition) DO UPDATE
                   SET next_offset = EXCLUDED.next_offset, state = NULL, saved_at = now()"""


@dataclass
class Restored:
    states: States
    next_offset: int
    replayed: int
    dirty: set[str]  # streams whose state differs from their checkpoint row


class Restorer:
    def __init__(self, pool: asyncpg.Pool, bootstrap: str, master: MasterKey) -> None:
        self._pool = pool
        self._bootstrap = bootstrap
        self._master = master

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
        """The states to start from (none: rows load on demand), the offset they are
        valid at, and which of them differ from their rows."""
        row = await self._pool.fetchrow(
            "SELECT next_offset, state FROM command.checkpoints WHERE events_partition = $1",
            partition,
        )
        if row is None:
            return {}, 0, set()
        if row["state"] is not None:  # a whole-partition checkpoint, from before rows
            states: States = await asyncio.to_thread(loads, row["state"])
            for state in states.values():
                hash_keys(state, self._master)
                answers_from_header(state)
            return states, row["next_offset"], set(states)
        return {}, row["next_offset"], set()

    async def load(self, partition: int, stream_ids: Collection[str]) -> States:
        """The checkpoint rows of these streams (a stream without one is new)."""
        async with self._pool.acquire() as conn:
            headers = await conn.fetch(
                "SELECT stream_id, state FROM command.stream_states "
                "WHERE events_partition = $1 AND stream_id = ANY($2)",
                partition,
                list(stream_ids),
            )
            found = [h["stream_id"] for h in headers]
            items = await conn.fetch(
                "SELECT stream_id, item FROM command.stream_items "
                "WHERE events_partition = $1 AND stream_id = ANY($2) "
                "ORDER BY stream_id, position",
                partition,
                found,
            )
            answers = await conn.fetch(
                "SELECT stream_id, position, answers FROM command.stream_answers "
                "WHERE events_partition = $1 AND stream_id = ANY($2) "
                "ORDER BY stream_id, position",
                partition,
                found,
            )
        size = (
            sum(len(r["state"]) for r in headers)
            + sum(len(r["item"]) for r in items)
            + sum(len(r["answers"]) for r in answers)
        )
        if size < UNPICKLE_INLINE_BYTES:
            return states_from_rows(headers, items, answers, self._master)
        # Unpickling many large streams takes a while: off the event loop, which keeps the
        # other partitions' writers and the consumer's heartbeats going meanwhile.
        return await asyncio.to_thread(states_from_rows, headers, items, answers, self._master)

    async def encode(self, partition: int, states: States, dirty: set[str]) -> CheckpointRows:
        """The changed streams' headers, their new and changed items and answers, encoded
        off the event loop: the caller keeps the states still until this returns (the
        writer takes no batch meanwhile)."""
        return await asyncio.to_thread(rows_to_save, partition, states, dirty)

    async def write(self, partition: int, rows: CheckpointRows, next_offset: int) -> bool:
        """Write encoded rows and the offset they are valid at, atomically; False, writing
        nothing, when the partition's stored checkpoint is newer. Checkpoints are written
        while their writer goes on, and one whose writer stopped may finish after the next
        owner's newer one: written then, it would put the offset back under rows that hold
        the events after it, which a restore would fold twice."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(LOCK_CHECKPOINT, partition)
            stored = await conn.fetchval(STORED_OFFSET, partition)
            if stored is not None and stored > next_offset:
                log.warning(
                    "checkpoint_superseded",
                    partition=partition,
                    offset=next_offset,
                    stored_offset=stored,
                )
                return False
            await _write_rows(conn, partition, rows)
            await conn.execute(SAVE_OFFSET, partition, next_offset)
        return True

    async def _replay(
        self, partition: int, states: States, offset: int
    ) -> tuple[int, int, set[str]]:
        """Fold the events after ``offset`` into ``states``: the next offset, how many
        events, and which streams they touched."""
        tp = TopicPartition(topics.EVENTS, partition)
        events = consumer(self._bootstrap)
        count, touched = 0, set()
        try:
            # In the try: a start that fails halfway, or is cancelled (a writer's start is
            # retried after faults, and each attempt restores), still stops the consumer.
            await events.start()
            events.assign([tp])
            events.seek(tp, offset)
            end = (await events.end_offsets([tp]))[tp]
            while await events.position(tp) < end:
                batch = await events.getmany(tp, timeout_ms=500, max_records=5000)
                records = batch.get(tp, [])
                count += len(records)
                decoded = [d for r in records if (d := _decode(r.value or b"")) is not None]
                missing = {env.stream_id for env, _ in decoded} - set(states)
                if missing:  # their rows are as of the checkpoint: fold onto them
                    states.update(await self.load(partition, missing))
                for env, event in decoded:
                    _fold(states, env, _with_key_hash(env, event, self._master))
                    touched.add(env.stream_id)
            return await events.position(tp), count, touched
        finally:
            await events.stop()


async def _write_rows(conn: asyncpg.Connection, partition: int, rows: CheckpointRows) -> None:
    await conn.executemany(SAVE_HEADERS, rows.headers)
    if rows.new:
        await conn.execute(SAVE_NEW_ITEMS, partition, *_columns(rows.new))
    if rows.changed:
        await conn.execute(SAVE_CHANGED_ITEMS, partition, *_columns(rows.changed))
    if rows.answers_below:  # first the runs no longer kept (all, where a run is whole)
        await conn.execute(DROP_ANSWERS, partition, *_columns(rows.answers_below))
    if rows.answers:
        await conn.execute(SAVE_ANSWERS, partition, *_columns(rows.answers))


def _columns(rows: Sequence[tuple[object, ...]]) -> list[list[object]]:
    """The rows as columns, as ``unnest`` takes them (one array a column)."""
    return [list(column) for column in zip(*rows, strict=True)]


def _with_key_hash(env: EventHeader, event: Event, master: MasterKey) -> Event:
    """An event written before labels were sealed carries its key in plain: the state
    keeps the key's hash, as the writer puts it in every event it writes now."""
    if isinstance(event, MemoryRemembered) and event.key is not None and event.key_hash is None:
        org = env.stream_id.split("/", 1)[0]
        return event.model_copy(update={"key_hash": master.key_hash(org, event.key)})
    return event


def _decode(raw: bytes) -> tuple[EventHeader, Event] | None:
    try:
        return decode_event(raw)
    except (ValidationError, KeyError, ValueError) as exc:
        # Not an event this writer wrote: the projector dead-letters it; skip it here.
        log.error("undecodable_event_skipped", error=str(exc)[:300])
        return None


def _fold(states: States, env: EventHeader, event: Event) -> None:
    """Fold one event in, as the writer did when it wrote it. Only the writer appends, so
    an event out of its stream's sequence, or one its state cannot take, is not the
    writer's (another producer's, on a broker without ACLs): it is reported and skipped,
    as the projector reports it (``projector.anomalies``), and the partition restores. A
    writer that cannot restore would hold its partition until the record is gone."""
    state = states.setdefault(env.stream_id, StreamState(env.stream_id))
    if env.seq != state.seq + 1:
        log.error(
            "restore_event_out_of_sequence",
            stream_id=env.stream_id,
            seq=env.seq,
            follows=state.seq,
            event_id=env.event_id,
        )
        return
    if event.item_id not in state.items and not isinstance(event, MemoryRemembered):
        log.error(
            "restore_event_of_unknown_item",
            stream_id=env.stream_id,
            seq=env.seq,
            item_id=event.item_id[:100],
            event_id=env.event_id,
        )
        return
    evolve(state, env.seq, env.command_id, event)
