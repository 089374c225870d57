"""Settings of the indexer (prefix ENGRAM_INDEXER_).

Which embedding model the deployment uses is shared with recall (it embeds queries
with the same model): see ``engram.embeddings.settings``. The names here describe how
this service behaves.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from contracts import topics
from engram.embeddings.settings import ProviderTuning
from engram.settings import ServiceSettings


class IndexerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_INDEXER_", extra="ignore", frozen=True)

    port: int = 8083
    group_id: str = "engram-indexer"
    topic: str = topics.EVENTS  # another topic only for tests and drills
    max_batch: int = Field(500, ge=1)
    # How long the broker may hold a fetch to gather records (see TrackedFollower): nobody
    # waits on this service's work, and waking for every transaction cost the broker and
    # this service about 2 ms of CPU per command. 0: wake for every transaction.
    fetch_gather_ms: int = Field(200, ge=0, le=5000)
    # Texts per provider call: one remote request is one unit of the daily budget.
    embed_batch: int = Field(64, ge=1, le=2048)
    # Texts per ONNX run of the local model (padded to the longest text in the run).
    local_batch: int = Field(32, ge=1)
    request_timeout_s: float = Field(30.0, gt=0)
    retries: int = Field(5, ge=0, le=5)
    retry_base_s: float = Field(0.5, gt=0)
    retry_max_s: float = Field(30.0, gt=0)
    # How often an indexer with no model and no vector looks again for one (idle.py).
    idle_check_s: float = Field(5.0, gt=0, le=3600)
    reindex_on_start: bool = True
    # How often to look again for active items without a current vector (0: only at start).
    reindex_interval_s: float = Field(600.0, ge=0)
    reindex_batch: int = Field(64, ge=1)
    # After a complete re-embed, delete the vectors of every other model.
    prune_other_models: bool = True

    @property
    def tuning(self) -> ProviderTuning:
        """The provider's behaviour for batch work: long timeouts, patient retries."""
        return ProviderTuning(
            local_batch=self.local_batch,
            request_timeout_s=self.request_timeout_s,
            retries=self.retries,
            retry_base_s=self.retry_base_s,
            retry_max_s=self.retry_max_s,
        )
