"""``evolve``: one event folded into a stream's decision state (``state``). The writer
folds every event it appends, and a restore the events after a checkpoint."""

from __future__ import annotations

from typing import Any

from contracts.events import (
    NEUTRAL,
    ChangeProposed,
    Event,
    MemoryForgotten,
    MemoryLinked,
    MemoryPinned,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    MemoryStatusChanged,
    MemoryUnlinked,
    ProposalResolved,
    RevisionsPruned,
    Status,
)
from services.command.state import Item, Proposal, Revision, StreamState, hold

# A kept answer names at most this many of its command's forgotten memories (a clear's
# receipt on a retry; the first answer names them all).
RECEIPT_KEPT = 1_000


def touches_active(before: Status | None, after: Status | None) -> bool:
    """Generations move on every change to active memory (DESIGN §1)."""
    return "active" in (before, after)


def evolve(state: StreamState, seq: int, command_id: str, event: Event) -> None:
    """Fold one event into the state (mutates; the writer owns its state)."""
    state.seq = seq
    if state.touched is not None:
        state.touched.add(event.item_id)
    before = state.items[event.item_id].status if event.item_id in state.items else None
    _APPLY[type(event)](state, event)
    after = state.items[event.item_id].status if event.item_id in state.items else None
    if touches_active(before, after) and not isinstance(event, NEUTRAL):
        state.generation += 1
    if isinstance(event, RevisionsPruned) and command_id in state.results:
        # Retention's, after the command's own events: its answer names the memory of its
        # last own event still (QA: a keyed save of another kind answered with the memory
        # it archived, a confirm and a promotion too).
        state.update_result(command_id, seq=seq, generation=state.generation)
        return
    item = state.items[event.item_id]
    # Several events of one command: the answer is the state after the last, with the
    # stream's version and generation then and the memories it forgot (its receipt).
    erased = (state.results.get(command_id) or {}).get("erased")
    if isinstance(event, MemoryForgotten):
        erased = erased if erased is not None else []
        if len(erased) < RECEIPT_KEPT:
            erased.append({"item_id": event.item_id, "revisions": event.revisions})
    result = {
        "item_id": item.item_id,
        "revision": item.revision,
        "status": item.status,
        "seq": seq,
        "generation": state.generation,
        **({"erased": erased} if erased is not None else {}),
    }
    if isinstance(event, ChangeProposed | ProposalResolved):
        proposal = (state.proposals or {})[event.proposal_id]
        result.update(proposal_id=event.proposal_id, proposal_status=proposal.status)
    state.keep_result(command_id, result)


def _remembered(state: StreamState, e: MemoryRemembered) -> None:
    if e.item_id in state.items:  # saved again under its id (not by this writer)
        state.keyed = state.held = state.live = None  # rebuilt at their next use
    else:
        if state.live is not None:
            state.live += 1
        if e.key_hash is not None and state.keyed is not None:
            state.keyed.setdefault(e.key_hash, []).append(e.item_id)
        if state.held is not None:
            hold(state.held, e.content_hash, e.item_id)
    state.items[e.item_id] = Item(
        item_id=e.item_id,
        kind=e.kind,
        status=e.status,
        revision=e.revision,
        pinned=e.pinned,
        key_hash=e.key_hash,
        confirmed=e.status == "active" and not e.inferred,
        expires_at=e.expires_at,
        revisions={e.revision: Revision(e.content, e.title, e.content_hash, e.content_length)},
        author=e.author,
        replaces=e.replaces if e.status == "candidate" else None,
        labels=e.labels,
    )
    if e.status == "candidate" and e.run_id is not None:
        state.count_candidate(e.run_id)


def _revised(state: StreamState, e: MemoryRevised) -> None:
    item = state.items[e.item_id]
    item.revisions[e.revision] = Revision(e.content, e.title, e.content_hash, e.content_length)
    if state.held is not None:
        hold(state.held, e.content_hash, item.item_id)
    item.last_change = ("revision", e.base_revision)
    item.revision = e.revision
    if item.status == "active" and not e.inferred:  # an inferred fact a person revised
        item.confirmed = True
    if e.labels is not None:  # a keyed save brought tags or sources
        item.labels = e.labels


