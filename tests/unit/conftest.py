"""Helpers for the decision core's tests: a deterministic context."""

from __future__ import annotations

import base64
import itertools
from datetime import UTC, datetime

from contracts import commands as c
from contracts.commands import MAX_CANDIDATES_PER_RUN
from contracts.events import (
    Event,
    Labels,
    MemoryRelabeled,
    MemoryRemembered,
    MemoryRevised,
    Sealed,
)
from services.command.core import Context, decide
from services.command.fold import evolve
from services.command.state import StreamState

_ids = itertools.count(1)


def plain_seal(item_id: str, text: str) -> Sealed:
    """A transparent 'seal' so tests can see which text an event carries."""
    return Sealed(key_id=item_id, nonce="", ciphertext=base64.b64encode(text.encode()).decode())


def unseal(sealed: Sealed) -> str:
    return base64.b64decode(sealed.ciphertext).decode()


def labels_of(event: MemoryRemembered | MemoryRevised | MemoryRelabeled) -> Labels:
    """A memory's labels as its event carries them, opened as the projector opens them
    (none: empty)."""
    return Labels.model_validate_json(unseal(event.labels)) if event.labels else Labels()


def make_context(
    scope: str = "member:ana",
    is_agent: bool = False,
    is_admin: bool = False,
    targets: frozenset[str] = frozenset(),
    member: str = "ana",
    now: datetime | None = None,
    keep_revisions: int | None = None,
    fork_of: str | None = None,
    max_candidates_per_run: int | None = MAX_CANDIDATES_PER_RUN,
) -> Context:
    counter = itertools.count(1)
    prefix = next(_ids)
    return Context(
        scope=scope,
        is_agent=is_agent,
        now=now or datetime(2026, 1, 1, tzinfo=UTC),
        new_item_id=lambda: f"item-{prefix}-{next(counter)}",
        seal=plain_seal,
        open=unseal,
        content_hash=lambda text: f"h:{' '.join(text.lower().split())}",
        key_hash=lambda key: f"k:{key}",
        source_hash=lambda source: f"s:{source}",
        is_admin=is_admin,
        targets=targets,
        member=member,
        keep_revisions=keep_revisions,
        fork_of=fork_of,
        max_candidates_per_run=max_candidates_per_run,
    )


def run(state: StreamState, cmd: c.Command, ctx: Context | None = None) -> list[Event]:
    """Decide the command (for ana in her private scope unless ``ctx`` says otherwise), and
    fold its events into the state as the writer does."""
    events = decide(state, cmd, ctx or make_context())
    for event in events:
        evolve(state, state.seq + 1, f"cmd-{state.seq + 1}", event)
    return events
