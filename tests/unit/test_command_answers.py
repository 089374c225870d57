"""A stream's idempotency record: a repeat gets the first answer while the stream keeps
it (its last ANSWERS_KEPT commands); an older save is still known by its item."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from contracts import commands as c
from contracts.envelope import CommandEnvelope
from services.command import state as state_module
from services.command.answers import answer, repeated
from services.command.context import new_item_id
from services.command.core import decide
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context


def save(state: StreamState, command_id: str, text: str) -> None:
    ctx = dataclasses.replace(
        make_context(), new_item_id=lambda: new_item_id(state.stream_id, command_id)
    )
    for event in decide(state, c.RememberMemory(content=text), ctx):
        evolve(state, state.seq + 1, command_id, event)


def test_the_record_keeps_the_last_answers_oldest_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "ANSWERS_KEPT", 3)
    state = StreamState("acme/member:ana")
    for n in range(5):
        save(state, f"cmd-{n}", f"text {n}")
    assert list(state.results) == ["cmd-2", "cmd-3", "cmd-4"]
    assert state.first_answer("cmd-4") == {
        "item_id": new_item_id("acme/member:ana", "cmd-4"),
        "revision": 1,
        "status": "active",
        "seq": 5,
        "generation": 5,
    }
    # The record survives a checkpoint as it is.
    assert list(pickle.loads(pickle.dumps(state)).results) == ["cmd-2", "cmd-3", "cmd-4"]


def test_a_save_older_than_the_record_is_known_by_its_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(state_module, "ANSWERS_KEPT", 2)
    state = StreamState("acme/member:ana")
    save(state, "first", "the first text")
    item_id = new_item_id("acme/member:ana", "first")
    ctx = make_context()
    [pinned] = decide(state, c.PinMemory(item_id=item_id), ctx)
    evolve(state, state.seq + 1, "pin", pinned)
    save(state, "later", "another text")
    assert "first" not in state.results
    # Its item as it is now, not a second item with the same id.
    assert state.first_answer("first") == {"item_id": item_id, "revision": 2, "status": "active"}
    assert state.first_answer("never-sent") is None


def test_the_same_command_id_names_another_item_in_another_stream() -> None:
    """A command id is the caller's: the same one sent in another scope or org is another
    command, and its save another item under another key."""
    assert new_item_id("acme/member:ana", "k7") != new_item_id("acme/member:bob", "k7")
    assert new_item_id("acme/member:ana", "k7") != new_item_id("evil/member:ana", "k7")
    ana, eve = StreamState("acme/member:ana"), StreamState("evil/member:eve")
    save(ana, "k7", "the victim's text")
    save(eve, "k7", "a decoy")
    assert set(ana.items).isdisjoint(eve.items)
    assert eve.first_answer("k7") == eve.results["k7"] != ana.results["k7"]


def test_a_repeat_gets_the_first_answer_with_its_version_and_receipt() -> None:
    state = StreamState("acme/member:ana")
    ctx = make_context()
    for n in range(3):
        save(state, f"save-000{n}", f"text {n}")
    first_item = new_item_id(state.stream_id, "save-0000")

    def decided(command_id: str, cmd: c.Command) -> dict[str, object]:
        events = decide(state, cmd, ctx)
        for event in events:
            evolve(state, state.seq + 1, command_id, event)
        return answer(cmd, state, command_id, events, ctx)

    def repeat(command_id: str, type_: str) -> dict[str, object]:
        env = CommandEnvelope(
            command_id=command_id, type=type_, token="t", stream_id=state.stream_id, payload={}
        )
        first = state.first_answer(command_id)
        assert first is not None
        return repeated(env, first, same=True).result

    saved_again = repeat("save-0002", "RememberMemory")
    assert (saved_again["seq"], saved_again["generation"], saved_again["duplicate"]) == (3, 3, True)
    assert saved_again["stream_id"] == state.stream_id
    forgot = decided("forget-01", c.ForgetMemory(item_id=first_item))
    forgot_again = repeat("forget-01", "ForgetMemory")
    assert forgot_again["receipt"] == forgot["receipt"]
    assert forgot_again["seq"] == forgot["seq"] == 4
    cleared = decided("clear-001", c.ClearMemories(confirm=True))
    cleared_again = repeat("clear-001", "ClearMemories")
    assert len(cleared["receipt"]["erased"]) == 2  # type: ignore[index]
    assert cleared_again["receipt"] == cleared["receipt"]
    assert "item_id" not in cleared and "item_id" not in cleared_again


def test_a_digest_holds_a_repeat_only_while_its_answer_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA: after a restore a stream held fewer digests than answers (the commands decided
    after the checkpoint have none), so digests kept by count outlived their answers: an
    old command id sent with another body was refused (422) after a restart and answered
    from its item without one."""
    monkeypatch.setattr(state_module, "ANSWERS_KEPT", 10)
    live = StreamState("acme/member:ana")
    for n in range(10):
        save(live, f"cmd-{n}", f"text {n}")
        live.record_fingerprint(f"cmd-{n}", f"digest {n}".encode())
    restored = pickle.loads(pickle.dumps(live))  # the checkpoint
    for n in range(10, 13):  # decided by the writer; replayed, without digests, by the next
        save(live, f"cmd-{n}", f"text {n}")
        live.record_fingerprint(f"cmd-{n}", f"digest {n}".encode())
        save(restored, f"cmd-{n}", f"text {n}")
    for state in (live, restored):
        assert state.fingerprint_of("cmd-2") is None  # its answer is gone: known by its item
        assert state.first_answer("cmd-2") is not None
        assert state.fingerprint_of("cmd-5") == b"digest 5"
    assert live.fingerprint_of("cmd-11") == b"digest 11"
    assert restored.fingerprint_of("cmd-11") is None  # the README's known limit
    assert live.fingerprints is not None and len(live.fingerprints) == 10
