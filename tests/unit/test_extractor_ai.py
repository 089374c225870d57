"""The AI path without a network: reading the model's reply, and the retry/budget loop.

The loop runs against httpx's in-process transport; the same client is tested
against a real local HTTP server in tests/integration/test_extractor_service.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from services.extractor.adapters.ai import ChatExtractor
from services.extractor.core import Candidate, select
from services.extractor.errors import AIFailed, BudgetExhausted
from services.extractor.prompt import ReplyError, chat_request, read_reply
from services.extractor.settings import ExtractorSettings

MESSAGE = "I prefer short answers. My timezone is CET."


def reply(candidates: object, fenced: bool = False) -> dict[str, object]:
    content = json.dumps({"candidates": candidates})
    if fenced:
        content = f"```json\n{content}\n```"
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


def test_read_reply_keeps_well_formed_entries() -> None:
    body = reply(
        [
            {"content": "Prefers short answers.", "kind": "preference", "evidence": "short"},
            {"content": "Timezone CET.", "kind": "lesson", "evidence": "timezone is CET"},
            {"content": 3, "evidence": "x"},
            "junk",
        ],
        fenced=True,
    )
    assert read_reply(body) == [
        Candidate("Prefers short answers.", "preference", "short"),
        Candidate("Timezone CET.", "note", "timezone is CET"),
    ]


@pytest.mark.parametrize(
    "body",
    [{}, {"choices": []}, reply("nope"), {"choices": [{"message": {"content": "not json"}}]}],
)
def test_read_reply_rejects_what_is_not_the_json_asked_for(body: object) -> None:
    with pytest.raises(ReplyError):
        read_reply(body)


def test_only_the_users_message_is_sent() -> None:
    request = chat_request("m", MESSAGE)
    assert request["model"] == "m"
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert request["messages"][1]["content"] == MESSAGE


class Budget:
    def __init__(self, left: int) -> None:
        self.left = left

    async def reserve(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


Handler = Callable[[httpx.Request], httpx.Response]


def extractor(handler: Handler, budget: Budget, sleeps: list[float]) -> ChatExtractor:
    settings = ExtractorSettings(
        MEMORY_EXTRACTION_URL="http://ai.test/v1",
        MEMORY_EXTRACTION_MODEL="tiny",
        MEMORY_AI_API_KEY="k-test",
        ai_backoff_seconds=0.5,
    )

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ChatExtractor(client, settings, budget, sleep=sleep, jitter=lambda: 1.0)


def scripted(*responses: httpx.Response) -> tuple[Handler, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return handle, seen


GOOD = httpx.Response(
    200,
    json=reply(
        [
            {
                "content": "Prefers short answers.",
                "kind": "preference",
                "evidence": "I prefer short answers",
            },
            {"content": "Lives in Paris.", "kind": "fact", "evidence": "I live in Paris"},
        ]
    ),
)


async def test_a_429_is_retried_after_the_pause_the_server_asks_for() -> None:
    handler, seen = scripted(httpx.Response(429, headers={"Retry-After": "2"}), GOOD)
    sleeps: list[float] = []
    budget = Budget(10)

    found = await extractor(handler, budget, sleeps).propose(MESSAGE)

    assert [c.content for c in select(found, MESSAGE)] == ["Prefers short answers."]
    assert len(seen) == 2 and sleeps == [2.0]
    assert budget.left == 8  # every request, retries included, is reserved
    assert str(seen[0].url) == "http://ai.test/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer k-test"


async def test_server_errors_are_retried_twice_then_given_up() -> None:
    """Twice by default: a failing endpoint holds a turn seconds, not minutes (QA)."""
    handler, seen = scripted(httpx.Response(503))
    sleeps: list[float] = []

    with pytest.raises(AIFailed, match="2 retries"):
        await extractor(handler, Budget(100), sleeps).propose(MESSAGE)

    assert len(seen) == 3
    assert sleeps == [0.5, 1.0]


async def test_timeouts_are_retried() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ReadTimeout("slow", request=request)
        return GOOD

    found = await extractor(handler, Budget(10), []).propose(MESSAGE)
    assert len(found) == 2 and len(calls) == 2


async def test_a_client_error_is_not_retried() -> None:
    handler, seen = scripted(httpx.Response(400, json={"error": "bad model"}))
    with pytest.raises(AIFailed, match="HTTP 400"):
        await extractor(handler, Budget(10), []).propose(MESSAGE)
    assert len(seen) == 1


async def test_an_unreadable_reply_is_a_failure() -> None:
    handler, _ = scripted(httpx.Response(200, json={"choices": []}))
    with pytest.raises(AIFailed):
        await extractor(handler, Budget(10), []).propose(MESSAGE)


async def test_no_budget_means_no_request() -> None:
    handler, seen = scripted(GOOD)
    with pytest.raises(BudgetExhausted):
        await extractor(handler, Budget(0), []).propose(MESSAGE)
    assert seen == []


async def test_a_budget_that_runs_out_while_retrying_ends_in_failure() -> None:
    handler, seen = scripted(httpx.Response(500))
    with pytest.raises(AIFailed, match="budget ran out"):
        await extractor(handler, Budget(2), []).propose(MESSAGE)
    assert len(seen) == 2


def test_settings_read_the_seed_names_and_turn_ai_off_at_zero() -> None:
    on = ExtractorSettings(
        MEMORY_EXTRACTION_URL="http://x/v1/chat/completions/", MEMORY_EXTRACTION_MODEL="m"
    )
    assert on.ai_enabled and on.chat_completions_url == "http://x/v1/chat/completions"
    off = ExtractorSettings(
        MEMORY_EXTRACTION_URL="http://x",
        MEMORY_EXTRACTION_MODEL="m",
        MEMORY_AI_DAILY_REQUEST_LIMIT=0,
    )
    assert not off.ai_enabled
    assert not ExtractorSettings().ai_enabled
    assert ExtractorSettings().port == 8084


def test_the_models_key_is_a_short_lowercase_name_or_none() -> None:
    body = reply(
        [
            {
                "content": "Budget is 2000.",
                "kind": "fact",
                "evidence": "2000",
                "key": " Trip  Budget",
            },
            {"content": "Likes tea.", "kind": "preference", "evidence": "tea", "key": None},
            {"content": "Editor is vim.", "kind": "fact", "evidence": "vim", "key": "x" * 101},
            {"content": "Lives in Oslo.", "kind": "fact", "evidence": "Oslo", "key": 7},
        ]
    )
    assert [c.key for c in read_reply(body)] == ["trip budget", None, None, None]
