"""Incremental checkpoints of the command writer: only the streams that changed are
rewritten, the offset moves with them in one transaction, rows load on demand, a
whole-partition checkpoint written before stream rows existed still restores (and is
then rewritten), and a checkpoint older than the stored one writes nothing."""

from __future__ import annotations

import pickle
import random

import asyncpg
import pytest

from contracts import commands as c
from engram.crypto import MasterKey
from services.command.adapters.restore import Restorer
from services.command.core import decide
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context

pytestmark = pytest.mark.integration


async def checkpoint(
    restorer: Restorer, partition: int, states: dict[str, StreamState], dirty: set[str], at: int
) -> None:
    """A checkpoint, as the writer's stream cache makes one: encoded, then written."""
    assert await restorer.write(partition, await restorer.encode(partition, states, dirty), at)


def state(stream_id: str, seq: int) -> StreamState:
    return StreamState(stream_id, seq=seq, generation=seq)


async def forget_partition(pool: asyncpg.Pool, partition: int) -> None:
    for table in ("stream_items", "stream_answers", "stream_states", "checkpoints"):
        await pool.execute(f"DELETE FROM command.{table} WHERE events_partition = $1", partition)


def run(state: StreamState, cmd: c.Command) -> None:
    for event in decide(state, cmd, make_context()):
        evolve(state, state.seq + 1, f"c{state.seq + 1}", event)


async def test_items_are_rows_of_their_own_written_when_new_or_changed(
    stack_settings: dict[str, str],
) -> None:
    partition = random.randint(100_000, 900_000)
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    restorer = Restorer(pool, stack_settings["KAFKA_BOOTSTRAP_SERVERS"], MasterKey(bytes(32)))
    written = "SELECT count(*) FROM command.stream_items WHERE events_partition = $1"
    try:
        live = StreamState("o/member:ana")
        for n in range(5):
            run(live, c.RememberMemory(content=f"fact {n}", key=f"k{n}"))
        await checkpoint(restorer, partition, {live.stream_id: live}, {live.stream_id}, 10)
        assert await pool.fetchval(written, partition) == 5

        ids = list(live.items)
        run(live, c.PinMemory(item_id=ids[3], pinned=True))
        run(live, c.RememberMemory(content="fact 5"))
        run(live, c.RememberMemory(content="fact 1 again", key="k1"))  # a revision of ids[1]
        before = {
            r["item_id"]: r["xmin"]
            for r in await pool.fetch(
                "SELECT item_id, xmin::text FROM command.stream_items WHERE events_partition = $1",
                partition,
            )
        }
        await checkpoint(restorer, partition, {live.stream_id: live}, {live.stream_id}, 20)
        after = {
            r["item_id"]: r["xmin"]
            for r in await pool.fetch(
                "SELECT item_id, xmin::text FROM command.stream_items WHERE events_partition = $1",
                partition,
            )
        }
        rewritten = {i for i in after if after[i] != before.get(i)}
        assert rewritten == {ids[1], ids[3], list(live.items)[5]}  # only these were written

        loaded = (await restorer.load(partition, [live.stream_id]))[live.stream_id]
        assert loaded == live and list(loaded.items) == list(live.items)
        holder = loaded.active_by_key("k:k1")  # the test context's hash of the key
        assert holder is not None and holder.item_id == ids[1]
    finally:
        await forget_partition(pool, partition)
        await pool.close()


