"""The OpenAI-compatible extraction client: budget, request, retries with backoff.

The budget is ``engram.budget.DailyBudget``: one count for all memory AI requests.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

import httpx

from engram.logging import get_logger
from services.extractor.core import Candidate, backoff_delay
from services.extractor.errors import AIFailed, AIRetryable, BudgetExhausted
from services.extractor.prompt import chat_request, read_reply
from services.extractor.settings import ExtractorSettings

log = get_logger(__name__)


class Budget(Protocol):
    async def reserve(self) -> bool:
        """Take one request from the budget; False when none is left."""
        ...


class ChatExtractor:
    def __init__(
        self,
        client: httpx.AsyncClient,
        settings: ExtractorSettings,
        budget: Budget,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self._client, self._s, self._budget = client, settings, budget
        self._sleep, self._jitter = sleep, jitter

    async def propose(self, message: str) -> list[Candidate]:
        """The model's candidates (unchecked). BudgetExhausted before any request is
        made; AIFailed once the retries are spent or the answer is not worth retrying."""
        last: AIRetryable | None = None
        for retry in range(self._s.ai_max_retries + 1):
            if last is not None:
                await self._pause(retry - 1, last)
            if not await self._budget.reserve():
                if last is None:
                    raise BudgetExhausted("no AI requests left today")
                raise AIFailed(f"the daily AI budget ran out while retrying: {last}")
            try:
                return await self._ask(message)
            except AIRetryable as exc:
                last = exc
        raise AIFailed(f"gave up after {self._s.ai_max_retries} retries: {last}")

    async def _pause(self, retry: int, error: AIRetryable) -> None:
        delay = backoff_delay(
            retry,
            self._s.ai_backoff_seconds,
            self._s.ai_backoff_max_seconds,
            error.retry_after,
            self._jitter(),
        )
        log.warning("ai_retry", retry=retry + 1, delay=round(delay, 3), error=str(error))
        await self._sleep(delay)

    async def _ask(self, message: str) -> list[Candidate]:
        assert self._s.extraction_model is not None
        try:
            response = await self._client.post(
                self._s.chat_completions_url,
                json=chat_request(self._s.extraction_model, message),
                headers=self._headers(),
                timeout=self._s.ai_timeout_seconds,
            )
        except httpx.TimeoutException as exc:
            raise AIRetryable(f"timed out: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise AIRetryable(f"connection failed: {exc!r}") from exc
        return _candidates(response)

    def _headers(self) -> dict[str, str]:
        key = self._s.ai_api_key
        return {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}


def _candidates(response: httpx.Response) -> list[Candidate]:
    status = response.status_code
    if status == 429 or status >= 500:
        raise AIRetryable(f"HTTP {status}", retry_after=_retry_after(response))
    if response.is_error:  # 4xx: the request itself is wrong; asking again will not help
        raise AIFailed(f"HTTP {status}: {response.text[:200]}")
    try:
        return read_reply(response.json())
    except ValueError as exc:
        raise AIFailed(str(exc)) from exc


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds; the HTTP-date form is rare from these endpoints, so ignored."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None
