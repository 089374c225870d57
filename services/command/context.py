"""What the writer passes into ``decide``: the caller, the time, ids and sealing, so the
core stays pure and decides the same way on every replica."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from contracts.commands import MAX_CANDIDATES_PER_RUN
from contracts.events import Sealed
from engram.billing import Account
from engram.ids import name_id

ITEM_NAMESPACE = uuid.UUID("6f1d2b0e-8a51-4c3e-9a56-2b1f0c7d9e11")


@functools.lru_cache(maxsize=65_536)  # asked several times per command on the hot path
def new_item_id(stream_id: str, command_id: str) -> str:
    """Deterministic: a command retried after a crash names the same item (and key). Of
    its stream too: a command id is the caller's (an Idempotency-Key), and the same one
    sent in another scope or org must never name the same item, nor its key."""
    return name_id(ITEM_NAMESPACE, f"{stream_id}\x1f{command_id}")


def copy_item_id(command_item_id: str, source_id: str) -> str:
    """The id of a promotion's or a fork's copy of ``source_id``: deterministic too."""
    return name_id(ITEM_NAMESPACE, f"{command_item_id}/{source_id}")


@dataclass(frozen=True)
class Context:
    scope: str  # resolved from the token, e.g. "member:ana"
    is_agent: bool
    now: datetime
    new_item_id: Callable[[], str]
    seal: Callable[[str, str], Sealed]  # (item_id, text) -> sealed text
    # Sealed text of the memory the command names (a correction's), opened.
    open: Callable[[Sealed], str]
    content_hash: Callable[[str], str]
    key_hash: Callable[[str], str]  # the keyed hashes of a memory's key and of a source
    source_hash: Callable[[str], str]
    is_admin: bool = False  # the token has the org's admin role
    # Memories of other streams the caller can see, among those the command links to
    # (the writer looks them up; a link within the stream needs no lookup).
    targets: frozenset[str] = frozenset()
    # Forgotten memories of other streams the caller can see, among those it links to.
    forgotten_targets: frozenset[str] = frozenset()
    member: str | None = None  # the token's member (an agent acts for one)
    # The org's retention: prior revisions each memory keeps (None: all of them).
    keep_revisions: int | None = None
    # The org's cap on the candidates one run proposes in a scope (None: no cap).
    max_candidates_per_run: int | None = MAX_CANDIDATES_PER_RUN
    # The org's quota of memories per scope, all but the forgotten (None: no quota).
    max_memories_per_scope: int | None = None
    # The org's memory capability (seed 004): off, an agent's command is refused.
    memory: bool = True
    # The org's learning is "apply" (seed 002): the extractor's facts in a session's or an
    # agent's memory are used at once, as unconfirmed inferences.
    apply_learning: bool = False
    # The org's account when it is metered (seed 004's pricing and holds; None: it is
    # not), as the writer has spent from it so far, and who spends (``caller_of``).
    account: Account | None = None
    caller: str = ""
    # A promotion's or a fork's source memories, read by the writer, and the session the
    # token's session forks.
    copies: tuple[Copy, ...] = ()
    fork_of: str | None = None
    session: str | None = None  # the token's session, a promotion's source
    # False when the projector had not caught up with the copies' source in time.
    copies_ready: bool = True


@dataclass(frozen=True)
class Copy:
    """A memory of another stream, in plain text, to copy into this one: an active one, or
    a retracted one for a fork (disabled, or archived since it was), or a move's in any
    status (which it refuses unless active)."""

    item_id: str
    kind: str
    key: str | None
    title: str | None
    content: str
    pinned: bool
    tags: tuple[str, ...]
    sources: tuple[str, ...]
    expires_at: datetime | None = None  # the copy expires when its source does
    revision: int = 0  # the revision read (a move copies the one its caller saw)
    author: str | None = None  # the member who saved it
    status: str = "active"
    # An inference no person confirmed (seed 002's learned memory): a promotion or a fork
    # copies it as one, and never over a confirmed fact.
    inferred: bool = False

    @property
    def retracted(self) -> bool:  # a fork copies it retracted (seed 002)
        return self.status in ("disabled", "archived")
