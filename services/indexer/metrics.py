"""Prometheus metrics of the indexer (served on /metrics by engram.http.install_health)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

EMBEDDED = Counter(
    "engram_indexer_embedded_total",
    "Texts embedded (a long memory's: one a passage)",
    ["model", "path"],
)
WRITTEN = Counter(
    "engram_indexer_vectors_written_total",
    "Items whose vectors (one a passage) were committed",
    ["path"],
)
DROPPED = Counter(
    "engram_indexer_vectors_dropped_total",
    "Items whose embeddings were not committed: forgotten or changed meanwhile",
    ["reason"],
)
DEAD_LETTERED = Counter(
    "engram_indexer_dead_lettered_total", "Events sent to engram.dlq.indexer", ["reason"]
)
BUDGET_EXHAUSTED = Counter(
    "engram_indexer_budget_exhausted_total", "Embeddings put off: the daily AI budget ran out"
)
REINDEX_PENDING = Gauge(
    "engram_indexer_reindex_pending",
    "Active items without a vector of the model for their current revision",
    ["model"],
)
REINDEX_EMBEDDED = Gauge(
    "engram_indexer_reindex_embedded", "Items re-embedded by the current pass", ["model"]
)
REINDEX_RUNNING = Gauge("engram_indexer_reindex_running", "1 while a re-embed pass runs", ["model"])
LAG = Gauge("engram_indexer_lag", "Records behind the end of engram.events", ["partition"])
IDLE = Gauge(
    "engram_indexer_idle",
    "1 while the indexer reads no event: no embedding model and no vector stored (idle.py)",
)
