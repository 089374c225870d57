"""Retrieval quality on LoCoMo (development split): recall@5/10/25/50 per category for
full text only, vectors only and hybrid, with a plain BM25 computed in the same run.

Every dialog turn is stored as a memory through the real command path (CommandEnvelopes on
engram.commands, one org per conversation); retrieval goes through the recall service's
`POST /v1/search`, asked for the top k for each k. Needs the stack up; vectors need the
indexer and recall started with embeddings on, e.g. `MEMORY_EMBEDDING_PROVIDER=local engram
up`. `--run <id>` reuses the memories a previous run stored (its id is printed), to compare
recall settings without storing everything again.

    .venv/bin/python bench/bench_locomo.py [--dataset ../shared/datasets/locomo/locomo_dev.json]

Prints the table and writes bench/results/locomo.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from contracts.envelope import CommandEnvelope
from engram.auth import dev_secret, mint_token
from engram.kafka import publish_commands
from engram.settings import REPO_ROOT, CommonSettings
from services.command.core import new_item_id

RESULTS = Path(__file__).parent / "results" / "locomo.json"
DATASET = REPO_ROOT.parent / "shared" / "datasets" / "locomo" / "locomo_dev.json"
RECALL = "http://127.0.0.1:8085"
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have he her his how i "
    "in is it its me my of on or our she so than that the their them they this to "
    "was we were what when where which who whom why will with you your ".split()
)


def turns(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    """(dia_id, memory text) for every turn, in the metric's exact text form."""
    out = []
    for n in range(1, 100):
        session = conversation.get(f"session_{n}")
        if session is None:
            continue
        date = conversation.get(f"session_{n}_date_time", "")
        for turn in session:
            text = f'({date}) {turn["speaker"]} said, "{turn["text"]}"'
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append((turn["dia_id"], text))
    return out


def evidence_ids(raw: list[str]) -> set[str]:
    """Normalise the few malformed evidence strings ("D8:6; D9:17", "D:11:26", "D30:05")."""
    ids = set()
    for entry in raw:
        for part in re.split(r"[;\s]+", entry):
            m = re.match(r"D:?(\d+):0*(\d+)", part.strip())
            if m:
                ids.add(f"D{int(m.group(1))}:{int(m.group(2))}")
    return ids


def recall_at(retrieved: list[str], evidence: set[str], k: int) -> float:
    if not evidence:
        return 1.0
    return len(evidence & set(retrieved[:k])) / len(evidence)


class BM25:
    """Plain Okapi BM25 (k1 1.5, b 0.75) over lower-cased alphanumeric tokens."""

    def __init__(self, docs: list[str]) -> None:
        self.docs = [self.tokens(d) for d in docs]
        self.avg = sum(map(len, self.docs)) / max(1, len(self.docs))
        df: Counter[str] = Counter(t for d in self.docs for t in set(d))
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.tf = [Counter(d) for d in self.docs]

    @staticmethod
    def tokens(text: str) -> list[str]:
        return [t for t in WORD.findall(text.lower()) if t not in STOPWORDS]

    def top(self, query: str, k: int) -> list[int]:
        terms = self.tokens(query)
        scores = []
        for i, tf in enumerate(self.tf):
            length = len(self.docs[i])
            s = sum(
                self.idf.get(t, 0) * tf[t] * 2.5 / (tf[t] + 1.5 * (0.25 + 0.75 * length / self.avg))
                for t in terms
                if t in tf
            )
            scores.append((s, i))
        return [i for s, i in sorted(scores, reverse=True)[:k] if s > 0]


async def store(
    common: CommonSettings, sample: dict[str, Any], run: str, publish: bool = True
) -> tuple[str, str, dict[str, str]]:
    """Remember every turn through engram.commands (unless ``publish`` is off: an earlier
    run did); return org, token and item -> dia_id."""
    org = f"locomo-{sample['sample_id']}-{run}"
    token = mint_token(dev_secret(), org=org, member="reader", ttl_seconds=6 * 3600)
    envelopes, by_item = [], {}
    for dia_id, text in turns(sample["conversation"]):
        command_id = f"{org}-{dia_id}"
        by_item[new_item_id(f"{org}/member:reader", command_id)] = dia_id
        envelopes.append(
            CommandEnvelope(
                command_id=command_id,
                type="RememberMemory",
                token=token,
                stream_id=f"{org}/member:reader",
                payload={"content": text, "kind": "note"},
            )
        )
    if publish:
        await publish_commands(common.kafka_bootstrap_servers, envelopes)
    return org, token, by_item


