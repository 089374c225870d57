"""A move (seed 004: an update that changes a memory's scope): decided in the scope it
moves into, a copy of the memory at the caller's revision; then a forget where it was,
which the move's transaction sends and which counts its text as moved, not forgotten."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contracts import commands as c
from contracts.envelope import CommandEnvelope
from contracts.events import Event, MemoryForgotten, MemoryRemembered, MemoryRevised
from services.command.context import Context, Copy
from services.command.copies import moved_forget
from services.command.core import decide
from services.command.errors import (
    Conflict,
    Forbidden,
    InvalidCommand,
    NotFound,
    NotReadable,
)
from services.command.state import StreamState, evolve
from tests.unit.conftest import labels_of, make_context, unseal


def run(state: StreamState, cmd: c.Command, ctx: Context) -> list[Event]:
    events = decide(state, cmd, ctx)
    for event in events:
        evolve(state, state.seq + 1, f"cmd-{state.seq + 1}", event)
    return events


def source(content: str = "Deploys need two approvals.", revision: int = 2, **kw: object) -> Copy:
    fields: dict[str, object] = {
        "item_id": "m-1", "kind": "decision", "key": None, "title": "Deploys",
        "content": content, "pinned": True, "tags": ("ops",), "sources": ("turn-3",),
        "revision": revision, "author": "ana", **kw}
    return Copy(**fields)  # type: ignore[arg-type]


def into(scope: str, *copies: Copy, **kw: object) -> Context:
    base = make_context(scope=scope, **kw)  # type: ignore[arg-type]
    return Context(**{**base.__dict__, "copies": copies})


def moving(**kw: object) -> c.MoveMemory:
    fields: dict[str, object] = {"item_id": "m-1", "scope": "shared", "from_scope": "private",
                                 "base_revision": 2, **kw}
    return c.MoveMemory(**fields)  # type: ignore[arg-type]


def test_a_memory_moves_as_a_copy_at_the_revision_its_caller_saw() -> None:
    shared = StreamState("acme/shared")
    [copied] = run(shared, moving(), into("shared", source()))
    assert isinstance(copied, MemoryRemembered) and copied.status == "active"
    assert copied.item_id != "m-1" and copied.author == "ana"
    assert (unseal(copied.content), copied.kind, copied.pinned) == (
        "Deploys need two approvals.", "decision", True)
    labels = labels_of(copied)
    assert (labels.tags, labels.sources) == (("ops",), ("m-1", "turn-3"))  # names its source

    env = CommandEnvelope(command_id="move-0001", type="MoveMemory", token="t",
                          stream_id="acme/shared", payload={})
    forget = moved_forget(moving(), env, "acme/member:ana", [copied])
    assert forget is not None and forget.stream_id == "acme/member:ana"
    assert forget.type == "ForgetMemory" and forget.token == "t"
    assert forget.payload == {"item_id": "m-1", "scope": "private", "base_revision": 2,
                              "moved_to": copied.item_id,
                              "reason": f"moved to the shared scope as {copied.item_id}"}
    again = moved_forget(moving(), env, "acme/member:ana", [copied])
    assert again is not None and again.command_id == forget.command_id  # a retry's is one
    assert moved_forget(c.PinMemory(item_id="m-1", pinned=True), env, "x", [copied]) is None


def test_the_forget_erases_only_the_revision_copied_and_counts_the_text_as_moved() -> None:
    private = StreamState("acme/member:ana")
    ana = make_context()
    [saved] = run(private, c.RememberMemory(content="Deploys need two approvals."), ana)
    stale = c.ForgetMemory(item_id=saved.item_id, base_revision=2, moved_to="copy-1")
    with pytest.raises(Conflict, match="at revision 1, not 2"):
        run(private, stale, ana)  # changed since the move read it: kept, nothing erased
    moved = c.ForgetMemory(item_id=saved.item_id, base_revision=1, moved_to="copy-1")
    [gone] = run(private, moved, ana)
    assert isinstance(gone, MemoryForgotten) and gone.moved_to == "copy-1"
    assert not private.forgotten_hashes  # moved, not forgotten: it may come back here
    [back] = run(private, c.RememberMemory(content="Deploys need two approvals."), ana)
    assert isinstance(back, MemoryRemembered)
    run(private, c.ForgetMemory(item_id=back.item_id), ana)
    assert private.forgotten_hashes  # a plain forget still counts the text as forgotten


def test_a_move_is_refused_copying_nothing() -> None:
    shared = StreamState("acme/shared")
    with pytest.raises(Forbidden, match="a person moves"):
        run(shared, moving(), into("shared", source(), is_agent=True))
    with pytest.raises(InvalidCommand, match="in the shared scope already"):
        run(shared, moving(from_scope="shared"), into("shared", source()))
    with pytest.raises(NotFound, match="no active memory m-1 in your private scope"):
        run(shared, moving(), into("shared"))
    not_ready = Context(**{**into("shared", source()).__dict__, "copies_ready": False})
    with pytest.raises(NotReadable):
        run(shared, moving(), not_ready)
    with pytest.raises(Conflict, match="is disabled"):
        run(shared, moving(), into("shared", source(disabled=True)))
    with pytest.raises(Conflict, match="at revision 2, not 1") as stale:
        run(shared, moving(base_revision=1), into("shared", source()))
    assert stale.value.extra["current_revision"] == 2
    assert shared.seq == 0


def test_a_teammates_shared_memory_moves_only_for_its_author_or_an_admin() -> None:
    bobs = source(author="bob")
    private = StreamState("acme/member:ana")
    with pytest.raises(Forbidden, match="is bob's"):
        run(private, moving(scope="private", from_scope="shared"), into("member:ana", bobs))
    [copied] = run(private, moving(scope="private", from_scope="shared"),
                   into("member:ana", bobs, is_admin=True))
    assert isinstance(copied, MemoryRemembered)


def test_text_the_scope_holds_or_forgot_is_not_moved_in_unless_meant() -> None:
    shared = StreamState("acme/shared")
    ana = make_context(scope="shared")
    [held] = run(shared, c.RememberMemory(content="Deploys need two approvals.", scope="shared"),
                 ana)
    with pytest.raises(Conflict, match=f"as memory {held.item_id}: forget memory m-1 instead"):
        run(shared, moving(), into("shared", source()))
    run(shared, c.ForgetMemory(item_id=held.item_id, scope="shared"), ana)
    with pytest.raises(Conflict, match="forgotten before"):
        run(shared, moving(), into("shared", source()))
    [copied] = run(shared, moving(resave_forgotten=True), into("shared", source()))
    assert isinstance(copied, MemoryRemembered)


def test_a_key_the_scope_holds_takes_the_moved_text_as_a_revision() -> None:
    shared = StreamState("acme/shared")
    ana = make_context(scope="shared")
    [held] = run(shared, c.RememberMemory(content="Deploys need one approval.", kind="decision",
                                          key="deploys", scope="shared"), ana)
    events = run(shared, moving(), into("shared", source(key="deploys")))
    revised = [e for e in events if isinstance(e, MemoryRevised)]
    assert [e.item_id for e in revised] == [held.item_id]
    assert unseal(revised[0].content) == "Deploys need two approvals."
    env = CommandEnvelope(command_id="move-0002", type="MoveMemory", token="t",
                          stream_id="acme/shared", payload={})
    forget = moved_forget(moving(), env, "acme/member:ana", events)
    assert forget is not None and forget.payload["moved_to"] == held.item_id


def test_a_moved_memory_keeps_its_expiry() -> None:
    later = datetime(2026, 6, 1, tzinfo=UTC)
    [copied] = run(StreamState("acme/shared"), moving(),
                   into("shared", source(expires_at=later)))
    assert isinstance(copied, MemoryRemembered) and copied.expires_at == later
