"""Pure extraction core: candidates -> checked, capped -> RememberMemory proposals.

No I/O. Time and the method used are passed in, so the same turn always turns
into the same commands with the same ids: a turn read twice (a replay, a
publisher's retry, a crash before the offset was stored) proposes nothing twice,
because the writer answers a repeated ``command_id`` with its first reply.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple

from pydantic import ValidationError

from contracts.commands import LASTING_KINDS, MAX_CONTENT, Kind, RememberMemory
from contracts.conversations import ConversationTurn
from contracts.envelope import CommandEnvelope
from engram.ids import name_id
from services.extractor.access import gives_access

MAX_CANDIDATES = 5
MIN_EVIDENCE_WORDS = 2
# Never change: command ids (and so item ids) of proposals derive from it.
NAMESPACE = uuid.UUID("6f1c3a52-8a0e-4c47-9d59-2f0d7b1e5a11")

# How a turn was handled, as recorded per turn. "rules-fallback": the AI failed
# for good and the rules stood in (the turn is also dead-lettered, for the record).
Method = Literal["rules", "ai", "rules-fallback"]

QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00ab": '"', "\u00bb": '"'}
)
WORD = re.compile(r"\w+")


# The scopes whose memory is one person's: a candidate's key is kept there only. Elsewhere
# two members' "my dentist" would be one key, and confirming Bob's would archive Ana's.
ONE_PERSONS = frozenset({"private", "session"})


@dataclass(frozen=True)
class Candidate:
    """One proposed memory and the words of the user's message it rests on."""

    content: str
    kind: Kind
    evidence: str
    # The fact's name ("my dentist"), the same for the same fact in any later message: a
    # person's confirm of a new value then archives the old one (seed 002: one change per
    # key). None: a fact with no name the rules or the model could give.
    key: str | None = None


def normalise(text: str) -> str:
    """Compare text as a reader would: same quotes, case and spacing."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(QUOTES).casefold().split())


def evidence_ok(evidence: str, message: str) -> bool:
    """The quote appears in the user's message (seed 000); a word or two proves nothing."""
    return _grounded(evidence, normalise(message))


def _grounded(evidence: str, normalised_message: str) -> bool:
    quote = normalise(evidence).strip(" \"'.,;:!?")
    return len(WORD.findall(quote)) >= MIN_EVIDENCE_WORDS and quote in normalised_message


# Candidates looked at for one turn, at most: five are kept, and a turn of thousands of
# short sentences must not hold the extractor (QA: one of 20,000 characters took 3 s).
MAX_CONSIDERED = 100


def select(candidates: Iterable[Candidate], message: str) -> list[Candidate]:
    """Keep grounded, harmless, distinct candidates, at most five, in the order given,
    from the first ``MAX_CONSIDERED``."""
    kept: list[Candidate] = []
    seen: set[str] = set()
    normalised = normalise(message)  # once a turn, not once a candidate (QA)
    for n, candidate in enumerate(candidates):
        if n == MAX_CONSIDERED:
            break
        key = normalise(candidate.content)
        if key in seen or not _acceptable(candidate, normalised):
            continue
        seen.add(key)
        kept.append(candidate)
        if len(kept) == MAX_CANDIDATES:
            break
    return kept


def _acceptable(candidate: Candidate, normalised_message: str) -> bool:
    text = candidate.content
    return (
        0 < len(text) <= MAX_CONTENT
        and _grounded(candidate.evidence, normalised_message)
        and not gives_access(text)
        and not gives_access(candidate.evidence)
        and follows_from(text, candidate.evidence)
    )


def follows_from(content: str, evidence: str) -> bool:
    """The content says what its evidence says: half its words (of three letters or more)
    are the evidence's (QA: a model's "The user's wife has cancer." passed on the evidence
    "I prefer tea", which the message held)."""
    words = {w for w in WORD.findall(normalise(content)) if len(w) >= 3}
    said = set(WORD.findall(normalise(evidence)))
    return not words or 2 * len(words & said) >= len(words)


class TurnKey(NamedTuple):
    """A turn as handled once (extractor.turns): the same id from another author or
    into another stream is another turn."""

    org: str
    turn_id: str
    stream_id: str
    author: str


def author(member: str, agent: str | None = None, session: str | None = None) -> str:
    """Who published a turn, as its token names them (one canonical string).

    A turn id is its caller's (per run or per member), so the same id from another
    member, agent or session is another turn: turns are told apart by stream and author.
    """
    named = {"member": member, "agent": agent, "session": session}
    return json.dumps({k: v for k, v in named.items() if v is not None}, separators=(",", ":"))


def command_id(stream_id: str, author: str, turn_id: str, method: Method, index: int) -> str:
    """Stable per turn and position; AI and rule proposals never share an id. The author
    is part of it: two members' "turn-1" in the shared stream must not share ids, or the
    writer would answer the second with the first's reply."""
    family = "ai" if method == "ai" else "rules"
    name = f"{stream_id}\x1f{author}\x1f{turn_id}\x1f{family}\x1f{index}"
    return name_id(NAMESPACE, name)


def proposal(turn: ConversationTurn, candidate: Candidate, method: Method) -> RememberMemory:
    # candidate=True: extraction only ever proposes; a person confirms (DESIGN §4).
    return RememberMemory(
        scope=turn.scope,
        content=candidate.content,
        kind=candidate.kind,
        key=candidate.key if turn.scope in ONE_PERSONS else None,
        tags=("extracted", "ai" if method == "ai" else "rules"),
        sources=tuple(dict.fromkeys((turn.turn_id, *turn.sources))),
        user_message=turn.user_message,
        candidate=True,
        extracted=True,
    )


def proposals(
    turn: ConversationTurn,
    key: TurnKey,
    method: Method,
    candidates: list[Candidate],
    now: datetime,
) -> list[CommandEnvelope]:
    """The command envelopes for a turn, acting with the turn's own token."""
    envelopes = []
    for index, candidate in enumerate(candidates):
        if turn.scope == "agent" and candidate.kind not in LASTING_KINDS:
            # Seed 002: an agent's memory keeps only lasting experience; facts of one task
            # stay in the session's (a seed coverage audit).
            continue
        try:
            command = proposal(turn, candidate, method)
        except ValidationError:  # a model's text no command takes (a NUL, say): dropped
            continue
        envelopes.append(
            CommandEnvelope(
                command_id=command_id(key.stream_id, key.author, key.turn_id, method, index),
                type="RememberMemory",
                token=turn.token,
                stream_id=key.stream_id,
                issued_at=now,
                # The same payload shape the HTTP route sends: defaults left out, scope kept.
                payload=command.model_dump(mode="json", exclude_defaults=True)
                | {"scope": command.scope},
            )
        )
    return envelopes


def backoff_delay(
    retry: int, base: float, cap: float, retry_after: float | None, jitter: float
) -> float:
    """Exponential backoff with jitter in [50%, 100%], never sooner than the server asked."""
    exponential = min(cap, base * 2**retry) * (0.5 + jitter / 2)
    return min(cap, max(exponential, retry_after or 0.0))
