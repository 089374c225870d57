"""Settings of the recall service (prefix ENGRAM_RECALL_, and the seeds' MEMORY_ names)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from engram.settings import ServiceSettings


class RecallSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_RECALL_", extra="ignore", frozen=True)

    port: int = 8085
    full_text_top: int = 30
    vector_top: int = 30
    packet_items: int = 12
    packet_chars: int = 6000
    search_chars: int = 16_000  # what one search result may carry in all
    semantic_max_distance: float = Field(0.4, alias="MEMORY_SEMANTIC_MAX_DISTANCE")
    # The restricted role recall reads with (RLS); default: DATABASE_URL as engram_recall.
    database_url: str | None = None
    database_role: str = "engram_recall"
