"""Forgetting is real: after a forget the text is in no table, in no Kafka segment
file on disk, and a replay from offset 0 rebuilds the tombstone, not the text."""

from __future__ import annotations

import os
import subprocess
import uuid
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import asyncpg
import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from contracts import topics
from contracts.conversations import ConversationTurn
from contracts.envelope import CommandEnvelope
from engram.crypto import MasterKey, load_master_key
from engram.devstack import kafka as devkafka
from engram.devstack import postgres as devpostgres
from engram.devstack import resolve_state
from engram.log_pruner import GroupLogPruner, TableLogPruner
from engram.settings import CommonSettings
from services.extractor.settings import ExtractorSettings
from services.projector.replay import replay
from tests.conftest import caller
from tests.support import (
    end_offsets,
    eventually,
    new_command_id,
    publish_turns,
    read_replies,
    send_commands,
    shadow_database,
)

pytestmark = pytest.mark.e2e


def pg_dump(dsn: str) -> bytes:
    tool = devpostgres.bin_path("pg_dump")
    binary = str(tool) if tool.exists() else "pg_dump"
    return subprocess.run(
        [binary, "--data-only", dsn], check=True, capture_output=True, timeout=120
    ).stdout


def files_containing(root: Path, needle: bytes) -> list[str]:
    found = []
    # Topics deleted by other tests vanish while we walk: os.walk skips them quietly.
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except FileNotFoundError:
                continue
    return found


