"""The org's ``learning`` policy (seeds 000 and 002 differ): under ``apply`` what the
extractor learns in a session's or an agent's memory is used at once, as an unconfirmed
inference; it never replaces a confirmed fact nor brings back a retracted one, and in the
other scopes it waits as a candidate, as it always does under ``suggest``."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import commands as c
from contracts.events import Event, MemoryRemembered, MemoryRevised, MemoryStatusChanged
from services.command.context import Context
from services.command.errors import AlreadyHeld, DomainError
from services.command.state import StreamState
from services.projector.adapters.marks import inference_marks
from tests.unit.conftest import make_context, run, unseal


def applying(scope: str = "session:trip", is_agent: bool = False, **kw: object) -> Context:
    return replace(make_context(scope=scope, is_agent=is_agent, **kw), apply_learning=True)  # type: ignore[arg-type]


def learned(text: str, key: str | None = "budget", scope: str = "session") -> c.RememberMemory:
    """The extractor's command, as ``services.extractor.core.proposal`` builds it."""
    return c.RememberMemory(
        scope=scope, content=text, key=key, candidate=True, extracted=True, run_id="run-1"
    )


def test_under_apply_a_learned_session_fact_is_active_and_inferred() -> None:
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    assert isinstance(fact, MemoryRemembered)
    assert (fact.status, fact.inferred, fact.run_id) == ("active", True, None)
    item = state.items[fact.item_id]
    assert item.status == "active" and not item.confirmed


def test_under_suggest_the_same_fact_waits_as_a_candidate() -> None:
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), make_context(scope="session:trip"))
    assert isinstance(fact, MemoryRemembered)
    assert (fact.status, fact.inferred) == ("candidate", False)


def test_apply_reaches_agent_memory_but_not_a_members_or_the_shared_scope() -> None:
    agent = StreamState("acme/agent:helper")
    [used] = run(
        agent, learned("Run the tests first.", None, "agent"), applying("agent:helper", True)
    )
    assert isinstance(used, MemoryRemembered) and used.status == "active"
    for scope, name in (("private", "member:ana"), ("shared", "shared")):
        state = StreamState(f"acme/{name}")
        [waits] = run(state, learned("Ana likes tea.", None, scope), applying(name))
        assert isinstance(waits, MemoryRemembered)
        assert (waits.status, waits.inferred) == ("candidate", False)


def test_an_explicit_candidate_is_no_learned_fact() -> None:
    """Only the extractor's facts are applied: an agent's own candidate still waits."""
    state = StreamState("acme/session:trip")
    command = c.RememberMemory(scope="session", content="Maybe Lisbon.", candidate=True)
    [waits] = run(state, command, applying(is_agent=True))
    assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"


def test_a_later_inference_of_the_key_revises_the_inferred_fact() -> None:
    """Seed 002: one key holds one fact, and consolidation changes what it learned."""
    state = StreamState("acme/session:trip")
    [first] = run(state, learned("The trip budget is 1500 EUR."), applying())
    [revised] = run(state, learned("The trip budget is 1800 EUR."), applying())
    assert isinstance(revised, MemoryRevised)
    assert (revised.item_id, revised.revision, revised.inferred) == (first.item_id, 2, True)
    assert unseal(revised.content) == "The trip budget is 1800 EUR."
    assert not state.items[first.item_id].confirmed  # still an inference
    [again] = run(state, learned("The trip budget is 2000 EUR."), applying())
    assert isinstance(again, MemoryRevised) and again.revision == 3


def test_an_inference_never_replaces_a_confirmed_fact() -> None:
    state = StreamState("acme/session:trip")
    [fact] = run(
        state,
        c.RememberMemory(scope="session", content="Budget: 1500.", key="budget"),
        make_context(scope="session:trip"),
    )
    [waits] = run(state, learned("The trip budget is 900 EUR."), applying())
    assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"
    assert state.items[fact.item_id].revision == 1  # untouched


