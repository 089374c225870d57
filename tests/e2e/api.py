"""The command and recall services over HTTP, as one caller or another: what the e2e
tests share; each test module adds the reads and waits of its own feature."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Caller


class ServicesApi:
    def __init__(self, http: httpx.AsyncClient, services: dict[str, str]) -> None:
        self.http, self.command, self.recall = http, services["command"], services["recall"]

    async def post(self, who: Caller, path: str, **body: Any) -> httpx.Response:
        """A command route of the command service."""
        return await self.http.post(f"{self.command}{path}", headers=who.headers, json=body)

    async def remember(self, who: Caller, text: str, **body: Any) -> dict[str, Any]:
        """Save a memory; the answer must be 201."""
        r = await self.post(who, "/v1/memories", content=text, **body)
        assert r.status_code == 201, r.text
        return dict(r.json())

    async def memory(self, who: Caller, item_id: str) -> dict[str, Any]:
        """The memory as recall reads it for ``who``; empty when it cannot see it."""
        r = await self.http.get(f"{self.recall}/v1/memories/{item_id}", headers=who.headers)
        return dict(r.json()) if r.status_code == 200 else {}
