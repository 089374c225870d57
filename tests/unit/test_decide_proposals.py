"""Proposals on a teammate's shared memory (seed 004): who may change what directly,
propose, merge (or outdated, expired), reject, withdraw, and forgetting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contracts import commands as c
from contracts.events import (
    ChangeProposed,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRevised,
    MemoryStatusChanged,
)
from contracts.events import ProposalResolved as Resolved
from services.command.core import Context
from services.command.errors import Conflict, Forbidden, InvalidCommand, ProposalRequired
from services.command.state import StreamState
from tests.unit.conftest import labels_of, make_context, run, unseal

START = datetime(2026, 1, 1, tzinfo=UTC)


def ctx(member: str, **kw: object) -> Context:
    return make_context(scope="shared", member=member, **kw)  # type: ignore[arg-type]


def anas_memory(state: StreamState) -> str:
    [saved] = run(
        state, c.RememberMemory(content="Standup is at 9:30.", scope="shared"), ctx("ana")
    )
    return saved.item_id


def propose(state: StreamState, item: str, member: str = "bob", **kw: object) -> str:
    cmd = c.ProposeChange(
        item_id=item,
        base_revision=state.items[item].revision,
        reason="it moved",
        **{"change": "correct", "content": "Standup is at 10:00.", **kw},
    )
    [proposed] = run(state, cmd, ctx(member))
    assert isinstance(proposed, ChangeProposed)
    return proposed.proposal_id


def test_a_teammates_shared_memory_changes_only_through_a_proposal() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    assert state.items[item].author == "ana"
    for cmd in (
        c.CorrectMemory(item_id=item, base_revision=1, content="x", scope="shared"),
        c.ArchiveMemory(item_id=item, scope="shared"),
        c.RestoreRevision(item_id=item, base_revision=1, revision=1, scope="shared"),
        c.PinMemory(item_id=item, scope="shared"),
        c.DisableMemory(item_id=item, scope="shared"),
    ):
        with pytest.raises(ProposalRequired) as err:
            run(state, cmd, ctx("bob"))
        assert err.value.extra == {"item_id": item, "author": "ana"}
    # Its author and an admin change it at once.
    assert run(
        state,
        c.CorrectMemory(item_id=item, base_revision=1, content="y", scope="shared"),
        ctx("ana"),
    )
    assert run(state, c.PinMemory(item_id=item, scope="shared"), ctx("ana"))
    assert run(state, c.ArchiveMemory(item_id=item, scope="shared"), ctx("cy", is_admin=True))


def test_a_memory_saved_before_authors_were_recorded_stays_open_to_all() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    state.items[item].author = None
    assert run(
        state,
        c.CorrectMemory(item_id=item, base_revision=1, content="z", scope="shared"),
        ctx("bob"),
    )


def test_a_merged_correction_becomes_the_next_revision_with_the_proposed_text() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    generation = state.generation
    pid = propose(state, item)
    assert state.generation == generation  # a proposal changes no memory
    assert state.results["cmd-2"]["proposal_status"] == "pending"
    revised, resolved = run(state, c.MergeProposal(proposal_id=pid), ctx("ana"))
    assert isinstance(revised, MemoryRevised) and isinstance(resolved, Resolved)
    assert (revised.revision, unseal(revised.content)) == (2, "Standup is at 10:00.")
    assert resolved.status == "merged" and state.generation == generation + 1
    with pytest.raises(Conflict, match="merged already"):
        run(state, c.RejectProposal(proposal_id=pid), ctx("ana"))


def test_archive_and_unarchive_proposals_change_the_status() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    [newer] = run(state, c.RememberMemory(content="Standup: 10:00.", scope="shared"), ctx("ana"))
    pid = propose(state, item, change="archive", content=None, superseded_by=newer.item_id)
    archived, _ = run(state, c.MergeProposal(proposal_id=pid), ctx("cy", is_admin=True))
    assert isinstance(archived, MemoryStatusChanged)
    assert (archived.status, archived.superseded_by) == ("archived", newer.item_id)
    with pytest.raises(Conflict, match="does not apply"):
        propose(state, item, change="archive", content=None)
    pid = propose(state, item, change="unarchive", content=None)
    restored, _ = run(state, c.MergeProposal(proposal_id=pid), ctx("ana"))
    assert isinstance(restored, MemoryStatusChanged) and restored.status == "active"


@pytest.mark.parametrize(("away", "back"), [("archive", "unarchive"), ("disable", "enable")])
def test_a_merge_never_makes_a_second_memory_active_under_one_key(away: str, back: str) -> None:
    """QA: a merged unarchive or enable made a memory active beside the one that took its
    key meanwhile, which a direct unarchive or enable refuses (409 held_by)."""
    state = StreamState("acme/shared")
    [office] = run(
        state,
        c.RememberMemory(content="The office is in Berlin.", key="office", scope="shared"),
        ctx("bob"),
    )
    pid = propose(state, office.item_id, member="ana", change=away, content=None)
    run(state, c.MergeProposal(proposal_id=pid), ctx("bob"))
    [paris] = run(
        state,
        c.RememberMemory(content="The office is in Paris.", key="office", scope="shared"),
        ctx("bob"),
    )
    pid = propose(state, office.item_id, member="ana", change=back, content=None)
    with pytest.raises(Conflict) as refused:
        run(state, c.MergeProposal(proposal_id=pid), ctx("bob"))
    assert refused.value.extra["held_by"] == paris.item_id
    assert [i.item_id for i in state.items.values() if i.status == "active"] == [paris.item_id]
    assert state.proposals is not None and state.proposals[pid].status == "pending"


def test_a_merge_the_scope_overtook_is_outdated_and_applies_nothing() -> None:
    """QA: an archive merged after its superseding memory was forgotten linked the
    forgotten memory again; a correction merged after its text was forgotten elsewhere
    brought that text back."""
    state = StreamState("acme/shared")
    item = anas_memory(state)
    [newer] = run(state, c.RememberMemory(content="Standup: 10:00.", scope="shared"), ctx("ana"))
    archive = propose(state, item, change="archive", content=None, superseded_by=newer.item_id)
    correct = propose(state, item, content="Standup is at 10:00 sharp.")
    run(state, c.ForgetMemory(item_id=newer.item_id), ctx("ana"))
    [resolved] = run(state, c.MergeProposal(proposal_id=archive), ctx("ana"))
    assert isinstance(resolved, Resolved) and resolved.status == "outdated"
    [saved] = run(
        state, c.RememberMemory(content="Standup is at 10:00 sharp.", scope="shared"), ctx("ana")
    )
    run(state, c.ForgetMemory(item_id=saved.item_id), ctx("ana"))
    [resolved] = run(state, c.MergeProposal(proposal_id=correct), ctx("ana"))
    assert isinstance(resolved, Resolved) and resolved.status == "outdated"
    assert state.items[item].status == "active" and state.items[item].revision == 1
    with pytest.raises(Conflict, match="forgotten before"):  # nor is it proposed again
        propose(state, item, content="Standup is at 10:00 sharp.")


def test_pin_and_status_proposals_apply_once_merged() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    with pytest.raises(Conflict, match="'unpin' does not apply") as err:
        propose(state, item, change="unpin", content=None)
    assert err.value.extra["pinned"] is False
    with pytest.raises(Conflict, match="'enable' does not apply"):
        propose(state, item, change="enable", content=None)
    pid = propose(state, item, change="pin", content=None)
    assert not state.items[item].pinned  # a proposal changes nothing by itself
    pinned, _ = run(state, c.MergeProposal(proposal_id=pid), ctx("ana"))
    assert isinstance(pinned, MemoryPinned) and pinned.pinned and state.items[item].pinned
    pid = propose(state, item, change="disable", content=None)
    disabled, _ = run(state, c.MergeProposal(proposal_id=pid), ctx("ana"))
    assert isinstance(disabled, MemoryStatusChanged) and disabled.status == "disabled"
    for change, check in (
        ("enable", lambda: state.items[item].status == "active"),
        ("unpin", lambda: not state.items[item].pinned),
    ):
        pid = propose(state, item, change=change, content=None)
        run(state, c.MergeProposal(proposal_id=pid), ctx("cy", is_admin=True))
        assert check()
    assert state.items[item].revision == 5  # each merged change is a revision


def test_a_proposal_on_a_changed_memory_is_outdated_and_applies_nothing() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    pid = propose(state, item)
    run(
        state,
        c.CorrectMemory(item_id=item, base_revision=1, content="9:45 now", scope="shared"),
        ctx("ana"),
    )
    [resolved] = run(state, c.MergeProposal(proposal_id=pid), ctx("ana"))
    assert isinstance(resolved, Resolved) and resolved.status == "outdated"
    assert state.items[item].revision == 2


def test_a_pending_proposal_expires_after_30_days() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    pid = propose(state, item)
    late = ctx("ana", now=START + timedelta(days=c.PROPOSAL_DAYS, seconds=1))
    [resolved] = run(state, c.MergeProposal(proposal_id=pid), late)
    assert isinstance(resolved, Resolved) and resolved.status == "expired"
    assert state.items[item].revision == 1


def test_who_may_merge_reject_and_withdraw() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    pid = propose(state, item)
    with pytest.raises(Forbidden, match="only ana"):
        run(state, c.MergeProposal(proposal_id=pid), ctx("dan"))
    with pytest.raises(Forbidden, match="never merge"):
        run(state, c.MergeProposal(proposal_id=pid), ctx("ana", is_agent=True))
    with pytest.raises(Forbidden, match="bob's to withdraw"):
        run(state, c.WithdrawProposal(proposal_id=pid), ctx("ana"))
    [withdrawn] = run(state, c.WithdrawProposal(proposal_id=pid), ctx("bob"))
    assert isinstance(withdrawn, Resolved) and withdrawn.status == "withdrawn"
    pid = propose(state, item, member="dan")
    [rejected] = run(state, c.RejectProposal(proposal_id=pid, reason="still 9:30"), ctx("ana"))
    assert isinstance(rejected, Resolved) and rejected.status == "rejected"
    # The reviewer's words are sealed under the memory's key: a forget shreds them too.
    assert rejected.reason is None and rejected.reason_sealed is not None
    assert unseal(rejected.reason_sealed) == "still 9:30"


def test_proposals_are_for_the_shared_scope_and_must_fit_their_change() -> None:
    state = StreamState("acme/member:ana")
    [saved] = run(state, c.RememberMemory(content="mine"), make_context())
    with pytest.raises(InvalidCommand, match="shared scope"):
        run(
            state,
            c.ProposeChange(
                item_id=saved.item_id,
                change="archive",
                base_revision=1,
                reason="r",
                scope="private",
            ),
            make_context(),
        )
    with pytest.raises(ValueError, match="content"):
        c.ProposeChange(item_id="i", change="archive", base_revision=1, reason="r", content="x")
    with pytest.raises(ValueError):
        c.ProposeChange(item_id="i", change="correct", base_revision=1, reason="", content="x")


def test_forgetting_a_memory_voids_its_proposals_and_their_text() -> None:
    state = StreamState("acme/shared")
    item = anas_memory(state)
    pid = propose(state, item)
    run(state, c.ForgetMemory(item_id=item, scope="shared"), ctx("ana"))
    proposal = (state.proposals or {})[pid]
    assert (proposal.status, proposal.content) == ("outdated", None)
    with pytest.raises(Conflict):
        run(state, c.MergeProposal(proposal_id=pid), ctx("ana"))


def test_a_teammates_shared_memory_is_forgotten_only_by_its_author_or_an_admin() -> None:
    # Seed 004's delete removes one of your own memories; no proposal can forget.
    state = StreamState("acme/shared")
    item, other = anas_memory(state), anas_memory(state)
    with pytest.raises(Forbidden) as err:
        run(state, c.ForgetMemory(item_id=item, scope="shared"), ctx("bob"))
    assert err.value.extra == {"item_id": item, "author": "ana"}
    assert state.items[item].status == "active"
    [forgotten] = run(state, c.ForgetMemory(item_id=item, scope="shared"), ctx("ana"))
    assert forgotten.item_id == item
    assert run(state, c.ForgetMemory(item_id=other, scope="shared"), ctx("cy", is_admin=True))


def test_a_teammate_may_dismiss_a_candidate_as_they_may_confirm_one() -> None:
    state = StreamState("acme/shared")
    [candidate] = run(
        state,
        c.RememberMemory(content="Lunch is at noon.", scope="shared", candidate=True),
        ctx("ana"),
    )
    assert run(state, c.DismissCandidate(item_id=candidate.item_id, scope="shared"), ctx("bob"))


def test_an_agent_changes_a_shared_fact_only_by_a_proposal_unless_asked_for_everyone() -> None:
    """Seed 000: shared memory is changed by an agent only when the user's message says it
    is for everyone (a seed audit: its member's agent archived, disabled, pinned and
    relabelled shared facts with no message). Its member merges the proposal."""
    state = StreamState("acme/shared")
    item = anas_memory(state)
    agent = ctx("ana", is_agent=True)
    for cmd in (
        c.ArchiveMemory(item_id=item, scope="shared"),
        c.PinMemory(item_id=item, scope="shared"),
        c.DisableMemory(item_id=item, scope="shared"),
    ):
        with pytest.raises(ProposalRequired, match="only when its user's message asks"):
            run(state, cmd, agent)
    with pytest.raises(ProposalRequired, match="only when its user's message asks"):
        run(
            state,
            c.RelabelMemory(item_id=item, base_revision=1, kind="decision", scope="shared"),
            agent,
        )
    asked = c.CorrectMemory(
        item_id=item,
        base_revision=1,
        content="Standup is at 9:45.",
        scope="shared",
        user_message="Update it for everyone: standup is at 9:45.",
    )
    [revised] = run(state, asked, agent)
    assert isinstance(revised, MemoryRevised)  # the message asked, for everyone
    [proposed] = run(
        state,
        c.ProposeChange(
            item_id=item,
            base_revision=2,
            change="pin",
            reason="the team reads it daily",
            scope="shared",
        ),
        agent,
    )
    assert isinstance(proposed, ChangeProposed)
    [pinned, merged] = run(
        state, c.MergeProposal(proposal_id=proposed.proposal_id, scope="shared"), ctx("ana")
    )
    assert isinstance(pinned, MemoryPinned) and isinstance(merged, Resolved)


def test_a_relabel_proposal_changes_the_kind_and_tags_once_merged() -> None:
    """Seed 004: an update of a teammate's memory that changes only its category or tags
    is a proposal too. Its tags are sealed under the memory's key, as its labels are."""
    state = StreamState("acme/shared")
    item = anas_memory(state)
    run(
        state,
        c.RelabelMemory(item_id=item, base_revision=1, tags=("ops",), scope="shared"),
        ctx("ana"),
    )
    with pytest.raises(Conflict, match="the relabel changes nothing"):
        propose(state, item, change="relabel", content=None, kind="note", tags=("ops",))
    pid = propose(
        state, item, change="relabel", content=None, kind="decision", tags=("meetings", "ops")
    )
    proposed = state.proposals[pid]  # type: ignore[index]
    assert proposed.kind == "decision" and proposed.tags is not None
    assert unseal(proposed.tags) == '["meetings", "ops"]'
    [relabeled, merged] = run(state, c.MergeProposal(proposal_id=pid, scope="shared"), ctx("ana"))
    assert isinstance(relabeled, MemoryRelabeled) and isinstance(merged, Resolved)
    assert (state.items[item].kind, state.items[item].revision) == ("decision", 3)
    assert labels_of(relabeled).tags == ("meetings", "ops")
    # Only the kind: the tags stay; a proposal the memory has already merges as nothing.
    pid = propose(state, item, change="relabel", content=None, kind="fact")
    run(
        state,
        c.RelabelMemory(item_id=item, base_revision=3, kind="decision", scope="shared"),
        ctx("ana"),
    )  # nothing changes: still revision 3
    [relabeled, _] = run(state, c.MergeProposal(proposal_id=pid, scope="shared"), ctx("ana"))
    assert isinstance(relabeled, MemoryRelabeled) and relabeled.kind == "fact"
    assert labels_of(relabeled).tags == ("meetings", "ops")
    with pytest.raises(ValueError, match="kind or tags are what a 'relabel'"):
        c.ProposeChange(item_id=item, base_revision=4, change="relabel", reason="x")
    with pytest.raises(ValueError, match="kind or tags are what a 'relabel'"):
        c.ProposeChange(item_id=item, base_revision=4, change="pin", reason="x", kind="fact")
    # Forgetting the memory voids the proposal and its tags.
    pid = propose(state, item, change="relabel", content=None, tags=("secret-project",))
    run(state, c.ForgetMemory(item_id=item, scope="shared"), ctx("ana"))
    assert state.proposals[pid].tags is None  # type: ignore[index]


