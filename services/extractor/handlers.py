"""The extractor's batch handlers: decode -> admit -> core -> publish, nothing else.

Both run inside the follower's transaction, so what they record (turns handled,
sources, suppressions) commits with the offset. Proposals are published before
that commit: a crash in between replays the turn, and its stable command ids
make the writer answer the repeats instead of proposing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from prometheus_client import Counter
from pydantic import ValidationError

from contracts import topics
from contracts.conversations import ConversationTurn
from contracts.envelope import EventEnvelope
from contracts.events import (
    Event,
    MemoryForgotten,
    MemoryRemembered,
    MemoryRevised,
    decode_event,
)
from engram.auth import AuthError, Principal, ScopeError, TokenVerifier
from engram.crypto import MasterKey
from engram.db import Connection
from engram.logging import get_logger
from engram.tracking import PoisonMessageError, TrackedFollower
from services.extractor.adapters import store
from services.extractor.adapters.ai import ChatExtractor
from services.extractor.adapters.commands import CommandPublisher
from services.extractor.core import Candidate, Method, TurnKey, author, proposals, select
from services.extractor.errors import AIFailed, BudgetExhausted, problem_text
from services.extractor.rules import rule_candidates
from services.extractor.watch import WATCHED, can_matter

log = get_logger(__name__)
PROPOSED = Counter("engram_extractor_proposals", "Candidates proposed", ["method"])
SKIPPED = Counter("engram_extractor_turns_skipped", "Turns not extracted", ["reason"])


class TurnExtractor:
    """Completed turns -> candidate RememberMemory commands, acting with the turn's token."""

    def __init__(
        self,
        verifier: TokenVerifier,
        publisher: CommandPublisher,
        ai: ChatExtractor | None,
        clock: Callable[[], datetime],
        master: MasterKey,
    ) -> None:
        self._verifier, self._publisher, self._ai, self._clock = verifier, publisher, ai, clock
        self._master = master
        self.follower: TrackedFollower | None = None  # set by the app (dead letters)

    async def handle_batch(self, conn: Connection, records: list[Any]) -> None:
        for record in records:
            await self._handle(conn, record)

    async def _handle(self, conn: Connection, record: Any) -> None:
        if topics.is_roll_marker(record.headers, record.value):
            return  # the pruner's own (engram/log_pruner.py): no turn
        try:
            turn, principal, stream = self._admit(record)
        except PoisonMessageError as exc:
            await _dead_letter(self.follower, record, str(exc))
            return
        key = TurnKey(principal.org, turn.turn_id, stream, _author_of(principal))
        if not await self._pending(conn, principal, turn, key):
            return
        method, candidates, failure = await self._extract(turn)
        envelopes = proposals(turn, key, method, candidates, self._clock())
        await self._publisher.publish(envelopes)
        await store.turn_done(conn, key, method, len(envelopes))
        PROPOSED.labels(method).inc(len(envelopes))
        log.info(
            "turn_extracted",
            turn_id=turn.turn_id,
            stream_id=stream,
            method=method,
            command_ids=[e.command_id for e in envelopes],
            partition=record.partition,
            offset=record.offset,
        )
        if failure:  # on record where operators look; the rules already stood in
            await _dead_letter(self.follower, record, failure)

    def _admit(self, record: Any) -> tuple[ConversationTurn, Principal, str]:
        """Decode the turn and resolve its stream from its token; anything else is poison."""
        try:
            turn = ConversationTurn.model_validate_json(record.value or b"")
        except ValidationError as exc:  # its fields and faults, never the user's words
            raise PoisonMessageError(f"undecodable conversation turn: {problem_text(exc)}") from exc
        try:
            principal = self._verifier.verify(turn.token)
            return turn, principal, principal.stream(turn.scope)
        except (AuthError, ScopeError) as exc:
            raise PoisonMessageError(f"turn {turn.turn_id} has no usable token: {exc}") from exc

    async def _pending(
        self,
        conn: Connection,
        principal: Principal,
        turn: ConversationTurn,
        key: TurnKey,
    ) -> bool:
        org = principal.org
        # Handled once, whatever the method: a turn read again (a replay, a repeated
        # publish, a re-drive of a fallback's dead letter) must not spend AI budget twice.
        if await store.turn_method(conn, key) is not None:
            return _skip("already_handled", turn)
        # An org whose memory is off learns nothing (seed 004's memory capability).
        if not await store.memory_on(conn, org):
            return _skip("memory_off", turn)
        # A session whose `generate` is off teaches nothing, its agent included (seed 002).
        if principal.session and not await store.generate_on(
            conn, org, principal.session, principal.fork_of
        ):
            return _skip("generate_off", turn)
        # An org whose agent memory is off teaches its agents nothing (seed 002).
        if turn.scope == "agent" and not await store.agent_memory_on(conn, org):
            return _skip("agent_memory_off", turn)
        # Forgetting an item suppresses extraction from the messages it came from, in its
        # own stream (source ids are the caller's, so may be per member).
        ids = looked_up(self._master, org, [turn.turn_id, *turn.sources])
        if await store.suppressed(conn, org, ids, key.stream_id):
            return _skip("suppressed", turn)
        return True

    async def _extract(self, turn: ConversationTurn) -> tuple[Method, list[Candidate], str | None]:
        """The AI's candidates when it is configured and answers, else the rules'."""
        message = turn.user_message
        if self._ai is None or not message.strip():
            return "rules", select(rule_candidates(message), message), None
        try:
            found = await self._ai.propose(message)
        except BudgetExhausted:
            return "rules", select(rule_candidates(message), message), None
        except AIFailed as exc:
            failure = f"AI extraction failed; rule-based proposals were made instead: {exc}"
            return "rules-fallback", select(rule_candidates(message), message), failure
        return "ai", select(found, message), None


