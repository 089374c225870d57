"""Proposals on a teammate's shared memory (seed 004): propose, then the author or an admin
merges or rejects, or the proposer withdraws. Merging re-checks the memory's revision and
the proposal's age; nothing is ever rebased. A proposal changes the text, the pin, the
status, or the kind and tags (``relabel``)."""

from __future__ import annotations

import json
from datetime import timedelta

from contracts import commands as c
from contracts.events import (
    ChangeProposed,
    Event,
    MemoryPinned,
    MemoryRevised,
    ProposalResolved,
    Sealed,
)
from services.command.context import Context
from services.command.errors import (
    Conflict,
    Forbidden,
    InvalidCommand,
    ProposalNotFound,
)
from services.command.labels import relabeled
from services.command.rules import (
    agent_on_shared_fact,
    check_base,
    check_not_forgotten,
    check_superseded_by,
    find_item,
    is_teammates,
    superseded_by_error,
    transition,
)
from services.command.state import Item, Proposal, StreamState


def propose(state: StreamState, cmd: c.ProposeChange, ctx: Context) -> list[Event]:
    if ctx.scope != "shared":
        raise InvalidCommand("proposals are for the shared scope: change your own memory directly")
    item = find_item(state, cmd.item_id)
    if not (is_teammates(item, ctx) or agent_on_shared_fact(item, ctx)):
        # QA: an author proposed a change to its own memory, which it makes directly (as
        # an admin does); an agent proposes on any shared fact (see check_owner).
        raise InvalidCommand(
            f"memory {item.item_id} is yours to change"
            f"{' (you are an admin)' if ctx.is_admin else ''}: change it directly"
        )
    check_base(item, cmd.base_revision, cmd.content)
    check_superseded_by(state, item.item_id, cmd.superseded_by)
    if cmd.content is not None:  # a proposal never carries forgotten text back
        check_not_forgotten(state, ctx.content_hash(cmd.content), False, cmd.content)
    if not _applies(item, cmd, ctx):
        raise Conflict(
            f"memory {item.item_id} holds this text already: the correction changes nothing"
            if cmd.change == "correct"
            else f"memory {item.item_id} has this kind and these tags already: the relabel "
            "changes nothing"
            if cmd.change == "relabel"
            else f"memory {item.item_id} is {item.status}"
            f"{', pinned' if item.pinned else ''}; '{cmd.change}' does not apply",
            item_id=item.item_id,
            memory_status=item.status,
            pinned=item.pinned,
        )
    proposal_id = ctx.new_item_id()
    return [
        ChangeProposed(
            item_id=item.item_id,
            proposal_id=proposal_id,
            change=cmd.change,
            base_revision=item.revision,
            reason="",
            reason_sealed=ctx.seal(item.item_id, cmd.reason),
            proposer=ctx.member or "",
            proposed_at=ctx.now,
            content=ctx.seal(item.item_id, cmd.content) if cmd.content is not None else None,
            title=ctx.seal(item.item_id, cmd.title) if cmd.title else None,
            content_hash=ctx.content_hash(cmd.content) if cmd.content is not None else None,
            content_length=len(cmd.content) if cmd.content is not None else None,
            superseded_by=cmd.superseded_by,
            kind=cmd.kind,
            tags=ctx.seal(item.item_id, json.dumps(cmd.tags)) if cmd.tags is not None else None,
        )
    ]


def _applies(item: Item, cmd: c.ProposeChange, ctx: Context) -> bool:
    """Whether the change would change the memory as it is now (a correction that keeps
    the title and gives the text it has changes nothing)."""
    change = cmd.change
    if change == "correct" and cmd.content is not None and not cmd.title:
        return ctx.content_hash(cmd.content) != item.current.content_hash
    if change == "relabel":
        return relabeled(item, cmd.kind, cmd.tags, ctx) is not None
    if change == "pin":
        return not item.pinned
    if change == "unpin":
        return item.pinned
    return change not in _TRANSITIONS or item.status in _TRANSITIONS[change]


def _pending(state: StreamState, proposal_id: str) -> Proposal:
    proposal = (state.proposals or {}).get(proposal_id)
    if proposal is None:
        raise ProposalNotFound(
            f"no proposal {proposal_id} in {state.stream_id}", proposal_id=proposal_id
        )
    if proposal.status != "pending":
        raise Conflict(
            f"proposal {proposal_id} is {proposal.status} already",
            proposal_id=proposal_id,
            proposal_status=proposal.status,
        )
    return proposal


