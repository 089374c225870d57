"""The write path through the real services: lifecycle, conflicts, isolation, bad input."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from contracts import topics
from contracts.envelope import CommandEnvelope
from engram.crypto import MasterKey, load_master_key, seal_payload
from engram.keystore import KeyStore
from engram.settings import CommonSettings
from services.command.context import new_item_id
from tests.conftest import Caller, caller
from tests.support import (
    dead_letters,
    end_offsets,
    eventually,
    new_command_id,
    read_replies,
    replies_so_far,
    send_commands,
)

pytestmark = pytest.mark.e2e


async def remember(http: httpx.AsyncClient, url: str, who: Caller, **body: Any) -> dict[str, Any]:
    response = await http.post(f"{url}/v1/memories", headers=who.headers, json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def recalled_ids(http: httpx.AsyncClient, url: str, who: Caller, query: str) -> list[str]:
    response = await http.post(f"{url}/v1/recall", headers=who.headers, json={"query": query})
    assert response.status_code == 200, response.text
    return [i["id"] for i in response.json()["items"]]


async def test_twenty_concurrent_corrections_on_one_base_one_wins(services: dict[str, str]) -> None:
    ana = caller()
    async with httpx.AsyncClient(timeout=30) as http:
        item = await remember(http, services["command"], ana, content="Budget: 1500 EUR")
        url = f"{services['command']}/v1/memories/{item['item_id']}/correct"
        answers = await asyncio.gather(
            *(
                http.post(
                    url,
                    headers=ana.headers,
                    json={"base_revision": 1, "content": f"Budget: {1600 + n} EUR"},
                )
                for n in range(20)
            )
        )
    codes = sorted(a.status_code for a in answers)
    assert codes == [200] + [409] * 19, codes
    conflict = next(a for a in answers if a.status_code == 409)
    body = conflict.json()
    assert conflict.headers["content-type"] == "application/problem+json"
    assert body["current_revision"] == 2 and body["content"].startswith("Budget: 16")


async def test_the_item_lifecycle_over_http(services: dict[str, str]) -> None:
    ana = caller()
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        item = await remember(http, cmd, ana, content="Ana prefers green tea", kind="preference")
        iid = item["item_id"]

        async def act(action: str, **body: Any) -> dict[str, Any]:
            r = await http.post(f"{cmd}/v1/memories/{iid}/{action}", headers=ana.headers, json=body)
            assert r.status_code == 200, r.text
            return dict(r.json())

        assert (await act("correct", base_revision=1, content="Ana prefers black tea"))[
            "revision"
        ] == 2
        assert (await act("restore-revision", base_revision=2, revision=1))["revision"] == 3
        assert (await act("undo", base_revision=3))["revision"] == 4
        assert (await act("pin"))["revision"] == 5
        await eventually(
            lambda: recalled_ids(http, rec, ana, "unrelated words"),
            what="the pinned item in every packet",
        )
        assert (await act("disable"))["status"] == "disabled"
        await eventually(lambda: _absent(http, rec, ana, "tea", iid), what="disabled hidden")
        assert (await act("enable"))["status"] == "active"
        assert (await act("archive"))["status"] == "archived"
        assert (await act("unarchive"))["status"] == "active"
        got = await eventually(lambda: _get(http, rec, ana, iid, revision=9), what="revision 9")
        assert got["content"] == "Ana prefers black tea" and got["pinned"]
        # Seed 004: an update changes the category and the tags, not the text.
        relabeled = await act("relabel", base_revision=9, kind="fact", tags=["drinks"])
        assert relabeled["revision"] == 10
        got = await eventually(lambda: _get(http, rec, ana, iid, revision=10), what="revision 10")
        assert (got["kind"], got["tags"], got["content"]) == (
            "fact",
            ["drinks"],
            "Ana prefers black tea",
        )
        revisions = await http.get(f"{rec}/v1/memories/{iid}/revisions", headers=ana.headers)
        assert revisions.status_code == 200, revisions.text
        assert "relabeled" in str(revisions.json())


async def test_a_keyed_save_revises_the_keys_memory_and_answers_200(
    services: dict[str, str],
) -> None:
    """One key holds one fact: a second save under a key revises its memory; the answer is
    200 naming that memory, not 201 as for a memory made (QA). The tags and sources the
    save brings join the memory's (QA: they were dropped)."""
    ana = caller()
    async with httpx.AsyncClient(timeout=30) as http:
        first = await remember(
            http,
            services["command"],
            ana,
            content="Ana drinks tea",
            key="drink",
            tags=["food"],
            sources=["msg-1"],
        )
        again = await http.post(
            f"{services['command']}/v1/memories",
            headers=ana.headers,
            json={
                "content": "Ana drinks coffee",
                "key": "drink",
                "tags": ["food", "morning"],
                "sources": ["msg-2"],
            },
        )
        assert again.status_code == 200, again.text
        assert (again.json()["item_id"], again.json()["revision"]) == (first["item_id"], 2)
        got = await eventually(
            lambda: _get(http, services["recall"], ana, first["item_id"], 2), what="revision 2"
        )
        assert (got["key"], got["tags"], got["sources"]) == (
            "drink",
            ["food", "morning"],
            ["msg-1", "msg-2"],
        )


