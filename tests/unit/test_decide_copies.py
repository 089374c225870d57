"""Promotion and fork (seed 002): another stream's memories copied in, sealed anew, once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from contracts import commands as c
from contracts.envelope import CommandEnvelope
from contracts.events import (
    MemoryPinned,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
)
from engram.crypto import MasterKey
from services.command.adapters.batch import Decoded, keys_needed
from services.command.adapters.lookups import Lookups, command_key
from services.command.context import Context, Copy, copy_item_id, new_item_id
from services.command.core import decide
from services.command.errors import Forbidden, InvalidCommand, NotReadable
from services.command.state import StreamState
from tests.unit.conftest import labels_of, make_context, run, unseal


def copy(
    item_id: str,
    content: str,
    kind: str = "procedure",
    key: str | None = None,
    expires_at: datetime | None = None,
    status: str = "active",
) -> Copy:
    return Copy(
        item_id=item_id,
        kind=kind,
        key=key,
        title=None,
        content=content,
        pinned=False,
        tags=("ci",),
        sources=("turn-7",),
        expires_at=expires_at,
        status=status,
    )


def with_copies(*copies: Copy, **kw: object) -> Context:
    base = make_context(scope="agent:helper", **kw)  # type: ignore[arg-type]
    return Context(**{**base.__dict__, "copies": copies, "session": "s-1"})


def test_a_promotion_copies_the_lasting_memories_once() -> None:
    state = StreamState("acme/agent:helper")
    ctx = with_copies(
        copy("s1", "Run the tests first."),
        copy("s2", "The build is red.", "fact"),
        copy("s3", "Ana likes short answers.", "preference"),
    )
    made = run(state, c.PromoteSession(), ctx)
    assert [type(e) for e in made] == [MemoryRemembered, MemoryRemembered]
    first = made[0]
    assert isinstance(first, MemoryRemembered)
    assert len({e.item_id for e in made} | {"s1", "s3"}) == 4  # new ids, one per copy
    assert (unseal(first.content), first.kind, labels_of(first).sources, first.author) == (
        "Run the tests first.",
        "procedure",
        ("s1", "turn-7"),
        "ana",
    )
    assert first.source_hashes == ("s:s1", "s:turn-7") and not first.sources  # sealed
    assert run(state, c.PromoteSession(), with_copies(*ctx.copies)) == []  # held already


def test_a_copy_keeps_the_newest_of_its_sources_sources() -> None:
    """QA: a copy of a memory with 32 sources dropped its newest one."""
    many = tuple(f"m-{n:02}" for n in range(32))
    source = replace(copy("s1", "Run the tests first."), sources=many)
    [made] = run(StreamState("acme/agent:helper"), c.PromoteSession(), with_copies(source))
    assert isinstance(made, MemoryRemembered)
    assert labels_of(made).sources == ("s1", *many[1:])  # the memory, then the last 31


def test_a_key_the_agent_holds_takes_the_sessions_text_as_a_revision() -> None:
    state = StreamState("acme/agent:helper")
    run(
        state,
        c.RememberMemory(content="Tests: the unit ones.", kind="procedure", key="tests"),
        make_context(scope="agent:helper"),
    )
    [revised] = run(
        state,
        c.PromoteSession(),
        with_copies(
            copy("s1", "Tests: all of them.", key="tests"),
            copy("s0", "Tests: older text.", key="tests"),
        ),
    )
    assert isinstance(revised, MemoryRevised) and unseal(revised.content) == "Tests: all of them."


def test_a_key_held_by_another_kind_is_archived_and_a_pinned_copy_pins_its_revision() -> None:
    """As a keyed save does (QA: a keyed save dropped its pin and its kind)."""
    state = StreamState("acme/agent:helper")
    [held] = run(
        state,
        c.RememberMemory(content="Tests: the unit ones.", kind="procedure", key="tests"),
        make_context(scope="agent:helper"),
    )
    pinned = replace(copy("s1", "Tests: all of them.", key="tests"), pinned=True)
    revised, pin = run(state, c.PromoteSession(), with_copies(pinned))
    assert isinstance(revised, MemoryRevised) and isinstance(pin, MemoryPinned)
    assert (pin.item_id, pin.revision, pin.pinned) == (held.item_id, 3, True)
    other = copy("s2", "Tests: Ana runs them.", "preference", key="tests")
    archived, made = run(state, c.PromoteSession(), with_copies(other))
    assert isinstance(archived, MemoryStatusChanged) and archived.item_id == held.item_id
    assert isinstance(made, MemoryRemembered) and made.kind == "preference"
    assert archived.superseded_by == made.item_id


def test_forgotten_text_is_not_copied_back() -> None:
    state = StreamState("acme/agent:helper")
    [saved] = run(
        state,
        c.RememberMemory(content="Deploy on Fridays.", kind="decision"),
        make_context(scope="agent:helper"),
    )
    run(
        state,
        c.ForgetMemory(item_id=saved.item_id, scope="agent"),
        make_context(scope="agent:helper"),
    )
    assert (
        run(state, c.PromoteSession(), with_copies(copy("s1", "Deploy on Fridays.", "decision")))
        == []
    )


def test_a_fork_copies_everything_into_a_new_session_only() -> None:
    state = StreamState("acme/session:b")
    with pytest.raises(InvalidCommand, match="forks no session"):
        run(state, c.ForkSession(), with_copies(copy("s1", "x")))
    itself = Context(**{**with_copies(copy("s1", "x"), fork_of="b").__dict__, "scope": "session:b"})
    with pytest.raises(InvalidCommand, match="forks itself"):
        run(state, c.ForkSession(), itself)
    made = run(
        state,
        c.ForkSession(),
        with_copies(
            copy("s1", "Budget: 1500 EUR.", "fact"),
            copy("s2", "Call me Ana.", "preference"),
            fork_of="a",
        ),
    )
    assert len(made) == 2
    with pytest.raises(Forbidden, match="history already"):
        run(state, c.ForkSession(), with_copies(copy("s3", "y"), fork_of="a"))


def test_a_fork_copies_a_retracted_fact_retracted_and_a_promotion_leaves_it() -> None:
    """Seed 002: learned memory is part of the session's history, so a fork takes a copy of
    it, retracted facts too; a retracted fact stays retracted. A key's active fact wins
    over an older retracted one of the key; a promotion copies active memories only."""
    sources = (
        copy("s1", "The budget was 1000 EUR.", "fact", key="budget", status="disabled"),
        copy("s2", "The budget is 1500 EUR.", "fact", key="budget"),
        copy("s3", "Ana takes the train.", "preference", status="disabled"),
        copy("s4", "Ana likes aisle seats.", "preference", key="seat", status="archived"),
    )  # retracted, then archived
    state = StreamState("acme/session:b")
    made = run(state, c.ForkSession(), with_copies(*sources, fork_of="a"))
    assert [(type(e), getattr(e, "status", None)) for e in made] == [
        (MemoryRemembered, "active"),
        (MemoryRemembered, "active"),
        (MemoryStatusChanged, "disabled"),
        (MemoryRemembered, "active"),
        (MemoryStatusChanged, "disabled"),
        (MemoryRemembered, "active"),
        (MemoryStatusChanged, "disabled"),
        (MemoryStatusChanged, "archived"),
    ]
    budget, old_budget, train, seat = (
        state.items[e.item_id] for e in made if isinstance(e, MemoryRemembered)
    )
    assert unseal(made[0].content) == "The budget is 1500 EUR."  # type: ignore[attr-defined]
    assert (budget.status, train.status, train.revision) == ("active", "disabled", 2)
    assert (seat.status, seat.archived_from, seat.revision) == ("archived", "disabled", 3)
    # The active fact holds the key; the retracted ones stay retracted, so an agent's save
    # of one is not brought back by the fork (QA: a fork left them out, and it was).
    assert old_budget.status == "disabled" and state.active_by_key("k:budget") is budget
    assert state.retracts("k:seat", "h:x") and state.retracts(None, "h:ana takes the train.")
    assert state.retracts(None, "h:the budget was 1000 eur.")
    promoted = run(
        StreamState("acme/agent:helper"),
        c.PromoteSession(kinds=("fact", "preference")),
        with_copies(*sources),
    )
    assert [unseal(e.content) for e in promoted] == [  # type: ignore[attr-defined]
        "The budget is 1500 EUR."
    ]


def test_a_source_with_too_many_memories_is_refused() -> None:
    many = [copy(f"s{n}", f"step {n}") for n in range(c.MAX_COPIES + 1)]
    with pytest.raises(InvalidCommand, match="more than 1000"):
        run(StreamState("acme/agent:helper"), c.PromoteSession(), with_copies(*many))


def test_a_source_the_projector_has_not_caught_up_with_copies_nothing() -> None:
    state = StreamState("acme/session:b")
    behind = Context(
        **{
            **with_copies(copy("s1", "Run the tests first.")).__dict__,
            "scope": "session:b",
            "fork_of": "a",
            "copies_ready": False,
        }
    )
    with pytest.raises(NotReadable, match="try again") as refused:
        decide(state, c.ForkSession(), behind)
    assert refused.value.rejection().status == 503
    assert state.seq == 0  # still a new session: the retry forks it
    with pytest.raises(NotReadable):
        decide(StreamState("acme/agent:helper"), c.PromoteSession(), behind)


def test_a_promotion_by_a_token_with_no_session_is_refused() -> None:
    no_session = Context(**{**with_copies(copy("s1", "x")).__dict__, "session": None})
    with pytest.raises(Forbidden, match="names no session"):
        run(StreamState("acme/agent:helper"), c.PromoteSession(), no_session)


def test_a_copy_keeps_its_sources_expiry_and_takes_a_key_of_another_lifetime() -> None:
    """QA: a copy lost its source's expiry, and a copy under a key the agent held took
    the held memory's expiry (an expired one hid the copy at once)."""
    state = StreamState("acme/agent:helper")
    own = make_context(scope="agent:helper")
    past = datetime(2025, 12, 1, tzinfo=UTC)  # before the context's now
    later = datetime(2026, 6, 1, tzinfo=UTC)
    run(
        state,
        c.RememberMemory(content="Seats: aisle.", kind="preference", key="seat", expires_at=past),
        own,
    )
    [archived, copied, lasting] = run(
        state,
        c.PromoteSession(),
        with_copies(
            copy("s1", "Seats: window.", "preference", key="seat"),
            copy("s2", "Run the tests first.", expires_at=later),
        ),
    )
    assert isinstance(archived, MemoryStatusChanged) and archived.status == "archived"
    assert isinstance(copied, MemoryRemembered) and archived.superseded_by == copied.item_id
    assert copied.expires_at is None and unseal(copied.content) == "Seats: window."
    assert isinstance(lasting, MemoryRemembered) and lasting.expires_at == later
    holder = state.active_by_key("k:seat")
    assert holder is not None and holder.item_id == copied.item_id