def test_a_persons_correction_confirms_an_inferred_fact() -> None:
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    [corrected] = run(
        state,
        c.CorrectMemory(item_id=fact.item_id, base_revision=1, content="Budget: 1600 EUR."),
        make_context(scope="session:trip"),
    )
    assert isinstance(corrected, MemoryRevised) and not corrected.inferred
    assert state.items[fact.item_id].confirmed
    [waits] = run(state, learned("The trip budget is 900 EUR."), applying())
    assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"


def test_an_agents_unasked_correction_of_an_inference_stays_an_inference() -> None:
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    [corrected] = run(
        state,
        c.CorrectMemory(item_id=fact.item_id, base_revision=1, content="Budget: 1700 EUR."),
        applying(is_agent=True),
    )
    assert isinstance(corrected, MemoryRevised) and corrected.inferred
    assert not state.items[fact.item_id].confirmed
    [revised] = run(state, learned("The trip budget is 1900 EUR."), applying())
    assert isinstance(revised, MemoryRevised) and revised.item_id == fact.item_id


def test_a_retracted_key_or_text_is_not_brought_back_by_an_inference() -> None:
    """Seed 002: a retracted fact stays retracted; only a direct Remember brings it back."""
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    [retracted] = run(
        state, c.DisableMemory(item_id=fact.item_id), make_context(scope="session:trip")
    )
    assert isinstance(retracted, MemoryStatusChanged) and retracted.status == "disabled"
    [by_key] = run(state, learned("The trip budget is 2500 EUR."), applying())
    [by_text] = run(state, learned("The trip budget is 1500 EUR.", key=None), applying())
    for waits in (by_key, by_text):
        assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"
    assert state.items[fact.item_id].status == "disabled"


def test_a_fact_learned_twice_is_held_once() -> None:
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    with pytest.raises(AlreadyHeld) as refused:
        run(state, learned("The trip budget is 1500 EUR.", key=None), applying())
    assert refused.value.extra["item_id"] == fact.item_id


def test_applied_facts_count_toward_no_run_cap() -> None:
    state = StreamState("acme/session:trip")
    ctx = applying(max_candidates_per_run=1)
    for n in range(3):
        [fact] = run(state, learned(f"Stop number {n} is a museum.", key=None), ctx)
        assert isinstance(fact, MemoryRemembered) and fact.status == "active"


def test_an_agent_may_not_rewrite_an_inference_to_a_retracted_text() -> None:
    """QA: an agent's unasked correction of an inferred fact brought back text a person had
    retracted; it waits as a candidate, and text another memory holds is refused."""
    state = StreamState("acme/session:trip")
    person = make_context(scope="session:trip")
    [hotel] = run(
        state, c.RememberMemory(scope="session", content="The hotel is the Hilton."), person
    )
    run(state, c.DisableMemory(item_id=hotel.item_id), person)
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    rewrite = c.CorrectMemory(
        item_id=fact.item_id, base_revision=1, content="The hotel is the Hilton."
    )
    [waits] = run(state, rewrite, applying(is_agent=True))
    assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"
    assert waits.replaces == fact.item_id
    [other] = run(state, c.RememberMemory(scope="session", content="We fly on Monday."), person)
    with pytest.raises(AlreadyHeld) as refused:
        run(
            state,
            c.CorrectMemory(item_id=fact.item_id, base_revision=1, content="We fly on Monday."),
            applying(is_agent=True),
        )
    assert refused.value.extra["item_id"] == other.item_id


def test_under_suggest_an_agents_unasked_correction_of_an_inference_waits() -> None:
    """QA: after the org went back to suggest, agents still rewrote inferred facts."""
    state = StreamState("acme/session:trip")
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    rewrite = c.CorrectMemory(item_id=fact.item_id, base_revision=1, content="Budget: 1700.")
    [waits] = run(state, rewrite, make_context(scope="session:trip", is_agent=True))
    assert isinstance(waits, MemoryRemembered) and waits.status == "candidate"
    assert state.items[fact.item_id].revision == 1


