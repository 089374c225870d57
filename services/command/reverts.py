"""What an undo or a restore brings back: an earlier revision's text, or the pin, labels
or status the memory's last change replaced. Pure, as ``core`` is."""

from __future__ import annotations

from contracts import commands as c
from contracts.events import Event, MemoryPinned, MemoryRelabeled, MemoryRevised
from services.command.changes import status_change
from services.command.context import Context
from services.command.errors import Conflict, InvalidCommand
from services.command.rules import (
    check_base,
    check_key_free,
    check_owner,
    check_person_for_text,
    check_person_to_enable,
    find_item,
)
from services.command.state import Item, StreamState


def restore_revision(state: StreamState, cmd: c.RestoreRevision, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision)
    check_owner(item, ctx)
    check_person_for_text(item, ctx, "restore an earlier text of")
    old = item.revisions.get(cmd.revision)
    if cmd.revision < item.revision and old is None and item.revisions:
        raise Conflict(
            f"memory {item.item_id} no longer keeps revision {cmd.revision}: the org's "
            f"retention keeps revisions {min(item.revisions)} to {item.revision}",
            item_id=item.item_id,
            oldest_kept=min(item.revisions),
        )
    if old is None or cmd.revision >= item.revision:
        raise InvalidCommand(f"memory {item.item_id} has no earlier revision {cmd.revision}")
    return [_copy_revision(state, item, cmd.revision, "restored")]


def _copy_revision(state: StreamState, item: Item, revision: int, reason: str) -> MemoryRevised:
    old = item.revisions[revision]
    if old.content_hash in state.forgotten_hashes:  # as a correction, never without asking
        raise Conflict(
            f"revision {revision} of memory {item.item_id} holds text that was forgotten "
            "since: correct the memory with that text and resave_forgotten=true if you mean "
            "to bring it back",
            item_id=item.item_id,
            revision=revision,
        )
    return MemoryRevised(
        item_id=item.item_id,
        revision=item.revision + 1,
        base_revision=item.revision,
        reason=reason,
        content=old.content,
        title=old.title,
        content_hash=old.content_hash,
        content_length=old.content_length,
        restored_from=revision,
    )


def undo(state: StreamState, cmd: c.UndoChange, ctx: Context) -> list[Event]:
    item = find_item(state, cmd.item_id)
    check_base(item, cmd.base_revision)
    check_owner(item, ctx)
    if item.last_change is None:
        raise Conflict(f"memory {item.item_id} has no change to undo", item_id=item.item_id)
    what, before = item.last_change
    if what == "revision":
        check_person_for_text(item, ctx, "undo a correction of")
        return [_copy_revision(state, item, before, "undone")]
    if what == "pinned":
        return [MemoryPinned(item_id=item.item_id, revision=item.revision + 1, pinned=before)]
    if what == "relabel":
        kind, labels = before
        return [
            MemoryRelabeled(
                item_id=item.item_id, revision=item.revision + 1, kind=kind, labels=labels
            )
        ]
    if item.status == "candidate":  # only a person's confirm makes a candidate a memory
        raise Conflict(
            f"memory {item.item_id} is a candidate: confirm or dismiss it",
            item_id=item.item_id,
            memory_status=item.status,
        )
    if before == "active":
        check_person_to_enable(item, ctx)
        check_key_free(state, item)
    return [status_change(item, before)]