async def test_forget_erases_the_text_from_tables_log_segments_and_replays(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    first, second = f"zebra-{uuid.uuid4().hex}", f"okapi-{uuid.uuid4().hex}"
    # A key, a tag and a source are a person's words too (QA: they travelled in plain).
    key, tag, source = (f"{name}-{uuid.uuid4().hex}" for name in ("lynx", "ibex", "tapir"))
    markers = (first, second, key, tag, source)
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        saved = await http.post(
            f"{cmd}/v1/memories",
            headers=ana.headers,
            json={
                "content": f"My locker code is {first}",
                "title": f"Locker {first}",
                "tags": ["locker", tag],
                "key": key,
                "sources": [source],
            },
        )
        item_id = saved.json()["item_id"]
        corrected = await http.post(
            f"{cmd}/v1/memories/{item_id}/correct",
            headers=ana.headers,
            json={"base_revision": 1, "content": f"Code: {second}"},
        )
        assert corrected.status_code == 200, corrected.text
        await eventually(lambda: _revision(http, rec, ana.headers, item_id, 2))
        dump = pg_dump(stack_settings["DATABASE_URL"])
        assert all(m.encode() in dump for m in markers)  # the scan can see them

        forgotten = await http.delete(f"{cmd}/v1/memories/{item_id}", headers=ana.headers)
        assert forgotten.status_code == 200, forgotten.text
        receipt = forgotten.json()["receipt"]
        assert receipt["erased"] == [{"item_id": item_id, "revisions": 2}]
        assert any("keystore" in w for w in receipt["where"])
        again = await http.post(
            f"{cmd}/v1/memories", headers=ana.headers, json={"content": f"Code: {second}"}
        )
        assert again.status_code == 409 and "forgotten" in again.json()["detail"]
        restore = await http.post(f"{cmd}/v1/memories/{item_id}/unarchive", headers=ana.headers)
        assert restore.status_code == 410

    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        await eventually(
            lambda: conn.fetchval("SELECT 1 FROM memory.tombstones WHERE item_id = $1", item_id),
            what="tombstone",
        )
        assert (
            await conn.fetchval("SELECT status FROM memory.items WHERE item_id = $1", item_id)
            == "forgotten"
        )
    finally:
        await conn.close()
    async with httpx.AsyncClient(timeout=30) as http:
        gone = await http.get(f"{rec}/v1/memories/{item_id}", headers=ana.headers)
    assert gone.status_code == 404

    dump = pg_dump(stack_settings["DATABASE_URL"])
    for marker in markers:  # as text, and as a bytea column dumps it (hex)
        assert marker.encode() not in dump and marker.encode().hex().encode() not in dump

    # The broker's segment files, byte for byte (the dev stack's data folder).
    kafka_data = devkafka.data_dir(resolve_state())
    assert kafka_data.is_dir(), f"this test reads Kafka's segment files under {kafka_data}"
    assert any(kafka_data.rglob("*.log")), "no segment files found"
    for marker in markers:
        assert files_containing(kafka_data, marker.encode()) == []

    common = CommonSettings()
    name = f"engram_forget_{uuid.uuid4().hex[:8]}"
    async with shadow_database(common.database_url, name) as shadow:
        report = await replay(
            common.database_url,
            shadow,
            common.kafka_bootstrap_servers,
            MasterKey(load_master_key(common)),
            org_pattern=ana.org,
        )
        assert report.matches, "the replay must rebuild the live read model"
        replayed = await asyncpg.connect(shadow)
        try:
            row = await replayed.fetchrow(
                "SELECT status, content, title FROM memory.items WHERE item_id = $1", item_id
            )
            assert dict(row) == {"status": "forgotten", "content": None, "title": None}
            assert (
                await replayed.fetchval(
                    "SELECT count(*) FROM memory.revisions"
                    " WHERE item_id = $1 AND content IS NOT NULL",
                    item_id,
                )
                == 0
            )
        finally:
            await replayed.close()
        dump = pg_dump(shadow)
        assert not [m for m in markers if m.encode() in dump]


async def test_a_moved_memory_and_a_proposals_tags_leave_with_its_forget(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """A review: neither a moved memory (its text where it was, and in its copy) nor a
    relabel proposal's tags may outlive the forget of the copy, in a table or a segment."""
    ana = caller()
    bob = caller(ana.org, member="bob")
    text, tag = f"quokka-{uuid.uuid4().hex}", f"numbat-{uuid.uuid4().hex}"
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        saved = await http.post(
            f"{cmd}/v1/memories",
            headers=ana.headers,
            json={"content": f"The vault opens with {text}"},
        )
        assert saved.status_code == 201, saved.text
        item_id = saved.json()["item_id"]
        await eventually(lambda: _revision(http, rec, ana.headers, item_id, 1))
        moved = await http.post(
            f"{cmd}/v1/memories/{item_id}/move",
            headers=ana.headers,
            json={"scope": "shared", "base_revision": 1},
        )
        assert moved.status_code == 200, moved.text
        copy_id = moved.json()["item_id"]
        await eventually(lambda: _revision(http, rec, bob.headers, copy_id, 1))
        proposed = await http.post(
            f"{cmd}/v1/memories/{copy_id}/propose",
            headers=bob.headers,
            json={"change": "relabel", "tags": [tag], "base_revision": 1, "reason": "tidy"},
        )
        assert proposed.status_code == 200, proposed.text

        async def listed() -> bool | None:
            r = await http.get(
                f"{rec}/v1/proposals", headers=ana.headers, params={"view": "review"}
            )
            return True if [p["tags"] for p in r.json()["proposals"]] == [[tag]] else None

        await eventually(listed, what="the proposal in review")
        dump = pg_dump(stack_settings["DATABASE_URL"])
        assert text.encode() in dump and tag.encode() in dump  # the scan can see them
        forgotten = await http.delete(
            f"{cmd}/v1/memories/{copy_id}", headers=ana.headers, params={"scope": "shared"}
        )
        assert forgotten.status_code == 200, forgotten.text

    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        await eventually(
            lambda: conn.fetchval("SELECT 1 FROM memory.tombstones WHERE item_id = $1", copy_id),
            what="tombstone",
        )
    finally:
        await conn.close()
    dump = pg_dump(stack_settings["DATABASE_URL"])
    for marker in (text, tag):
        assert marker.encode() not in dump and marker.encode().hex().encode() not in dump
    kafka_data = devkafka.data_dir(resolve_state())
    for marker in (text, tag):
        assert files_containing(kafka_data, marker.encode()) == []


async def test_a_kafka_callers_plain_text_leaves_the_commands_topic_once_decided(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """A Kafka caller's command carries its text in plain on engram.commands. Once it is
    decided, the pruner deletes it (DeleteRecords up to the command service's committed
    offset) and rolls the segment that holds it (a marker record, which the writer
    commits and does nothing else with); the broker then removes the file. The topic's
    segments roll here after 1 s instead of a minute, so that the test does not wait."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    kafka_data = devkafka.data_dir(resolve_state())
    ana, secret = caller(), f"quokka-{uuid.uuid4().hex}"
    command_id = new_command_id()
    await send_commands(
        bootstrap,
        [
            CommandEnvelope(
                command_id=command_id,
                type="RememberMemory",
                token=ana.token,
                stream_id=f"{ana.org}/member:{ana.member}",
                payload={"content": f"The safe opens with {secret}", "kind": "fact"},
            )
        ],
    )
    [reply] = (await read_replies(bootstrap, {command_id}))[command_id]
    assert reply.ok, reply
    holders = {Path(f).parent.name for f in files_containing(kafka_data, secret.encode())}
    assert holders and all(h.startswith(f"{topics.COMMANDS}-") for h in holders), holders

    async with httpx.AsyncClient(timeout=30) as http:
        forgotten = await http.delete(
            f"{services['command']}/v1/memories/{reply.result['item_id']}", headers=ana.headers
        )
    assert forgotten.status_code == 200, forgotten.text
    assert any(w.startswith(topics.COMMANDS) for w in forgotten.json()["receipt"]["where"])

    dead_letters = [topics.dead_letter_topic("command")]
    dead_before = await end_offsets(bootstrap, dead_letters)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    pruner = GroupLogPruner(bootstrap, topics.COMMANDS, "engram-command", segment_ms=1000)
    await pruner.start()
    try:
        await _set_segment_ms(admin, "1000")
        partitions = await pruner.all_partitions()

        async def gone() -> bool:
            await pruner.prune_once(partitions)
            return not files_containing(kafka_data, secret.encode())

        await eventually(gone, deadline=90, interval=1.0, what="the plain text off the disk")
    finally:
        await _set_segment_ms(admin, str(topics.PRUNED_SEGMENT_MS))
        await pruner.stop()
        await admin.close()
    # The markers were committed by the writer, never taken for poison.
    assert await end_offsets(bootstrap, dead_letters) == dead_before


async def test_a_turns_words_leave_the_conversations_topic_once_handled(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    """A conversation turn carries the user's words in plain on engram.conversations. Once
    the extractor has handled it (its offset stored with what it wrote), the extractor's
    pruner deletes it and rolls its segment, as the command service does for commands; a
    forget of what it proposed from the turn then leaves the words nowhere on disk. The
    topic's segments roll here after 1 s instead of a minute."""
    bootstrap = stack_settings["KAFKA_BOOTSTRAP_SERVERS"]
    kafka_data = devkafka.data_dir(resolve_state())
    # Letters only: the rules take a long run of hex digits for a secret, and propose none.
    ana, secret = caller(), "wombat" + "".join(chr(97 + int(c, 16)) for c in uuid.uuid4().hex)
    message = f"I prefer tea brewed by {secret}."
    turn = ConversationTurn(
        turn_id=f"turn-{secret}",
        run_id="run-1",
        token=ana.token,
        user_message=message,
        completed_at=datetime.now(UTC),
    )
    await publish_turns(bootstrap, turn.model_dump_json().encode())

    def holders() -> set[str]:
        return {
            Path(f).parent.name
            for f in files_containing(kafka_data, secret.encode())
            if Path(f).parent.name.startswith(f"{topics.CONVERSATIONS}-")
        }

    assert holders(), "the scan can see the turn's words"
    async with httpx.AsyncClient(timeout=30) as http:

        async def candidate() -> str | None:
            r = await http.get(
                f"{services['recall']}/v1/memories",
                headers=ana.headers,
                params={"status": "candidate"},
            )
            found = [m["item_id"] for m in r.json()["memories"] if secret in m["content"]]
            return found[0] if found else None

        item_id = await eventually(candidate, deadline=60, what="the turn's candidate")
        forgotten = await http.delete(
            f"{services['command']}/v1/memories/{item_id}", headers=ana.headers
        )
        assert forgotten.status_code == 200, forgotten.text

    common = CommonSettings()
    pool = await asyncpg.create_pool(common.database_url, min_size=1, max_size=2)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    pruner = TableLogPruner(
        bootstrap,
        topics.CONVERSATIONS,
        pool,
        "extractor.offsets",
        ExtractorSettings().group_id,
        segment_ms=1000,
    )
    await pruner.start()
    dead_letters = [topics.dead_letter_topic("extractor")]
    dead_before = await end_offsets(bootstrap, dead_letters)
    try:
        await _set_segment_ms(admin, "1000", topics.CONVERSATIONS)
        partitions = await pruner.all_partitions()

        async def gone() -> bool:
            await pruner.prune_once(partitions)
            return not holders()

        await eventually(gone, deadline=90, interval=1.0, what="the turn's words off the disk")

        async def read_to_the_end() -> bool:  # the markers too
            ends = await end_offsets(bootstrap, [topics.CONVERSATIONS])
            handled = await pruner.committed(partitions)
            return all(handled.get(tp.partition, 0) >= end for tp, end in ends.items())

        await eventually(read_to_the_end, deadline=60, what="the extractor past the markers")
    finally:
        await _set_segment_ms(admin, str(topics.PRUNED_SEGMENT_MS), topics.CONVERSATIONS)
        await pruner.stop()
        await admin.close()
        await pool.close()
    # The extractor took the roll markers for no turn: it dead-lettered none of them.
    assert await end_offsets(bootstrap, dead_letters) == dead_before


async def test_clear_forgets_every_memory_of_one_scope_after_confirmation(
    services: dict[str, str], stack_settings: dict[str, str]
) -> None:
    ana = caller()
    cmd, rec = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=30) as http:
        mine = [
            (
                await http.post(f"{cmd}/v1/memories", headers=ana.headers, json={"content": text})
            ).json()["item_id"]
            for text in ("Ana drinks tea at four", "Ana's locker is 12")
        ]
        shared = (
            await http.post(
                f"{cmd}/v1/memories",
                headers=ana.headers,
                json={"content": "Deploys are on Tuesdays", "scope": "shared"},
            )
        ).json()["item_id"]
        not_admin = await http.post(
            f"{cmd}/v1/memories/clear",
            headers=ana.headers,
            json={"confirm": True, "scope": "shared"},
        )
        assert not_admin.status_code == 403, not_admin.text
        unconfirmed = await http.post(f"{cmd}/v1/memories/clear", headers=ana.headers, json={})
        assert unconfirmed.status_code == 422, unconfirmed.text
        assert "confirm=true" in unconfirmed.json()["detail"]

        cleared = await http.post(
            f"{cmd}/v1/memories/clear", headers=ana.headers, json={"confirm": True}
        )

        assert cleared.status_code == 200, cleared.text
        erased = cleared.json()["receipt"]["erased"]
        assert sorted(e["item_id"] for e in erased) == sorted(mine)
        for item_id in mine:
            await eventually(
                partial(_status, http, rec, ana.headers, item_id, 404),
                what=f"{item_id} gone from recall",
            )
        assert (
            await http.get(f"{rec}/v1/memories/{shared}", headers=ana.headers)
        ).status_code == 200  # another scope: untouched
        again = await http.post(
            f"{cmd}/v1/memories", headers=ana.headers, json={"content": "Ana drinks tea at four"}
        )
        assert again.status_code == 409 and "forgotten" in again.json()["detail"]

    conn = await asyncpg.connect(stack_settings["DATABASE_URL"])
    try:
        rows = await conn.fetch(
            "SELECT status, content FROM memory.items WHERE item_id = ANY($1)", mine
        )
        assert [tuple(r) for r in rows] == [("forgotten", None)] * 2
    finally:
        await conn.close()


async def _status(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], item_id: str, status: int
) -> bool:
    return (await http.get(f"{url}/v1/memories/{item_id}", headers=headers)).status_code == status


async def _set_segment_ms(
    admin: AIOKafkaAdminClient, value: str, topic: str = topics.COMMANDS
) -> None:
    [spec] = [s for s in topics.topic_specs(1) if s.name == topic]
    settings = {**spec.config(), "segment.ms": value}
    await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, settings)])


async def _revision(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], item_id: str, revision: int
) -> bool:
    r = await http.get(f"{url}/v1/memories/{item_id}", headers=headers)
    return r.status_code == 200 and r.json()["revision"] == revision
