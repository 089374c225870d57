"""The org's revision retention (DESIGN §4, seed 004): a change drops the revisions more
than ``keep_revisions`` before it, in the log, so every reader prunes the same."""

from __future__ import annotations

import pytest

from contracts import commands as c
from contracts.events import Event, MemoryRevised, RevisionsPruned
from services.command.core import Context, decide
from services.command.errors import Conflict
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context, run


def corrected(state: StreamState, item: str, text: str, ctx: Context) -> list[Event]:
    base = state.items[item].revision
    return run(state, c.CorrectMemory(item_id=item, base_revision=base, content=text), ctx)


def test_a_change_prunes_the_revisions_past_the_orgs_retention() -> None:
    state, keep2 = StreamState("s"), make_context(keep_revisions=2)
    [saved] = run(state, c.RememberMemory(content="v1"), keep2)
    item = saved.item_id
    assert corrected(state, item, "v2", keep2)[1:] == []  # 1 and 2: nothing to drop yet
    assert corrected(state, item, "v3", keep2)[1:] == []
    generation = state.generation
    revised, pruned = corrected(state, item, "v4", keep2)
    assert isinstance(revised, MemoryRevised) and revised.revision == 4
    assert pruned == RevisionsPruned(item_id=item, before=2)
    assert sorted(state.items[item].revisions) == [2, 3, 4]
    assert state.generation == generation + 1  # the correction moves it, the pruning not

    with pytest.raises(Conflict, match="no longer keeps revision 1") as err:
        run(state, c.RestoreRevision(item_id=item, base_revision=4, revision=1), keep2)
    assert err.value.extra["oldest_kept"] == 2
    restored = run(state, c.RestoreRevision(item_id=item, base_revision=4, revision=2), keep2)
    assert [type(e) for e in restored] == [MemoryRevised, RevisionsPruned]


def test_without_a_policy_every_revision_stays() -> None:
    state, ctx = StreamState("s"), make_context()
    [saved] = run(state, c.RememberMemory(content="v1"), ctx)
    for n in range(2, 7):
        assert len(corrected(state, saved.item_id, f"v{n}", ctx)) == 1
    assert sorted(state.items[saved.item_id].revisions) == [1, 2, 3, 4, 5, 6]


def test_a_pruned_revisions_text_still_refuses_a_resave_after_a_forget() -> None:
    state, keep1 = StreamState("s"), make_context(keep_revisions=1)
    [saved] = run(state, c.RememberMemory(content="the old budget"), keep1)
    corrected(state, saved.item_id, "the new budget", keep1)
    corrected(state, saved.item_id, "the newest budget", keep1)
    assert 1 not in state.items[saved.item_id].revisions
    run(state, c.ForgetMemory(item_id=saved.item_id), keep1)
    with pytest.raises(Conflict, match="forgotten before"):
        run(state, c.RememberMemory(content="the old budget"), keep1)


def test_retention_after_a_commands_own_events_leaves_its_answer_on_its_memory() -> None:
    """QA: with keep_revisions, a keyed save of another kind answered with the memory it
    archived (whose pruned revisions came last), not the new one."""
    state, keep1 = StreamState("s"), make_context(keep_revisions=1)
    [held] = run(state, c.RememberMemory(content="Trip is in May.", key="trip"), keep1)
    run(state, c.RememberMemory(content="Trip is in June.", key="trip"), keep1)
    cmd = c.RememberMemory(content="Trip decision: July.", key="trip", kind="decision")
    events = decide(state, cmd, keep1)
    assert isinstance(events[-1], RevisionsPruned) and events[-1].item_id == held.item_id
    for event in events:
        evolve(state, state.seq + 1, "cmd-july", event)
    new = events[1].item_id
    assert new != held.item_id
    assert state.results["cmd-july"] == {
        "item_id": new,
        "revision": 1,
        "status": "active",
        "seq": state.seq,
        "generation": state.generation,
    }
