"""The writer's decision state for one stream, folded from events by ``fold.evolve``
(and stored at checkpoints as ``rows``).

It keeps sealed text (never plaintext), so a restore or an undo can re-emit an
earlier revision without decrypting it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contracts.events import (
    ProposalStatus,
    Sealed,
    Status,
)
from services.command.context import new_item_id

LinkKey = tuple[str, str]  # (target_id, kind)

# A stream keeps the first answers of its last this-many commands, so a retry gets its
# first answer again. An older save is still known by its item, whose id derives from the
# command id (``StreamState.first_answer``), so it is never saved twice.
ANSWERS_KEPT = 1_000
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
    # How many commands the stream has kept an answer of, ever: an answer's place in the
    # order of ``results`` is ``answers_made - len(results)`` plus its index there, and a
    # checkpoint stores the answers in runs from their places (``rows.changed_answers``).
    # Bookkeeping for storage, as ``stored``: compared by nothing.
    answers_made: int = field(default=0, compare=False, repr=False)
    # The commands whose answers (or digests) are new or changed since the last checkpoint
    # (None: store every kept answer, as a new stream or one from a row of before answer
    # runs must; a cache, as ``touched``).
    answered: set[str] | None = field(default=None, compare=False, repr=False)

    def candidates_of(self, run_id: str) -> int:
        return (self.run_candidates or {}).get(run_id, 0)

    def count_candidate(self, run_id: str) -> None:
        """One more candidate of the run: it moves to the newest end, and only the last
        ``RUNS_KEPT`` runs are kept."""
        if self.run_candidates is None:
            self.run_candidates = {}
        runs = self.run_candidates
        runs[run_id] = runs.pop(run_id, 0) + 1
        keep_newest(runs, RUNS_KEPT)

    def keep_result(self, command_id: str, result: dict[str, Any]) -> None:
        """A command's answer as its events left the stream, its last ``ANSWERS_KEPT``. (A
        command of several events keeps the answer after each: a dict keeps the place of
        a key assigned again, so answers only ever join at the newest end.)"""
        if command_id not in self.results:
            self.answers_made += 1
        self.results[command_id] = result
        self._answered(command_id)
        keep_newest(self.results, ANSWERS_KEPT)
        if kept := self.fingerprints:
            while kept and next(iter(kept)) not in self.results:  # their answers went
                del kept[next(iter(kept))]
            self.fingerprints = kept or None  # as a row with no digests loads

    def update_result(self, command_id: str, **changes: Any) -> None:
        """Change a kept answer in place (a command's later event moved its figures)."""
        self.results[command_id].update(changes)
        self._answered(command_id)

    def _answered(self, command_id: str) -> None:
        if self.answered is not None:
            self.answered.add(command_id)

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
            self.fingerprints = self.fingerprints or {}
            self.fingerprints[command_id] = digest
            self._answered(command_id)

    def record_answer(self, command_id: str, answer: dict[str, Any]) -> None:
        """Keep the answer of a command that wrote no events (a change that changed
        nothing), so that its retry gets it instead of being decided again, maybe to
        another effect. No event holds it: after a restart it is known only if decided
        before the last checkpoint."""
        self.keep_result(
            command_id, {k: v for k, v in answer.items() if k not in ("stream_id", "receipt")}
        )

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
                    hold(self.held, revision.content_hash, item.item_id)
        for item_id in self.held.get(digest, ()):
            item = self.items[item_id]
            if (
                item.status in statuses
                and item.current.content_hash == digest
                and (item.expires_at is None or item.expires_at > now)
            ):
                return item
        return None


def hold(held: dict[str, list[str]], digest: str, item_id: str) -> None:
    holders = held.setdefault(digest, [])
    if item_id not in holders[-1:]:
        holders.append(item_id)


def keep_newest(entries: dict[str, Any], kept: int) -> None:
    """Drop the oldest entries (a dict keeps insertion order) beyond ``kept``."""
    while len(entries) > kept:
        del entries[next(iter(entries))]
