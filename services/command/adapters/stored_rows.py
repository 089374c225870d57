"""A checkpoint's rows as Postgres stores them: each changed stream's header, its new and
changed items and its new and changed answers, pickled (``rows_to_save``), and read back
into states (``states_from_rows``) only through ``loads``, which refuses any class a
checkpoint does not hold. Rows of every format before this one still load."""

from __future__ import annotations

import dataclasses
import io
import pickle
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from engram.crypto import MasterKey
from services.command.rows import changed_answers, changed_rows, from_rows, with_answers
from services.command.state import StreamState

States = dict[str, StreamState]
# A stream's row: (ROW_FORMAT, its state without items and answers, how many answers it
# keeps); its items are rows of command.stream_items, its answers runs of them in
# command.stream_answers. Rows of before still load: the pickled StreamState itself, (2,
# the state without items, every item's row), format 3, whose items kept their key in plain
# where format 4 keeps its keyed hash (``hash_keys``), and format 4, whose header held the
# stream's answers.
ROW_FORMAT = 5
ItemRecord = tuple[str, str, int, bytes]  # stream_id, item_id, position, pickled row
AnswerRecord = tuple[str, int, int, bytes]  # stream_id, first and last place, pickled run
# The only classes a checkpoint row may name. A row is read with ``loads``, which refuses
# any other, so a row written by someone other than the writer (the tables are the owner
# role's alone) cannot make a restore call arbitrary code, as plain ``pickle.loads`` would.
ROW_CLASSES = frozenset(
    {
        ("services.command.state", "StreamState"),
        ("services.command.state", "Item"),
        ("services.command.state", "Revision"),
        ("services.command.state", "Proposal"),
        ("contracts.events", "Sealed"),
        ("datetime", "datetime"),
        ("datetime", "timezone"),
        ("datetime", "timedelta"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
    }
)


@dataclass
class CheckpointRows:
    """What a checkpoint writes: the changed streams' headers, their new items (with
    their place) and their changed items, their new and changed answers (a run a stream),
    and, a stream's, which of its stored runs go: those wholly below a place, all of them
    (``True``), and those from the new run's first place on, which it replaces. So a run
    stored later always starts later than any it overlaps."""

    headers: list[tuple[int, str, bytes]] = field(default_factory=list)
    new: list[ItemRecord] = field(default_factory=list)
    changed: list[tuple[str, str, bytes]] = field(default_factory=list)
    answers: list[AnswerRecord] = field(default_factory=list)
    answers_below: list[tuple[str, int, bool, int | None]] = field(default_factory=list)


def rows_to_save(partition: int, states: States, dirty: set[str]) -> CheckpointRows:
    """What a checkpoint of the ``dirty`` streams writes."""
    rows = CheckpointRows()
    for stream_id in sorted(dirty):
        if (state := states.get(stream_id)) is None:
            continue
        header = dataclasses.replace(
            state,
            items={},
            results={},
            fingerprints=None,
            stored=None,
            touched=None,
            keyed=None,
            held=None,
            live=None,
            answered=None,
        )
        stored = (ROW_FORMAT, header, len(state.results))
        rows.headers.append((partition, stream_id, pickle.dumps(stored, pickle.HIGHEST_PROTOCOL)))
        items = changed_rows(state)
        rows.new += [(stream_id, row[0], n, _pickled(row)) for n, row in items.new]
        rows.changed += [(stream_id, row[0], _pickled(row)) for row in items.changed]
        answers = changed_answers(state)
        if answers.rows:
            last = answers.first + len(answers.rows) - 1
            rows.answers.append((stream_id, answers.first, last, _pickled(answers.rows)))
        replaced = answers.first if answers.rows else None  # the runs from there on
        rows.answers_below.append((stream_id, answers.below, answers.whole, replaced))
    return rows


def _pickled(row: object) -> bytes:
    return pickle.dumps(row, pickle.HIGHEST_PROTOCOL)


class UnsafeRow(pickle.UnpicklingError):
    """A checkpoint row names a class no checkpoint holds."""


class _RowUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ROW_CLASSES:
            raise UnsafeRow(f"a checkpoint row names {module}.{name}, which no checkpoint holds")
        return super().find_class(module, name)


def loads(row: bytes) -> Any:
    """A checkpoint row's value, refusing any class outside ``ROW_CLASSES``."""
    return _RowUnpickler(io.BytesIO(row)).load()


def states_from_rows(
    headers: list[asyncpg.Record],
    items: list[asyncpg.Record],
    answers: list[asyncpg.Record],
    master: MasterKey,
) -> States:
    """The streams of these header rows, each with its item and answer rows (each in
    their order)."""
    rows: dict[str, list[Any]] = {}
    for record in items:
        rows.setdefault(record["stream_id"], []).append(loads(record["item"]))
    kept: dict[str, list[Any]] = {}
    for record in answers:
        run = (record["position"], loads(record["answers"]))
        kept.setdefault(record["stream_id"], []).append(run)
    return {
        r["stream_id"]: stream_of(
            loads(r["state"]), rows.get(r["stream_id"], []), master, kept.get(r["stream_id"], [])
        )
        for r in headers
    }


def stream_of(
    stored: Any, rows: list[Any], master: MasterKey, answers: list[Any] | None = None
) -> StreamState:
    """A stream from its header row's value, its item rows' and its answer runs' (each its
    first place and its rows), in whichever format."""
    if isinstance(stored, StreamState):  # a row of before item rows: the whole state
        state = stored
    elif stored[0] == 2:  # (2, header, every item's row), none in command.stream_items
        state = from_rows(stored[1], stored[2])
    else:
        state = from_rows(stored[1], rows)
        if stored[0] == ROW_FORMAT:
            return with_answers(state, answers or [], stored[2])
        if stored[0] == 4:  # its keys hashed already, its answers in the header
            return answers_from_header(state)
    hash_keys(state, master)
    return answers_from_header(state)


def answers_from_header(state: StreamState) -> StreamState:
    """A state from a row of before answer rows, which held its answers: numbered in
    their order, and all of them stored by its next checkpoint."""
    state.answers_made, state.answered = len(state.results), None
    return state


def hash_keys(state: StreamState, master: MasterKey) -> None:
    """A state of before sealed labels, its items' keys in plain, as this format keeps
    them: as keyed hashes. Its next checkpoint stores every item, so no plain key stays in
    its rows (it is dirty as soon as it changes)."""
    org = state.stream_id.split("/", 1)[0]
    for item in state.items.values():
        # An item pickled whole has the field of before (``key``); one from a row holds the
        # plain key where ``key_hash`` is now.
        plain = item.__dict__.pop("key", None) or item.__dict__.get("key_hash")
        item.key_hash = master.key_hash(org, plain) if plain is not None else None
        item.__dict__.setdefault("labels", None)
    state.keyed = state.held = state.live = None
    state.stored = state.touched = None  # the next checkpoint stores every item
