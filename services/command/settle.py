"""An HTTP move answered once it has settled (``services.command.moves``).

A move is decided where the memory goes; its forget where the memory was follows through
Kafka. Answered before that, a caller's next command could reach the memory where it was
first: a clear or a forget erased it and then undid the move (QA: the text was in no scope
after), a fork or a promotion copied it once more. So the gateway waits for the forget's
answer before it answers the move, and, when the forget is refused, for the undo's: the
move is then refused, 409, with nothing moved. The gateway makes both commands as the
writer will (their ids are keyed hashes of what they hold) and waits for their answers
before the move is sent, so that none comes before its waiter."""

from __future__ import annotations

import asyncio

from contracts import commands as c
from contracts.envelope import CommandEnvelope, CommandReply
from engram.auth import Principal
from engram.crypto import MasterKey
from services.command.adapters.replies import CommandGateway, ReplyTimeout, Seal
from services.command.errors import Conflict
from services.command.moves import move_undone, moved_forget


async def send_move(
    gateway: CommandGateway,
    master: MasterKey,
    principal: Principal,
    envelope: CommandEnvelope,
    cmd: c.MoveMemory,
    timeout: float,
    seal: Seal,
) -> CommandReply:
    """The move's answer once its forget is decided: its own, or a refusal when the memory
    had changed, moved or been forgotten first and the move was undone."""
    forget = moved_forget(cmd, envelope, principal, master.issued_id)
    undo = move_undone(
        c.ForgetMoved.model_validate(forget.payload), forget, principal, master.issued_id
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    with gateway.expecting([forget, undo]) as (forgot, undone):
        reply = await gateway.send(envelope, timeout, seal)
        if not reply.ok or reply.result.get("duplicate") or not reply.events:
            return reply  # refused, a repeat (settled long since), or nothing copied
        try:
            async with asyncio.timeout_at(deadline):
                settled = await forgot
                if settled.ok:
                    return reply
                left_both = not (await undone).ok
        except TimeoutError as exc:
            raise ReplyTimeout(envelope.command_id) from exc
    why = settled.rejection.detail if settled.rejection else "refused"
    copy = forget.payload["moved_to"]
    outcome = (
        f"its copy {copy} changed too, so both remain: forget the one not wanted"
        if left_both
        else f"the move was undone (its copy {copy} forgotten): nothing moved"
    )
    refusal = Conflict(
        f"memory {cmd.item_id} changed, moved or was forgotten before the move settled "
        f"({why}); {outcome}",
        item_id=cmd.item_id,
        copy_id=copy,
    )
    return CommandReply(
        command_id=envelope.command_id,
        ok=False,
        stream_id=envelope.stream_id,
        rejection=refusal.rejection(),
    )
