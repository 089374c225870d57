"""The decision core: given events, when a command, then events or an error."""

from __future__ import annotations

import pytest

from contracts import commands as c
from contracts.events import (
    Labels,
    MemoryForgotten,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
)
from services.command.errors import (
    Conflict,
    Forbidden,
    Gone,
    InvalidCommand,
    NotFound,
    ProposalRequired,
)
from services.command.state import StreamState
from tests.unit.conftest import labels_of, make_context, run, unseal


def remembered(state: StreamState, text: str = "The trip budget is 1500 EUR.", **kw: object) -> str:
    [event] = run(state, c.RememberMemory(content=text, **kw))
    return event.item_id


def test_remember_by_a_person_is_active_at_revision_one_with_sealed_text() -> None:
    state = StreamState("acme/member:ana")
    [event] = run(state, c.RememberMemory(content="I like tea", kind="preference", pinned=True))
    assert isinstance(event, MemoryRemembered)
    assert (event.status, event.revision, event.kind, event.pinned) == (
        "active",
        1,
        "preference",
        True,
    )
    assert unseal(event.content) == "I like tea"
    assert state.generation == 1


def test_correct_on_the_current_revision_writes_the_next_revision() -> None:
    state = StreamState("s")
    item = remembered(state)
    [event] = run(state, c.CorrectMemory(item_id=item, base_revision=1, content="1600 EUR"))
    assert isinstance(event, MemoryRevised)
    assert (event.revision, event.base_revision, event.reason) == (2, 1, "corrected")


def test_a_stale_base_conflicts_names_the_current_revision_and_returns_the_text() -> None:
    state = StreamState("s")
    item = remembered(state)
    run(state, c.CorrectMemory(item_id=item, base_revision=1, content="first"))
    with pytest.raises(Conflict) as err:
        run(state, c.CorrectMemory(item_id=item, base_revision=1, content="my unsaved text"))
    assert err.value.extra["current_revision"] == 2
    assert err.value.extra["content"] == "my unsaved text"


def test_restore_revision_and_undo_bring_back_earlier_text_as_new_revisions() -> None:
    state = StreamState("s")
    item = remembered(state, "v1")
    run(state, c.CorrectMemory(item_id=item, base_revision=1, content="v2"))
    [restored] = run(state, c.RestoreRevision(item_id=item, base_revision=2, revision=1))
    assert isinstance(restored, MemoryRevised)
    assert (restored.revision, unseal(restored.content), restored.reason) == (3, "v1", "restored")
    [undone] = run(state, c.UndoChange(item_id=item, base_revision=3))
    assert isinstance(undone, MemoryRevised)
    assert (undone.revision, unseal(undone.content), undone.reason) == (4, "v2", "undone")
    with pytest.raises(Conflict):
        run(state, c.UndoChange(item_id=item, base_revision=3))


def test_pin_disable_archive_and_restore_each_write_a_revision() -> None:
    state = StreamState("s")
    item = remembered(state)
    other = remembered(state, "The budget is now 2000 EUR.")
    assert isinstance(run(state, c.PinMemory(item_id=item))[0], MemoryPinned)
    assert run(state, c.PinMemory(item_id=item)) == []  # already pinned: nothing to write
    [disabled] = run(state, c.DisableMemory(item_id=item))
    assert isinstance(disabled, MemoryStatusChanged) and disabled.status == "disabled"
    run(state, c.DisableMemory(item_id=item, disabled=False))
    [archived] = run(state, c.ArchiveMemory(item_id=item, superseded_by=other))
    assert isinstance(archived, MemoryStatusChanged)
    assert (archived.status, archived.superseded_by) == ("archived", other)
    run(state, c.UnarchiveMemory(item_id=item))
    assert (state.items[item].status, state.items[item].revision) == ("active", 6)


def test_forget_is_terminal_keeps_hashes_and_refuses_an_accidental_resave() -> None:
    state = StreamState("s")
    item = remembered(state, "secret plan")
    run(state, c.CorrectMemory(item_id=item, base_revision=1, content="secret plan B"))
    [forgotten] = run(state, c.ForgetMemory(item_id=item))
    assert isinstance(forgotten, MemoryForgotten)
    assert forgotten.revisions == 2 and len(forgotten.content_hashes) == 2
    assert state.items[item].revisions == {}
    for cmd in (
        c.UnarchiveMemory(item_id=item),
        c.RestoreRevision(item_id=item, base_revision=2, revision=1),
        c.ForgetMemory(item_id=item),
    ):
        with pytest.raises(Gone):
            run(state, cmd)
    with pytest.raises(Conflict, match="forgotten before"):
        run(state, c.RememberMemory(content="Secret  plan"))
    assert isinstance(
        run(state, c.RememberMemory(content="secret plan", resave_forgotten=True))[0],
        MemoryRemembered,
    )


