"""The settings every service shares; each service adds its own under its prefix."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


def state_dir() -> Path:
    """Where the development stack keeps data, logs and generated dev secrets."""
    return Path(os.environ.get("ENGRAM_STATE_DIR", REPO_ROOT / ".engram")).resolve()


def dev_secret_file(name: str, make: Callable[[], str]) -> str:
    """A development secret in the state folder's ``secrets/``, made once by ``make``:
    the folder only its owner enters (0700), the file only its owner reads (0600) from the
    moment it exists (a security review: it was written under the umask, then chmod'ed)."""
    folder = state_dir() / "secrets"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)  # one made before this rule, or by another umask
    path = folder / name
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made before, or by another process just now
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(make())
    return path.read_text().strip()


class CommonSettings(BaseSettings):
    """Connection settings read without a prefix, as every tool expects them."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    kafka_bootstrap_servers: str = Field("127.0.0.1:29092", alias="KAFKA_BOOTSTRAP_SERVERS")
    database_url: str = Field("postgresql://postgres@127.0.0.1:25432/engram", alias="DATABASE_URL")
    environment: Literal["dev", "production"] = Field("dev", alias="ENGRAM_ENV")
    # Topics made by the set-up step keep their count (the services read it from Kafka).
    # Two: a partition's writer commits one Kafka transaction at a time, and on two cores
    # fewer, fuller transactions beat more parallel ones (README, Benchmarks).
    partitions: int = Field(2, alias="ENGRAM_PARTITIONS", ge=1, le=256)
    log_level: str = Field("INFO", alias="ENGRAM_LOG_LEVEL")
    jwt_secret: str | None = Field(None, alias="ENGRAM_JWT_SECRET")
    jwt_jwks_url: str | None = Field(None, alias="ENGRAM_JWT_JWKS_URL")
    jwt_public_key: str | None = Field(None, alias="ENGRAM_JWT_PUBLIC_KEY")
    master_key: str | None = Field(None, alias="ENGRAM_MASTER_KEY")
    # A caller's (org, member, agent and person claim) HTTP requests a second to each
    # command or recall instance, 0 for no limit, and its bucket: how many it may send at
    # once before that rate holds it back.
    rate_limit_per_second: float = Field(200, alias="ENGRAM_RATE_LIMIT_PER_SECOND", ge=0)
    rate_limit_burst: int = Field(400, alias="ENGRAM_RATE_LIMIT_BURST", ge=1)


class ServiceSettings(BaseSettings):
    """Base for a service's own settings: its HTTP address and instance name."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    host: str = "127.0.0.1"
    port: int = 8080
    instance: str = Field(default_factory=lambda: f"{os.uname().nodename}-{os.getpid()}")