async def test_answers_are_stored_in_runs_written_when_new_and_deleted_when_no_longer_kept(
    stack_settings: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("services.command.state.ANSWERS_KEPT", 4)
    partition = random.randint(100_000, 900_000)
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    restorer = Restorer(pool, stack_settings["KAFKA_BOOTSTRAP_SERVERS"], MasterKey(bytes(32)))
    runs = (
        "SELECT position, last, xmin::text FROM command.stream_answers WHERE events_partition = $1"
    )

    async def stored() -> dict[int, tuple[int, str]]:
        return {r["position"]: (r["last"], r["xmin"]) for r in await pool.fetch(runs, partition)}

    async def save(offset: int) -> None:
        await checkpoint(restorer, partition, {live.stream_id: live}, {live.stream_id}, offset)

    try:
        live = StreamState("o/member:ana")
        for n in range(3):
            run(live, c.RememberMemory(content=f"fact {n}"))
        live.record_fingerprint("c1", b"digest")
        await save(10)
        first = await stored()
        assert {p: last for p, (last, _) in first.items()} == {0: 2}

        for n in range(3, 6):
            run(live, c.RememberMemory(content=f"fact {n}"))
        await save(20)
        second = await stored()
        assert {p: last for p, (last, _) in second.items()} == {0: 2, 3: 5}
        assert second[0] == first[0]  # not written again: it still holds a kept answer

        loaded = (await restorer.load(partition, [live.stream_id]))[live.stream_id]
        assert loaded == live and list(loaded.results) == ["c3", "c4", "c5", "c6"]
        assert loaded.answers_made == 6 and loaded.fingerprint_of("c1") is None  # went too

        run(live, c.RememberMemory(content="fact 6"))
        await save(30)  # the oldest kept is now the fourth: the first run goes
        assert {p: last for p, (last, _) in (await stored()).items()} == {3: 5, 6: 6}
        loaded = (await restorer.load(partition, [live.stream_id]))[live.stream_id]
        assert loaded == live and list(loaded.results) == list(live.results)
    finally:
        await forget_partition(pool, partition)
        await pool.close()


async def test_only_changed_streams_are_rewritten_and_the_offset_moves_with_them(
    stack_settings: dict[str, str],
) -> None:
    partition = random.randint(100_000, 900_000)  # a partition no writer owns
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    restorer = Restorer(pool, stack_settings["KAFKA_BOOTSTRAP_SERVERS"], MasterKey(bytes(32)))
    try:
        assert await restorer._checkpoint(partition) == ({}, 0, set())

        states = {"o/a": state("o/a", 3), "o/b": state("o/b", 5)}
        await checkpoint(restorer, partition, states, {"o/a", "o/b"}, 120)
        states["o/a"].seq = 9  # changed since, but not saved: not dirty
        states["o/c"] = state("o/c", 1)
        await checkpoint(restorer, partition, states, {"o/c"}, 150)

        # The rows load on demand: a restore starts from none of them.
        restored, offset, dirty = await restorer._checkpoint(partition)
        assert (restored, offset, dirty) == ({}, 150, set())
        rows = await restorer.load(partition, ["o/a", "o/b", "o/c", "o/new"])
        assert {s: st.seq for s, st in rows.items()} == {"o/a": 3, "o/b": 5, "o/c": 1}

        # A checkpoint from before stream rows: the whole partition in one value.
        legacy = {"o/d": state("o/d", 7)}
        await pool.execute(
            "UPDATE command.checkpoints SET state = $2, next_offset = 200 "
            "WHERE events_partition = $1",
            partition,
            pickle.dumps(legacy),
        )
        restored, offset, dirty = await restorer._checkpoint(partition)
        assert (offset, set(restored), dirty) == (200, {"o/d"}, {"o/d"})
        await checkpoint(restorer, partition, restored, dirty, 210)  # rewritten as rows
        assert (
            await pool.fetchval(
                "SELECT state FROM command.checkpoints WHERE events_partition = $1", partition
            )
            is None
        )
        restored, offset, _ = await restorer._checkpoint(partition)
        assert offset == 210 and restored == {}
        assert (await restorer.load(partition, ["o/d"]))["o/d"].seq == 7
    finally:
        await forget_partition(pool, partition)
        await pool.close()


async def test_a_checkpoint_older_than_the_stored_one_writes_nothing(
    stack_settings: dict[str, str],
) -> None:
    """A writer that stopped while its checkpoint's write hung may finish it after the next
    owner wrote a newer one: its rows and offset must not replace the newer ones."""
    partition = random.randint(100_000, 900_000)
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=2)
    assert pool is not None
    restorer = Restorer(pool, stack_settings["KAFKA_BOOTSTRAP_SERVERS"], MasterKey(bytes(32)))
    try:
        old = await restorer.encode(partition, {"o/a": state("o/a", 3)}, {"o/a"})
        new = await restorer.encode(partition, {"o/a": state("o/a", 8)}, {"o/a"})
        assert await restorer.write(partition, new, 300)
        assert not await restorer.write(partition, old, 250)  # finished late: nothing
        _, offset, _ = await restorer._checkpoint(partition)
        assert offset == 300
        assert (await restorer.load(partition, ["o/a"]))["o/a"].seq == 8
        assert await restorer.write(partition, old, 300)  # the same offset: written
        assert (await restorer.load(partition, ["o/a"]))["o/a"].seq == 3
    finally:
        await forget_partition(pool, partition)
        await pool.close()