def test_a_correction_brings_forgotten_text_back_only_when_the_caller_means_it() -> None:
    """QA: a correction to the text of a forgotten memory was saved without a word."""
    state = StreamState("s")
    locker = remembered(state, "My locker number is 42.")
    other = remembered(state, "My locker is on floor 2.")
    run(state, c.ForgetMemory(item_id=locker))
    with pytest.raises(Conflict, match="forgotten before"):
        run(
            state,
            c.CorrectMemory(item_id=other, base_revision=1, content="my locker number is 42."),
        )
    [revised] = run(
        state,
        c.CorrectMemory(
            item_id=other, base_revision=1, resave_forgotten=True, content="My locker number is 42."
        ),
    )
    assert state.items[other].revision == 2 and revised.item_id == other


def test_clear_forgets_every_memory_of_the_scope_only_when_confirmed() -> None:
    state = StreamState("s")
    active, old = remembered(state, "tea at four"), remembered(state, "coffee at nine")
    gone = remembered(state, "the old door code")
    candidate = remembered(state, "maybe likes jazz", candidate=True)
    disabled = remembered(state, "standup at ten")
    run(state, c.DisableMemory(item_id=disabled, disabled=True))
    run(state, c.ArchiveMemory(item_id=old, superseded_by=active))
    run(state, c.ForgetMemory(item_id=gone))
    with pytest.raises(InvalidCommand, match="confirm=true"):
        run(state, c.ClearMemories())
    assert state.items[active].status == "active"

    events = run(state, c.ClearMemories(confirm=True, reason="starting over"))

    assert [e.item_id for e in events] == [active, old, candidate, disabled]
    assert all(isinstance(e, MemoryForgotten) and e.reason == "starting over" for e in events)
    assert all(i.status == "forgotten" and i.revisions == {} for i in state.items.values())
    with pytest.raises(Conflict, match="forgotten before"):
        run(state, c.RememberMemory(content="tea at four"))
    assert run(state, c.ClearMemories(confirm=True)) == []  # nothing left to clear


def test_only_an_admin_clears_the_shared_scope() -> None:
    state = StreamState("acme/shared")
    shared = make_context(scope="shared")
    [event] = run(
        state, c.RememberMemory(content="Deploys are on Tuesdays", scope="shared"), shared
    )
    with pytest.raises(Forbidden, match="admin"):
        run(state, c.ClearMemories(scope="shared", confirm=True), shared)
    assert state.items[event.item_id].status == "active"
    admin = make_context(scope="shared", is_admin=True)
    assert [
        e.item_id for e in run(state, c.ClearMemories(scope="shared", confirm=True), admin)
    ] == [event.item_id]


def test_unknown_items_are_not_found() -> None:
    with pytest.raises(NotFound):
        run(StreamState("s"), c.PinMemory(item_id="nope"))


def test_an_agent_save_without_the_users_request_is_a_candidate() -> None:
    state = StreamState("s")
    agent = make_context(is_agent=True)
    [event] = run(
        state, c.RememberMemory(content="Ana likes tea", user_message="what should I drink?"), agent
    )
    assert isinstance(event, MemoryRemembered) and event.status == "candidate"
    assert state.generation == 0  # candidates are not active memory
    [event] = run(
        state,
        c.RememberMemory(content="Ana likes tea", user_message="Please remember: Ana likes tea"),
        agent,
    )
    assert isinstance(event, MemoryRemembered) and event.status == "active"


def test_only_a_person_confirms_and_a_candidate_can_be_dismissed() -> None:
    state = StreamState("s")
    item = remembered(state, candidate=True)
    with pytest.raises(Forbidden):
        run(state, c.ConfirmCandidate(item_id=item), make_context(is_agent=True))
    [confirmed] = run(state, c.ConfirmCandidate(item_id=item))
    assert isinstance(confirmed, MemoryStatusChanged) and confirmed.status == "active"
    other = remembered(state, "another guess", candidate=True)
    assert isinstance(run(state, c.DismissCandidate(item_id=other))[0], MemoryForgotten)
    with pytest.raises(Conflict):
        run(state, c.DismissCandidate(item_id=item))