def test_an_expired_memory_holds_its_text_no_longer() -> None:
    """QA: a promotion skipped a session's lasting fact because the agent held the same
    text in a memory that had expired: the fact was lost without a word."""
    state = StreamState("acme/agent:helper")
    past = datetime(2025, 12, 1, tzinfo=UTC)
    run(
        state,
        c.RememberMemory(content="Tabs are 4 spaces.", key="tabs", expires_at=past),
        make_context(scope="agent:helper"),
    )
    [archived, copied] = run(
        state, c.PromoteSession(), with_copies(copy("s1", "Tabs are 4 spaces.", key="tabs"))
    )
    assert isinstance(archived, MemoryStatusChanged) and isinstance(copied, MemoryRemembered)
    assert copied.expires_at is None and archived.superseded_by == copied.item_id


def test_an_agents_promotion_brings_no_retracted_fact_back() -> None:
    """QA: an agent saved the retracted text, or its key, in its session and promoted it:
    the copies were active in the agent's memory again. A person's promotion copies them."""
    state = StreamState("acme/agent:helper")
    person = make_context(scope="agent:helper")
    [saved] = run(
        state,
        c.RememberMemory(content="Run the tests first.", kind="procedure", key="tests"),
        person,
    )
    run(state, c.DisableMemory(item_id=saved.item_id, scope="agent"), person)
    copies = (copy("s1", "Run the tests first."), copy("s2", "Run them twice.", key="tests"))
    assert run(state, c.PromoteSession(), with_copies(*copies, is_agent=True)) == []
    assert len(run(state, c.PromoteSession(), with_copies(*copies))) == 2


