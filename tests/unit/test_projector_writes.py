"""The projector's rows from events (``core.project``): every event type the log carries
has its writes, each with a place in WRITE_ORDER (a write of no place would never run), and
an event type with none is refused rather than applied as nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts import events as ev
from contracts.envelope import Actor, EventHeader
from services.projector.core import WRITE_ORDER, Opened, project

AT = datetime(2026, 1, 1, tzinfo=UTC)
SEALED = ev.Sealed(key_id="i-1", nonce="", ciphertext="")
ENV = EventHeader(
    event_id="e-1",
    type="MemoryRemembered",
    stream_id="org/member:ana",
    seq=1,
    command_id="c-1",
    occurred_at=AT,
    actor=Actor(org="org", member="ana"),
)
ONE_OF_EACH: list[ev.Event] = [
    ev.MemoryRemembered(
        item_id="i-1",
        scope="member:ana",
        kind="fact",
        status="active",
        content=SEALED,
        content_hash="h",
        content_length=4,
    ),
    ev.MemoryRevised(
        item_id="i-1",
        revision=2,
        base_revision=1,
        reason="corrected",
        content=SEALED,
        content_hash="h",
        content_length=4,
    ),
    ev.MemoryPinned(item_id="i-1", revision=3, pinned=True),
    ev.MemoryRelabeled(item_id="i-1", revision=4, kind="note"),
    ev.MemoryStatusChanged(item_id="i-1", revision=5, status="archived", previous="active"),
    ev.MemoryLinked(item_id="i-1", target_id="i-2", kind="related"),
    ev.MemoryUnlinked(item_id="i-1", target_id="i-2", kind="related"),
    ev.ChangeProposed(
        item_id="i-1",
        proposal_id="p-1",
        change="archive",
        base_revision=5,
        reason="old",
        proposer="ana",
        proposed_at=AT,
    ),
    ev.ProposalResolved(item_id="i-1", proposal_id="p-1", status="rejected"),
    ev.RevisionsPruned(item_id="i-1", before=2),
    ev.MemoryForgotten(item_id="i-1", revisions=5),
]


def test_the_examples_cover_every_event_type() -> None:
    assert {type(event) for event in ONE_OF_EACH} == set(ev.EVENTS.values())


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda event: type(event).__name__)
def test_every_event_type_has_writes_that_run(event: ev.Event) -> None:
    writes = project(ENV, event, Opened(content="text", title=None))
    assert writes
    assert {write.query for write in writes} <= set(WRITE_ORDER)


def test_an_event_type_without_writes_is_refused() -> None:
    class Unknown(ev.Event):
        pass

    with pytest.raises(TypeError, match="no projection for Unknown"):
        project(ENV, Unknown(item_id="i-1"), Opened(content=None, title=None))
