"""One key holds one fact (seed 002's remember key): a confirmed candidate replaces what it
was proposed for, and a memory whose key was taken meanwhile is not made active beside it."""

from __future__ import annotations

import pytest

from contracts import commands as c
from contracts.events import Event, MemoryStatusChanged
from services.command.core import Context, decide
from services.command.errors import Conflict
from services.command.state import StreamState, evolve
from tests.unit.conftest import make_context


def run(state: StreamState, cmd: c.Command, ctx: Context | None = None) -> list[Event]:
    events = decide(state, cmd, ctx or make_context())
    for event in events:
        evolve(state, state.seq + 1, f"cmd-{state.seq + 1}", event)
    return events


def save(state: StreamState, text: str, ctx: Context | None = None, **kw: object) -> str:
    [event] = run(state, c.RememberMemory(content=text, **kw), ctx)
    return event.item_id


def active(state: StreamState, key: str) -> list[str]:
    return [i.item_id for i in state.items.values() if i.key == key and i.status == "active"]


def test_a_confirmed_correction_by_an_agent_archives_the_memory_it_corrects() -> None:
    state = StreamState("acme/member:ana")
    office = save(state, "The office is in Paris.", key="office")
    agent = make_context(is_agent=True)
    [candidate] = run(state, c.CorrectMemory(item_id=office, base_revision=1,
                                             content="The office is in Rome."), agent)
    assert state.items[candidate.item_id].status == "candidate"
    archived, confirmed = decide(state, c.ConfirmCandidate(item_id=candidate.item_id),
                                 make_context())
    for event in (archived, confirmed):
        evolve(state, state.seq + 1, "the-confirm", event)
    assert state.results["the-confirm"]["item_id"] == candidate.item_id  # its answer
    assert isinstance(confirmed, MemoryStatusChanged) and confirmed.status == "active"
    assert isinstance(archived, MemoryStatusChanged)
    assert (archived.item_id, archived.status, archived.superseded_by) == (
        office, "archived", candidate.item_id)
    assert active(state, "office") == [candidate.item_id]
    # A later save with the key revises the one that holds it now.
    [revised] = run(state, c.RememberMemory(content="The office is in Madrid.", key="office"))
    assert revised.item_id == candidate.item_id


def test_a_confirmed_unkeyed_correction_archives_its_original_too() -> None:
    state = StreamState("acme/member:ana")
    tz = save(state, "Ana works in CET.")
    corrected = c.CorrectMemory(item_id=tz, base_revision=1, content="Ana works in EET.")
    [candidate] = run(state, corrected, make_context(is_agent=True))
    run(state, c.ConfirmCandidate(item_id=candidate.item_id))
    assert (state.items[tz].status, state.items[candidate.item_id].status) == ("archived", "active")


def test_a_keyed_candidate_confirmed_after_a_save_of_its_key_replaces_that_save() -> None:
    state = StreamState("acme/member:ana")
    waiting = save(state, "Timezone is CET.", key="tz", candidate=True)
    saved = save(state, "Timezone is UTC.", key="tz")  # no active memory held tz: a new one
    run(state, c.ConfirmCandidate(item_id=waiting))
    assert active(state, "tz") == [waiting] and state.items[saved].status == "archived"


def test_a_memory_whose_key_was_taken_is_not_made_active_again() -> None:
    state = StreamState("acme/member:ana")
    old = save(state, "Replies in English.", key="lang")
    run(state, c.DisableMemory(item_id=old, disabled=True))
    new = save(state, "Replies in German.", key="lang")
    for again in (c.DisableMemory(item_id=old, disabled=False),
                  c.UndoChange(item_id=old, base_revision=state.items[old].revision)):
        with pytest.raises(Conflict, match=f"memory {new} holds the key 'lang'") as refused:
            run(state, again)
        assert refused.value.rejection().extra["held_by"] == new
    run(state, c.ArchiveMemory(item_id=old))
    with pytest.raises(Conflict, match="holds the key"):
        run(state, c.UnarchiveMemory(item_id=old))
    run(state, c.ArchiveMemory(item_id=new))
    run(state, c.UnarchiveMemory(item_id=old))  # the key is free again
    assert active(state, "lang") == [old]
