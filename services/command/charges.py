"""What a command costs (seed 004's pricing): 1 credit for each memory a save makes
(``remember``, each of an ``ingest``'s messages, a lesson, a MEMORY.md import) and for a
correction that brings the memory a text it has not had. Everything else is free: reads,
pins, relabels, links, moves, promotions and forks (copies), proposals, archives,
restores, forgets, and what the extractor learns on its own. Pure: the events say it
(``charged``), so the log holds every charge and a replay records the same.
"""

from __future__ import annotations

from contracts import commands as c
from contracts.events import Event, MemoryRemembered, MemoryRevised
from engram.billing import hold_on
from services.command.context import Context
from services.command.errors import Held
from services.command.state import StreamState

PRICE = 1  # credits a saved memory, or a new text, costs


def charged(state: StreamState, cmd: c.Command, events: list[Event], ctx: Context) -> list[Event]:
    """The events with their charges, when the org is metered; a command that needs more
    credit than is left, or than its caller's monthly cap leaves, is refused whole."""
    if ctx.account is None or not _paid(cmd):
        return events
    price = {"charged": PRICE, "charged_to": ctx.caller}
    priced = [e.model_copy(update=price) if _costs(state, e) else e for e in events]
    total = cost(priced)
    if total and (hold := hold_on(ctx.account, ctx.caller, total)) is not None:
        raise Held(hold, credits_needed=total)
    return priced


def _paid(cmd: c.Command) -> bool:
    if isinstance(cmd, c.RememberMemory):
        return not cmd.extracted
    return isinstance(cmd, c.CorrectMemory)


def _costs(state: StreamState, event: Event) -> bool:
    """A new memory, or a revision to a text the memory never had (seed 004: an update
    that repeats text already saved is not charged again)."""
    if isinstance(event, MemoryRemembered):
        if event.replaces is None:
            return True
        # A memory that takes another's place (an agent's unasked correction waiting as a
        # candidate, a keyed save of another kind): as a revision of it (QA: a candidate
        # of the memory's earlier text was charged).
        item = state.items.get(event.replaces)
    elif isinstance(event, MemoryRevised):
        item = state.items.get(event.item_id)
    else:
        return False
    if item is None:
        return True
    had = {r.content_hash for r in item.revisions.values()} | (item.retired_hashes or set())
    return event.content_hash not in had


def cost(events: list[Event]) -> int:
    """What the events charged, in all."""
    return sum(e.charged for e in events if isinstance(e, MemoryRemembered | MemoryRevised))