async def test_a_keyed_save_sealed_by_the_gateway_on_kafka_revises_the_keys_memory(
    services: dict[str, str],
    stack_settings: dict[str, str],
) -> None:
    """The HTTP gateway seals a save's key with its text when it publishes the command on
    engram.commands (another instance writes the partition): the writer opens it with the
    save's own data key, and then fetches the data key of the memory holding that key."""
    ana = caller()
    async with httpx.AsyncClient(timeout=30) as http:
        first = await remember(
            http, services["command"], ana, content="Ana drinks tea", key="drink", tags=["food"]
        )
    command_id = new_command_id()
    stream = f"{ana.org}/member:{ana.member}"
    own = new_item_id(stream, command_id)  # as the gateway seals it (submit._sealed)
    pool = await asyncpg.create_pool(stack_settings["DATABASE_URL"], min_size=1, max_size=1)
    try:
        keystore = KeyStore(pool, MasterKey(load_master_key(CommonSettings())))
        data_key = (await keystore.create_many([(own, ana.org)]))[own]
    finally:
        await pool.close()
    payload = seal_payload(
        {"content": "Ana drinks coffee", "key": "drink", "tags": ["morning"], "scope": "private"},
        own,
        data_key,
    )
    assert isinstance(payload["key"], dict) and isinstance(payload["tags"], dict)
    await send_commands(
        stack_settings["KAFKA_BOOTSTRAP_SERVERS"],
        [
            CommandEnvelope(
                command_id=command_id,
                type="RememberMemory",
                token=ana.token,
                stream_id=stream,
                payload=payload,
            )
        ],
    )
    [reply] = (await read_replies(stack_settings["KAFKA_BOOTSTRAP_SERVERS"], {command_id}))[
        command_id
    ]
    assert reply.ok, reply
    assert (reply.result["item_id"], reply.result["revision"]) == (first["item_id"], 2)
    async with httpx.AsyncClient(timeout=30) as http:
        got = await eventually(
            lambda: _get(http, services["recall"], ana, first["item_id"], 2), what="revision 2"
        )
    assert (got["content"], got["key"], got["tags"]) == (
        "Ana drinks coffee",
        "drink",
        ["food", "morning"],
    )


async def _get(
    http: httpx.AsyncClient, url: str, who: Caller, item_id: str, revision: int
) -> dict[str, Any] | None:
    r = await http.get(f"{url}/v1/memories/{item_id}", headers=who.headers)
    return r.json() if r.status_code == 200 and r.json()["revision"] == revision else None


async def _absent(http: httpx.AsyncClient, url: str, who: Caller, query: str, item_id: str) -> bool:
    return item_id not in await recalled_ids(http, url, who, query)


