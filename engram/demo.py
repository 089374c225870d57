"""The README's demo: remember -> events -> projector -> recall packet."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from engram.auth import dev_secret, mint_token


async def run_demo(
    command_url: str, recall_url: str, console: Console, deadline_seconds: float = 30.0
) -> int:
    """0 when the remembered fact came back in a recall packet in time; 1 otherwise, with
    what went wrong printed (a service that does not answer is one line, not a traceback)."""
    try:
        return await _demo(command_url, recall_url, console, deadline_seconds)
    except httpx.TransportError as exc:
        where = exc.request.url.copy_with(path="/", query=None)
        console.print(
            f"[red]no answer from {where}[/red] ({exc.__class__.__name__}): "
            "start the services with `engram up`"
        )
        return 1


async def _demo(
    command_url: str, recall_url: str, console: Console, deadline_seconds: float
) -> int:
    org = f"demo-{uuid.uuid4().hex[:6]}"
    token = mint_token(dev_secret(), org=org, member="ana")
    headers = {"Authorization": f"Bearer {token}"}
    fact = {"content": "The trip budget is 1500 EUR.", "kind": "fact", "title": "Trip budget"}
    async with httpx.AsyncClient(timeout=20) as client:
        started = time.monotonic()
        saved = await client.post(f"{command_url}/v1/memories", json=fact, headers=headers)
        if saved.status_code != 201:
            console.print(f"[red]remember failed[/red]: {saved.status_code} {saved.text}")
            return 1
        console.print(
            f"remembered {saved.json()['item_id']} (org {org}) "
            f"in {1000 * (time.monotonic() - started):.0f} ms"
        )
        query = {"query": "What is the budget for the trip?", "run_id": "demo-run"}
        while time.monotonic() - started < deadline_seconds:
            packet = await client.post(f"{recall_url}/v1/recall", json=query, headers=headers)
            body = packet.json()
            if packet.status_code == 200 and body["items"]:
                console.print(
                    f"visible to recall after {time.monotonic() - started:.2f} s; "
                    f"generation {body['generation']}, context {body['context_id']}"
                )
                console.print(Panel(Text(body["packet"]), title="recall packet"))
                return 0
            await asyncio.sleep(0.05)  # poll interval, bounded by the deadline
        console.print("[red]the memory did not reach recall within the deadline[/red]")
        return 1