async def wait_ready(pool: asyncpg.Pool, orgs: list[str], total: int, vectors: bool) -> None:
    query = (
        "SELECT count(*) FROM indexer.vectors WHERE org = ANY($1)"
        if vectors
        else "SELECT count(*) FROM memory.items WHERE org = ANY($1)"
    )
    deadline = time.monotonic() + 1800
    while (n := await pool.fetchval(query, orgs)) < total:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {n}/{total} ready")
        print(f"  waiting: {n}/{total} {'vectors' if vectors else 'items'}", flush=True)
        await asyncio.sleep(5)


async def evaluate(
    http: httpx.AsyncClient,
    token: str,
    by_item: dict[str, str],
    question: str,
    retrieval: str,
    k: int,
) -> list[str]:
    """The top ``k`` for the question, asked for as such (the metric's definition)."""
    r = await http.post(
        f"{RECALL}/v1/search",
        headers={"Authorization": f"Bearer {token}"},
        json={"query": question, "limit": k, "retrieval": retrieval},
    )
    r.raise_for_status()
    return [by_item[m["id"]] for m in r.json()["memories"]]


def summarise(scores: dict[str, dict[int, list[float]]]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for category, per_k in scores.items():
        # Two decimals: a figure near its target (75) must not round onto it.
        table[category] = {f"@{k}": round(100 * sum(v) / len(v), 2) for k, v in per_k.items()}
    return table


async def main(args: argparse.Namespace) -> None:
    common = CommonSettings()
    data = json.loads(Path(args.dataset).read_text())
    run = args.run or uuid.uuid4().hex[:6]
    print(f"run {run}")
    pool = await asyncpg.create_pool(common.database_url, min_size=1, max_size=2)
    assert pool is not None
    started = time.monotonic()
    have = await pool.fetchval(
        "SELECT count(*) FROM memory.items WHERE org LIKE $1", f"locomo-%-{run}"
    )
    fresh = have < sum(len(turns(s["conversation"])) for s in data)
    stored = [await store(common, sample, run, publish=fresh) for sample in data]
    total = sum(len(s[2]) for s in stored)
    print(f"published {total} turns as memories ({len(data)} conversations)")
    await wait_ready(pool, [s[0] for s in stored], total, vectors=False)
    vectors = (
        bool(
            await pool.fetchval(
                "SELECT count(*) FROM indexer.vectors WHERE org = ANY($1)", [s[0] for s in stored]
            )
        )
        or args.vectors
    )
    if vectors:
        await wait_ready(pool, [s[0] for s in stored], total, vectors=True)
    ingest = time.monotonic() - started
    modes = ["full_text", "vector", "hybrid"] if vectors else ["full_text"]
    scores: dict[str, dict[str, dict[int, list[float]]]] = {
        m: defaultdict(lambda: defaultdict(list)) for m in [*modes, "bm25"]
    }
    async with httpx.AsyncClient(timeout=60) as http:
        # The model recall embeds queries with (None: embeddings off), from its health.
        model = (await http.get(f"{RECALL}/health")).json().get("model")
        for sample, (_, token, by_item) in zip(data, stored, strict=True):
            texts = turns(sample["conversation"])
            bm25 = BM25([t for _, t in texts])
            for qa in sample["qa"]:
                evidence = evidence_ids(qa.get("evidence", []))
                category = CATEGORIES.get(qa["category"], str(qa["category"]))
                baseline = [texts[i][0] for i in bm25.top(qa["question"], max(KS))]
                for k in KS:
                    ranked = {
                        m: await evaluate(http, token, by_item, qa["question"], m, k) for m in modes
                    }
                    ranked["bm25"] = baseline[:k]
                    for mode, got in ranked.items():
                        value = recall_at(got, evidence, k)
                        scores[mode][category][k].append(value)
                        scores[mode]["overall"][k].append(value)
    await pool.close()
    results = {
        "when": time.strftime("%F %T"),
        "turns": total,
        "questions": sum(len(s["qa"]) for s in data),
        "run": run,
        "ingest_seconds": round(ingest, 1),  # about 0 when --run reused stored memories
        "vectors": vectors,
        "model": model,
        "recall": {m: summarise(s) for m, s in scores.items()},
    }
    for mode, table in results["recall"].items():
        print(f"{mode:>9}: " + "  ".join(f"{c} {v}" for c, v in table["overall"].items()))
        for category, row in sorted(table.items()):
            if category != "overall":
                print(f"{'':>9}  {category:<12} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DATASET))
    parser.add_argument(
        "--vectors", action="store_true", help="wait for vectors even if none exist yet"
    )
    parser.add_argument("--run", help="reuse the memories of this earlier run")
    asyncio.run(main(parser.parse_args()))
