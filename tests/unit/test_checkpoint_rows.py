"""A stream's checkpoint stores its state without items and answers as one row, each item as
a row of its own and each kept answer as a row of its own, writing only the items and
answers new or changed since the last checkpoint: whatever the commands, the rows load back
into the state the writer holds, in the same item and answer order, and rows of before this
format still load. (The SQL is the integration test's; here the three tables are
dictionaries that take the rows as its statements do.)"""

from __future__ import annotations

import os
import pickle
from dataclasses import replace
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import commands as c
from engram.crypto import MasterKey
from services.command.adapters.stored_rows import UnsafeRow, loads, rows_to_save, stream_of
from services.command.core import decide
from services.command.errors import DomainError
from services.command.fold import evolve
from services.command.rows import _item_row
from services.command.state import StreamState
from tests.unit.conftest import make_context
from tests.unit.test_decide_properties import build, steps

MASTER = MasterKey(bytes(32))


class Stored:
    """One stream's rows in command.stream_states, command.stream_items and
    command.stream_answers."""

    def __init__(self) -> None:
        self.header = b""
        self.items: dict[str, tuple[int, bytes]] = {}  # item_id -> (position, row)
        self.written = 0  # item rows written by the last save
        self.answers: dict[int, tuple[int, bytes]] = {}  # first place -> (last place, run)
        self.answers_written = 0  # answers written by the last save

    def save(self, state: StreamState) -> None:
        rows = rows_to_save(0, {state.stream_id: state}, {state.stream_id})
        [(_, _, self.header)] = rows.headers
        for _, item_id, position, item in rows.new:  # INSERT ... ON CONFLICT DO UPDATE
            self.items[item_id] = (position, item)
        for _, item_id, item in rows.changed:  # UPDATE ... WHERE item_id
            assert item_id in self.items
            self.items[item_id] = (self.items[item_id][0], item)
        self.written = len(rows.new) + len(rows.changed)
        [(_, below, whole, replaced)] = rows.answers_below  # DELETE ... WHERE last < below
        self.answers = {  # OR whole OR position >= replaced
            p: (last, r)
            for p, (last, r) in self.answers.items()
            if last >= below and not whole and (replaced is None or p < replaced)
        }
        self.answers_written = 0
        for _, first, last, run in rows.answers:  # INSERT ... ON CONFLICT DO UPDATE
            self.answers[first] = (last, run)
            self.answers_written += len(loads(run))
            assert last == first + len(loads(run)) - 1

    def kept(self) -> list[int]:
        """The places of the answers the stored runs hold (some no longer kept)."""
        return sorted({n for p, (last, _) in self.answers.items() for n in range(p, last + 1)})

    def load(self) -> StreamState:
        ordered = sorted(self.items.values())  # ORDER BY position
        assert [p for p, _ in ordered] == list(range(len(ordered)))
        rows = [loads(r) for _, r in ordered]
        runs = [(p, loads(r)) for p, (_, r) in self.answers.items()]
        return stream_of(loads(self.header), rows, MASTER, runs)


def reloaded(state: StreamState, stored: Stored | None = None) -> StreamState:
    stored = stored or Stored()
    stored.save(state)
    return stored.load()


