"""The command writer's stream cache: a stream not in memory is exactly its checkpoint
row, so streams leave only right after a checkpoint, least recently used first, and come
back from their rows when a command for them arrives."""

from __future__ import annotations

import copy
from collections.abc import Collection

from services.command.adapters.streams import StreamCache
from services.command.state import Item, StreamState


class Rows:
    """The checkpoint rows, in memory, with the restorer's load and save."""

    def __init__(self, rows: dict[str, StreamState]) -> None:
        self.rows = rows
        self.loads: list[list[str]] = []

    async def load(self, partition: int, stream_ids: Collection[str]) -> dict[str, StreamState]:
        self.loads.append(sorted(stream_ids))
        return {s: copy.deepcopy(self.rows[s]) for s in stream_ids if s in self.rows}

    async def save(
        self, partition: int, states: dict[str, StreamState], dirty: set[str], offset: int
    ) -> None:
        for stream_id in dirty:
            self.rows[stream_id] = copy.deepcopy(states[stream_id])


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
    assert set(w.states) == {"o/big"}
    await w.load({"o/big"})
    assert rows.loads == [["o/big"]]  # still in memory: not loaded again
