"""Which embedding model a deployment uses (MEMORY_*), and how a service drives it.

The MEMORY_* names describe the deployment's AI and are read the same way by every
service that embeds (the indexer writes vectors, recall embeds queries): both must
name the same model. ``ProviderTuning`` is each service's own behaviour (timeouts,
retries, batch sizes), built from that service's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ProviderName = Literal["off", "local", "openai"]
# pgvector's HNSW index takes at most 2,000 dimensions of type ``vector``.
MAX_INDEXED_DIMENSIONS = 2000


class EmbeddingSettings(BaseSettings):
    """Which embedding model, if any. Off by default: everything works without it."""

    # No populate_by_name: pydantic-settings would then also read bare PROVIDER, URL, MODEL
    # or API_KEY from the environment. Construct it with the MEMORY_* names.
    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    provider: ProviderName = Field("off", alias="MEMORY_EMBEDDING_PROVIDER")
    url: str | None = Field(None, alias="MEMORY_EMBEDDING_URL")
    model: str = Field("text-embedding-3-small", alias="MEMORY_EMBEDDING_MODEL")
    dimensions: int = Field(
        1536, alias="MEMORY_EMBEDDING_DIMENSIONS", ge=1, le=MAX_INDEXED_DIMENSIONS
    )
    api_key: SecretStr | None = Field(None, alias="MEMORY_AI_API_KEY")
    daily_request_limit: int = Field(100, alias="MEMORY_AI_DAILY_REQUEST_LIMIT", ge=0)
    # Send ``dimensions`` in remote requests (text-embedding-3 honours it; older models
    # reject it). A property of the endpoint, so every service must agree on it: the
    # indexer's older name still sets it.
    request_dimensions: bool = Field(
        True,
        validation_alias=AliasChoices(
            "MEMORY_EMBEDDING_REQUEST_DIMENSIONS", "ENGRAM_INDEXER_REQUEST_DIMENSIONS"
        ),
    )

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


@dataclass(frozen=True)
class ProviderTuning:
    """How one service drives a provider; the defaults are the indexer's (batch work)."""

    # Texts per ONNX run of the local model (padded to the longest text in the run).
    local_batch: int = 32
    request_timeout_s: float = 30.0
    # Attempts after the first; each one is a request, charged to the daily budget.
    retries: int = 5
    retry_base_s: float = 0.5
    retry_max_s: float = 30.0