def test_undo_takes_a_confirm_back_but_never_makes_a_candidate_active() -> None:
    # Found by the property test: undoing the undo of a confirm activated a candidate
    # without a confirm, and an agent could send that undo.
    state = StreamState("s")
    item = remembered(state, candidate=True)
    run(state, c.ConfirmCandidate(item_id=item))
    [undone] = run(state, c.UndoChange(item_id=item, base_revision=2))
    assert isinstance(undone, MemoryStatusChanged) and undone.status == "candidate"
    for ctx in (make_context(is_agent=True), make_context()):  # an agent, and a person too
        with pytest.raises(Conflict, match="confirm or dismiss it"):
            run(state, c.UndoChange(item_id=item, base_revision=3), ctx)


def test_an_inference_never_replaces_a_confirmed_fact() -> None:
    state = StreamState("s")
    item = remembered(state, "The budget is 1500 EUR.", key="budget")
    agent = make_context(is_agent=True)
    [guess] = run(
        state,
        c.CorrectMemory(item_id=item, base_revision=1, content="The budget is 900 EUR."),
        agent,
    )
    assert isinstance(guess, MemoryRemembered)
    assert (guess.status, guess.replaces) == ("candidate", item)
    [keyed] = run(state, c.RememberMemory(content="budget 800", key="budget"), agent)
    assert isinstance(keyed, MemoryRemembered) and keyed.status == "candidate"
    assert state.items[item].revision == 1


def test_a_memorys_key_tags_and_sources_travel_sealed() -> None:
    """QA: a memory's key, tags and sources travelled in plain in engram.events, which is
    kept for good, so a forget left them readable. They are sealed with the text now, and
    only keyed hashes of the key and the sources stay beside them."""
    state = StreamState("acme/member:ana")
    [event] = run(
        state,
        c.RememberMemory(
            content="Ana's doctor is Dr Reyes.", key="doctor", tags=("health",), sources=("msg-9",)
        ),
    )
    assert isinstance(event, MemoryRemembered) and event.labels is not None
    assert (event.key, event.tags, event.sources) == (None, (), ())
    assert labels_of(event) == Labels(key="doctor", tags=("health",), sources=("msg-9",))
    assert event.labels.key_id == event.item_id  # shredded with the memory's key
    assert (event.key_hash, event.source_hashes) == ("k:doctor", ("s:msg-9",))
    hashes = {"key_hash", "source_hashes", "content_hash"}  # the test's hashes are plain
    for name in ("doctor", "health", "msg-9"):
        assert name not in event.model_dump_json(exclude=hashes)
    [plain] = run(state, c.RememberMemory(content="No labels here."))
    assert isinstance(plain, MemoryRemembered)
    assert (plain.labels, plain.key_hash, plain.source_hashes) == (None, None, ())


def test_a_keyed_save_brings_its_tags_and_sources_to_the_memory_it_revises() -> None:
    """QA: a keyed save that revised the key's memory dropped its tags and sources, so a
    forget of the memory suppressed no extraction from the save's sources."""
    state = StreamState("acme/member:ana")
    item = remembered(state, "Tea at four.", key="drink", tags=("food",), sources=("m-1",))
    [revised] = run(
        state,
        c.RememberMemory(
            content="Coffee at four.", key="drink", tags=("food", "daily"), sources=("m-1", "m-2")
        ),
    )
    assert isinstance(revised, MemoryRevised) and revised.item_id == item
    assert revised.labels is not None and revised.labels.key_id == item
    assert labels_of(revised) == Labels(key="drink", tags=("food", "daily"), sources=("m-1", "m-2"))
    assert revised.source_hashes == ("s:m-2",)  # the one it brought
    assert state.items[item].labels == revised.labels
    [same] = run(
        state, c.RememberMemory(content="Coffee at five.", key="drink", tags=("daily",))
    )  # nothing new: labels stay
    assert isinstance(same, MemoryRevised) and (same.labels, same.source_hashes) == (None, ())
    many = tuple(f"t{n:02}" for n in range(32))
    run(state, c.RememberMemory(content="Tea at six.", key="drink", tags=many))
    [named] = run(
        state, c.RememberMemory(content="Tea at seven.", key="drink", tags=("t00", "new"))
    )
    assert isinstance(named, MemoryRevised)  # the 32 last named, the save's own last (QA)
    assert labels_of(named).tags == (*many[2:], "t00", "new")  # t01 is the oldest named
    state.items[item].labels = None  # as a memory saved before labels were sealed
    [old] = run(
        state,
        c.RememberMemory(content="Tea at five.", key="drink", tags=("new",), sources=("m-3",)),
    )
    # Its tags and sources are unknown here: new labels would replace them; the hashes go.
    assert isinstance(old, MemoryRevised) and (old.labels, old.source_hashes) == (None, ("s:m-3",))


