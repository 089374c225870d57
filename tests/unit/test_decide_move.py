"""A move (seed 004: an update that changes a memory's scope): decided in the scope it
moves into, a copy of the memory at the caller's revision; then a forget where it was,
which the move's transaction sends and which counts its text as moved, not forgotten;
refused, that forget undoes the move."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from contracts import commands as c
from contracts.envelope import CommandEnvelope
from contracts.events import MemoryForgotten, MemoryRemembered
from engram.auth import Principal, TokenVerifier, dev_secret, mint_token
from engram.crypto import MasterKey
from engram.settings import CommonSettings
from services.command.adapters.admission import authorise
from services.command.context import Context, Copy, new_item_id
from services.command.errors import (
    Conflict,
    Forbidden,
    Gone,
    InvalidCommand,
    NotFound,
    NotReadable,
    Unauthenticated,
)
from services.command.moves import after_decision, after_refusal, move_undone, moved_forget
from services.command.state import StreamState
from tests.unit.conftest import labels_of, make_context, run, unseal

MASTER = MasterKey(bytes(32))


def source(content: str = "Deploys need two approvals.", revision: int = 2, **kw: object) -> Copy:
    fields: dict[str, object] = {
        "item_id": "m-1",
        "kind": "decision",
        "key": None,
        "title": "Deploys",
        "content": content,
        "pinned": True,
        "tags": ("ops",),
        "sources": ("turn-3",),
        "revision": revision,
        "author": "ana",
        **kw,
    }
    return Copy(**fields)  # type: ignore[arg-type]


def into(scope: str, *copies: Copy, **kw: object) -> Context:
    base = make_context(scope=scope, **kw)  # type: ignore[arg-type]
    return Context(**{**base.__dict__, "copies": copies})


def moving(**kw: object) -> c.MoveMemory:  # from ana's private scope into shared
    fields: dict[str, object] = {
        "item_id": "m-1",
        "scope": "shared",
        "from_scope": "private",
        "base_revision": 2,
        **kw,
    }
    return c.MoveMemory.model_validate(fields)


def test_a_memory_moves_as_a_copy_at_the_revision_its_caller_saw() -> None:
    shared = StreamState("acme/shared")
    ctx = into("shared", source())  # the copy's id follows from the move's, as the writer's
    ctx = Context(
        **{**ctx.__dict__, "new_item_id": lambda: new_item_id("acme/shared", "move-0001")}
    )
    [copied] = run(shared, moving(), ctx)
    assert isinstance(copied, MemoryRemembered) and copied.status == "active"
    assert copied.item_id != "m-1" and copied.author == "ana"
    assert (unseal(copied.content), copied.kind, copied.pinned) == (
        "Deploys need two approvals.",
        "decision",
        True,
    )
    labels = labels_of(copied)
    assert (labels.tags, labels.sources) == (("ops",), ("m-1", "turn-3"))  # names its source

    ana = Principal(org="acme", member="ana")
    env = CommandEnvelope(
        command_id="move-0001", type="MoveMemory", token="t", stream_id="acme/shared", payload={}
    )
    forget = moved_forget(moving(), env, ana, MASTER.issued_id)
    assert forget.stream_id == "acme/member:ana"
    assert forget.type == "ForgetMoved" and forget.token == "t"
    assert forget.payload == {
        "item_id": "m-1",
        "base_revision": 2,
        "moved_to": copied.item_id,
        "to_scope": "shared",
        "follows": "acme/shared move-0001",
    }
    assert forget.command_id == MASTER.issued_id("acme/member:ana", "t", forget.payload)
    again = moved_forget(moving(), env, ana, MASTER.issued_id)
    assert again.command_id == forget.command_id  # a retry's is the same
    assert after_decision(moving(), env, ana, [], MASTER.issued_id) is None  # nothing copied

    # Refused where it was, the forget undoes the move: the copy's own forget, at its
    # first revision, which undoes nothing further.
    undo = move_undone(c.ForgetMoved.model_validate(forget.payload), forget, ana, MASTER.issued_id)
    assert undo.stream_id == "acme/shared" and undo.command_id != forget.command_id
    assert undo.payload == {
        "item_id": copied.item_id,
        "scope": "shared",
        "base_revision": 1,
        "moved_to": "m-1",
        "to_scope": "private",
        "undo": True,
        "follows": f"acme/member:ana {forget.command_id}",
    }


def test_only_the_command_service_sends_a_forget_moved_and_its_token_may_have_expired() -> None:
    """QA: a move just before its token expired left the memory in both scopes (its
    forget, appended after the expiry, was refused 401); and a caller could take the
    forget's id first, or send one of its own."""
    verifier = TokenVerifier(CommonSettings())
    expired = mint_token(dev_secret(), org="acme", member="ana", ttl_seconds=-60)
    payload = {
        "item_id": "m-1",
        "base_revision": 1,
        "moved_to": "c-1",
        "to_scope": "shared",
        "follows": "acme/shared move-0001",
    }
    issued = CommandEnvelope(
        command_id=MASTER.issued_id("acme/member:ana", expired, payload),
        type="ForgetMoved",
        token=expired,
        stream_id="acme/member:ana",
        payload=payload,
    )
    principal, cmd = authorise(verifier, issued, {}, time.time(), (0, 1), MASTER)
    assert principal.member == "ana" and isinstance(cmd, c.ForgetMoved)
    other = mint_token(dev_secret(), org="acme", member="ana", ttl_seconds=60)
    for forged in (
        issued.model_copy(update={"command_id": "issued-" + "0" * 32}),
        issued.model_copy(update={"payload": {**payload, "moved_to": "c-2"}}),
        issued.model_copy(update={"token": other}),
    ):  # sent again, another token
        with pytest.raises(Forbidden, match="the command service's own"):
            authorise(verifier, forged, {}, time.time(), (0, 1), MASTER)
    plain = CommandEnvelope(
        command_id="forget-0001",
        type="ForgetMemory",
        token=expired,
        stream_id="acme/member:ana",
        payload={"item_id": "m-1"},
    )
    with pytest.raises(Unauthenticated, match="expired"):  # any other command's must hold
        authorise(verifier, plain, {}, time.time(), (0, 1), MASTER)


