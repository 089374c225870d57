"""What a new memory costs Postgres in the projector's tables, table by table.

Each case inserts ``--items`` synthetic memories (shaped like the write-path benchmark's)
into the real read-model tables of the running stack in one transaction, reads the
backend's CPU time from /proc/<pid>/schedstat (so Postgres must run on this machine, as
the dev stack does), and rolls back: nothing stays. ``memory.items`` is measured with its
BM25 term-index triggers and without them (disabled inside the transaction, which locks
the table until the rollback: run this on an idle stack), so the difference is what the
term index costs. Each case runs ``--repeats`` times; the median is reported. Prints the
figures and writes them to bench/results/projector_rows.json.

    .venv/bin/python bench/bench_projector_rows.py [--items 500] [--repeats 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

import asyncpg

from engram.settings import CommonSettings

RESULTS = Path(__file__).parent / "results" / "projector_rows.json"
STREAMS = 64

ITEMS = """
INSERT INTO memory.items (item_id, org, scope, stream_id, kind, status, content,
                          content_length, revision, created_by, created_at, updated_at)
SELECT $1 || g, 'bench-rows', 'member:m' || g % 64, 'bench-rows/member:m' || g % 64, 'fact',
       'active', 'Benchmark fact number ' || g || ' for m' || g % 64, 32, 1,
       '{"member": "m"}'::jsonb, now(), now()
FROM generate_series(1, $2) AS g"""
REVISIONS = """
INSERT INTO memory.revisions (item_id, revision, org, scope, reason, content, content_hash,
                              actor, command_id, occurred_at)
SELECT $1 || g, 1, 'bench-rows', 'member:m' || g % 64, 'remember',
       'Benchmark fact number ' || g || ' for m' || g % 64, md5($1 || g), '{}'::jsonb,
       $1 || g, now()
FROM generate_series(1, $2) AS g"""
AUDIT = """
INSERT INTO memory.audit (stream_id, seq, event_id, type, item_id, org, scope, revision,
                          actor, command_id, occurred_at)
SELECT 'bench-rows/member:m' || g % 64, g, $1 || g, 'MemoryRemembered', $1 || g,
       'bench-rows', 'member:m' || g % 64, 1, '{}'::jsonb, $1 || g, now()
FROM generate_series(1, $2) AS g"""
NO_TERM_INDEX = [
    f"ALTER TABLE memory.items DISABLE TRIGGER {t}"
    for t in ("items_terms_insert", "items_terms_update", "items_terms_delete")
]

CASES: dict[str, tuple[list[str], str]] = {
    "items, with the term index": ([], ITEMS),
    "items, without the term index": (NO_TERM_INDEX, ITEMS),
    "revisions": ([], REVISIONS),
    "audit": ([], AUDIT),
}


def backend_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/schedstat") as stat:
        return int(stat.read().split()[0]) / 1e9


async def microseconds_per_item(
    conn: asyncpg.Connection, pid: int, setup: list[str], insert: str, items: int
) -> float:
    transaction = conn.transaction()
    await transaction.start()
    try:
        for statement in setup:
            await conn.execute(statement)
        before = backend_seconds(pid)
        await conn.execute(insert, f"rows-{uuid.uuid4().hex[:12]}-", items)
        return (backend_seconds(pid) - before) * 1e6 / items
    finally:
        await transaction.rollback()


async def main(args: argparse.Namespace) -> None:
    conn = await asyncpg.connect(CommonSettings().database_url)
    try:
        pid = int(await conn.fetchval("SELECT pg_backend_pid()"))
        try:
            backend_seconds(pid)
        except OSError:
            raise SystemExit("Postgres runs elsewhere: its backend's CPU cannot be read") from None
        figures: dict[str, float] = {}
        for name, (setup, insert) in CASES.items():
            runs = [
                await microseconds_per_item(conn, pid, setup, insert, args.items)
                for _ in range(args.repeats)
            ]
            figures[name] = round(statistics.median(runs), 1)
            print(f"{name}: {figures[name]} µs of Postgres CPU an item (median of {len(runs)})")
    finally:
        await conn.close()
    with_index = figures["items, with the term index"]
    term_index = round(with_index - figures["items, without the term index"], 1)
    total = round(with_index + figures["revisions"] + figures["audit"], 1)
    print(f"the term index: {term_index} µs an item of {total} for the three tables")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "when": time.strftime("%F %T"),
                "items_per_transaction": args.items,
                "repeats": args.repeats,
                "microseconds_per_item": figures,
                "term_index_microseconds_per_item": term_index,
                "three_tables_microseconds_per_item": total,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    parsed = parser.parse_args()
    if parsed.items < 1 or parsed.repeats < 1:
        parser.error("--items and --repeats must be at least 1")
    asyncio.run(main(parsed))