def test_a_fork_copies_a_retracted_fact_that_has_expired_too() -> None:
    """QA: a retracted fact past its expiry was left out of a fork, and an agent in the
    fork then saved it as a fact; in the source it waits for a person."""
    past = datetime(2025, 12, 1, tzinfo=UTC)  # before the context's now
    state = StreamState("acme/session:b")
    made = run(
        state,
        c.ForkSession(),
        with_copies(
            copy(
                "s1",
                "The flight is LH123.",
                "fact",
                key="flight",
                expires_at=past,
                status="disabled",
            ),
            fork_of="a",
        ),
    )
    assert [type(e) for e in made] == [MemoryRemembered, MemoryStatusChanged]
    assert state.retracts("k:flight", "h:x") and state.retracts(None, "h:the flight is lh123.")


def test_a_fork_of_a_retracted_fact_under_a_retention_policy() -> None:
    """Review: with keep_revisions set, a fork of a retracted fact raised KeyError (the
    retention looked its copy up in the state before it was there)."""
    state = StreamState("acme/session:b")
    ctx = with_copies(
        copy("s1", "The flight is LH123.", "fact", status="archived"), fork_of="a", keep_revisions=1
    )
    made = run(state, c.ForkSession(), ctx)
    assert [type(e) for e in made] == [MemoryRemembered, MemoryStatusChanged, MemoryStatusChanged]