def test_an_inferred_correction_waits_under_the_labels_of_the_fact_it_corrects() -> None:
    """Its key, and its tags and sources too (QA: a confirm of it made a memory with none,
    so a forget of that memory suppressed nothing from the sources)."""
    state = StreamState("acme/member:ana")
    item = remembered(
        state, "The budget is 1500 EUR.", key="budget", tags=("money",), sources=("m-1",)
    )
    agent = make_context(is_agent=True)
    [guess] = run(
        state,
        c.CorrectMemory(item_id=item, base_revision=1, content="The budget is 900 EUR."),
        agent,
    )
    assert isinstance(guess, MemoryRemembered) and guess.labels is not None
    assert guess.labels.key_id == guess.item_id  # sealed anew, under the candidate's key
    assert labels_of(guess) == Labels(key="budget", tags=("money",), sources=("m-1",))
    assert (guess.key_hash, guess.source_hashes) == ("k:budget", ("s:m-1",))
    state.items[item].labels = None  # as a memory saved before labels were sealed
    [old] = run(
        state,
        c.CorrectMemory(item_id=item, base_revision=1, content="The budget is 800 EUR."),
        agent,
    )
    assert isinstance(old, MemoryRemembered)  # its key's hash alone: the writer knows no more
    assert (old.labels, old.key_hash, old.source_hashes) == (None, "k:budget", ())


def test_a_keyed_save_that_names_a_tag_again_makes_it_the_newest() -> None:
    """QA: naming again only what the memory holds changed nothing, so the limit later
    dropped the tag the person had named last."""
    state = StreamState("acme/member:ana")
    remembered(state, "Blue.", key="color", tags=("a", "b"), sources=("x", "y"))
    [again] = run(
        state, c.RememberMemory(content="Green.", key="color", tags=("a",), sources=("x",))
    )
    assert isinstance(again, MemoryRevised) and again.source_hashes == ()
    assert labels_of(again) == Labels(key="color", tags=("b", "a"), sources=("y", "x"))


def test_a_confirmed_remember_with_a_known_key_revises_that_fact() -> None:
    state = StreamState("s")
    item = remembered(state, "The budget is 1500 EUR.", key="budget")
    [event] = run(state, c.RememberMemory(content="The budget is 1600 EUR.", key="budget"))
    assert isinstance(event, MemoryRevised) and event.item_id == item


def test_a_keyed_save_pins_its_fact_and_one_of_another_kind_is_a_fact_of_its_own() -> None:
    """QA: a keyed save that revised the key's memory dropped its pin and its kind."""
    state = StreamState("s")
    item = remembered(state, "Coffee order is latte.", key="coffee")
    revised, pinned = run(
        state, c.RememberMemory(content="Coffee order is flat white.", key="coffee", pinned=True)
    )
    assert isinstance(revised, MemoryRevised) and isinstance(pinned, MemoryPinned)
    assert (pinned.item_id, pinned.revision, pinned.pinned) == (item, 3, True)
    [again] = run(state, c.RememberMemory(content="Coffee order is a flat white.", key="coffee"))
    assert isinstance(again, MemoryRevised), "an unpinned save leaves the pin as it is"
    assert state.items[item].pinned

    archived, new = run(
        state, c.RememberMemory(content="Coffee: oat milk.", key="coffee", kind="preference")
    )
    assert isinstance(archived, MemoryStatusChanged) and archived.item_id == item
    assert (archived.status, archived.superseded_by) == ("archived", new.item_id)
    assert isinstance(new, MemoryRemembered) and new.kind == "preference"
    holder = state.active_by_key(make_context().key_hash("coffee"))
    assert holder is not None and holder.item_id == new.item_id


