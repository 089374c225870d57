"""Settings of the indexer (prefix ENGRAM_INDEXER_) and of the embedding model (MEMORY_*).

The MEMORY_* names describe which AI the deployment uses and are shared with the
other services that need the same model (recall embeds queries with it); the
ENGRAM_INDEXER_* names describe how this service behaves.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from contracts import topics
from engram.settings import ServiceSettings

ProviderName = Literal["off", "local", "openai"]
# pgvector's HNSW index takes at most 2,000 dimensions of type ``vector``.
MAX_INDEXED_DIMENSIONS = 2000


class EmbeddingSettings(BaseSettings):
    """Which embedding model, if any. Off by default: everything works without it."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    provider: ProviderName = Field("off", alias="MEMORY_EMBEDDING_PROVIDER")
    url: str | None = Field(None, alias="MEMORY_EMBEDDING_URL")
    model: str = Field("text-embedding-3-small", alias="MEMORY_EMBEDDING_MODEL")
    dimensions: int = Field(
        1536, alias="MEMORY_EMBEDDING_DIMENSIONS", ge=1, le=MAX_INDEXED_DIMENSIONS
    )
    api_key: SecretStr | None = Field(None, alias="MEMORY_AI_API_KEY")
    daily_request_limit: int = Field(100, alias="MEMORY_AI_DAILY_REQUEST_LIMIT", ge=0)

    @model_validator(mode="after")
    def _openai_needs_a_url(self) -> EmbeddingSettings:
        if self.provider == "openai" and not self.url:
            raise ValueError("MEMORY_EMBEDDING_PROVIDER=openai needs MEMORY_EMBEDDING_URL")
        return self

    @property
    def effective_provider(self) -> ProviderName:
        """A daily limit of 0 turns remote AI off; the local model is never charged."""
        if self.provider == "openai" and self.daily_request_limit == 0:
            return "off"
        return self.provider


class IndexerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_INDEXER_", extra="ignore", frozen=True)

    port: int = 8083
    group_id: str = "engram-indexer"
    topic: str = topics.EVENTS  # another topic only for tests and drills
    max_batch: int = Field(500, ge=1)
    # Texts per provider call: one remote request is one unit of the daily budget.
    embed_batch: int = Field(64, ge=1, le=2048)
    # Texts per ONNX run of the local model (padded to the longest text in the run).
    local_batch: int = Field(32, ge=1)
    request_timeout_s: float = Field(30.0, gt=0)
    # Send ``dimensions`` in remote requests (text-embedding-3 honours it; older models reject it).
    request_dimensions: bool = True
    retries: int = Field(5, ge=0, le=5)
    retry_base_s: float = Field(0.5, gt=0)
    retry_max_s: float = Field(30.0, gt=0)
    reindex_on_start: bool = True
    # How often to look again for active items without a current vector (0: only at start).
    reindex_interval_s: float = Field(600.0, ge=0)
    reindex_batch: int = Field(64, ge=1)
    # After a complete re-embed, delete the vectors of every other model.
    prune_other_models: bool = True
