"""A checkpoint's rows as Postgres stores them: each changed stream's header and its new
and changed items, pickled (``rows_to_save``), and read back into states
(``states_from_rows``) only through ``loads``, which refuses any class a checkpoint does not
hold. Rows of every format before this one still load."""

from __future__ import annotations

import dataclasses
import io
import pickle
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from engram.crypto import MasterKey
from services.command.rows import changed_rows, from_rows
from services.command.state import StreamState

States = dict[str, StreamState]
# A stream's row: (ROW_FORMAT, its state without items); its items are rows of
# command.stream_items. Rows of before still load: the pickled StreamState itself,
# (2, the state without items, every item's row), and format 3, whose items kept their
# key in plain where format 4 keeps its keyed hash (``hash_keys``).
ROW_FORMAT = 4
ItemRecord = tuple[str, str, int, bytes]  # stream_id, item_id, position, pickled row
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
    their place) and their changed items."""

    headers: list[tuple[int, str, bytes]] = field(default_factory=list)
    new: list[ItemRecord] = field(default_factory=list)
    changed: list[tuple[str, str, bytes]] = field(default_factory=list)


def rows_to_save(partition: int, states: States, dirty: set[str]) -> CheckpointRows:
    """What a checkpoint of the ``dirty`` streams writes."""
    rows = CheckpointRows()
    for stream_id in sorted(dirty):
        if (state := states.get(stream_id)) is None:
            continue
        header = dataclasses.replace(
            state, items={}, stored=None, touched=None, keyed=None, held=None, live=None
        )
        rows.headers.append(
            (partition, stream_id, pickle.dumps((ROW_FORMAT, header), pickle.HIGHEST_PROTOCOL))
        )
        items = changed_rows(state)
        rows.new += [(stream_id, row[0], n, _pickled(row)) for n, row in items.new]
        rows.changed += [(stream_id, row[0], _pickled(row)) for row in items.changed]
    return rows


def _pickled(row: tuple[Any, ...]) -> bytes:
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
    headers: list[asyncpg.Record], items: list[asyncpg.Record], master: MasterKey
) -> States:
    """The streams of these header rows, each with its item rows (in their order)."""
    rows: dict[str, list[Any]] = {}
    for record in items:
        rows.setdefault(record["stream_id"], []).append(loads(record["item"]))
    return {
        r["stream_id"]: stream_of(loads(r["state"]), rows.get(r["stream_id"], []), master)
        for r in headers
    }


def stream_of(stored: Any, rows: list[Any], master: MasterKey) -> StreamState:
    """A stream from its header row's value and its item rows', in whichever format."""
    if isinstance(stored, StreamState):  # a row of before item rows: the whole state
        state = stored
    elif stored[0] == 2:  # (2, header, every item's row), none in command.stream_items
        state = from_rows(stored[1], stored[2])
    else:
        state = from_rows(stored[1], rows)
        if stored[0] == ROW_FORMAT:
            return state
    hash_keys(state, master)
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
