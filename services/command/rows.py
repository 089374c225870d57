"""A stream's decision state as a checkpoint stores it: a header (the state without its
items) and each item as a row of plain values, only the items changed since the last
checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import Any

from contracts.events import Sealed
from services.command.state import Item, Revision, StreamState

# An item as plain values, the form a checkpoint stores (``changed_rows``, ``from_rows``).
ItemRow = tuple[Any, ...]
SealedRow = tuple[str, str, str]  # key_id, nonce, ciphertext

# A checkpoint stores a stream's state without its items (a header) and each item as a row
# of plain values, and only the items changed since the last checkpoint
# (``StreamState.touched``, filled by ``evolve``). Pickling every item of every changed
# stream at each checkpoint cost about 5 ms a thousand items, however few had changed, and
# wrote them all to Postgres again.


@dataclass(frozen=True)
class ChangedRows:
    """A stream's item rows a checkpoint stores: ``new`` with their place in ``items``,
    ``changed`` already stored (they keep their place)."""

    new: list[tuple[int, ItemRow]]
    changed: list[ItemRow]


def changed_rows(state: StreamState) -> ChangedRows:
    """The items to store at a checkpoint: all of them the first time, then only those
    new or changed since the last call."""
    stored, touched = state.stored, state.touched
    if stored is None or touched is None:
        rows = ChangedRows([(n, _item_row(i)) for n, i in enumerate(state.items.values())], [])
    else:
        # Items are only ever added (a forgotten one stays, as a tombstone): the new ones
        # are the last, in their order.
        fresh = list(islice(reversed(state.items), len(state.items) - stored))[::-1]
        new_ids = set(fresh)
        rows = ChangedRows(
            [(stored + n, _item_row(state.items[item_id])) for n, item_id in enumerate(fresh)],
            [
                _item_row(state.items[item_id])
                for item_id in sorted(touched - new_ids)
                if item_id in state.items
            ],
        )
    state.stored, state.touched = len(state.items), set()
    return rows


# A kept answer as a checkpoint stores it: (command id, its answer, the digest a repeat is
# held to, if any), in a run of answers from a place in the order of ``StreamState.results``
# (``answers_made`` counts the places).
AnswerRow = tuple[str, dict[str, Any], bytes | None]


@dataclass(frozen=True)
class ChangedAnswers:
    """A stream's answers a checkpoint stores, as one run: ``rows`` from place ``first``
    on (none: nothing changed), and the place below which no answer is kept any more (a
    stored run wholly below it goes). ``whole``: the run is every kept answer, and any
    other run stored for the stream goes."""

    first: int
    rows: list[AnswerRow]
    below: int
    whole: bool


def changed_answers(state: StreamState) -> ChangedAnswers:
    """The answers to store at a checkpoint: all of them the first time, then those new or
    changed since the last call, as one run from the oldest of them to the newest answer.
    Answers join at the newest end and leave from the oldest, so the run is what the
    stream answered since. Storing every kept answer of every changed stream in its header
    at each checkpoint (as before) rewrote up to ``ANSWERS_KEPT`` of them for a stream that
    had taken one command: 0.7 ms and 140 KB a stream; one answer a row instead cost
    Postgres more than that did in the sustained benchmark."""
    results, digests = state.results, state.fingerprints or {}
    below = state.answers_made - len(results)
    answered, state.answered = state.answered, set()
    if answered is None:
        start = 0
    elif not (wanted := answered & results.keys()):
        return ChangedAnswers(below, [], below, False)
    else:  # a walk back from the newest finds them; it stops when it has them all
        start = len(results)
        for command_id in reversed(results):
            start -= 1
            wanted.discard(command_id)
            if not wanted:
                break
    run = [
        (command_id, answer, digests.get(command_id))
        for command_id, answer in islice(results.items(), start, None)
    ]
    return ChangedAnswers(below + start, run, below, answered is None)


def with_answers(
    header: StreamState, runs: list[tuple[int, list[AnswerRow]]], kept: int
) -> StreamState:
    """A stream's state from its checkpoint's header (its state without answers, which
    counts them: ``answers_made``) with its ``kept`` newest answers and their digests,
    from the stored runs (each from its first place; of two that overlap, the one that
    starts later was stored later, and its answers stand)."""
    by_place: dict[int, AnswerRow] = {}
    for first, rows in sorted(runs, key=lambda run: run[0]):
        by_place.update(enumerate(rows, first))
    places = range(header.answers_made - kept, header.answers_made)
    rows = [by_place[n] for n in places if n in by_place]
    header.results = {command_id: answer for command_id, answer, _ in rows}
    digests = {command_id: digest for command_id, _, digest in rows if digest is not None}
    header.fingerprints = digests or None
    header.answered = set()
    return header


def from_rows(header: StreamState, rows: list[ItemRow]) -> StreamState:
    """A stream's state from its checkpoint: ``header`` (its state without items) and
    its items' rows, in their order."""
    header.items = {row[0]: _item_of(row) for row in rows}
    header.stored = len(rows)
    header.touched = set()
    return header


def _item_row(item: Item) -> ItemRow:
    revisions = tuple(
        (n, _sealed_row(r.content), _sealed_row(r.title), r.content_hash, r.content_length)
        for n, r in item.revisions.items()
    )
    return (
        item.item_id,
        item.kind,
        item.status,
        item.revision,
        item.pinned,
        item.key_hash,
        item.confirmed,
        revisions,
        item.expires_at,
        item.last_change,
        dict(item.links) if item.links is not None else None,
        item.author,
        item.retired_hashes,
        item.replaces,
        _sealed_row(item.labels),
        item.archived_from,
    )


def _item_of(row: ItemRow) -> Item:
    (item_id, kind, status, revision, pinned, key_hash, confirmed, revisions, *rest) = row
    expires_at, last_change, links, author, retired_hashes, replaces, *tail = rest
    labels = tail[:1]  # rows of before labels were sealed have none
    archived_from = tail[1] if len(tail) > 1 else None  # nor what an archive came from
    return Item(
        item_id=item_id,
        kind=kind,
        status=status,
        revision=revision,
        pinned=pinned,
        key_hash=key_hash,
        confirmed=confirmed,
        revisions={
            n: Revision(_sealed_of(content), title and _sealed_of(title), content_hash, length)
            for n, content, title, content_hash, length in revisions
        },
        expires_at=expires_at,
        last_change=last_change,
        links=dict(links) if links is not None else None,
        author=author,
        retired_hashes=retired_hashes,
        replaces=replaces,
        labels=_sealed_of(labels[0]) if labels and labels[0] is not None else None,
        archived_from=archived_from,
    )


def _sealed_row(sealed: Sealed | None) -> SealedRow | None:
    return None if sealed is None else (sealed.key_id, sealed.nonce, sealed.ciphertext)


def _sealed_of(row: SealedRow) -> Sealed:
    # Written by this writer from validated events: no need to validate again.
    return Sealed.model_construct(key_id=row[0], nonce=row[1], ciphertext=row[2])
