"""The indexer's pure core: which events need an embedding, which vectors become void,
and when a finished embedding may be committed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.events import (
    Event,
    MemoryForgotten,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
)
from engram.embeddings.retry import backoff
from services.indexer.core import (
    Plan,
    Seen,
    Tracked,
    embedding_text,
    embedding_texts,
    fold,
    plan,
    verdict,
)
from tests.unit.conftest import plain_seal, unseal
from tests.unit.test_decide_properties import command_events, steps

ORG, SCOPE = "acme", "member:ana"


def remembered(status: str = "active", text: str = "The trip budget is 1500 EUR.") -> Event:
    return MemoryRemembered(
        item_id="m1",
        scope=SCOPE,
        kind="fact",
        status=status,
        content=plain_seal("m1", text),
        content_hash="h",
        content_length=len(text),
    )


def revised(revision: int, text: str) -> Event:
    return MemoryRevised(
        item_id="m1",
        revision=revision,
        base_revision=revision - 1,
        reason="corrected",
        content=plain_seal("m1", text),
        content_hash="h2",
        content_length=len(text),
    )


def status(revision: int, to: str, previous: str = "active") -> Event:
    return MemoryStatusChanged(item_id="m1", revision=revision, status=to, previous=previous)


def folded(*events: Event) -> Tracked:
    state: Tracked | None = None
    for event in events:
        state = fold(state, event, ORG, SCOPE)
    assert state is not None
    return state


# -- fold: the indexer's own view of an item ---------------------------------------------------


def test_an_active_remember_is_tracked_with_its_sealed_text_at_revision_one() -> None:
    state = folded(remembered())
    assert (state.status, state.revision, state.text_revision) == ("active", 1, 1)
    assert state.content is not None and unseal(state.content) == "The trip budget is 1500 EUR."


def test_a_pin_moves_the_revision_but_not_the_text() -> None:
    state = folded(remembered(), MemoryPinned(item_id="m1", revision=2, pinned=True))
    assert (state.revision, state.text_revision) == (2, 1)


def test_a_relabel_moves_the_revision_but_not_the_text() -> None:
    state = folded(remembered(), MemoryRelabeled(item_id="m1", revision=2, kind="fact"))
    assert (state.revision, state.text_revision) == (2, 1)


def test_a_replayed_or_older_event_changes_nothing() -> None:
    state = folded(remembered(), revised(2, "1600 EUR"))
    assert folded(remembered(), revised(2, "1600 EUR"), remembered(), revised(2, "x")) == state


def test_forget_drops_the_sealed_text_and_nothing_after_it_counts() -> None:
    state = folded(
        remembered(),
        MemoryForgotten(item_id="m1", revisions=1),
        revised(2, "back again"),
        status(3, "active"),
    )
    assert state.status == "forgotten"
    assert (state.content, state.title, state.text_revision) == (None, None, None)


# -- plan: which events need an embedding, which vectors become void ---------------------------


def test_a_new_active_item_without_a_vector_needs_one() -> None:
    assert plan(folded(remembered()), None, True) == Plan(
        "m1", keep_from=1, relabel_to=1, embed=True
    )


def test_a_candidate_needs_no_embedding_and_may_hold_no_vector() -> None:
    assert plan(folded(remembered("candidate")), None, True) == Plan("m1", None, None, False)


def test_a_pin_relabels_the_vector_of_the_unchanged_text_instead_of_re_embedding() -> None:
    state = folded(remembered(), MemoryPinned(item_id="m1", revision=2, pinned=True))
    assert plan(state, 1, True) == Plan("m1", keep_from=1, relabel_to=2, embed=False)


def test_new_text_voids_the_older_vectors_and_needs_an_embedding() -> None:
    state = folded(remembered(), revised(2, "1600 EUR"))
    assert plan(state, 1, True) == Plan("m1", keep_from=2, relabel_to=2, embed=True)


@pytest.mark.parametrize("to", ["disabled", "archived"])
def test_disable_and_archive_void_every_vector(to: str) -> None:
    assert plan(folded(remembered(), status(2, to)), 1, True) == Plan("m1", None, None, False)


def test_forget_voids_every_vector() -> None:
    state = folded(remembered(), MemoryForgotten(item_id="m1", revisions=1))
    assert plan(state, 1, True) == Plan("m1", None, None, False)


def test_enabling_again_re_embeds_because_disabling_removed_the_vector() -> None:
    state = folded(remembered(), status(2, "disabled"), status(3, "active", "disabled"))
    assert plan(state, None, True) == Plan("m1", keep_from=1, relabel_to=3, embed=True)


def test_with_embeddings_off_vectors_are_still_voided_but_nothing_is_embedded() -> None:
    assert plan(folded(remembered(), revised(2, "new")), None, False).embed is False
    assert plan(folded(remembered(), status(2, "disabled")), 1, False).keep_from is None


def test_an_item_the_projector_holds_further_on_is_embedded_at_its_last_revision_only() -> None:
    """Reading a backlog: the log holds this item's later revisions, which embed it."""
    state = folded(remembered(), revised(2, "new"))
    assert plan(state, None, True, projected_at=4) == Plan("m1", 2, 2, embed=False)
    for projected in (None, 1, 2):  # the projector not there yet, or just there
        assert plan(state, None, True, projected_at=projected).embed is True


def test_an_active_item_whose_text_was_never_seen_holds_no_vector() -> None:
    state = fold(None, status(4, "active", "disabled"), ORG, SCOPE)
    assert plan(state, 2, True) == Plan("m1", None, None, False)