async def test_agent_saves_become_candidates_until_a_person_confirms(
    services: dict[str, str],
) -> None:
    person = caller()
    agent = caller(person.org, member=person.member, agent="helper")
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        guess = await remember(
            http,
            cmd,
            agent,
            content="Ana likes sailing",
            user_message="what should we do this weekend?",
        )
        assert guess["status"] == "candidate"
        asked = await remember(
            http,
            cmd,
            agent,
            content="Ana likes hiking",
            user_message="please remember that Ana likes hiking",
        )
        assert asked["status"] == "active"
        await eventually(lambda: recalled_ids(http, rec, person, "hiking"), what="confirmed")
        assert guess["item_id"] not in await recalled_ids(http, rec, person, "sailing")
        r = await http.post(f"{cmd}/v1/memories/{guess['item_id']}/confirm", headers=agent.headers)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden"), "an agent cannot confirm"
        r = await http.post(f"{cmd}/v1/memories/{guess['item_id']}/confirm", headers=person.headers)
        assert r.status_code == 200 and r.json()["status"] == "active"
        assert await eventually(lambda: recalled_ids(http, rec, person, "sailing"))


async def test_bad_input_gets_typed_problems(services: dict[str, str]) -> None:
    ana = caller()
    url = f"{services['command']}/v1/memories"
    async with httpx.AsyncClient(timeout=30) as http:
        too_long = await http.post(url, headers=ana.headers, json={"content": "x" * 4001})
        unknown = await http.post(url, headers=ana.headers, json={"content": "x", "org": "b"})
        other_scope = await http.post(
            url, headers=ana.headers, json={"content": "x", "scope": "member:bob"}
        )
        not_json = await http.post(
            url, headers={**ana.headers, "content-type": "application/json"}, content=b"{nope"
        )
        no_token = await http.post(url, json={"content": "x"})
        bad_token = await http.post(
            url, headers={"Authorization": "Bearer nope"}, json={"content": "x"}
        )
        no_project = await http.post(
            url, headers=ana.headers, json={"content": "x", "scope": "project"}
        )
        missing = await http.post(f"{url}/does-not-exist/pin", headers=ana.headers)
        no_action = await http.post(f"{url}/does-not-exist/polish", headers=ana.headers)
        no_payload = await http.post(
            f"{services['command']}/v1/commands",
            headers=ana.headers,
            json={"type": "RememberMemory"},
        )
    for response, status in (
        (too_long, 422),
        (unknown, 422),
        (other_scope, 422),
        (not_json, 422),
        (no_token, 401),
        (bad_token, 401),
        (no_project, 403),
        (missing, 404),
        (no_action, 422),
        (no_payload, 422),
    ):
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == status and response.json()["detail"]