def test_the_forget_erases_only_the_revision_copied_and_counts_the_text_as_moved() -> None:
    private = StreamState("acme/member:ana")
    ana = make_context()
    [saved] = run(private, c.RememberMemory(content="Deploys need two approvals."), ana)
    stale = c.ForgetMoved(
        item_id=saved.item_id,
        base_revision=2,
        moved_to="copy-1",
        to_scope="shared",
        follows="acme/shared move-0001",
    )
    with pytest.raises(Conflict, match="at revision 1, not 2"):
        run(private, stale, ana)  # changed since the move read it: kept, nothing erased
    moved = c.ForgetMoved(
        item_id=saved.item_id,
        base_revision=1,
        moved_to="copy-1",
        to_scope="shared",
        follows="acme/shared move-0001",
    )
    [gone] = run(private, moved, ana)
    assert isinstance(gone, MemoryForgotten) and gone.moved_to == "copy-1"
    assert gone.reason == "moved to the shared scope as copy-1"
    with pytest.raises(Gone):  # moved (or forgotten) first: refused, so the move is undone
        run(private, moved, ana)
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
    with pytest.raises(NotFound, match="no memory m-1 in your private scope"):
        run(shared, moving(), into("shared"))
    with pytest.raises(Gone):
        run(shared, moving(), into("shared", source(status="forgotten", content="")))
    for status in ("disabled", "archived", "candidate"):
        with pytest.raises(Conflict, match=f"is {status}: only an active memory moves"):
            run(shared, moving(), into("shared", source(status=status)))
    lapsed = source(expires_at=datetime(2025, 12, 1, tzinfo=UTC))  # before the context's now
    with pytest.raises(Conflict, match="is expired"):
        run(shared, moving(), into("shared", lapsed))
    not_ready = Context(**{**into("shared", source()).__dict__, "copies_ready": False})
    with pytest.raises(NotReadable):
        run(shared, moving(), not_ready)
    with pytest.raises(Conflict, match="at revision 2, not 1") as stale:
        run(shared, moving(base_revision=1), into("shared", source()))
    assert stale.value.extra["current_revision"] == 2
    assert shared.seq == 0


def test_a_teammates_shared_memory_moves_only_for_its_author_or_an_admin() -> None:
    bobs = source(author="bob")
    private = StreamState("acme/member:ana")
    with pytest.raises(Forbidden, match="is bob's"):
        run(private, moving(scope="private", from_scope="shared"), into("member:ana", bobs))
    [copied] = run(
        private,
        moving(scope="private", from_scope="shared"),
        into("member:ana", bobs, is_admin=True),
    )
    assert isinstance(copied, MemoryRemembered)


