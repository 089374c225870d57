"""Settings of the projector (prefix ENGRAM_PROJECTOR_)."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from engram.settings import ServiceSettings


class ProjectorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_PROJECTOR_", extra="ignore", frozen=True)

    port: int = 8082
    group_id: str = "engram-projector"
    max_batch: int = 1000
