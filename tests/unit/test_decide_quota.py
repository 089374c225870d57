"""The org's quota of memories per scope (seed 004: storage quotas protect the shared
service; a seed coverage audit found none): a command that would add memories past it is
refused whole, and one that adds none always passes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contracts import commands as c
from contracts.events import Event
from services.command.core import Context, decide
from services.command.errors import MemoryOff, MemoryQuotaReached
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context

FULL_AT_3 = replace(make_context(), max_memories_per_scope=3)


def run(state: StreamState, cmd: c.Command, ctx: Context = FULL_AT_3) -> list[Event]:
    events = decide(state, cmd, ctx)
    for event in events:
        evolve(state, state.seq + 1, f"cmd-{state.seq + 1}", event)
    return events


def test_a_full_scope_takes_no_new_memory_but_every_other_change() -> None:
    state = StreamState("acme/member:ana")
    ids = [run(state, c.RememberMemory(content=f"fact {n}"))[0].item_id for n in range(3)]
    with pytest.raises(MemoryQuotaReached) as refused:
        run(state, c.RememberMemory(content="one too many"))
    assert refused.value.rejection().status == 429
    assert refused.value.extra == {"memories": 3, "max_memories_per_scope": 3}
    with pytest.raises(MemoryQuotaReached):  # an agent's candidate is a memory too
        run(state, c.RememberMemory(content="a guess", candidate=True))
    run(state, c.CorrectMemory(item_id=ids[0], base_revision=1, content="fact 0, fixed"))
    run(state, c.ArchiveMemory(item_id=ids[1]))  # archived memories still count
    with pytest.raises(MemoryQuotaReached):
        run(state, c.RememberMemory(content="one too many"))
    run(state, c.ForgetMemory(item_id=ids[2]))  # a forgotten one does not
    run(state, c.RememberMemory(content="now it fits"))
    assert state.memories() == 3
    assert run(state, c.RememberMemory(content="now it fits", key="k"), make_context())
    assert state.memories() == 4  # without a quota nothing is counted against one


def test_the_count_is_rebuilt_from_the_items_after_a_restore() -> None:
    state = StreamState("acme/member:ana")
    for n in range(3):
        run(state, c.RememberMemory(content=f"fact {n}"), make_context())
    state.live = None  # as a state loaded from its checkpoint rows
    with pytest.raises(MemoryQuotaReached):
        run(state, c.RememberMemory(content="fact 3"))


def test_an_org_whose_memory_is_off_takes_no_agents_command_but_its_peoples() -> None:
    """Seed 004: turning the memory capability off hides it from agents and keeps what is
    held (a seed coverage audit found no switch)."""
    state = StreamState("acme/member:ana")
    off = replace(make_context(), memory=False)
    [saved] = run(state, c.RememberMemory(content="Kept."), off)  # a person still may
    agent = replace(make_context(is_agent=True), memory=False)
    for cmd in (
        c.RememberMemory(content="x", user_message="remember x"),
        c.PinMemory(item_id=saved.item_id, pinned=True),
    ):
        with pytest.raises(MemoryOff) as refused:
            run(state, cmd, agent)
        assert refused.value.rejection().status == 403
    # Erasing is never refused: an agent's own scope is reached with its token alone (QA).
    assert run(state, c.ForgetMemory(item_id=saved.item_id), agent)
    assert run(state, c.RememberMemory(content="Also kept."), off)
    assert run(state, c.ClearMemories(confirm=True), agent)
