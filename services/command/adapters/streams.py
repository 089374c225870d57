"""A partition writer's stream states, and the checkpoints that let the next owner of the
partition restore them without reading the whole log."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from engram.logging import get_logger
from services.command.adapters.restore import Restorer
from services.command.adapters.stored_rows import CheckpointRows
from services.command.state import StreamState

log = get_logger(__name__)


class StreamCache:
    """The partition's stream states, least recently used first. A stream not in it is
    exactly its checkpoint row (or new): streams leave it only once a checkpoint that saved
    them is written, and never one changed since.

    A checkpoint's rows are encoded while the writer waits (the states hold still), and
    Postgres writes them while the writer goes on deciding: a write took 60-80 ms of a
    100-130 ms checkpoint, every 5,000 events, during which the partition's commands
    waited (the 64-writer benchmark's p99 went from about 55 to 120-140 ms in a round that
    held one). One checkpoint is written at a time; a failed write's streams and events
    count toward the next."""

    def __init__(
        self,
        partition: int,
        restorer: Restorer,
        checkpoint_every: int = 5000,
        cached_items: int = 100_000,
    ) -> None:
        self.partition = partition
        self._restorer = restorer
        self.states: dict[str, StreamState] = {}
        self.dirty: set[str] = set()  # streams changed since the last checkpoint
        self.next_event_offset = 0  # where a checkpoint taken now would resume reading
        self.events_since_checkpoint = 0
        self.checkpoint_every = checkpoint_every
        self._cached_items = cached_items
        self._writing: asyncio.Task[bool] | None = None  # the checkpoint being written

    async def restore(self) -> None:
        # Events replayed count toward the next checkpoint: a long replay is saved soon.
        restored = await self._restorer.restore(self.partition)
        self.states, self.next_event_offset = restored.states, restored.next_offset
        self.events_since_checkpoint, self.dirty = restored.replayed, restored.dirty
        await self.maybe_checkpoint()

    def committed(self, last_event_offset: int, events: int) -> None:
        """A transaction put ``events`` events in the log, the last at that offset."""
        self.next_event_offset = last_event_offset + 1
        self.events_since_checkpoint += events

    async def maybe_checkpoint(self) -> None:
        """Every N events (after a commit or a long restore), save the decision state as of
        ``next_event_offset``, so the next owner replays at most N events. Call it between
        batches: it encodes the rows before it returns, leaves them to Postgres, and lets
        the streams a written checkpoint saved leave the cache."""
        self._settle()
        if self.events_since_checkpoint < self.checkpoint_every:
            return
        await self.written()  # one checkpoint at a time
        dirty, events, offset = self.dirty, self.events_since_checkpoint, self.next_event_offset
        rows = await self._restorer.encode(self.partition, self.states, dirty)
        self.dirty, self.events_since_checkpoint = set(), 0
        self._writing = asyncio.create_task(
            self._write(rows, dirty, events, offset),
            name=f"command-checkpoint-{self.partition}",
        )

    async def _write(self, rows: CheckpointRows, dirty: set[str], events: int, offset: int) -> bool:
        """Whether the rows were written (not when a newer owner's checkpoint is stored)."""
        try:
            return await self._restorer.write(self.partition, rows, offset)
        except BaseException:  # not saved: the next checkpoint takes its streams again
            self.dirty |= dirty
            self.events_since_checkpoint += events
            raise

    async def written(self) -> None:
        """Wait for the checkpoint being written, if any (a writer that stops saves what it
        has begun); call it between batches, as streams may leave the cache then."""
        if self._writing is not None:
            await asyncio.wait([self._writing])
        self._settle()

    def _settle(self) -> None:
        """A checkpoint written: the streams it saved may leave the cache. One that failed
        is logged, its streams already marked changed again; one a newer owner's checkpoint
        superseded saved nothing, and nothing leaves."""
        task = self._writing
        if task is None or not task.done():
            return
        self._writing = None
        if task.cancelled() or (error := task.exception()) is not None:
            log.warning(
                "checkpoint_failed",
                partition=self.partition,
                error="cancelled" if task.cancelled() else repr(error),
            )
            return
        if task.result():  # superseded: nothing of this writer's was saved
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently used streams (all saved) while the cache holds more
        than its budget (a stream counts its items plus one, so empty states count too);
        the most recent stream always stays."""
        held = sum(len(state.items) + 1 for state in self.states.values())
        for stream_id in list(self.states)[:-1]:
            if held <= self._cached_items:
                break
            if stream_id in self.dirty:  # changed since the checkpoint: its row is behind
                continue
            held -= len(self.states.pop(stream_id).items) + 1

    async def load(self, stream_ids: set[str]) -> None:
        """Bring a batch's streams into the cache, as the most recently used."""
        if missing := [s for s in stream_ids if s not in self.states]:
            loaded = await self._restorer.load(self.partition, missing)
            for stream_id in missing:
                self.states[stream_id] = loaded.get(stream_id) or StreamState(stream_id)
        for stream_id in stream_ids:
            self.states[stream_id] = self.states.pop(stream_id)

    def drop_undecided(self, stream_ids: Iterable[str]) -> None:
        """Streams where nothing was ever decided (all refused) are not kept."""
        for stream_id in stream_ids:
            state = self.states.get(stream_id)
            if state is not None and state.seq == 0 and not state.results:
                del self.states[stream_id]