def test_an_agents_unarchive_or_undo_leaves_an_inference_one() -> None:
    """QA: an agent's archive and unarchive, or its undo of the extractor's revision, made
    the inference a confirmed fact, which later inferences could no longer revise."""
    state = StreamState("acme/session:trip")
    agent = applying(is_agent=True)
    [fact] = run(state, learned("The trip budget is 1500 EUR."), applying())
    run(state, c.ArchiveMemory(item_id=fact.item_id), agent)
    [back] = run(state, c.UnarchiveMemory(item_id=fact.item_id), agent)
    assert isinstance(back, MemoryStatusChanged) and back.inferred
    run(state, learned("The trip budget is 1800 EUR."), applying())
    [undone] = run(state, c.UndoChange(item_id=fact.item_id, base_revision=4), agent)
    assert isinstance(undone, MemoryRevised) and undone.inferred
    assert not state.items[fact.item_id].confirmed
    [revised] = run(state, learned("The trip budget is 2000 EUR."), applying())
    assert isinstance(revised, MemoryRevised) and revised.item_id == fact.item_id
    # A person's unarchive confirms it.
    person = make_context(scope="session:trip")
    run(state, c.ArchiveMemory(item_id=fact.item_id), person)
    run(state, c.UnarchiveMemory(item_id=fact.item_id), person)
    assert state.items[fact.item_id].confirmed


def step(kind: str, item: str, base: int, text: str, keyed: bool) -> c.Command:
    return {
        "learn": lambda: learned(text, key="budget" if keyed else None),
        "person_save": lambda: c.RememberMemory(scope="session", content=text, key="budget"),
        "agent_correct": lambda: c.CorrectMemory(item_id=item, base_revision=base, content=text),
        "person_correct": lambda: c.CorrectMemory(item_id=item, base_revision=base, content=text),
        "disable": lambda: c.DisableMemory(item_id=item),
        "enable": lambda: c.DisableMemory(item_id=item, disabled=False),
        "archive": lambda: c.ArchiveMemory(item_id=item),
        "unarchive": lambda: c.UnarchiveMemory(item_id=item),
        "undo": lambda: c.UndoChange(item_id=item, base_revision=base),
        "forget": lambda: c.ForgetMemory(item_id=item),
    }[kind]()


KINDS = [
    "learn",
    "person_save",
    "agent_correct",
    "person_correct",
    "disable",
    "enable",
    "archive",
    "unarchive",
    "undo",
    "forget",
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.integers(0, 3),
            st.sampled_from(["1500", "1800", "2000"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_the_projector_marks_inferences_as_the_writer_folds_them(
    steps: list[tuple[str, int, str, bool]],
) -> None:
    """A review: the writer (``state.evolve``) and the projector (``marks``) fold
    inferences apart; over any sequence they must agree, or a replay, a promotion or a
    read would disagree with what the writer decides."""
    state = StreamState("acme/session:trip")
    ids: list[str] = []
    inferred_at_birth: dict[str, bool] = {}
    events: list[Event] = []
    for kind, slot, amount, agent in steps:
        item = ids[slot % len(ids)] if ids else "missing"
        base = state.items[item].revision if item in state.items else 1
        command = step(kind, item, base, f"The trip budget is {amount} EUR.", agent)
        by_agent = agent and kind not in ("person_save", "person_correct")
        try:
            made = run(state, command, applying(is_agent=by_agent))
        except DomainError:
            continue
        events += made
        for event in made:
            if isinstance(event, MemoryRemembered):
                ids.append(event.item_id)
                inferred_at_birth[event.item_id] = event.inferred
    marks = inference_marks(events, {})
    for item_id, memory in state.items.items():
        expected = inferred_at_birth[item_id] and not memory.confirmed
        assert marks.get(item_id, False) == expected, item_id