async def test_isolation_between_members_and_orgs_over_http_and_kafka(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    bob = caller(ana.org, member="bob")
    eve = caller()  # another org
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        private = await remember(http, cmd, ana, content="Ana's salary is 7000 EUR")
        shared = await remember(
            http, cmd, ana, content="The office salary day is the 25th", scope="shared"
        )
        await eventually(lambda: recalled_ids(http, rec, ana, "salary"), what="ana sees")
        assert await eventually(lambda: _count(http, rec, bob, "salary", 1)) == [shared["item_id"]]
        assert await recalled_ids(http, rec, eve, "salary") == []
        for who in (bob, eve):
            r = await http.get(f"{rec}/v1/memories/{private['item_id']}", headers=who.headers)
            assert r.status_code == 404
            r = await http.post(
                f"{cmd}/v1/memories/{private['item_id']}/correct",
                headers=who.headers,
                json={"base_revision": 1, "content": "0"},
            )
            assert r.status_code == 404  # bob's private stream has no such item
        r = await http.post(
            f"{cmd}/v1/memories/{shared['item_id']}/pin",
            headers=eve.headers,
            json={"scope": "shared"},
        )
        assert r.status_code == 404  # another org's shared stream is another stream

    # Over Kafka, bob's token cannot write into ana's stream.
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    command_id = new_command_id()
    await send_commands(
        bootstrap,
        [
            CommandEnvelope(
                command_id=command_id,
                type="CorrectMemory",
                token=bob.token,
                stream_id=f"{ana.org}/member:ana",
                payload={"item_id": private["item_id"], "base_revision": 1, "content": "hacked"},
            )
        ],
    )
    # Refused, and not answered: a reply under this id would be taken by ana's caller for
    # its own (QA); the record is dead-lettered, with its reply's transaction.
    [letter] = await eventually(
        lambda: dead_letters(bootstrap, "command", command_id), what="bob's command dead-lettered"
    )
    assert "not answered" in str(letter["error"])
    assert "is not one of the token's scopes" in str(letter["error"])
    assert (await replies_so_far(bootstrap, {command_id}))[command_id] == []


async def _count(
    http: httpx.AsyncClient, url: str, who: Caller, query: str, n: int
) -> list[str] | None:
    ids = await recalled_ids(http, url, who, query)
    return ids if len(ids) == n else None


async def test_an_http_command_is_handed_over_in_process_not_through_kafka(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """One instance writes every partition here, so the gateway hands each command to
    its writer: neither the command (its text included) nor its answer crosses Kafka,
    only the events do. A repeat still gets the first answer."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    before = await end_offsets(bootstrap, [topics.COMMANDS, topics.REPLIES])
    ana, command_id = caller(), new_command_id()
    headers = {**ana.headers, "Idempotency-Key": command_id}
    async with httpx.AsyncClient(timeout=30) as http:
        url = f"{services['command']}/v1/memories"
        first = await http.post(url, headers=headers, json={"content": "Handed over: 7 apples"})
        again = await http.post(url, headers=headers, json={"content": "Handed over: 7 apples"})
    assert first.status_code == 201, first.text
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["item_id"] == first.json()["item_id"]
    crossed = await _records_since(bootstrap, before)
    assert not [v for v in crossed if command_id.encode() in v or b"7 apples" in v]


async def _records_since(bootstrap: str, since: dict[TopicPartition, int]) -> list[bytes]:
    """Every record (committed or not) written to these partitions after ``since``."""
    end = await end_offsets(bootstrap, sorted({tp.topic for tp in since}))
    kafka = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await kafka.start()
    values: list[bytes] = []
    try:
        kafka.assign(list(since))
        for tp, offset in since.items():
            kafka.seek(tp, offset)
        deadline = time.monotonic() + 60
        while True:  # fetch at least once: aiokafka's stop() right after assign() fails
            for records in (await kafka.getmany(timeout_ms=200)).values():
                values += [r.value or b"" for r in records]
            if not [tp for tp in since if await kafka.position(tp) < end[tp]]:
                return values
            assert time.monotonic() < deadline, "the topics were not read to their end"
    finally:
        await kafka.stop()


async def test_a_key_is_retracted_over_http(services: dict[str, str]) -> None:
    """Seed 002's Forget by key: the key's memory is disabled (kept, not erased)."""
    ana = caller(session="trip")
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        saved = await remember(
            http, cmd, ana, content="The budget is 1500 EUR.", key="budget", scope="session"
        )
        url = f"{cmd}/v1/memories/retract"
        r = await http.post(url, headers=ana.headers, json={"key": "budget", "scope": "session"})
        assert r.status_code == 200, r.text
        assert (r.json()["item_id"], r.json()["status"]) == (saved["item_id"], "disabled")
        again = await http.post(
            url, headers=ana.headers, json={"key": "budget", "scope": "session"}
        )
        assert (again.status_code, again.json()["code"]) == (409, "conflict")
        got = await eventually(
            lambda: _get(http, rec, ana, saved["item_id"], revision=2),
            what="the retraction in the read model",
        )
        assert (got["status"], got["content"]) == ("disabled", "The budget is 1500 EUR.")