def test_a_batch_makes_a_key_for_every_copy_it_read() -> None:
    """Review: a promotion made keys for the copies active when read only, but the live
    state decides: one read retracted and enabled earlier in the batch was copied without
    a key, and the promotion failed."""
    env = CommandEnvelope(
        command_id="promote-0001",
        type="PromoteSession",
        token="t",
        stream_id="acme/agent:helper",
        payload={},
    )
    read = (copy("s1", "Run the tests first."), copy("s2", "Ship on Fridays.", status="disabled"))
    looked_up = Lookups(copies={command_key(env): read})
    decoded = [Decoded(record=None, envelope=env)]
    new, _ = keys_needed(decoded, {}, looked_up, MasterKey(bytes(32)))
    own = new_item_id(env.stream_id, env.command_id)
    assert {copy_item_id(own, s.item_id) for s in read} <= {item_id for item_id, _ in new}


def test_an_inference_is_copied_as_one_and_never_over_a_confirmed_fact() -> None:
    """QA (learning: apply): a promotion put a session's inference over the agent's
    confirmed fact of its key, and a fork made an inference a confirmed fact."""
    state = StreamState("acme/agent:helper")
    person = make_context(scope="agent:helper")
    [fact] = run(
        state,
        c.RememberMemory(scope="agent", content="Call me Samuel.", kind="preference", key="name"),
        person,
    )
    guess = replace(copy("s1", "Call me Sam.", "preference", key="name"), inferred=True)
    tests = replace(copy("s2", "Run the tests first."), inferred=True)
    made = run(state, c.PromoteSession(), with_copies(guess, tests))
    assert [(type(e), e.item_id == fact.item_id) for e in made] == [(MemoryRemembered, False)]
    [copied] = made
    assert isinstance(copied, MemoryRemembered) and copied.inferred
    assert not state.items[copied.item_id].confirmed
    assert unseal(state.items[fact.item_id].current.content) == "Call me Samuel."
    # An inference of the key a copy revises stays one; a confirmed source confirms it.
    newer = replace(copy("s3", "Run the tests twice.", key="tests"), inferred=True)
    keyed = StreamState("acme/agent:helper")
    [first] = run(
        keyed,
        c.PromoteSession(),
        with_copies(replace(copy("s4", "Run the tests first.", key="tests"), inferred=True)),
    )
    [revised] = run(keyed, c.PromoteSession(), with_copies(newer))
    assert isinstance(revised, MemoryRevised) and revised.item_id == first.item_id
    assert revised.inferred and not keyed.items[first.item_id].confirmed
    confirmed = copy("s5", "Run the tests thrice.", key="tests")
    [settled] = run(keyed, c.PromoteSession(), with_copies(confirmed))
    assert isinstance(settled, MemoryRevised) and not settled.inferred
    assert keyed.items[first.item_id].confirmed
