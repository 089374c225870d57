"""A restore folds the log as the writer wrote it; an event that is not the writer's (out
of its stream's sequence, or of an item the stream never had) is reported and skipped,
never a writer that cannot start."""

from __future__ import annotations

from datetime import UTC, datetime

from contracts import commands as c
from contracts.envelope import Actor, EventHeader
from contracts.events import Event, MemoryPinned, MemoryRemembered
from engram.crypto import MasterKey
from services.command.adapters.restore import _fold, _with_key_hash
from services.command.core import decide
from services.command.state import StreamState
from tests.unit.conftest import make_context


def header(stream: str, seq: int) -> EventHeader:
    return EventHeader(
        event_id=f"e-{seq}",
        type="T",
        stream_id=stream,
        seq=seq,
        command_id=f"cmd-{seq}",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        actor=Actor(org="acme", member="ana"),
    )


def test_events_out_of_sequence_or_of_unknown_items_are_skipped() -> None:
    stream = "acme/member:ana"
    states: dict[str, StreamState] = {}
    [saved] = decide(StreamState(stream), c.RememberMemory(content="x"), make_context())
    _fold(states, header(stream, 1), saved)
    pin: Event = MemoryPinned(item_id=saved.item_id, revision=2, pinned=True)
    _fold(states, header(stream, 7), pin)  # a gap
    _fold(states, header(stream, 1), pin)  # a repeat
    _fold(states, header(stream, 2), MemoryPinned(item_id="forged", revision=2, pinned=True))
    state = states[stream]
    assert (state.seq, state.items[saved.item_id].pinned) == (1, False)
    _fold(states, header(stream, 2), pin)  # the writer's next one still folds
    assert (state.seq, state.items[saved.item_id].pinned) == (2, True)


def test_an_event_of_before_sealed_labels_restores_its_key_as_a_hash() -> None:
    """An event written before labels were sealed carries its key in plain: the restore
    hashes it as the writer does now, so a keyed save still finds the key's memory."""
    stream, master = "acme/member:ana", MasterKey(bytes(32))
    [saved] = decide(StreamState(stream), c.RememberMemory(content="Paris."), make_context())
    assert isinstance(saved, MemoryRemembered)
    old = saved.model_copy(update={"key": "office", "tags": ("work",)})
    states: dict[str, StreamState] = {}
    _fold(states, header(stream, 1), _with_key_hash(header(stream, 1), old, master))
    holder = states[stream].active_by_key(master.key_hash("acme", "office"))
    assert holder is not None and holder.item_id == saved.item_id
    assert holder.key_hash != "office" and holder.labels is None
