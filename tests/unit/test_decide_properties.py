"""Invariants of decide/evolve over random command sequences (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import commands as c
from contracts.events import (
    Event,
    MemoryLinked,
    MemoryRemembered,
    MemoryStatusChanged,
    MemoryUnlinked,
    RevisionsPruned,
)
from services.command.core import decide
from services.command.errors import Conflict, DomainError
from services.command.fold import evolve
from services.command.state import StreamState
from tests.unit.conftest import make_context

TEXTS = st.sampled_from(["tea", "coffee", "budget 1500", "budget 1600", "run tests first"])
SLOT = st.integers(min_value=0, max_value=3)  # which known item a command targets


@st.composite
def steps(draw: Any) -> tuple[str, dict[str, Any]]:
    kind = draw(
        st.sampled_from(
            [
                "remember",
                "correct",
                "restore",
                "undo",
                "pin",
                "disable",
                "archive",
                "unarchive",
                "confirm",
                "forget",
                "clear",
                "link",
                "unlink",
                "relabel",
            ]
        )
    )
    return kind, {
        "slot": draw(SLOT),
        "text": draw(TEXTS),
        "agent": draw(st.booleans()),
        "stale": draw(st.booleans()),
        "flag": draw(st.booleans()),
        "other": draw(SLOT),
        "run": draw(st.sampled_from([None, "r1", "r2"])),
    }


def build(
    kind: str, a: dict[str, Any], item_id: str, state: StreamState, other_id: str
) -> c.Command:
    current = state.items[item_id].revision if item_id in state.items else 1
    base = current - 1 if a["stale"] and current > 1 else current
    return {
        "remember": lambda: c.RememberMemory(
            content=a["text"], candidate=a["flag"], resave_forgotten=True, run_id=a["run"]
        ),
        "correct": lambda: c.CorrectMemory(
            item_id=item_id, base_revision=base, content=a["text"], run_id=a["run"]
        ),
        "restore": lambda: c.RestoreRevision(item_id=item_id, base_revision=base, revision=1),
        "undo": lambda: c.UndoChange(item_id=item_id, base_revision=base),
        "pin": lambda: c.PinMemory(item_id=item_id, pinned=a["flag"]),
        "relabel": lambda: c.RelabelMemory(
            item_id=item_id,
            base_revision=base,
            kind="fact" if a["flag"] else None,
            tags=(a["run"] or "t",),
        ),
        "disable": lambda: c.DisableMemory(item_id=item_id, disabled=a["flag"]),
        "archive": lambda: c.ArchiveMemory(item_id=item_id),
        "unarchive": lambda: c.UnarchiveMemory(item_id=item_id),
        "confirm": lambda: c.ConfirmCandidate(item_id=item_id),
        "forget": lambda: c.ForgetMemory(item_id=item_id),
        "clear": lambda: c.ClearMemories(confirm=a["flag"]),
        "link": lambda: c.LinkMemory(
            item_id=item_id,
            target_id=other_id,
            kind="related" if a["flag"] else "depends-on",
            weight=0.5 if a["stale"] else None,
        ),
        "unlink": lambda: c.UnlinkMemory(
            item_id=item_id, target_id=other_id, kind="related" if a["flag"] else "depends-on"
        ),
    }[kind]()


def command_events(sequence: list[Any], stream_id: str = "acme/member:ana") -> list[Event]:
    """The events ``decide`` makes of a command sequence, each folded in before the next
    command (the commands a step names that are refused make none)."""
    state = StreamState(stream_id)
    ids: list[str] = []
    events: list[Event] = []
    for kind, a in sequence:
        item_id = ids[a["slot"] % len(ids)] if ids else "missing"
        other_id = ids[a["other"] % len(ids)] if ids else "missing"
        try:
            decided = decide(state, build(kind, a, item_id, state, other_id), make_context())
        except DomainError:
            continue
        for event in decided:
            evolve(state, state.seq + 1, f"c{state.seq + 1}", event)
            ids += [event.item_id] if isinstance(event, MemoryRemembered) else []
            events.append(event)
    return events


@settings(max_examples=300, deadline=None)
@given(
    st.lists(steps(), min_size=1, max_size=40),
    st.one_of(st.none(), st.integers(1, 3)),
    st.one_of(st.none(), st.integers(1, 3)),
)
def test_invariants_hold_for_any_command_sequence(
    sequence: list[Any], keep: int | None, cap: int | None
) -> None:
    state = StreamState("acme/member:ana")
    ids: list[str] = []
    proposed: dict[str, int] = {}  # run -> the candidates it proposed
    seq = 0
    for kind, a in sequence:
        item_id = ids[a["slot"] % len(ids)] if ids else "missing"
        other_id = ids[a["other"] % len(ids)] if ids else "missing"
        before = state.items.get(item_id, None)
        before_rev, before_status = (before.revision, before.status) if before else (0, None)
        cmd = build(kind, a, item_id, state, other_id)
        ctx = make_context(is_agent=a["agent"], keep_revisions=keep, max_candidates_per_run=cap)
        try:
            events = decide(state, cmd, ctx)
        except Conflict as exc:
            if "base_revision" in exc.extra:
                assert exc.extra["base_revision"] != before_rev
            continue
        except DomainError:
            continue
        stale = getattr(cmd, "base_revision", None)
        # Stale bases always conflict: no event was decided on an old revision.
        assert stale is None or stale == before_rev
        # Each item's revision before this command's event on it (a confirm also archives
        # the memory its candidate replaces, whose revision is its own).
        last = {i: item.revision for i, item in state.items.items()}
        for event in events:
            seq += 1
            evolve(state, seq, f"c{seq}", event)
            if isinstance(event, MemoryRemembered):
                ids.append(event.item_id)
                if event.status == "candidate" and event.run_id is not None:
                    proposed[event.run_id] = proposed.get(event.run_id, 0) + 1
                    # A run never proposes more candidates than the org's cap.
                    assert cap is None or proposed[event.run_id] <= cap
                continue
            item = state.items[event.item_id]
            if isinstance(event, MemoryLinked | MemoryUnlinked | RevisionsPruned):
                assert item.revision == last[item.item_id]  # no revision of the text
            elif item.status != "forgotten":
                assert item.revision == last[item.item_id] + 1  # revisions go up by exactly one
            last[item.item_id] = item.revision
            if isinstance(event, MemoryStatusChanged) and before_status == "candidate":
                # A candidate becomes active only by a person's confirm.
                assert item.status != "active" or (kind == "confirm" and not a["agent"])
        assert state.seq == seq
        if isinstance(cmd, c.ClearMemories):  # a confirmed clear leaves nothing readable
            assert cmd.confirm and all(i.status == "forgotten" for i in state.items.values())
        for item in state.items.values():
            if item.status == "forgotten":  # no sealed text of it survives anywhere
                assert item.revisions == {} and item.last_change is None
                assert not item.links  # and no link from it
            if keep is not None:  # the org's retention: no older revision is kept
                assert all(r >= item.revision - keep for r in item.revisions)
            for target, _ in item.links or {}:  # nor to it, within the stream
                assert state.items[target].status != "forgotten" and target != item.item_id
            if not item.confirmed:
                assert item.status in ("candidate", "forgotten")
