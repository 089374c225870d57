"""A partition writer's stream states, and the checkpoints that let the next owner of the
partition restore them without reading the whole log."""

from __future__ import annotations

from collections.abc import Iterable

from services.command.adapters.restore import Restorer
from services.command.state import StreamState


class StreamCache:
    """The partition's stream states, least recently used first. A stream not in it is
    exactly its checkpoint row (or new): streams leave it only right after a checkpoint,
    which saved every changed stream."""

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
        ``next_event_offset``, so the next owner replays at most N events."""
        if self.events_since_checkpoint >= self.checkpoint_every:
            await self._restorer.save(
                self.partition, self.states, self.dirty, self.next_event_offset
            )
            self.events_since_checkpoint = 0
            self.dirty = set()
            self._evict()

    def _evict(self) -> None:
        """Drop the least recently used streams (all saved) while the cache holds more
        than its budget (a stream counts its items plus one, so empty states count too);
        the most recent stream always stays."""
        held = sum(len(state.items) + 1 for state in self.states.values())
        for stream_id in list(self.states)[:-1]:
            if held <= self._cached_items:
                break
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