def test_an_expected_version_must_be_the_streams_current_one() -> None:
    state = StreamState("acme/agent:helper")
    run(state, c.RememberMemory(content="Run the tests first.", expected_version=0))
    with pytest.raises(Conflict) as err:
        run(state, c.RememberMemory(content="Keep answers short.", expected_version=0))
    assert (err.value.extra["current_version"], err.value.extra["expected_version"]) == (1, 0)
    assert run(state, c.RememberMemory(content="Keep answers short.", expected_version=1))
    assert run(state, c.RememberMemory(content="No version, no check."))


def test_an_agent_brings_no_earlier_text_back_over_a_confirmed_fact() -> None:
    """QA: an agent's undo or restore-revision put an earlier text back over a person's
    correction, where the agent's own correction would have waited as a candidate."""
    state = StreamState("acme/member:ana")
    item = remembered(state, "Team lunch is on Thursday.")
    run(state, c.CorrectMemory(item_id=item, base_revision=1, content="Team lunch is on Friday."))
    agent = make_context(is_agent=True)
    for cmd in (
        c.UndoChange(item_id=item, base_revision=2),
        c.RestoreRevision(item_id=item, base_revision=2, revision=1),
    ):
        with pytest.raises(Forbidden, match="agent may not"):
            run(state, cmd, agent)
    assert unseal(state.items[item].current.content) == "Team lunch is on Friday."
    run(state, c.PinMemory(item_id=item, pinned=True), agent)  # not a text: the agent may
    [unpinned] = run(state, c.UndoChange(item_id=item, base_revision=3), agent)
    assert isinstance(unpinned, MemoryPinned) and not unpinned.pinned
    [restored] = run(state, c.RestoreRevision(item_id=item, base_revision=4, revision=1))
    assert isinstance(restored, MemoryRevised)
    assert unseal(restored.content) == "Team lunch is on Thursday."  # a person may


def test_undo_and_restore_bring_no_forgotten_text_back() -> None:
    """QA: a correction to forgotten text was refused, but an undo or a restore of a
    revision holding it brought it back."""
    state = StreamState("acme/member:ana")
    vault = remembered(state, "The vault pin is 8080.")
    run(state, c.CorrectMemory(item_id=vault, base_revision=1, content="The vault pin changed."))
    twin = remembered(state, "The vault pin is 8080.", resave_forgotten=False)
    run(state, c.ForgetMemory(item_id=twin))
    for cmd in (
        c.UndoChange(item_id=vault, base_revision=2),
        c.RestoreRevision(item_id=vault, base_revision=2, revision=1),
    ):
        with pytest.raises(Conflict, match="forgotten since"):
            run(state, cmd)
    assert unseal(state.items[vault].current.content) == "The vault pin changed."


def test_a_forgotten_memory_keeps_no_key_in_the_writers_state() -> None:
    """QA: the tombstone in the writer's state (and so its checkpoint row) kept the key."""
    state = StreamState("acme/member:ana")
    item = remembered(state, "The wifi password is hunter2.", key="wifi hunter2")
    run(state, c.ForgetMemory(item_id=item))
    forgotten = state.items[item]
    assert forgotten.key_hash is None and forgotten.labels is None
    assert state.active_by_key("k:wifi hunter2") is None


def test_a_disabled_memory_stays_so_until_a_person_enables_it() -> None:
    """Seed 002: retracted entries stay retracted; only a person can bring one back (a seed
    coverage audit: an agent could enable, or undo the disabling)."""
    state = StreamState("acme/member:ana")
    agent = make_context(is_agent=True)
    item = remembered(state)
    run(state, c.DisableMemory(item_id=item, disabled=True), agent)  # an agent may retract
    with pytest.raises(Forbidden, match="is disabled, or was when it was archived: only a person"):
        run(state, c.DisableMemory(item_id=item, disabled=False), agent)
    with pytest.raises(Forbidden, match="only a person"):
        run(state, c.UndoChange(item_id=item, base_revision=2), agent)
    [enabled] = run(state, c.UndoChange(item_id=item, base_revision=2))  # a person may
    assert isinstance(enabled, MemoryStatusChanged) and enabled.status == "active"
    run(state, c.DisableMemory(item_id=item, disabled=True), agent)
    with pytest.raises(Forbidden, match="only a person"):  # QA: then unarchived, active
        run(state, c.ArchiveMemory(item_id=item), agent)
    run(state, c.ArchiveMemory(item_id=item))  # a person archives the disabled memory
    with pytest.raises(Forbidden, match="is disabled, or was when it was archived"):  # QA
        run(state, c.UnarchiveMemory(item_id=item), agent)
    run(state, c.UnarchiveMemory(item_id=item))  # a person may: active
    run(state, c.ArchiveMemory(item_id=item), agent)
    [back] = run(state, c.UnarchiveMemory(item_id=item), agent)  # seed 004: restored at once
    assert isinstance(back, MemoryStatusChanged) and back.status == "active"