def test_a_person_changes_its_own_shared_memory_directly_not_by_a_proposal() -> None:
    """QA: the author could propose a change to its own memory (and an admin to any)."""
    state = StreamState("acme/shared")
    item = anas_memory(state)
    for who in (ctx("ana"), ctx("cy", is_admin=True)):
        with pytest.raises(InvalidCommand, match="change it directly"):
            run(
                state,
                c.ProposeChange(
                    item_id=item, base_revision=1, change="pin", reason="mine", scope="shared"
                ),
                who,
            )


def test_an_agent_neither_forgets_a_shared_fact_nor_clears_the_shared_scope() -> None:
    """QA: with no message, an agent forgot its member's shared fact, and an agent with the
    admin role cleared the whole shared scope (seed 000)."""
    state = StreamState("acme/shared")
    item = anas_memory(state)
    with pytest.raises(Forbidden, match="a person forgets it"):
        run(state, c.ForgetMemory(item_id=item, scope="shared"), ctx("ana", is_agent=True))
    with pytest.raises(Forbidden, match="a person with the admin role"):
        run(
            state,
            c.ClearMemories(confirm=True, scope="shared"),
            ctx("ana", is_agent=True, is_admin=True),
        )
    assert run(state, c.ForgetMemory(item_id=item, scope="shared"), ctx("ana"))
