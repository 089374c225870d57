"""Settings of the extractor (prefix ENGRAM_EXTRACTOR_; the AI names as seed 000 has them)."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from contracts import topics
from engram.settings import ServiceSettings


class ExtractorSettings(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="ENGRAM_EXTRACTOR_", extra="ignore", frozen=True, populate_by_name=True
    )

    port: int = 8084
    group_id: str = "engram-extractor"
    events_group_id: str = "engram-extractor-events"
    conversations_topic: str = topics.CONVERSATIONS
    events_topic: str = topics.EVENTS
    # Small batches: a batch's transaction stays open while the AI is asked.
    max_batch: int = Field(20, ge=1)
    # How long the broker may hold a fetch to gather records (see TrackedFollower): nobody
    # waits on this service's work, and waking for every transaction cost the broker and
    # this service about 2 ms of CPU per command. 0: wake for every transaction.
    fetch_gather_ms: int = Field(200, ge=0, le=5000)
    # How often the handled turns are deleted from the conversations topic (see
    # engram/log_pruner.py): its segment age, so that every pass closes a segment.
    prune_seconds: float = Field(topics.PRUNED_SEGMENT_MS / 1000, gt=0)

    # An OpenAI-compatible endpoint: a base URL (…/v1) or the full …/chat/completions.
    extraction_url: str | None = Field(None, alias="MEMORY_EXTRACTION_URL")
    extraction_model: str | None = Field(None, alias="MEMORY_EXTRACTION_MODEL")
    ai_api_key: SecretStr | None = Field(None, alias="MEMORY_AI_API_KEY")
    # Requests per UTC day, reserved before each request; 0 turns AI off.
    ai_daily_request_limit: int = Field(100, alias="MEMORY_AI_DAILY_REQUEST_LIMIT", ge=0)
    # A turn waits on the AI at most about 3 x 10 s + 1.5 s, then the rules stand in (QA:
    # at 20 s, five retries and backoffs up to 30 s, a failing endpoint held a turn over
    # two minutes, and a batch of 20 turns most of an hour).
    ai_timeout_seconds: float = Field(10.0, gt=0)
    ai_max_retries: int = Field(2, ge=0, le=5)
    ai_backoff_seconds: float = Field(0.5, ge=0)
    ai_backoff_max_seconds: float = Field(5.0, ge=0)

    @property
    def ai_enabled(self) -> bool:
        return bool(self.extraction_url and self.extraction_model) and (
            self.ai_daily_request_limit > 0
        )

    @property
    def chat_completions_url(self) -> str:
        url = (self.extraction_url or "").rstrip("/")
        return url if url.endswith("/chat/completions") else f"{url}/chat/completions"