def test_a_relabel_changes_kind_or_tags_in_a_new_revision_and_undo_takes_it_back() -> None:
    """Seed 004: an update changes the category (kind) or the tags without the text (a seed
    coverage audit: no command could)."""
    state = StreamState("acme/member:ana")
    [saved] = run(
        state, c.RememberMemory(content="Tea at four.", key="tea", tags=("food",), sources=("m-1",))
    )
    [relabeled] = run(
        state,
        c.RelabelMemory(
            item_id=saved.item_id, base_revision=1, kind="preference", tags=("daily", "food")
        ),
    )
    assert isinstance(relabeled, MemoryRelabeled)
    assert (relabeled.revision, relabeled.kind) == (2, "preference")
    assert labels_of(relabeled) == Labels(key="tea", tags=("daily", "food"), sources=("m-1",))
    item = state.items[saved.item_id]
    assert (item.kind, item.revision, item.current) == ("preference", 2, item.revisions[1])
    assert state.generation == 2  # the packet's header shows the kind
    assert (
        run(state, c.RelabelMemory(item_id=saved.item_id, base_revision=2, kind="preference")) == []
    )  # nothing changes
    with pytest.raises(Conflict):  # a stale base, as for a correction
        run(state, c.RelabelMemory(item_id=saved.item_id, base_revision=1, tags=()))
    [undone] = run(state, c.UndoChange(item_id=saved.item_id, base_revision=2))
    assert isinstance(undone, MemoryRelabeled) and undone.kind == "note"
    assert labels_of(undone) == Labels(key="tea", tags=("food",), sources=("m-1",))
    [cleared] = run(state, c.RelabelMemory(item_id=saved.item_id, base_revision=3, tags=()))
    assert isinstance(cleared, MemoryRelabeled)
    assert labels_of(cleared) == Labels(key="tea", sources=("m-1",))
    with pytest.raises(ValueError, match="the new kind, the new tags, or both"):
        c.RelabelMemory(item_id=saved.item_id, base_revision=4)


def test_a_teammates_memory_is_relabeled_by_its_author_or_an_admin_or_a_proposal() -> None:
    """Seed 004: a teammate's memory changes through a proposal, its kind and tags too."""
    state = StreamState("acme/shared")
    ana = make_context(scope="shared", member="ana")
    [saved] = run(state, c.RememberMemory(content="Deploys on Tuesdays.", scope="shared"), ana)
    ben = make_context(scope="shared", member="ben")
    with pytest.raises(ProposalRequired, match="propose the change"):
        run(
            state,
            c.RelabelMemory(
                item_id=saved.item_id, base_revision=1, kind="decision", scope="shared"
            ),
            ben,
        )
    admin = make_context(scope="shared", member="cleo", is_admin=True)
    assert run(
        state,
        c.RelabelMemory(item_id=saved.item_id, base_revision=1, kind="decision", scope="shared"),
        admin,
    )


def test_a_key_is_retracted_by_disabling_its_memory_and_an_unknown_key_conflicts() -> None:
    """Seed 002's Forget of a session fact: retracted, not erased; an unknown key → 409."""
    state = StreamState("acme/session:trip")
    [saved] = run(state, c.RememberMemory(content="The budget is 1500 EUR.", key="budget"))
    [retracted] = run(state, c.RetractKey(key="budget"), make_context(is_agent=True))
    assert isinstance(retracted, MemoryStatusChanged)
    assert (retracted.item_id, retracted.status) == (saved.item_id, "disabled")
    with pytest.raises(Conflict, match="no active memory of this scope holds that key") as gone:
        run(state, c.RetractKey(key="budget"))  # retracted already
    assert "budget" not in str(gone.value.extra)
    [again] = run(state, c.RememberMemory(content="The budget is 2000 EUR.", key="budget"))
    assert again.item_id != saved.item_id  # a retracted key comes back by a new remember
