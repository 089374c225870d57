"""A lean HTTP/1.1 keep-alive client for the benchmarks.

The load generator shares the two cores with everything it measures: httpx spent about
3.7 ms of CPU per request here, more than the command service itself, and so inflated
every latency it reported. This client writes one request and parses the status line,
the headers and a Content-Length body; nothing more, which is all the services send.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class KeepAliveClient:
    """One connection; requests go one at a time (use one client per concurrent writer)."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self._host, self._port = host, port
        self._head = f"Host: {host}\r\nAuthorization: Bearer {token}\r\n"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST JSON; the status and the decoded JSON answer."""
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        data = json.dumps(body).encode()
        self._writer.write(
            f"POST {path} HTTP/1.1\r\n{self._head}Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        head = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        length = next(
            (int(h.split(":", 1)[1]) for h in head if h.lower().startswith("content-length:")),
            None,
        )
        if length is None:
            raise RuntimeError(f"{path} answered {status} without a Content-Length")
        return status, json.loads(await self._reader.readexactly(length))

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            await self._writer.wait_closed()
            self._reader = self._writer = None
