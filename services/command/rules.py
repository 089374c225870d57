"""Checks the decisions share: finding an item, the stale-base and author checks, a run's
cap on candidates, a scope's quota, and the status transitions they guard. The events they
build are ``changes``'s."""

from __future__ import annotations

from contracts.events import Event, MemoryRemembered
from services.command.changes import forgotten as forgotten  # core imports it here
from services.command.changes import status_change, superseded_by
from services.command.context import Context
from services.command.errors import (
    AlreadyHeld,
    CandidateLimitReached,
    Conflict,
    Forbidden,
    Gone,
    InvalidCommand,
    MemoryQuotaReached,
    NotFound,
    ProposalRequired,
)
from services.command.state import Item, StreamState


def find_item(state: StreamState, item_id: str) -> Item:
    item = state.items.get(item_id)
    if item is None:
        hint = (
            " (a shared memory is changed with scope: shared)"
            if not state.stream_id.endswith("/shared")
            else ""
        )
        raise NotFound(f"no memory {item_id} in {state.stream_id}{hint}", item_id=item_id)
    if item.status == "forgotten":
        raise Gone(
            f"memory {item_id} was forgotten; it cannot be changed or restored", item_id=item_id
        )
    return item


def check_base(item: Item, base: int, text: str | None = None) -> None:
    if base != item.revision:
        extra = {"item_id": item.item_id, "current_revision": item.revision, "base_revision": base}
        if text is not None:
            extra["content"] = text  # the caller's text comes back so nothing is lost
        raise Conflict(f"memory {item.item_id} is at revision {item.revision}, not {base}", **extra)


def is_teammates(item: Item, ctx: Context) -> bool:
    """A shared memory another member saved, and the caller is no admin (a memory saved
    before authors were recorded is no one's, and stays open to all)."""
    return (
        ctx.scope == "shared"
        and item.author is not None
        and item.author != ctx.member
        and not ctx.is_admin
    )


def agent_on_shared_fact(item: Item, ctx: Context) -> bool:
    """An agent at a shared fact (one ever confirmed), which it changes only as the user's
    message asks for everyone (seed 000): a proposal, a person's forget."""
    return ctx.is_agent and ctx.scope == "shared" and item.confirmed


def check_owner(item: Item, ctx: Context, *, proposable: bool = True, asked: bool = False) -> None:
    """In the shared scope a memory's text and status are changed by its author or an
    admin; a teammate proposes the change instead (seed 004), or, for a change no proposal
    makes (``proposable`` false: a relabel, an undo), is refused. An agent changes a shared
    fact only when the user's message asked it to for everyone (seed 000; ``asked``: a save
    or correction whose message did): any other change of its is a proposal too, which a
    person merges (a seed audit: an agent archived, disabled, pinned and relabelled shared
    facts with no message at all)."""
    agents = agent_on_shared_fact(item, ctx) and not asked
    if not (is_teammates(item, ctx) or agents):
        return
    whose = (
        f"memory {item.item_id} is {item.author}'s"
        if is_teammates(item, ctx)
        else f"memory {item.item_id} is a shared fact, which an agent changes only when its "
        "user's message asks for it for everyone"
    )
    if not proposable:
        raise Forbidden(
            f"{whose}: only its author or an admin, in person, makes this change",
            item_id=item.item_id,
            author=item.author,
        )
    raise ProposalRequired(
        f"{whose}: propose the change (POST /v1/memories/{item.item_id}/propose); its "
        "author or an admin merges it",
        item_id=item.item_id,
        author=item.author,
    )


def check_run_cap(state: StreamState, run_id: str | None, ctx: Context) -> None:
    """A run proposes at most the org's cap of candidates in a scope (seed 001: a task
    makes at most three proposals); a save without a run is not counted."""
    cap = ctx.max_candidates_per_run
    if run_id is not None and cap is not None and state.candidates_of(run_id) >= cap:
        raise CandidateLimitReached(
            f"run {run_id} has proposed {cap} candidates in {state.stream_id} already, "
            "the org's max_candidates_per_run: a person confirms or dismisses them",
            run_id=run_id,
            max_candidates_per_run=cap,
        )


def check_may_forget(item: Item, ctx: Context) -> None:
    """Seed 004's delete removes one of the caller's own memories: a teammate's shared
    memory is forgotten by its author or an org admin, and no proposal can do it (a
    forget cannot wait for a review, nor be undone after one)."""
    check_not_teammates(item, ctx, "only its author or an org admin can forget it")
    if agent_on_shared_fact(item, ctx):
        # Seed 000: an agent changes shared memory only when the user's message says so for
        # everyone, and a forget carries no message and cannot be undone (QA: an agent
        # forgot a shared fact with no message at all).
        raise Forbidden(
            f"memory {item.item_id} is a shared fact: a person forgets it (its author or an "
            "admin); an agent forgets what its own scopes hold",
            item_id=item.item_id,
            author=item.author,
        )


def check_not_teammates(item: Item, ctx: Context, who_may: str) -> None:
    """A change no teammate makes on another member's shared memory, nor proposes."""
    if is_teammates(item, ctx):
        raise Forbidden(
            f"memory {item.item_id} is {item.author}'s: {who_may}",
            item_id=item.item_id,
            author=item.author,
        )


