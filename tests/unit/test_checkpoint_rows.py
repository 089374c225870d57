"""A stream's checkpoint row stores its items as rows, re-encoding only the items changed
since the last checkpoint: whatever the commands, a row loads back into the state the
writer holds, in the same item order, and a row of before this format still loads."""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import commands as c
from services.command.adapters.restore import _pickle_stream, _stream_of
from services.command.core import decide
from services.command.errors import DomainError
from services.command.state import StreamState, evolve
from tests.unit.conftest import make_context
from tests.unit.test_decide_properties import build, steps


def reloaded(state: StreamState) -> StreamState:
    return _stream_of(pickle.loads(_pickle_stream(state)))


def assert_same(loaded: StreamState, live: StreamState) -> None:
    assert loaded == live
    assert list(loaded.items) == list(live.items)  # decisions walk items in this order
    assert list(loaded.results) == list(live.results)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(steps(), st.booleans(), st.booleans()), min_size=1, max_size=40))
def test_a_checkpoint_row_loads_back_into_the_live_state(sequence: list[Any]) -> None:
    state = StreamState("acme/member:ana")
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
            assert_same(reloaded(state), state)
            if restart:  # or a new owner goes on from the row
                state = reloaded(state)
    assert_same(reloaded(state), state)


def test_only_changed_items_are_encoded_again() -> None:
    state = StreamState("acme/member:ana")
    ctx = make_context()
    for n in range(3):
        for event in decide(state, c.RememberMemory(content=f"fact {n}"), ctx):
            evolve(state, state.seq + 1, f"c{n}", event)
    reloaded(state)
    assert state.touched == set() and state.rows is not None
    first, second, third = list(state.items)
    kept = [state.rows[first], state.rows[third]]
    for event in decide(state, c.PinMemory(item_id=second, pinned=True), ctx):
        evolve(state, state.seq + 1, "pin", event)
    assert state.touched == {second}
    assert_same(reloaded(state), state)
    assert [state.rows[first], state.rows[third]] == kept  # not encoded again
    assert state.rows[first] is kept[0] and state.rows[third] is kept[1]
    assert state.rows[second][4] is True  # pinned


def test_forgetting_a_target_rewrites_the_rows_that_linked_to_it() -> None:
    state = StreamState("acme/member:ana")
    ctx = make_context()
    for n in range(2):
        for event in decide(state, c.RememberMemory(content=f"fact {n}"), ctx):
            evolve(state, state.seq + 1, f"c{n}", event)
    source, target = list(state.items)
    for cmd in [c.LinkMemory(item_id=source, target_id=target, kind="related")]:
        for event in decide(state, cmd, ctx):
            evolve(state, state.seq + 1, "link", event)
    reloaded(state)
    for event in decide(state, c.ForgetMemory(item_id=target), ctx):
        evolve(state, state.seq + 1, "forget", event)
    assert source in (state.touched or set())  # its link to the forgotten memory went
    loaded = reloaded(state)
    assert_same(loaded, state)
    assert not loaded.items[source].links


def test_a_row_of_before_the_format_still_loads() -> None:
    state = StreamState("acme/member:ana")
    for event in decide(state, c.RememberMemory(content="tea"), make_context()):
        evolve(state, 1, "c1", event)
    legacy = pickle.loads(pickle.dumps(state))  # a row was the pickled state itself
    loaded = _stream_of(legacy)
    assert_same(loaded, state)
    assert loaded.touched is None  # tracked only once its items are rows
    assert_same(reloaded(loaded), state)
