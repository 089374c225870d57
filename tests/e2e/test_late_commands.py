"""A Kafka caller's command that waits out a command service outage is decided with its
token as it stood when the broker appended the command; one published after its token
expired is refused."""

from __future__ import annotations

import asyncio
import time
import uuid

import jwt
import pytest

from contracts.envelope import CommandEnvelope
from engram.auth import dev_secret, mint_token
from engram.devstack import stack
from tests.support import eventually, read_replies, send_commands

pytestmark = pytest.mark.e2e
TTL_SECONDS = 3


def remember(token: str, org: str, text: str) -> CommandEnvelope:
    return CommandEnvelope(
        command_id=str(uuid.uuid4()),
        type="RememberMemory",
        token=token,
        stream_id=f"{org}/member:ana",
        payload={"content": text},
    )


async def expired(token: str) -> bool:
    return time.time() > jwt.decode(token, options={"verify_signature": False})["exp"] + 0.5


async def test_a_command_queued_through_an_outage_keeps_its_tokens_time(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    org = f"late-{uuid.uuid4().hex[:8]}"
    token = mint_token(dev_secret(), org=org, member="ana", ttl_seconds=TTL_SECONDS)
    await asyncio.to_thread(stack.stop_services, None, ["command"])
    try:
        queued = remember(token, org, "The office closes at 18:00 on Fridays.")
        await send_commands(bootstrap, [queued])  # appended while the token holds
        await eventually(
            lambda: expired(token), deadline=TTL_SECONDS + 10, what="the token expired"
        )
        too_late = remember(token, org, "The office closes at 17:00 on Fridays.")
        await send_commands(bootstrap, [too_late])  # appended after it expired
    finally:
        await asyncio.to_thread(stack.start_services, None, ["command"], ensure_infra=False)
    replies = await read_replies(bootstrap, {queued.command_id, too_late.command_id})
    [decided], [refused] = replies[queued.command_id], replies[too_late.command_id]
    assert decided.ok and decided.result["status"] == "active", decided
    assert not refused.ok and refused.rejection is not None
    assert (refused.rejection.code, refused.rejection.status) == ("unauthenticated", 401)
    assert "expired" in refused.rejection.detail
