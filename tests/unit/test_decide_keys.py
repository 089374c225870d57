"""One key holds one fact (seed 002's remember key): a confirmed candidate replaces what it
was proposed for, and a memory whose key was taken meanwhile is not made active beside it."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import commands as c
from contracts.events import MemoryStatusChanged
from services.command.core import Context, decide
from services.command.errors import Conflict, DomainError
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context, run
from tests.unit.test_checkpoint_rows import Stored


def save(state: StreamState, text: str, ctx: Context | None = None, **kw: object) -> str:
    [event] = run(state, c.RememberMemory(content=text, **kw), ctx)
    return event.item_id


def active(state: StreamState, key: str) -> list[str]:
    """The active memories under ``key``, by a scan (the test context hashes it ``k:``)."""
    return [
        i.item_id for i in state.items.values() if i.key_hash == f"k:{key}" and i.status == "active"
    ]


def test_a_confirmed_correction_by_an_agent_archives_the_memory_it_corrects() -> None:
    state = StreamState("acme/member:ana")
    office = save(state, "The office is in Paris.", key="office")
    agent = make_context(is_agent=True)
    [candidate] = run(
        state,
        c.CorrectMemory(item_id=office, base_revision=1, content="The office is in Rome."),
        agent,
    )
    assert state.items[candidate.item_id].status == "candidate"
    archived, confirmed = decide(
        state, c.ConfirmCandidate(item_id=candidate.item_id), make_context()
    )
    for event in (archived, confirmed):
        evolve(state, state.seq + 1, "the-confirm", event)
    assert state.results["the-confirm"]["item_id"] == candidate.item_id  # its answer
    assert isinstance(confirmed, MemoryStatusChanged) and confirmed.status == "active"
    assert isinstance(archived, MemoryStatusChanged)
    assert (archived.item_id, archived.status, archived.superseded_by) == (
        office,
        "archived",
        candidate.item_id,
    )
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
    for again in (
        c.DisableMemory(item_id=old, disabled=False),
        c.UndoChange(item_id=old, base_revision=state.items[old].revision),
    ):
        with pytest.raises(Conflict, match=f"memory {new} holds this memory's key") as refused:
            run(state, again)
        assert refused.value.rejection().extra["held_by"] == new
    run(state, c.ArchiveMemory(item_id=old))
    with pytest.raises(Conflict, match="holds this memory's key"):
        run(state, c.UnarchiveMemory(item_id=old))
    run(state, c.ArchiveMemory(item_id=new))
    run(state, c.UnarchiveMemory(item_id=old))  # the key is free again
    assert active(state, "lang") == [old]


KEYS = ["office", "budget", "editor"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "save",
                    "candidate",
                    "agent",
                    "confirm",
                    "archive",
                    "unarchive",
                    "disable",
                    "enable",
                    "forget",
                    "checkpoint",
                ]
            ),
            st.integers(0, 2),
            st.integers(0, 5),
        ),
        max_size=40,
    )
)
def test_the_key_index_finds_what_a_scan_of_the_items_finds(steps: list[Any]) -> None:
    """``active_by_key`` answers from its index of keys, kept by ``evolve`` and rebuilt
    after a load; it must name the same memory as a scan of the items would."""
    state, stored = StreamState("acme/member:ana"), Stored()
    for n, (step, key, slot) in enumerate(steps):
        ids = list(state.items)
        item_id = ids[slot % len(ids)] if ids else "missing"
        cmd: c.Command | None = {
            "save": c.RememberMemory(content=f"fact {n}", key=KEYS[key]),
            "candidate": c.RememberMemory(content=f"fact {n}", key=KEYS[key], candidate=True),
            "agent": c.RememberMemory(content=f"fact {n}", key=KEYS[key]),
            "confirm": c.ConfirmCandidate(item_id=item_id),
            "archive": c.ArchiveMemory(item_id=item_id),
            "unarchive": c.UnarchiveMemory(item_id=item_id),
            "disable": c.DisableMemory(item_id=item_id, disabled=True),
            "enable": c.DisableMemory(item_id=item_id, disabled=False),
            "forget": c.ForgetMemory(item_id=item_id),
        }.get(step)
        if cmd is None:  # a new owner loads the stream from its checkpoint
            stored.save(state)
            state = stored.load()
            continue
        with contextlib.suppress(DomainError):
            run(state, cmd, make_context(is_agent=step == "agent"))
        for k in KEYS:
            found = state.active_by_key(f"k:{k}")
            assert (found.item_id if found else None) == next(iter(active(state, k)), None)


def test_a_save_of_another_lifetime_takes_the_key_as_a_memory_of_its_own() -> None:
    """QA: a keyed save revised an expired memory, which hid the new fact at once, and a
    keyed save's own expiry was dropped. An expiry belongs to a memory: a fact of another
    lifetime is a new memory, and the key's memory is archived, superseded by it."""
    state = StreamState("acme/member:ana")
    past = datetime(2025, 12, 1, tzinfo=UTC)  # before the context's now
    soon = datetime(2026, 2, 1, tzinfo=UTC)
    door = save(state, "The door code is 1234.", key="door", expires_at=past)
    archived, remembered = decide(
        state, c.RememberMemory(content="The door code is 9876.", key="door"), make_context()
    )
    for event in (archived, remembered):  # one command: its answer is its last event's
        evolve(state, state.seq + 1, "new-code", event)
    assert isinstance(archived, MemoryStatusChanged) and archived.item_id == door
    assert (archived.status, archived.superseded_by) == ("archived", remembered.item_id)
    assert state.items[remembered.item_id].expires_at is None
    assert state.results["new-code"]["item_id"] == remembered.item_id
    [_, timed] = run(
        state, c.RememberMemory(content="The door code is 5555.", key="door", expires_at=soon)
    )
    assert state.items[timed.item_id].expires_at == soon
    [revised] = run(
        state, c.RememberMemory(content="The door code is 5556.", key="door", expires_at=soon)
    )  # the same lifetime: a revision
    assert revised.item_id == timed.item_id and state.items[timed.item_id].revision == 2
    assert active(state, "door") == [timed.item_id]