def transition(
    state: StreamState, item_id: str, allowed: dict[str, str], superseded_by: str | None = None
) -> list[Event]:
    item = find_item(state, item_id)
    target = allowed.get(item.status)
    if target is None:
        raise Conflict(
            f"memory {item_id} is {item.status}; that change does not apply",
            item_id=item_id,
            memory_status=item.status,
        )
    if target == item.status:
        return []
    # Back to active by any path (an enable, an unarchive, a merged proposal of either); a
    # confirmed candidate instead replaces the key's holder (``replaced_on_confirm``).
    if target == "active" and item.status in ("archived", "disabled"):
        check_key_free(state, item)
    return [status_change(item, target, superseded_by)]


def check_person_for_text(item: Item, ctx: Context, what: str) -> None:
    """An inference never replaces a confirmed fact: an agent's correction waits as a
    candidate, and an agent may not bring an earlier text back by undo or restore, which
    have no text of the user's to check and no candidate to wait as."""
    if ctx.is_agent and item.confirmed:
        raise Forbidden(
            f"an agent may not {what} a confirmed memory: a person does, or the agent sends "
            "the text as a correction (a candidate, unless the user asked for it)",
            item_id=item.item_id,
        )


def check_person_to_enable(item: Item, ctx: Context) -> None:
    """A disabled memory (seed 002's retracted entry) stays so until a person brings it
    back: an agent may not enable it, by enable or by undoing its disabling (a seed coverage
    audit), nor archive it, which unarchiving would make active, nor unarchive one that was
    disabled when a person archived it (QA)."""
    if ctx.is_agent and "disabled" in (item.status, item.archived_from):
        raise Forbidden(
            f"memory {item.item_id} is disabled, or was when it was archived: only a person "
            "can bring it back",
            item_id=item.item_id,
        )


def check_not_held(state: StreamState, digest: str, ctx: Context, own: str | None = None) -> None:
    """A candidate of text the scope holds, as a memory (not expired) or a candidate other
    than ``own``, is not proposed again: 409, naming the holder (whoever reads the scope
    reads its candidates too)."""
    holder = state.holding(digest, ctx.now)
    if holder is not None and holder.item_id != own:
        raise AlreadyHeld(
            f"this scope holds this text already, as {holder.status} memory "
            f"{holder.item_id}: it is not proposed again",
            item_id=holder.item_id,
            holder_status=holder.status,
        )


def check_quota(state: StreamState, events: list[Event], quota: int) -> None:
    """A command that adds memories to a scope that would then hold more than the org's
    quota is refused whole (a promotion's copies too); one that adds none always passes,
    so a full scope can still be corrected, archived and forgotten."""
    added = sum(
        1 for e in events if isinstance(e, MemoryRemembered) and e.item_id not in state.items
    )
    if added and state.memories() + added > quota:
        raise MemoryQuotaReached(
            f"this scope holds {state.memories()} memories and the org's quota is {quota} "
            f"(max_memories_per_scope); this command would add {added}: forget some, or ask "
            "an admin to raise the quota",
            memories=state.memories(),
            max_memories_per_scope=quota,
        )


def check_not_forgotten(state: StreamState, digest: str, resave: bool, text: str) -> None:
    """Forgotten text is not saved again, by a save or a correction, unless the caller
    says it means it (``resave_forgotten``)."""
    if digest in state.forgotten_hashes and not resave:
        raise Conflict(
            "this text was forgotten before; send resave_forgotten=true if you mean "
            "to save it again",
            content=text,
        )


def superseded_by_error(state: StreamState, item_id: str, superseded_by: str | None) -> str | None:
    """Why ``superseded_by`` cannot replace the memory, if it cannot."""
    if superseded_by is None:
        return None
    if superseded_by == item_id:
        return f"memory {item_id} cannot be superseded by itself"
    replacement = state.items.get(superseded_by)
    if replacement is None or replacement.status != "active":
        return f"superseded_by {superseded_by} is not an active memory of this scope"
    return None


def check_superseded_by(state: StreamState, item_id: str, superseded_by: str | None) -> None:
    if (error := superseded_by_error(state, item_id, superseded_by)) is not None:
        raise InvalidCommand(error)


def check_key_free(state: StreamState, item: Item) -> None:
    """One key holds one fact: a memory whose key another active memory took meanwhile
    (saved while it was disabled or archived) is not made active again beside it."""
    holder = state.active_by_key(item.key_hash) if item.key_hash else None
    if holder is not None and holder.item_id != item.item_id:
        raise Conflict(
            f"memory {holder.item_id} holds this memory's key now: archive or forget it "
            f"first, or correct it, to make {item.item_id} active again",
            item_id=item.item_id,
            held_by=holder.item_id,
        )


def replaced_on_confirm(state: StreamState, candidate: Item, ctx: Context) -> list[Event]:
    """What a candidate replaces once a person confirms it: the memory an agent's
    correction proposed it for, and any active memory holding its key; each is archived,
    superseded by it, so one key (and one corrected fact) stays one active memory."""
    holder = state.active_by_key(candidate.key_hash) if candidate.key_hash else None
    replaced = {i for i in (candidate.replaces, holder.item_id if holder else None) if i}
    events: list[Event] = []
    for item_id in sorted(replaced):
        item = state.items.get(item_id)
        if item is not None and item.status == "active":
            check_owner(item, ctx)
            events.append(superseded_by(item, candidate.item_id))
    return events
