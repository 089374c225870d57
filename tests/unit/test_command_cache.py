"""The command writer's stream cache: a stream not in memory is exactly its checkpoint
row, so streams leave only once a checkpoint that saved them is written (and never one
changed since), least recently used first, and come back from their rows when a command
for them arrives. The rows are encoded while the writer waits, and written while it goes
on."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Collection

from services.command.adapters.streams import StreamCache
from services.command.state import Item, StreamState


class Rows:
    """The checkpoint rows, in memory, with the restorer's load, encode and write. A write
    waits for ``release`` when ``hold`` is set, and fails once when ``fail`` is set."""

    def __init__(self, rows: dict[str, StreamState]) -> None:
        self.rows = rows
        self.loads: list[list[str]] = []
        self.offsets: list[int] = []
        self.hold = False
        self.release = asyncio.Event()
        self.fail = False

    async def load(self, partition: int, stream_ids: Collection[str]) -> dict[str, StreamState]:
        self.loads.append(sorted(stream_ids))
        return {s: copy.deepcopy(self.rows[s]) for s in stream_ids if s in self.rows}

    async def encode(
        self, partition: int, states: dict[str, StreamState], dirty: set[str]
    ) -> dict[str, StreamState]:
        return {stream_id: copy.deepcopy(states[stream_id]) for stream_id in dirty}

    async def write(self, partition: int, rows: dict[str, StreamState], offset: int) -> bool:
        if self.hold:
            await self.release.wait()
        if self.fail:
            self.fail = False
            raise ConnectionError("the database went away")
        if self.offsets and self.offsets[-1] > offset:
            return False  # a newer owner's checkpoint is stored
        self.rows |= rows
        self.offsets.append(offset)
        return True


def stream(stream_id: str, items: int) -> StreamState:
    state = StreamState(stream_id, seq=items)
    for n in range(items):
        state.items[f"{stream_id}-{n}"] = Item(
            f"{stream_id}-{n}", "fact", "active", 1, False, None, True
        )
    return state


def cache(rows: Rows, cached_items: int) -> StreamCache:
    return StreamCache(0, rows, checkpoint_every=1, cached_items=cached_items)  # type: ignore[arg-type]


async def test_streams_load_from_their_rows_and_leave_only_after_a_checkpoint() -> None:
    rows = Rows({"o/a": stream("o/a", 2), "o/b": stream("o/b", 2)})
    w = cache(rows, cached_items=5)

    await w.load({"o/a"})
    await w.load({"o/b", "o/new"})
    assert rows.loads == [["o/a"], ["o/b", "o/new"]]
    assert w.states["o/a"].seq == 2 and w.states["o/new"].seq == 0
    assert next(iter(w.states)) == "o/a"  # the least recently used first

    # A change, and no checkpoint yet: nothing leaves, whatever the budget says.
    w.states["o/new"] = stream("o/new", 1)
    w.dirty.add("o/new")
    assert len(w.states) == 3

    # The checkpoint saves the changed stream, then the oldest streams leave until they
    # fit (each counts its items plus one: 3 + 3 + 2 > 5, so o/a goes and 5 remain).
    w.events_since_checkpoint = 1
    await w.maybe_checkpoint()
    await w.written()
    assert rows.rows["o/new"].seq == 1 and w.dirty == set()
    assert set(w.states) == {"o/b", "o/new"}

    # A command for o/a brings it back from its row, as it was.
    await w.load({"o/a"})
    assert rows.loads[-1] == ["o/a"] and len(w.states["o/a"].items) == 2
    assert list(w.states)[-1] == "o/a"  # now the most recently used


async def test_the_most_recent_stream_stays_even_past_the_budget() -> None:
    rows = Rows({"o/big": stream("o/big", 10)})
    w = cache(rows, cached_items=1)
    await w.load({"o/big"})
    w.events_since_checkpoint = 1
    await w.maybe_checkpoint()
    await w.written()
    assert set(w.states) == {"o/big"}
    await w.load({"o/big"})
    assert rows.loads == [["o/big"]]  # still in memory: not loaded again


async def test_streams_stay_until_the_checkpoint_is_written_and_one_changed_since_stays() -> None:
    rows = Rows({"o/a": stream("o/a", 2), "o/b": stream("o/b", 2), "o/c": stream("o/c", 2)})
    w = cache(rows, cached_items=3)
    await w.load({"o/a"})
    await w.load({"o/b"})
    await w.load({"o/c"})
    w.dirty = {"o/a", "o/b", "o/c"}
    w.events_since_checkpoint, w.next_event_offset = 1, 40
    rows.hold = True

    await w.maybe_checkpoint()  # encoded, being written: the writer goes on
    assert w.dirty == set() and rows.offsets == []
    w.states["o/a"].seq += 1  # a batch decided meanwhile changes o/a
    w.dirty.add("o/a")
    await w.maybe_checkpoint()  # between batches, the write not done: nothing leaves
    assert set(w.states) == {"o/a", "o/b", "o/c"}

    rows.release.set()
    await w.written()
    assert rows.offsets == [40] and rows.rows["o/a"].seq == 2  # as it was when encoded
    # Over budget: o/b leaves (saved); o/a, changed since, stays; o/c is the most recent.
    assert set(w.states) == {"o/a", "o/c"}
    assert w.states["o/a"].seq == 3


async def test_a_failed_write_leaves_its_streams_for_the_next_checkpoint() -> None:
    rows = Rows({"o/a": stream("o/a", 1), "o/b": stream("o/b", 1)})
    w = cache(rows, cached_items=1)
    await w.load({"o/a"})
    await w.load({"o/b"})
    w.dirty = {"o/a"}
    w.events_since_checkpoint, w.next_event_offset = 1, 7
    rows.fail = True

    await w.maybe_checkpoint()
    await w.written()  # failed: logged, not raised; nothing leaves
    assert rows.offsets == [] and w.dirty == {"o/a"} and w.events_since_checkpoint == 1
    assert set(w.states) == {"o/a", "o/b"}

    await w.maybe_checkpoint()  # the next one saves it
    await w.written()
    assert rows.offsets == [7] and w.dirty == set()
    assert set(w.states) == {"o/b"}  # o/a saved and least recently used: it leaves


async def test_a_superseded_checkpoint_saved_nothing_and_nothing_leaves() -> None:
    rows = Rows({"o/a": stream("o/a", 1), "o/b": stream("o/b", 1)})
    rows.offsets = [100]  # a newer owner's checkpoint
    w = cache(rows, cached_items=1)
    await w.load({"o/a"})
    await w.load({"o/b"})
    w.dirty = {"o/a"}
    w.events_since_checkpoint, w.next_event_offset = 1, 50
    await w.maybe_checkpoint()
    await w.written()
    assert rows.offsets == [100] and set(w.states) == {"o/a", "o/b"}
