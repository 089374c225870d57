"""The writer's decision state for one stream, folded from events by ``evolve``.

It keeps sealed text (never plaintext), so a restore or an undo can re-emit an
earlier revision without decrypting it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
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
    ProposalStatus,
    RevisionsPruned,
    Sealed,
    Status,
)
from services.command.context import new_item_id

LinkKey = tuple[str, str]  # (target_id, kind)
# An item as plain values, the form a checkpoint stores (``changed_rows``, ``from_rows``).
ItemRow = tuple[Any, ...]
SealedRow = tuple[str, str, str]  # key_id, nonce, ciphertext

# A stream keeps the first answers of its last this-many commands, so a retry gets its
# first answer again. An older save is still known by its item, whose id derives from the
# command id (``StreamState.first_answer``), so it is never saved twice.
ANSWERS_KEPT = 1_000
# A kept answer names at most this many of its command's forgotten memories (a clear's
# receipt on a retry; the first answer names them all).
RECEIPT_KEPT = 1_000
# A stream counts the candidates of its last this-many runs (the org's cap per run).
RUNS_KEPT = 1_000


@dataclass(frozen=True)
class Revision:
    content: Sealed
    title: Sealed | None
    content_hash: str
    content_length: int


@dataclass
class Item:
    item_id: str
    kind: str
    status: Status
    revision: int
    pinned: bool
    # The keyed hash of its key (``MasterKey.key_hash``): the key itself is sealed, in
    # ``labels``, and the writer keeps no plaintext.
    key_hash: str | None
    # A confirmed fact: active once, and not only as an inference (``MemoryRemembered.
    # inferred``) that no person or asked-for save has revised or brought back since.
    confirmed: bool
    revisions: dict[int, Revision] = field(default_factory=dict)
    expires_at: datetime | None = None
    # What the last change did, so that Undo can reverse exactly that.
    last_change: tuple[str, Any] | None = None
    # Outgoing links and their weights; None until the first. (A class-level default, so
    # an item unpickled from a checkpoint written before links existed reads None too.)
    links: dict[LinkKey, float | None] | None = None
    # The member who saved it (None: saved before authors were recorded).
    author: str | None = None
    # Content hashes of revisions the org's retention dropped (None: none dropped).
    retired_hashes: frozenset[str] | None = None
    # A candidate's: the memory an agent's correction proposed it for, which its confirm
    # archives (None: none, or a candidate from a checkpoint written before this).
    replaces: str | None = None
    # Its key, tags and sources, sealed as its event carries them (None: none, or saved
    # before labels were sealed): a correction's candidate takes its key.
    labels: Sealed | None = None
    # What an archived memory was before its archive (None: not archived, or archived
    # before this was kept): one a person had disabled stays a person's to bring back.
    archived_from: Status | None = None

    @property
    def current(self) -> Revision:
        return self.revisions[self.revision]

    @property
    def retracted(self) -> bool:
        """Disabled (seed 002's retracted), or archived since it was."""
        return self.status == "disabled" or (
            self.status == "archived" and self.archived_from == "disabled"
        )


@dataclass
class Proposal:
    item_id: str
    change: str
    base_revision: int
    proposer: str
    proposed_at: datetime
    status: ProposalStatus = "pending"
    content: Revision | None = None  # a correction's sealed text
    superseded_by: str | None = None
    kind: str | None = None  # a relabel's new kind
    tags: Sealed | None = None  # a relabel's new tags, a sealed JSON list


@dataclass
class StreamState:
    stream_id: str
    seq: int = 0
    generation: int = 0
    items: dict[str, Item] = field(default_factory=dict)
    forgotten_hashes: set[str] = field(default_factory=set)
    # command_id -> the first answer, so a repeated command gets it again: the last
    # ANSWERS_KEPT commands', oldest first.
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The items that have held links, so a forget finds the links to it without a scan
    # (None until the first link, as Item.links).
    linked: set[str] | None = None
    # Proposals by id (None until the first, as Item.links).
    proposals: dict[str, Proposal] | None = None
    # run_id -> the candidates that run proposed here, its last RUNS_KEPT runs, oldest
    # first (None until the first, as Item.links).
    run_candidates: dict[str, int] | None = None
    # command_id -> a digest of the command as first decided, kept as long as its answer
    # (None until the first, as Item.links). A repeat that differs is another request
    # under a used id, and is refused. Events do not carry it: a command decided after
    # the last checkpoint is known after a restore by its answer only.
    fingerprints: dict[str, bytes] | None = None
    # How many of ``items`` (the first, in order) the checkpoint stores, and the items
    # changed since it (both None until a checkpoint stored them all or a load from one:
    # ``changed_rows``). Not part of the state: compared by nothing, stored by no header.
    stored: int | None = field(default=None, compare=False, repr=False)
    touched: set[str] | None = field(default=None, compare=False, repr=False)
    # key hash -> the items saved under it, in the order of ``items`` (None until the first
    # use; a cache, as ``stored``): a keyed save finds the key's holder without a scan,
    # which cost a keyed save about 0.6 ms in a stream of 10,000 memories.
    keyed: dict[str, list[str]] | None = field(default=None, compare=False, repr=False)
    # content hash -> the items whose text has held it, in the order of ``items`` (None
    # until the first candidate; a cache, as ``keyed``): a candidate of text the stream
    # holds is refused without a scan.
    held: dict[str, list[str]] | None = field(default=None, compare=False, repr=False)
    # How many of ``items`` are not forgotten (None until the first use under a quota; a
    # cache, as ``keyed``).
    live: int | None = field(default=None, compare=False, repr=False)

    def candidates_of(self, run_id: str) -> int:
        return (self.run_candidates or {}).get(run_id, 0)

    def first_answer(self, command_id: str) -> dict[str, Any] | None:
        """What a repeat of this command is answered with, if the stream decided it: its
        first answer while kept, else (a save older than that) its item as it is now."""
        if (first := self.results.get(command_id)) is not None:
            return first
        if (item := self.items.get(new_item_id(self.stream_id, command_id))) is not None:
            return {"item_id": item.item_id, "revision": item.revision, "status": item.status}
        return None

    def record_fingerprint(self, command_id: str, digest: bytes) -> None:
        if command_id in self.results:  # it was answered (it wrote events)
            self.fingerprints = kept = self.fingerprints or {}
            kept[command_id] = digest
            while next(iter(kept)) not in self.results:  # the oldest lost their answers
                del kept[next(iter(kept))]

    def record_answer(self, command_id: str, answer: dict[str, Any]) -> None:
        """Keep the answer of a command that wrote no events (a change that changed
        nothing), so that its retry gets it instead of being decided again, maybe to
        another effect. No event holds it: after a restart it is known only if decided
        before the last checkpoint."""
        self.results[command_id] = {
            k: v for k, v in answer.items() if k not in ("stream_id", "receipt")
        }
        _keep_newest(self.results, ANSWERS_KEPT)

    def fingerprint_of(self, command_id: str) -> bytes | None:
        """The digest a repeat of this command is held to, while its answer is kept. (After
        a restore a stream holds fewer digests than answers: the commands decided after the
        checkpoint have none. Kept by count, the oldest digests outlived their answers, and
        whether a repeat was refused hung on when the service last restarted.)"""
        if command_id not in self.results:
            return None
        return (self.fingerprints or {}).get(command_id)

    def active_by_key(self, key_hash: str) -> Item | None:
        """The active memory that holds the key of this keyed hash, if one does."""
        return next((i for i in self._by_key(key_hash) if i.status == "active"), None)

    def retracted_key(self, key_hash: str) -> bool:
        """Whether the key's fact is retracted: a disabled memory holds it (archived since,
        too), an active one does not (seed 002: a retracted fact stays retracted until a
        person brings it back)."""
        held = self._by_key(key_hash)
        return any(i.retracted for i in held) and all(i.status != "active" for i in held)

    def retracts(self, key_hash: str | None, digest: str) -> bool:
        """Whether a save of this key (if any) and text would bring a retracted fact back:
        its key's, or its very text's (seed 002: a person's to do)."""
        return bool(key_hash and self.retracted_key(key_hash)) or self.retracted_text(digest)

    def retracted_text(self, digest: str) -> bool:
        """Whether a retracted memory (``Item.retracted``) holds this text, the hash of its
        current revision (QA: an agent's save of the text without its key brought it
        back). A scan of the stream: only an agent's save, correction or promotion asks,
        never a person's."""
        return any(i.retracted and i.current.content_hash == digest for i in self.items.values())

    def _by_key(self, key_hash: str) -> list[Item]:
        if self.keyed is None:
            self.keyed = {}
            for item in self.items.values():
                if item.key_hash is not None:
                    self.keyed.setdefault(item.key_hash, []).append(item.item_id)
        return [self.items[item_id] for item_id in self.keyed.get(key_hash, ())]

    def memories(self) -> int:
        """How many memories the stream holds: all but the forgotten (a quota counts them)."""
        if self.live is None:
            self.live = sum(1 for item in self.items.values() if item.status != "forgotten")
        return self.live

    def holding(
        self, digest: str, now: datetime, statuses: tuple[str, ...] = ("active", "candidate")
    ) -> Item | None:
        """The active memory or candidate (of ``statuses``) whose current text has this
        hash, if one does and has not expired (an expired memory holds its text no longer,
        as a copy reads it)."""
        if self.held is None:
            self.held = {}
            for item in self.items.values():
                for revision in item.revisions.values():
                    _hold(self.held, revision.content_hash, item.item_id)
        for item_id in self.held.get(digest, ()):
            item = self.items[item_id]
            if (
                item.status in statuses
                and item.current.content_hash == digest
                and (item.expires_at is None or item.expires_at > now)
            ):
                return item
        return None


def _hold(held: dict[str, list[str]], digest: str, item_id: str) -> None:
    holders = held.setdefault(digest, [])
    if item_id not in holders[-1:]:
        holders.append(item_id)


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
        state.results[command_id].update(seq=seq, generation=state.generation)
        return
    item = state.items[event.item_id]
    # Several events of one command: the answer is the state after the last, with the
    # stream's version and generation then and the memories it forgot (its receipt).
    erased = (state.results.get(command_id) or {}).get("erased")
    if isinstance(event, MemoryForgotten):
        erased = erased if erased is not None else []
        if len(erased) < RECEIPT_KEPT:
            erased.append({"item_id": event.item_id, "revisions": event.revisions})
    state.results[command_id] = {
        "item_id": item.item_id,
        "revision": item.revision,
        "status": item.status,
        "seq": seq,
        "generation": state.generation,
        **({"erased": erased} if erased is not None else {}),
    }
    if isinstance(event, ChangeProposed | ProposalResolved):
        proposal = (state.proposals or {})[event.proposal_id]
        state.results[command_id].update(
            proposal_id=event.proposal_id, proposal_status=proposal.status
        )
    _keep_newest(state.results, ANSWERS_KEPT)


def _keep_newest(entries: dict[str, Any], kept: int) -> None:
    """Drop the oldest entries (a dict keeps insertion order) beyond ``kept``."""
    while len(entries) > kept:
        del entries[next(iter(entries))]


def _remembered(state: StreamState, e: MemoryRemembered) -> None:
    if e.item_id in state.items:  # saved again under its id (not by this writer)
        state.keyed = state.held = state.live = None  # rebuilt at their next use
    else:
        if state.live is not None:
            state.live += 1
        if e.key_hash is not None and state.keyed is not None:
            state.keyed.setdefault(e.key_hash, []).append(e.item_id)
        if state.held is not None:
            _hold(state.held, e.content_hash, e.item_id)
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
        if state.run_candidates is None:
            state.run_candidates = {}
        runs = state.run_candidates
        runs[e.run_id] = runs.pop(e.run_id, 0) + 1  # the run moves to the newest end
        _keep_newest(runs, RUNS_KEPT)


def _revised(state: StreamState, e: MemoryRevised) -> None:
    item = state.items[e.item_id]
    item.revisions[e.revision] = Revision(e.content, e.title, e.content_hash, e.content_length)
    if state.held is not None:
        _hold(state.held, e.content_hash, item.item_id)
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


# --- checkpoint rows ------------------------------------------------------------------------
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