def test_text_the_scope_holds_or_forgot_is_not_moved_in_unless_meant() -> None:
    shared = StreamState("acme/shared")
    ana = make_context(scope="shared")
    # A candidate of the text first does not hide the active memory that holds it (QA:
    # the move answered 200 and moved nothing).
    run(
        shared,
        c.RememberMemory(content="Deploys need two approvals.", scope="shared", candidate=True),
        ana,
    )
    [held] = run(
        shared, c.RememberMemory(content="Deploys need two approvals.", scope="shared"), ana
    )
    with pytest.raises(Conflict, match=f"as memory {held.item_id}: forget memory m-1 instead"):
        run(shared, moving(), into("shared", source()))
    run(shared, c.ForgetMemory(item_id=held.item_id, scope="shared"), ana)
    with pytest.raises(Conflict, match="forgotten before"):
        run(shared, moving(), into("shared", source()))
    [copied] = run(shared, moving(resave_forgotten=True), into("shared", source()))
    assert isinstance(copied, MemoryRemembered)


def test_a_key_the_scope_holds_refuses_the_move() -> None:
    """QA: a move revised a teammate's shared memory by its key (or archived it, for a
    fact of another kind), where the same save was a proposal: a move only copies."""
    shared = StreamState("acme/shared")
    bob = make_context(scope="shared", member="bob")
    for kind in ("decision", "fact"):
        [held] = run(
            shared,
            c.RememberMemory(
                content=f"Deploys: one approval ({kind}).", kind=kind, key="deploys", scope="shared"
            ),
            bob,
        )
        with pytest.raises(Conflict, match=f"memory {held.item_id} holds this memory's key"):
            run(shared, moving(), into("shared", source(key="deploys")))
        run(shared, c.ForgetMemory(item_id=held.item_id, scope="shared"), bob)
    [copied] = run(shared, moving(), into("shared", source(key="deploys")))
    assert isinstance(copied, MemoryRemembered) and labels_of(copied).key == "deploys"


def test_a_moved_memory_keeps_its_expiry() -> None:
    later = datetime(2026, 6, 1, tzinfo=UTC)
    [copied] = run(StreamState("acme/shared"), moving(), into("shared", source(expires_at=later)))
    assert isinstance(copied, MemoryRemembered) and copied.expires_at == later


def test_what_a_command_sends_on_is_a_moves_forget_or_its_undo() -> None:
    """The writer sends what these say, in the transaction of the command they follow."""
    ana = Principal(org="acme", member="ana")
    env = CommandEnvelope(
        command_id="move-0003", type="MoveMemory", token="t", stream_id="acme/shared", payload={}
    )
    [copied] = run(StreamState("acme/shared"), moving(), into("shared", source()))
    forget = after_decision(moving(), env, ana, [copied], MASTER.issued_id)
    assert forget is not None and forget.stream_id == "acme/member:ana"
    assert after_decision(c.PinMemory(item_id="m-1"), env, ana, [copied], MASTER.issued_id) is None
    refused = c.ForgetMoved.model_validate(forget.payload)
    undo = after_refusal(refused, forget, ana, MASTER.issued_id)
    assert undo is not None and (undo.stream_id, undo.payload["undo"]) == ("acme/shared", True)
    undone = c.ForgetMoved.model_validate(undo.payload)
    assert after_refusal(undone, undo, ana, MASTER.issued_id) is None  # no undo of an undo
    assert after_refusal(None, forget, None, MASTER.issued_id) is None  # token unreadable
    assert after_refusal(c.PinMemory(item_id="m-1"), env, ana, MASTER.issued_id) is None


def test_a_moved_memorys_earlier_texts_count_as_forgotten_where_it_was() -> None:
    """Review: its earlier revisions are erased with it, so they are guarded as forgotten
    text; only the text it moved with lives on."""
    private = StreamState("acme/member:ana")
    [saved] = run(private, c.RememberMemory(content="Deploys need one approval."))
    run(
        private,
        c.CorrectMemory(
            item_id=saved.item_id, base_revision=1, content="Deploys need two approvals."
        ),
    )
    run(
        private,
        c.ForgetMoved(
            item_id=saved.item_id,
            base_revision=2,
            moved_to="copy-1",
            to_scope="shared",
            follows="acme/shared move-0004",
        ),
    )
    assert private.forgotten_hashes == {"h:deploys need one approval."}
