"""Settings of the recall service (prefix ENGRAM_RECALL_, and the seeds' MEMORY_ names).

Which embedding model embeds queries is the deployment's (``engram.embeddings.settings``,
read the same way as the indexer, so the vectors compare); how long a query may wait
for it is recall's own.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from engram.embeddings.settings import ProviderTuning
from engram.settings import ServiceSettings
from services.recall.core import Ranking


class RecallSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_RECALL_", extra="ignore", frozen=True)

    port: int = 8085
    full_text_top: int = 30
    # bm25: ranked over the term index, reading a bounded number of postings per word;
    # ts_rank_cd: the seed's ranking, which ranks every item that matches any word.
    full_text_ranking: Ranking = "bm25"
    vector_top: int = 30
    packet_items: int = 12
    packet_chars: int = 6000
    search_chars: int = 16_000  # what one search result may carry in all
    semantic_max_distance: float = Field(0.4, alias="MEMORY_SEMANTIC_MAX_DISTANCE")
    # Query embeddings kept, least recently used out first (0: no cache).
    query_cache_size: int = Field(1024, ge=0)
    # A remote query embedding is on the answer's critical path: a short timeout and one
    # retry, then recall answers from full text alone.
    embed_timeout_s: float = Field(5.0, gt=0)
    embed_retries: int = Field(1, ge=0, le=5)
    # The restricted role recall reads with (RLS); default: DATABASE_URL as engram_recall.
    database_url: str | None = None
    database_role: str = "engram_recall"

    @property
    def tuning(self) -> ProviderTuning:
        return ProviderTuning(
            local_batch=8,  # queries come one at a time
            request_timeout_s=self.embed_timeout_s,
            retries=self.embed_retries,
            retry_base_s=0.2,
            retry_max_s=1.0,  # a Retry-After longer than this gives up on vectors instead
        )
