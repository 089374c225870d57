"""A save that would be a candidate, of text the scope holds already (an active memory or a
candidate), is refused: the extractor and agents proposed the same fact again and again,
and a person was asked to confirm what was there (QA, observations)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from contracts import commands as c
from contracts.events import MemoryRemembered
from services.command.errors import AlreadyHeld, Conflict
from services.command.state import StreamState
from tests.unit.conftest import make_context, run

AGENT = make_context(is_agent=True)
TEXT = "The user prefers green tea."


def proposed(text: str = TEXT, **kw: object) -> c.RememberMemory:
    return c.RememberMemory(content=text, candidate=True, extracted=True, **kw)


def test_a_candidate_of_an_active_memorys_text_is_refused_naming_the_memory() -> None:
    state = StreamState("acme/member:ana")
    [saved] = run(state, c.RememberMemory(content=TEXT))
    with pytest.raises(AlreadyHeld) as refused:
        run(state, proposed("  the user PREFERS green   tea. "))  # the same text, as hashed
    assert refused.value.extra == {"item_id": saved.item_id, "holder_status": "active"}
    assert refused.value.rejection().status == 409
    with pytest.raises(AlreadyHeld):  # an agent's save without the user's intent too
        run(state, c.RememberMemory(content=TEXT, user_message="what do I drink?"), AGENT)
    assert len(state.items) == 1


def test_a_second_candidate_of_the_same_text_is_refused_and_counts_toward_no_cap() -> None:
    state = StreamState("acme/member:ana")
    [first] = run(state, proposed(run_id="run-1"), AGENT)
    assert isinstance(first, MemoryRemembered) and first.status == "candidate"
    with pytest.raises(AlreadyHeld) as refused:
        run(state, proposed(run_id="run-1"), AGENT)
    assert refused.value.extra["item_id"] == first.item_id
    assert state.candidates_of("run-1") == 1


def test_a_confirmed_save_of_held_text_is_still_the_persons_to_make() -> None:
    state = StreamState("acme/member:ana")
    run(state, c.RememberMemory(content=TEXT))
    [again] = run(state, c.RememberMemory(content=TEXT))
    assert isinstance(again, MemoryRemembered) and again.status == "active"
    agent_asked = c.RememberMemory(content=TEXT, user_message=f"Remember: {TEXT}")
    [asked] = run(state, agent_asked, AGENT)
    assert isinstance(asked, MemoryRemembered) and asked.status == "active"


def test_text_the_scope_no_longer_holds_can_be_proposed_again() -> None:
    state = StreamState("acme/member:ana")
    [saved] = run(state, c.RememberMemory(content=TEXT))
    run(state, c.CorrectMemory(item_id=saved.item_id, base_revision=1, content="Coffee now."))
    [old_text] = run(state, proposed())  # the memory's text moved on
    with pytest.raises(AlreadyHeld):
        run(state, proposed("coffee now."))  # its new text is held
    run(state, c.ArchiveMemory(item_id=saved.item_id))  # neither active nor a candidate
    [archived_text] = run(state, proposed("coffee now."))
    assert archived_text.item_id != saved.item_id
    run(state, c.DismissCandidate(item_id=old_text.item_id))  # a dismissal forgets it
    with pytest.raises(Conflict, match="forgotten before"):  # which is asked about first
        run(state, proposed())


def test_a_teammates_shared_candidate_is_named_as_the_scope_reads_it() -> None:
    state = StreamState("acme/shared")
    ana = make_context(scope="shared", is_agent=True, member="ana")
    ben = make_context(scope="shared", is_agent=True, member="ben")
    [anas] = run(state, proposed(scope="shared"), ana)
    with pytest.raises(AlreadyHeld) as refused:
        run(state, proposed(scope="shared"), ben)
    assert refused.value.extra == {"item_id": anas.item_id, "holder_status": "candidate"}


def test_the_index_of_held_text_is_rebuilt_from_the_items_after_a_restore() -> None:
    state = StreamState("acme/member:ana")
    [saved] = run(state, c.RememberMemory(content=TEXT))
    state.held = None  # as a state loaded from its checkpoint rows
    with pytest.raises(AlreadyHeld) as refused:
        run(state, proposed())
    assert refused.value.extra["item_id"] == saved.item_id


def test_an_expired_memory_holds_its_text_no_longer() -> None:
    state = StreamState("acme/member:ana")
    soon = make_context().now + timedelta(hours=1)
    run(state, c.RememberMemory(content=TEXT, expires_at=soon))
    with pytest.raises(AlreadyHeld):
        run(state, proposed())
    later = replace(make_context(), now=soon + timedelta(seconds=1))
    [fresh] = run(state, proposed(), later)
    assert isinstance(fresh, MemoryRemembered) and fresh.status == "candidate"


def test_a_correction_that_would_be_a_candidate_of_held_text_is_refused_too() -> None:
    """QA: an agent's correction of a fact to the fact's own text, or to a candidate's,
    made a candidate each time; so did a correction of a candidate to held text."""
    state = StreamState("acme/member:ana")
    [fact] = run(state, c.RememberMemory(content=TEXT))
    [other] = run(state, proposed("Ana likes jazz."), AGENT)
    for text in (TEXT, "ana likes JAZZ."):
        with pytest.raises(AlreadyHeld):
            run(state, c.CorrectMemory(item_id=fact.item_id, base_revision=1, content=text), AGENT)
    [mine] = run(state, proposed("Ana likes rain."), AGENT)
    with pytest.raises(AlreadyHeld) as refused:
        run(
            state, c.CorrectMemory(item_id=mine.item_id, base_revision=1, content="Ana likes jazz.")
        )
    assert refused.value.extra["item_id"] == other.item_id
    [same] = run(
        state, c.CorrectMemory(item_id=mine.item_id, base_revision=1, content="Ana likes rain.")
    )  # its own text: a revision
    assert same.item_id == mine.item_id