class SourceRecorder:
    """engram.events -> which sources each item came from, suppressed once it is forgotten.

    Only keyed hashes of the sources and a flag are kept, never text nor the ids: the
    table outlives the forgotten item.
    """

    def __init__(self, master: MasterKey) -> None:
        self.follower: TrackedFollower | None = None  # set by the app (dead letters)
        self._master = master

    async def handle_batch(self, conn: Connection, records: list[Any]) -> None:
        for record in records:
            try:
                decoded = _watched_event(record)
            except PoisonMessageError as exc:
                await _dead_letter(self.follower, record, str(exc))
                continue
            if decoded is not None:
                await _record(conn, *decoded, self._master)


def _watched_event(record: Any) -> tuple[str, Event] | None:
    """(stream id, event) for the events that can matter here; None for every other."""
    raw = record.value or b""
    if not can_matter(raw):  # nearly every event, told without its full decode
        return None
    try:
        env, event = decode_event(raw)
    except (ValueError, KeyError) as exc:  # pydantic's ValidationError is a ValueError
        if _unwatched(raw):  # not this reader's to judge: the projector reports it
            return None
        raise PoisonMessageError(f"undecodable event: {problem_text(exc)}") from exc
    if env.type not in WATCHED:
        return None
    return env.stream_id, event


def _unwatched(raw: bytes) -> bool:
    """An envelope that decodes, of a type this reader does not watch."""
    try:
        return EventEnvelope.model_validate_json(raw).type not in WATCHED
    except ValueError:
        return False


async def _record(conn: Connection, stream: str, event: Event, master: MasterKey) -> None:
    org = stream.split("/", 1)[0]
    hashes: tuple[str, ...] = ()
    if isinstance(event, MemoryRemembered):
        # An event written before sources were sealed carries them in plain.
        hashes = event.source_hashes or tuple(master.source_hash(org, s) for s in event.sources)
    elif isinstance(event, MemoryRevised):  # a keyed save that brought sources
        hashes = event.source_hashes
    if hashes:  # in the item's stream: suppressed there once it is forgotten
        await store.record_sources(conn, org, list(hashes), event.item_id, stream)
    elif isinstance(event, MemoryForgotten) and event.moved_to is None:  # (QA: a move's did)
        await store.suppress_sources(conn, org, event.item_id)
        log.info("sources_suppressed", org=org, item_id=event.item_id)


async def _dead_letter(follower: TrackedFollower | None, record: Any, error: str) -> None:
    assert follower is not None, "the app wires the follower before it runs"
    await follower.dead_letter(record, error)


def _author_of(principal: Principal) -> str:
    """The turn's author: the member, agent and session its token names."""
    return author(principal.member, principal.agent, principal.session)


def _skip(reason: str, turn: ConversationTurn) -> bool:
    SKIPPED.labels(reason).inc()
    log.info("turn_skipped", reason=reason, turn_id=turn.turn_id)
    return False


def looked_up(master: MasterKey, org: str, ids: list[str]) -> list[str]:
    """What a turn's ids are looked up by in extractor.sources: their keyed hashes (004),
    and the ids themselves (a forgotten item's own id is kept as it is)."""
    return [*ids, *(master.source_hash(org, i) for i in ids)]