def _resolve(
    proposal_id: str, proposal: Proposal, status: str, reason: Sealed | None = None
) -> ProposalResolved:
    return ProposalResolved(
        item_id=proposal.item_id, proposal_id=proposal_id, status=status, reason_sealed=reason
    )


def _reviewer(state: StreamState, proposal: Proposal, ctx: Context, what: str) -> Item:
    """The memory's author or an admin reviews a proposal; an agent never merges."""
    item = find_item(state, proposal.item_id)
    if ctx.is_agent and what == "merge":
        raise Forbidden("an agent can propose but never merge")
    if not ctx.is_admin and item.author is not None and ctx.member != item.author:
        raise Forbidden(
            f"only {item.author}, who saved memory {item.item_id}, or an admin can {what} "
            "this proposal"
        )
    return item


def merge(state: StreamState, cmd: c.MergeProposal, ctx: Context) -> list[Event]:
    proposal = _pending(state, cmd.proposal_id)
    item = _reviewer(state, proposal, ctx, "merge")
    if ctx.now > proposal.proposed_at + timedelta(days=c.PROPOSAL_DAYS):
        return [_resolve(cmd.proposal_id, proposal, "expired")]
    # Never rebased; nor applied once the scope overtook it.
    if item.revision != proposal.base_revision or _overtaken(state, item, proposal):
        return [_resolve(cmd.proposal_id, proposal, "outdated")]
    change: list[Event]
    if proposal.change == "correct":
        assert proposal.content is not None
        change = [
            MemoryRevised(
                item_id=item.item_id,
                revision=item.revision + 1,
                base_revision=item.revision,
                reason="corrected",
                content=proposal.content.content,
                title=proposal.content.title or item.current.title,
                content_hash=proposal.content.content_hash,
                content_length=proposal.content.content_length,
            )
        ]
    elif proposal.change == "relabel":
        tags = None if proposal.tags is None else tuple(json.loads(ctx.open(proposal.tags)))
        relabel = relabeled(item, proposal.kind, tags, ctx)  # None: it has them already
        change = [] if relabel is None else [relabel]
    elif proposal.change in ("pin", "unpin"):
        change = [
            MemoryPinned(
                item_id=item.item_id, revision=item.revision + 1, pinned=proposal.change == "pin"
            )
        ]
    else:
        allowed = _TRANSITIONS[proposal.change]  # only an archive carries superseded_by
        change = transition(state, item.item_id, allowed, proposal.superseded_by)
    return [*change, _resolve(cmd.proposal_id, proposal, "merged")]


def _overtaken(state: StreamState, item: Item, proposal: Proposal) -> bool:
    """The scope changed since the proposal so that it can no longer apply as proposed:
    the memory it named to supersede this one is no longer active, or its text was
    forgotten since (a merge never brings forgotten text back)."""
    if superseded_by_error(state, item.item_id, proposal.superseded_by) is not None:
        return True
    content = proposal.content
    return content is not None and content.content_hash in state.forgotten_hashes


# A status proposal's transitions, from the status it applies to.
_TRANSITIONS: dict[str, dict[str, str]] = {
    "archive": {"active": "archived", "disabled": "archived"},
    "unarchive": {"archived": "active"},
    "disable": {"active": "disabled"},
    "enable": {"disabled": "active"},
}


def reject(state: StreamState, cmd: c.RejectProposal, ctx: Context) -> list[Event]:
    proposal = _pending(state, cmd.proposal_id)
    _reviewer(state, proposal, ctx, "reject")
    reason = ctx.seal(proposal.item_id, cmd.reason) if cmd.reason else None
    return [_resolve(cmd.proposal_id, proposal, "rejected", reason)]


def withdraw(state: StreamState, cmd: c.WithdrawProposal, ctx: Context) -> list[Event]:
    proposal = _pending(state, cmd.proposal_id)
    if proposal.proposer != ctx.member:
        raise Forbidden(f"proposal {cmd.proposal_id} is {proposal.proposer}'s to withdraw")
    return [_resolve(cmd.proposal_id, proposal, "withdrawn")]
