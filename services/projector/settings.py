"""Settings of the projector (prefix ENGRAM_PROJECTOR_)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from engram.settings import ServiceSettings


class ProjectorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_PROJECTOR_", extra="ignore", frozen=True)

    port: int = 8082
    group_id: str = "engram-projector"
    max_batch: int = 1000
    # How often the term index's delta table is vacuumed while events are applied (see
    # services/projector/adapters/deltas.py); 0 leaves it to autovacuum.
    deltas_vacuum_seconds: float = Field(5.0, ge=0)