def test_a_retracted_keys_fact_is_a_persons_to_bring_back() -> None:
    """Seed 002: a retracted fact stays retracted; only a person brings it back. An agent's
    save of the key, even one the user's message asks for, waits as a candidate (a seed
    audit: it made the fact active again); a person's save makes it a fact."""
    state = StreamState("acme/agent:helper")
    first = save(state, "Run the tests before you report.", key="tests-first")
    run(state, c.DisableMemory(item_id=first))
    agent = make_context(is_agent=True)
    message = "Remember: run the tests before you report."
    [again] = run(
        state,
        c.RememberMemory(
            content="Run the tests before you report.", key="tests-first", user_message=message
        ),
        agent,
    )
    assert state.items[again.item_id].status == "candidate"
    other = save(
        state,
        "Write the changelog first.",
        agent,
        key="changelog",
        user_message="Remember: write the changelog first.",
    )
    assert state.items[other].status == "active"  # a key never retracted: as before
    person = save(state, "Run the tests before you push.", key="tests-first")
    assert state.items[person].status == "active"


def test_a_retracted_fact_stays_so_without_its_key_and_once_archived() -> None:
    """QA: an agent's save of the retracted text without its key, or of a key whose memory
    a person disabled and then archived, made the fact active again."""
    state = StreamState("acme/agent:helper")
    agent = make_context(is_agent=True)
    text, message = "Run the tests before you report.", "Remember: run the tests before you report."
    first = save(state, text, key="tests-first")
    run(state, c.DisableMemory(item_id=first))
    [again] = run(state, c.RememberMemory(content=text, user_message=message), agent)
    assert state.items[again.item_id].status == "candidate"
    lang = save(state, "Answer in English.", key="lang")
    run(state, c.DisableMemory(item_id=lang))
    run(state, c.ArchiveMemory(item_id=lang))
    [back] = run(
        state,
        c.RememberMemory(
            content="Answer in English, always.",
            key="lang",
            user_message="Remember: answer in English, always.",
        ),
        agent,
    )
    assert state.items[back.item_id].status == "candidate"


def test_an_agent_brings_a_retracted_fact_back_by_no_other_road() -> None:
    """QA: an agent corrected another memory to the retracted text, or the retracted memory
    itself (then saved the old text anew); each left the fact active again."""
    state = StreamState("acme/agent:helper")
    agent = make_context(is_agent=True)
    ship = save(state, "Ship on Thursdays.", key="ship")
    run(state, c.DisableMemory(item_id=ship))
    other = save(state, "Ship on Fridays.")
    [corrected] = run(
        state,
        c.CorrectMemory(
            item_id=other,
            base_revision=1,
            content="Ship on Thursdays.",
            user_message="Correct it: ship on Thursdays.",
        ),
        agent,
    )
    assert state.items[corrected.item_id].status == "candidate"
    with pytest.raises(DomainError, match="retracted"):
        run(
            state,
            c.CorrectMemory(
                item_id=ship,
                base_revision=state.items[ship].revision,
                content="Ship on Tuesdays.",
                user_message="Correct it: ship on Tuesdays.",
            ),
            agent,
        )
