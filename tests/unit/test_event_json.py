"""``contracts.envelope.event_json`` writes, byte for byte, what the envelope model writes:
the writer sends events through it, readers decode them with the model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.envelope import Actor, EventEnvelope, MadeBy, event_json
from contracts.events import SCHEMA_VERSIONS, MemoryRemembered, Sealed, decode_event
from tests.unit.test_decide_properties import command_events, steps

ACTORS = st.sampled_from(
    [
        Actor(org="acme", member="ana"),
        Actor(org="acme", member="ana", agent="bot", session="s1", project="p", roles=("admin",)),
    ]
)
WHEN = st.sampled_from(
    [datetime(2026, 12, 2, 3, 4, 5, tzinfo=UTC), datetime(2026, 12, 2, 3, 4, 5, 678901, tzinfo=UTC)]
)
MADE_BY = st.sampled_from([None, "person", "agent", "extraction", "promotion", "fork", "proposal"])


@settings(max_examples=150, deadline=None)
@given(st.lists(steps(), min_size=1, max_size=25), ACTORS, WHEN, MADE_BY)
def test_event_json_is_the_envelope_models_json(
    sequence: list[Any], actor: Actor, when: datetime, made_by: MadeBy | None
) -> None:
    for seq, event in enumerate(command_events(sequence), start=1):
        name = type(event).__name__
        header: dict[str, Any] = {
            "event_id": f"e{seq}",
            "type": name,
            "schema_version": SCHEMA_VERSIONS[name],
            "stream_id": "acme/member:ana",
            "seq": seq,
            "command_id": f"c{seq}",
            "occurred_at": when,
            "actor": actor,
            "made_by": made_by,
        }
        model = EventEnvelope(**header, payload=event.model_dump(mode="json"))
        written = event_json(**header, payload=event)
        assert written == model.model_dump_json().encode()
        env, decoded = decode_event(written)
        assert decoded == event and env.seq == seq and env.actor == actor


def test_every_optional_field_of_a_memory_reads_back_alike() -> None:
    """What the random sequences do not set: an expiry, a title, labels, hashes, a run."""
    sealed = Sealed(key_id="i1", nonce="bm9uY2U=", ciphertext="Y2lwaGVy")
    event = MemoryRemembered(
        item_id="i1",
        scope="member:ana",
        kind="preference",
        status="candidate",
        content=sealed,
        title=sealed,
        labels=sealed,
        key_hash="k" * 64,
        source_hashes=("s1", "s2"),
        pinned=True,
        content_hash="h" * 64,
        content_length=12,
        expires_at=datetime(2027, 1, 1, tzinfo=UTC),
        replaces="i0",
        author="ana",
        run_id="r1",
        inferred=True,
        charged=3,
        charged_to="member:ana",
    )
    header: dict[str, Any] = {
        "event_id": "e1",
        "type": "MemoryRemembered",
        "schema_version": SCHEMA_VERSIONS["MemoryRemembered"],
        "stream_id": "acme/member:ana",
        "seq": 1,
        "command_id": "c1",
        "occurred_at": datetime(2026, 12, 2, tzinfo=UTC),
        "actor": Actor(org="acme", member="ana"),
        "made_by": "extraction",
    }
    written = event_json(**header, payload=event)
    assert (
        written
        == EventEnvelope(**header, payload=event.model_dump(mode="json")).model_dump_json().encode()
    )
    assert decode_event(written)[1] == event