def assert_same(loaded: StreamState, live: StreamState) -> None:
    assert loaded == live
    assert list(loaded.items) == list(live.items)  # decisions walk items in this order
    assert list(loaded.results) == list(live.results)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(steps(), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_a_checkpoint_row_loads_back_into_the_live_state(sequence: list[Any]) -> None:
    loads_back(sequence)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(steps(), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_it_does_when_the_stream_keeps_few_answers(sequence: list[Any]) -> None:
    with mock.patch("services.command.state.ANSWERS_KEPT", 4):  # most answers leave
        loads_back(sequence)


def loads_back(sequence: list[Any]) -> None:
    """Decide the commands, checkpointing and restarting where the sequence says: the
    rows always load back into the live state."""
    state = StreamState("acme/member:ana")
    stored = Stored()
    ids: list[str] = []
    seq = 0
    for (kind, a), checkpoint, restart in sequence:
        item_id = ids[a["slot"] % len(ids)] if ids else "missing"
        other_id = ids[a["other"] % len(ids)] if ids else "missing"
        cmd = build(kind, a, item_id, state, other_id)
        try:
            events = decide(state, cmd, make_context(is_agent=a["agent"], keep_revisions=2))
        except DomainError:
            events = []
        for event in events:
            seq += 1
            evolve(state, seq, f"c{seq}", event)
            if event.item_id not in ids:
                ids.append(event.item_id)
        if checkpoint:  # the writer saves a checkpoint, and goes on from its own state
            assert_same(reloaded(state, stored), state)
            if restart:  # or a new owner goes on from the rows
                state = stored.load()
    assert_same(reloaded(state, stored), state)


def run(state: StreamState, *commands: c.Command) -> None:
    for cmd in commands:
        for event in decide(state, cmd, make_context()):
            evolve(state, state.seq + 1, f"c{state.seq + 1}", event)


def saved(count: int) -> StreamState:
    state = StreamState("acme/member:ana")
    run(state, *(c.RememberMemory(content=f"fact {n}") for n in range(count)))
    return state


def test_only_new_and_changed_items_are_written() -> None:
    state, stored = saved(3), Stored()
    stored.save(state)
    assert stored.written == 3 and state.touched == set() and state.stored == 3
    _, second, _ = list(state.items)
    run(state, c.PinMemory(item_id=second, pinned=True), c.RememberMemory(content="fact 3"))
    assert state.touched == {second, list(state.items)[3]}
    assert_same(reloaded(state, stored), state)
    assert stored.written == 2  # the pinned one and the new one
    stored.save(state)
    assert stored.written == 0  # nothing changed since


def test_only_new_answers_are_written_and_those_no_longer_kept_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("services.command.state.ANSWERS_KEPT", 3)
    state, stored = saved(2), Stored()
    stored.save(state)
    assert stored.answers_written == 2 and stored.kept() == [0, 1]
    run(state, *(c.RememberMemory(content=f"fact {n}") for n in (2, 3, 4)))
    assert state.answered == {"c3", "c4", "c5"}
    assert_same(reloaded(state, stored), state)
    assert stored.answers_written == 3  # the new ones only
    assert stored.kept() == [2, 3, 4]  # the first run (0 and 1) is kept no more
    stored.save(state)
    assert stored.answers_written == 0  # nothing changed since
    run(state, c.RememberMemory(content="fact 5"))
    assert_same(reloaded(state, stored), state)
    assert stored.answers_written == 1
    assert stored.kept() == [2, 3, 4, 5]  # 2 is not kept, but its run (2-4) has 3 and 4


def test_digests_and_the_answers_of_commands_without_events_are_stored_too() -> None:
    state, stored = saved(1), Stored()
    state.record_fingerprint("c1", b"digest-1")
    state.record_answer("noop", {"item_id": "x", "revision": 1, "stream_id": "s"})
    loaded = reloaded(state, stored)
    assert_same(loaded, state)
    assert loaded.fingerprint_of("c1") == b"digest-1"
    assert loaded.first_answer("noop") == {"item_id": "x", "revision": 1}
    state.record_fingerprint("noop", b"digest-2")  # a digest after the checkpoint
    assert_same(reloaded(state, stored), state)
    assert stored.answers_written == 1
    run(state, c.RememberMemory(content="fact 1"), c.RememberMemory(content="fact 2"))
    assert list(state.results) == ["c1", "noop", "c2", "c3"]
    state.record_fingerprint("c2", b"digest-3")
    assert_same(reloaded(state, stored), state)  # runs 0-1, 1 and 2-3 are stored
    state.record_fingerprint("c1", b"digest-4")  # older answers change: the run from the
    state.record_fingerprint("c2", b"digest-5")  # oldest of them replaces runs 1 and 2-3
    loaded = reloaded(state, stored)
    assert_same(loaded, state)
    assert stored.answers_written == 4 and sorted(stored.answers) == [0]
    assert loaded.fingerprint_of("c2") == b"digest-5"


def test_a_format_4_row_held_its_answers_and_its_next_checkpoint_stores_them_all() -> None:
    state, stored = saved(3), Stored()
    stored.save(state)
    header = replace(state, items={}, stored=None, touched=None, answered=None)
    stored.header, stored.answers = pickle.dumps((4, header)), {}  # as format 4 stored it
    loaded = stored.load()
    assert_same(loaded, state)
    assert loaded.answered is None and loaded.answers_made == 3
    assert_same(reloaded(loaded, stored), state)
    assert stored.answers_written == 3 and stored.kept() == [0, 1, 2]


def test_forgetting_a_target_rewrites_the_rows_that_linked_to_it() -> None:
    state, stored = saved(2), Stored()
    source, target = list(state.items)
    run(state, c.LinkMemory(item_id=source, target_id=target, kind="related"))
    stored.save(state)
    run(state, c.ForgetMemory(item_id=target))
    assert source in (state.touched or set())  # its link to the forgotten memory went
    loaded = reloaded(state, stored)
    assert_same(loaded, state)
    assert not loaded.items[source].links


def keyed(count: int) -> StreamState:
    """A stream of ``count`` memories, each under a key (``key-N``), with their keys'
    hashes as the writer's master key makes them (not the test context's)."""
    state = StreamState("acme/member:ana")
    ctx = replace(make_context(), key_hash=lambda key: MASTER.key_hash("acme", key))
    for n in range(count):
        for event in decide(state, c.RememberMemory(content=f"fact {n}", key=f"key-{n}"), ctx):
            evolve(state, state.seq + 1, f"c{state.seq + 1}", event)
    return state


def of_before(state: StreamState) -> StreamState:
    """The state as versions before sealed labels kept it: each item's key in plain (in
    the field ``key``), no labels."""
    old = pickle.loads(pickle.dumps(state))
    for n, item in enumerate(old.items.values()):
        del item.__dict__["key_hash"], item.__dict__["labels"]
        item.__dict__["key"] = f"key-{n}"
    return old


def test_rows_of_before_the_format_still_load() -> None:
    state = keyed(2)
    legacy = of_before(state)
    whole = loads(pickle.dumps(legacy))  # a row was the pickled state itself
    # Format 3's item rows: the plain key in the place of its hash, and no labels.
    rows = [
        (*row[:5], f"key-{n}", *row[6:14])
        for n, row in enumerate(map(_item_row, state.items.values()))
    ]
    with_items = loads(  # then the state without items, and every item's row
        pickle.dumps((2, replace(state, items={}), rows))
    )
    format_3 = loads(pickle.dumps((3, replace(state, items={}))))
    for header, item_rows in ((whole, []), (with_items, []), (format_3, rows)):
        loaded = stream_of(header, item_rows, MASTER)
        for item in loaded.items.values():
            item.labels = state.items[item.item_id].labels  # sealed: of before, none
        assert_same(loaded, state)  # the keys are hashed as the writer hashes them now
        assert loaded.active_by_key(MASTER.key_hash("acme", "key-1")) is not None
        assert loaded.stored is None  # its rows hold plain keys: the next checkpoint
        stored = Stored()  # writes every item
        assert_same(reloaded(loaded, stored), state)
        assert stored.written == 2
        assert b"key-1" not in b"".join(r for _, r in stored.items.values())


class Gadget:
    """What a forged row could name: any callable, run as the row loads."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("ran",))


def test_a_row_that_names_another_class_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for forged in (pickle.dumps(Gadget()), pickle.dumps((4, [Gadget()])), pickle.dumps(os.system)):
        with pytest.raises(UnsafeRow, match=r"names (builtins\.print|posix\.system)"):
            loads(forged)
    assert capsys.readouterr().out == ""
