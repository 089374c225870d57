"""What a batch's decisions need from outside their streams, read before deciding, in a
few round trips per batch: the targets of links into other streams, each org's limits
(revision retention, the cap on a run's candidates), and the source memories of a
promotion or a fork. ``decide`` gets them through its ``Context``, as it gets the time
and ids."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from contracts.envelope import CommandEnvelope
from contracts.topics import stream_id
from engram.auth import AuthError, Principal, ScopeError, TokenVerifier
from services.command.adapters.copies import CopySources
from services.command.adapters.policies import OrgLimits, OrgPolicies
from services.command.adapters.targets import LinkTargets, Target
from services.command.context import Copy
from services.command.state import StreamState


@dataclass(frozen=True)
class Lookups:
    targets: dict[str, Target] = field(default_factory=dict)
    limits: dict[str, OrgLimits] = field(default_factory=dict)  # by org
    copies: dict[str, tuple[Copy, ...]] = field(default_factory=dict)  # by command id


@dataclass(frozen=True)
class BatchLookups:
    verifier: TokenVerifier
    targets: LinkTargets | None = None
    policies: OrgPolicies | None = None
    sources: CopySources | None = None

    async def gather(
        self,
        envelopes: Iterable[CommandEnvelope],
        states: Mapping[str, StreamState],
        appended_at: Mapping[str, float | None] | None = None,
    ) -> Lookups:
        """``appended_at``: by command id, the time each command's token must hold at, as
        the writer checks it (None or missing: now)."""
        envelopes = list(envelopes)
        return Lookups(
            await self._targets(envelopes, states),
            await self._limits(envelopes),
            await self._copies(envelopes, appended_at or {}),
        )

    async def _targets(
        self, envelopes: list[CommandEnvelope], states: Mapping[str, StreamState]
    ) -> dict[str, Target]:
        """The memories of other streams that the batch's commands link to."""
        if self.targets is None:
            return {}
        wanted: set[str] = set()
        for env in envelopes:
            ids = env.payload.get("related_ids") or ()
            if env.type == "LinkMemory":
                ids = [env.payload.get("target_id")]
            state = states.get(env.stream_id)
            wanted |= {i for i in ids if isinstance(i, str) and not (state and i in state.items)}
        return await self.targets.find(wanted)

    async def _limits(self, envelopes: list[CommandEnvelope]) -> dict[str, OrgLimits]:
        """The limits of each org in the batch."""
        if self.policies is None:
            return {}
        return await self.policies.limits({e.stream_id.split("/", 1)[0] for e in envelopes})

    async def _copies(
        self, envelopes: list[CommandEnvelope], appended_at: Mapping[str, float | None]
    ) -> dict[str, tuple[Copy, ...]]:
        """The source memories of each promotion (the token's session) and fork (the
        session the token's session forks). A token that grants no source finds none; the
        command is then refused when it is decided."""
        if self.sources is None:
            return {}
        wanted: dict[str, str] = {}
        for env in envelopes:
            if env.type in ("PromoteSession", "ForkSession"):
                source = self._source(env, appended_at.get(env.command_id))
                if source is not None:
                    wanted[env.command_id] = source
        found = await self.sources.active(set(wanted.values()))
        return {command_id: found[source] for command_id, source in wanted.items()}

    def _source(self, env: CommandEnvelope, at: float | None) -> str | None:
        try:
            principal: Principal = self.verifier.verify(env.token, at=at)
            if env.type == "PromoteSession":
                return principal.stream("session")
        except (AuthError, ScopeError):
            return None
        return (
            stream_id(principal.org, f"session:{principal.fork_of}") if principal.fork_of else None
        )
