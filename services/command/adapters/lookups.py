"""What a batch's decisions need from outside their streams, read before deciding, in a
few round trips per batch: the targets of links into other streams, each org's limits
(revision retention, the cap on a run's candidates), and the source memories of a
promotion or a fork. ``decide`` gets them through its ``Context``, as it gets the time
and ids.

Targets and sources come from the read model, which trails the log: a source is read
once the projector holds what its partition held when the batch came (``projection``),
and a target not found is looked for again once it holds every partition's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from contracts.envelope import CommandEnvelope
from contracts.text import NUL
from contracts.topics import partition_for, stream_id
from engram.auth import AuthError, Principal, ScopeError, TokenVerifier
from services.command.adapters.copies import CopySources
from services.command.adapters.policies import OrgLimits, OrgPolicies
from services.command.adapters.projection import ProjectionWatch
from services.command.adapters.targets import LinkTargets, Target
from services.command.context import Copy
from services.command.state import StreamState

MAX_ID = 64  # an item id, as commands take it
CommandKey = tuple[str, str]  # (stream_id, command_id): a command id is its caller's


def ids_in(value: object) -> list[str]:
    """The ids a raw payload field names, as its validated command will (stripped), less
    any no item could have (not text, empty, over 64 characters, holding a NUL): a lookup
    runs before the command is validated, and must not trip on what validation refuses."""
    values = value if isinstance(value, list | tuple) else [value]
    ids = [v.strip() for v in values if isinstance(v, str)]
    return [i for i in ids if 0 < len(i) <= MAX_ID and NUL not in i]


def command_key(env: CommandEnvelope) -> CommandKey:
    """What tells a batch's commands apart: the same command id may come in two streams."""
    return env.stream_id, env.command_id


@dataclass(frozen=True)
class Lookups:
    targets: dict[str, Target] = field(default_factory=dict)
    limits: dict[str, OrgLimits] = field(default_factory=dict)  # by org
    copies: dict[CommandKey, tuple[Copy, ...]] = field(default_factory=dict)
    # Commands whose source the projector had not caught up with in time.
    unready: frozenset[CommandKey] = frozenset()
    sources: dict[CommandKey, str] = field(default_factory=dict)  # each copy's stream
    moves: frozenset[CommandKey] = frozenset()  # whose one memory is read in any status

    def live_copies(self, key: CommandKey, states: Mapping[str, StreamState]) -> tuple[Copy, ...]:
        """A command's copies as its source stream (when this writer holds it) has them
        now: a forget or an archive earlier in the same batch never lets the text be
        copied, and a disable or an enable since the read holds for the copy."""
        copies = self.copies.get(key, ())
        source = states.get(self.sources.get(key, ""))
        if source is None:
            return copies
        now = ((c, source.items.get(c.item_id)) for c in copies)
        return tuple(
            c if i is None else replace(c, revision=i.revision, status=i.status)
            for c, i in now
            if i is None or i.status == "active" or i.retracted or key in self.moves
        )


@dataclass(frozen=True)
class BatchLookups:
    verifier: TokenVerifier
    targets: LinkTargets | None = None
    policies: OrgPolicies | None = None
    sources: CopySources | None = None
    projection: ProjectionWatch | None = None
    partitions: int = 1  # of engram.events: where each source stream's events are

    async def gather(
        self,
        envelopes: Iterable[CommandEnvelope],
        states: Mapping[str, StreamState],
        appended_at: Mapping[CommandKey, float | None] | None = None,
    ) -> Lookups:
        """``appended_at``: by command, the time each command's token must hold at, as
        the writer checks it (None or missing: now)."""
        envelopes = list(envelopes)
        copies, unready, sources = await self._copies(envelopes, appended_at or {})
        return Lookups(
            await self._targets(envelopes, states),
            await self._limits(envelopes),
            copies,
            unready,
            sources,
            frozenset(command_key(e) for e in envelopes if e.type == "MoveMemory"),
        )

    async def _targets(
        self, envelopes: list[CommandEnvelope], states: Mapping[str, StreamState]
    ) -> dict[str, Target]:
        """The memories of other streams that the batch's commands link to."""
        if self.targets is None:
            return {}
        wanted: set[str] = set()
        for env in envelopes:
            ids = ids_in(env.payload.get("related_ids"))
            if env.type == "LinkMemory":
                ids = ids_in(env.payload.get("target_id"))
            state = states.get(env.stream_id)
            wanted |= {i for i in ids if not (state and i in state.items)}
        found = await self.targets.find(wanted)
        missing = wanted - found.keys()
        # Saved a moment ago in another stream, perhaps: looked for again once the
        # projector holds every partition's events (else it is not there: refused).
        if (
            missing
            and self.projection is not None
            and await self.projection.caught_up(range(self.partitions))
        ):
            found |= await self.targets.find(missing)
        return found

    async def _limits(self, envelopes: list[CommandEnvelope]) -> dict[str, OrgLimits]:
        """The limits of each org in the batch."""
        if self.policies is None:
            return {}
        return await self.policies.limits({e.stream_id.split("/", 1)[0] for e in envelopes})

    async def _copies(
        self, envelopes: list[CommandEnvelope], appended_at: Mapping[CommandKey, float | None]
    ) -> tuple[dict[CommandKey, tuple[Copy, ...]], frozenset[CommandKey], dict[CommandKey, str]]:
        """The source memories of each promotion (the token's session), fork (the
        session the token's session forks) and move (its one memory, in the scope it
        moves from), and the commands whose source the projector had not caught up with
        in time. A token that grants no source finds none; the command is then refused
        when it is decided."""
        if self.sources is None:
            return {}, frozenset(), {}
        wanted: dict[CommandKey, tuple[str, str | None]] = {}  # source stream, a move's item
        for env in envelopes:
            if env.type in ("PromoteSession", "ForkSession", "MoveMemory"):
                source = self._source(env, appended_at.get(command_key(env)))
                item = env.payload.get("item_id") if env.type == "MoveMemory" else None
                if source is not None and (env.type != "MoveMemory" or isinstance(item, str)):
                    wanted[command_key(env)] = (source, item)
        sources = {key: source for key, (source, _) in wanted.items()}
        if wanted and self.projection is not None:
            where = {partition_for(s, self.partitions) for s in sources.values()}
            if not await self.projection.caught_up(where):
                return {}, frozenset(wanted), sources
        found = await self.sources.copyable({s for s, item in wanted.values() if item is None})
        copies = {
            key: found[source] if item is None else await self.sources.one(source, item)
            for key, (source, item) in wanted.items()
        }
        return copies, frozenset(), sources

    def _source(self, env: CommandEnvelope, at: float | None) -> str | None:
        try:
            principal: Principal = self.verifier.verify(env.token, at=at)
            if env.type == "PromoteSession":
                return principal.stream("session")
            if env.type == "MoveMemory":
                choice = env.payload.get("from_scope", "private")
                return principal.stream(choice) if isinstance(choice, str) else None
        except (AuthError, ScopeError):
            return None
        return (
            stream_id(principal.org, f"session:{principal.fork_of}") if principal.fork_of else None
        )
