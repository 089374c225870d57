"""Stream-size benchmark: does a command cost the writer more as its streams grow?

The decision state of a stream holds every memory it ever saved, so any per-command work
that walks it grows with the stream: a checkpoint that encodes each changed stream whole,
or a keyed save that scans for its key's holder. This runs the command writer's in-process
work for one partition, with none of Kafka or Postgres: ``decide`` with real sealing and
content hashes, ``evolve``, and a checkpoint of the changed streams every
``--checkpoint-every`` events, encoded as the writer stores them
(``restore._checkpoint_rows``; Postgres's part of writing them is not counted). It first
fills ``--streams`` streams with ``N`` memories each, untimed, then times ``--commands``
remembers spread over them (every other one keyed), for each ``N`` in ``--sizes``. Prints
CPU microseconds a command, split into deciding and checkpointing, and writes them to
bench/results/stream_size.json.

    .venv/bin/python bench/bench_stream_size.py [--sizes 100,1000,5000] [--streams 20]
        [--commands 20000] [--checkpoint-every 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from contracts import commands as c
from engram.crypto import MasterKey, open_sealed, seal
from services.command.adapters.restore import _checkpoint_rows
from services.command.core import Context, decide
from services.command.fold import evolve
from services.command.state import StreamState

RESULTS = Path(__file__).parent / "results" / "stream_size.json"


class Partition:
    """One partition's streams, decided and checkpointed as the writer does."""

    def __init__(self, streams: int, checkpoint_every: int) -> None:
        self.states = [StreamState(f"bench/member:m{i}") for i in range(streams)]
        self.master = MasterKey(os.urandom(32))
        self.data_key = os.urandom(32)
        self.dirty: set[int] = set()
        self.since_checkpoint = 0
        self.checkpoint_every = checkpoint_every
        self.decide_seconds = self.checkpoint_seconds = 0.0

    def context(self, state: StreamState) -> Context:
        return Context(
            scope="member:" + state.stream_id.rsplit(":", 1)[1],
            is_agent=False,
            now=datetime.now(UTC),
            new_item_id=lambda: str(uuid.uuid4()),
            seal=lambda item_id, text: seal(item_id, self.data_key, text),
            open=lambda sealed: open_sealed(sealed, self.data_key),
            content_hash=lambda text: self.master.content_hash("bench", text),
            key_hash=lambda key: self.master.key_hash("bench", key),
            source_hash=lambda source: self.master.source_hash("bench", source),
        )

    def checkpoint(self, dirty: set[int]) -> None:
        """Encode the rows a checkpoint of these streams writes (not the writing)."""
        states = {s.stream_id: s for s in self.states}
        _checkpoint_rows(0, states, {self.states[i].stream_id for i in dirty})

    def remember(self, n: int, keyed: bool) -> None:
        index = n % len(self.states)
        state = self.states[index]
        started = time.process_time()
        cmd = c.RememberMemory(
            content=f"Benchmark fact number {n} for {state.stream_id}",
            key=f"key-{n % 500}" if keyed else None,
        )
        for event in decide(state, cmd, self.context(state)):
            evolve(state, state.seq + 1, str(uuid.uuid4()), event)
            self.since_checkpoint += 1
        self.dirty.add(index)
        self.decide_seconds += time.process_time() - started
        if self.since_checkpoint >= self.checkpoint_every:
            started = time.process_time()
            self.checkpoint(self.dirty)
            self.dirty, self.since_checkpoint = set(), 0
            self.checkpoint_seconds += time.process_time() - started


def run(size: int, streams: int, commands: int, checkpoint_every: int) -> dict[str, float]:
    partition = Partition(streams, checkpoint_every)
    for n in range(size * streams):  # fill, untimed; one checkpoint at the end
        partition.remember(n, keyed=False)
    partition.checkpoint(set(range(streams)))
    partition.dirty, partition.since_checkpoint = set(), 0
    partition.decide_seconds = partition.checkpoint_seconds = 0.0
    for n in range(commands):
        partition.remember(size * streams + n, keyed=n % 2 == 0)
    return {
        "items_per_stream": size,
        "streams": streams,
        "commands": commands,
        "decide_us": round(partition.decide_seconds / commands * 1e6, 1),
        "checkpoint_us": round(partition.checkpoint_seconds / commands * 1e6, 1),
        "total_us": round(
            (partition.decide_seconds + partition.checkpoint_seconds) / commands * 1e6, 1
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--commands", type=int, default=20_000)
    parser.add_argument("--checkpoint-every", type=int, default=5_000)
    args = parser.parse_args()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        row = run(size, args.streams, args.commands, args.checkpoint_every)
        print(json.dumps(row))
        rows.append(row)
    results = {"machine": "2 cores, 24 GiB", "when": time.strftime("%F %T"), "runs": rows}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