def _pinned(state: StreamState, e: MemoryPinned) -> None:
    item = state.items[e.item_id]
    item.last_change = ("pinned", item.pinned)
    item.pinned, item.revision = e.pinned, e.revision
    item.revisions[e.revision] = item.revisions[e.revision - 1]


def _relabeled(state: StreamState, e: MemoryRelabeled) -> None:
    item = state.items[e.item_id]
    item.last_change = ("relabel", (item.kind, item.labels))
    item.kind, item.labels, item.revision = e.kind, e.labels, e.revision
    item.revisions[e.revision] = item.revisions[e.revision - 1]


def _status(state: StreamState, e: MemoryStatusChanged) -> None:
    item = state.items[e.item_id]
    item.last_change = ("status", e.previous)
    item.status, item.revision = e.status, e.revision
    item.archived_from = e.previous if e.status == "archived" else None
    item.confirmed = item.confirmed or (e.status == "active" and not e.inferred)
    item.revisions[e.revision] = item.revisions[e.revision - 1]


def _forgotten(state: StreamState, e: MemoryForgotten) -> None:
    item = state.items[e.item_id]
    if state.live is not None and item.status != "forgotten":
        state.live -= 1
    # A moved memory's current text lives on in the scope it moved to; its earlier texts,
    # erased with it, count as forgotten (QA: none did).
    moved = {item.current.content_hash} if e.moved_to is not None and item.revisions else set()
    state.forgotten_hashes.update(set(e.content_hashes) - moved)
    # Keep only the tombstone: no sealed text survives in the writer either.
    item.status, item.revisions, item.last_change, item.links = "forgotten", {}, None, None
    # Its labels are a person's words too, and its key is free: the tombstone keeps none of
    # them (the read models neither).
    item.key_hash, item.labels = None, None
    for proposal in (state.proposals or {}).values():  # its proposals' text goes too
        if proposal.item_id == e.item_id:
            proposal.content, proposal.tags = None, None
            if proposal.status == "pending":
                proposal.status = "outdated"
    for source in state.linked or ():  # the stream's own links to it go too
        links = state.items[source].links or {}
        if gone := [k for k in links if k[0] == e.item_id]:
            for key in gone:
                del links[key]
            if state.touched is not None:
                state.touched.add(source)


def _proposed(state: StreamState, e: ChangeProposed) -> None:
    content = (
        Revision(e.content, e.title, e.content_hash or "", e.content_length or 0)
        if e.content is not None
        else None
    )
    if state.proposals is None:
        state.proposals = {}
    state.proposals[e.proposal_id] = Proposal(
        item_id=e.item_id,
        change=e.change,
        base_revision=e.base_revision,
        proposer=e.proposer,
        proposed_at=e.proposed_at,
        content=content,
        superseded_by=e.superseded_by,
        kind=e.kind,
        tags=e.tags,
    )


def _resolved(state: StreamState, e: ProposalResolved) -> None:
    proposal = (state.proposals or {})[e.proposal_id]
    proposal.status, proposal.content, proposal.tags = e.status, None, None  # spent


def _pruned(state: StreamState, e: RevisionsPruned) -> None:
    """The retention drops old revisions; their hashes still refuse a re-save after a
    forget (``retired_hashes``)."""
    item = state.items[e.item_id]
    old = [r for r in item.revisions if r < e.before]
    item.retired_hashes = (item.retired_hashes or frozenset()) | {
        item.revisions[r].content_hash for r in old
    }
    for r in old:
        del item.revisions[r]


def _linked(state: StreamState, e: MemoryLinked) -> None:
    item = state.items[e.item_id]
    if item.links is None:
        item.links = {}
    item.links[e.target_id, e.kind] = e.weight
    if state.linked is None:
        state.linked = set()
    state.linked.add(e.item_id)


def _unlinked(state: StreamState, e: MemoryUnlinked) -> None:
    (state.items[e.item_id].links or {}).pop((e.target_id, e.kind), None)


_APPLY: dict[type[Event], Any] = {
    MemoryRemembered: _remembered,
    MemoryRevised: _revised,
    MemoryPinned: _pinned,
    MemoryRelabeled: _relabeled,
    MemoryStatusChanged: _status,
    MemoryForgotten: _forgotten,
    MemoryLinked: _linked,
    MemoryUnlinked: _unlinked,
    ChangeProposed: _proposed,
    ProposalResolved: _resolved,
    RevisionsPruned: _pruned,
}
