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
    # How many of each retriever's best (full text, vectors) enter the rank fusion. None:
    # as many as the answer holds (a packet's items, a search's limit), so an item that
    # one retriever ranks first is not overtaken by items both rank low. The seeds fuse
    # two top-30 lists: 30 does that (a larger answer always fuses as many as it holds).
    fusion_depth: int | None = Field(None, ge=1, le=1000)
    # bm25: ranked over the term index, reading a bounded number of postings per word;
    # ts_rank_cd: the seed's ranking, which ranks every item that matches any word.
    full_text_ranking: Ranking = "bm25"
    # Relevance feedback in a hybrid search (README, design notes): the first pass's
    # ``feedback_items`` best answers lend their ``feedback_terms`` strongest other words,
    # at ``feedback_weight`` each, to the full-text list, whose ``feedback_pool`` best
    # (or as many as the answer holds, if more) are then scored again with them. The
    # pool's default is a packet's depth, so a packet's full-text search reads no more
    # than it would without feedback. feedback_items 0 turns it off.
    feedback_items: int = Field(5, ge=0, le=50)
    feedback_terms: int = Field(10, ge=1, le=100)
    feedback_weight: float = Field(0.3, gt=0, le=10)
    feedback_pool: int = Field(12, ge=1, le=1000)
    packet_items: int = 12
    packet_chars: int = 6000
    search_chars: int = 16_000  # what one search result may carry in all
    # A vector matches under this cosine distance. None: the model's own cut (the local
    # e5 model's 0.2; 0.4, the seeds' default, for a remote model).
    semantic_max_distance: float | None = Field(
        None, alias="MEMORY_SEMANTIC_MAX_DISTANCE", gt=0, le=2
    )
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