# -- verdict: the recheck before a vector is committed -----------------------------------------


@pytest.mark.parametrize(
    ("own", "projected", "expected"),
    [
        (Seen("active", 1), None, "write"),  # the projector lags: the indexer's view decides
        (None, Seen("active", 1), "write"),
        (Seen("active", 1), Seen("active", 1), "write"),
        (Seen("active", 2), Seen("disabled", 1), "stale"),  # enabled at 2, not yet projected
        (Seen("active", 1), Seen("forgotten", 1), "forgotten"),  # the projector is ahead
        (Seen("forgotten", 1), Seen("active", 1), "forgotten"),
        (Seen("active", 1), Seen("active", 2), "stale"),  # corrected meanwhile
        (Seen("disabled", 1), None, "inactive"),
        (None, Seen("archived", 1), "inactive"),
        (None, None, "unknown"),
        (Seen("active", 0), Seen("active", 0), "unknown"),  # never write ahead of the log
    ],
)
def test_a_vector_is_committed_only_for_an_item_active_at_that_revision(
    own: Seen | None, projected: Seen | None, expected: str
) -> None:
    assert verdict(1, [own, projected]) == expected


def test_a_vector_for_the_new_revision_is_allowed_when_the_indexer_saw_it_first() -> None:
    assert verdict(2, [Seen("active", 2), Seen("disabled", 1)]) == "write"


# -- small pure helpers ------------------------------------------------------------------------


def test_the_embedded_text_is_the_title_then_the_content() -> None:
    assert embedding_text("Trip", "1500 EUR") == "Trip\n1500 EUR"
    assert embedding_text(None, "1500 EUR") == "1500 EUR"


def test_backoff_doubles_is_capped_and_honours_a_longer_retry_after() -> None:
    assert [backoff(a, 0.5, 5.0) for a in range(5)] == [0.5, 1.0, 2.0, 4.0, 5.0]
    assert backoff(0, 0.5, 5.0, retry_after=3.0) == 3.0
    assert backoff(0, 0.5, 5.0, retry_after=60.0) == 5.0


# -- property: whatever the history and batching, vectors end as current text of active items --


@dataclass
class Vector:
    revision: int
    text: str


def apply_batch(
    store: dict[str, Vector],
    tracked: dict[str, Tracked],
    batch: list[Event],
    projected: dict[str, int],
) -> None:
    """An in-memory stand-in for write(): void, relabel, then embed with the recheck;
    ``projected``: the revisions of the projector's rows."""
    for event in batch:
        tracked[event.item_id] = fold(tracked.get(event.item_id), event, ORG, SCOPE)
    for item_id in {event.item_id for event in batch}:
        state = tracked[item_id]
        have = store.get(item_id)
        p = plan(state, have.revision if have else None, True, projected.get(item_id))
        if have and (p.keep_from is None or have.revision < p.keep_from):
            del store[item_id]
        elif have and p.relabel_to is not None and have.revision >= (p.keep_from or 0):
            have.revision = p.relabel_to
        if p.embed and verdict(state.revision, [Seen(state.status, state.revision)]) == "write":
            assert state.content is not None
            store[item_id] = Vector(state.revision, unseal(state.content))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(steps(), min_size=1, max_size=40),
    st.lists(st.integers(1, 6), min_size=1),
    st.booleans(),
)
def test_vectors_always_hold_the_current_text_of_active_items_only(
    sequence: list[Any], cuts: list[int], projector_ahead: bool
) -> None:
    """Whether the projector has applied nothing yet or the whole log already (the
    indexer reading a backlog)."""
    events = command_events(sequence, f"{ORG}/{SCOPE}")
    projected: dict[str, int] = {}
    if projector_ahead:
        final: dict[str, Tracked] = {}
        for event in events:
            final[event.item_id] = fold(final.get(event.item_id), event, ORG, SCOPE)
        projected = {item_id: state.revision for item_id, state in final.items()}
    store: dict[str, Vector] = {}
    tracked: dict[str, Tracked] = {}
    start = 0
    for size in [*cuts, len(events)]:
        apply_batch(store, tracked, events[start : start + size], projected)
        start += size
    for item_id, state in tracked.items():
        if state.status == "active":
            assert state.content is not None
            assert store[item_id] == Vector(state.revision, unseal(state.content))
        else:
            assert item_id not in store


class Whole:
    """A model that reads any text whole, titles of up to five characters."""

    def heading(self, title: str | None) -> str | None:
        return title[:5] if title else title

    def pieces(self, title: str | None, passage: str) -> list[str]:
        return [passage]


class Halves(Whole):
    def pieces(self, title: str | None, passage: str) -> list[str]:
        return [passage[: len(passage) // 2], passage[len(passage) // 2 :]]


def test_a_long_memory_is_embedded_a_passage_at_a_time_each_with_its_title() -> None:
    long = "A sentence of the long memory. " * 100
    texts = embedding_texts("Runbook", long, Whole())
    assert [(t.passage, t.piece) for t in texts] == [(0, 0), (1, 0), (2, 0)]
    assert all(t.text.startswith("Runbo\n") for t in texts)  # the title as the model reads it
    assert [t.text for t in embedding_texts(None, "Short.", Whole())] == ["Short."]  # as before


def test_a_passage_the_model_cannot_read_whole_is_embedded_in_its_pieces() -> None:
    texts = embedding_texts("T", "A sentence. " * 150, Halves())
    assert [(t.passage, t.piece) for t in texts] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(t.text.startswith("T\n") for t in texts)
