"""The set-up step: topics with their partition counts and retention, the shared
package's tables, then every service's migrations, in dependency order (the read
models before their readers)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engram.db import migrate, migrate_shared
from engram.kafka import ensure_topics
from engram.settings import REPO_ROOT, CommonSettings

# The projector's memory.* tables come before the services that read them, and the
# indexer's vectors before recall's row-level security on them.
MIGRATION_ORDER = ("projector", "indexer", "command", "recall", "extractor")


@dataclass(frozen=True)
class SetupReport:
    topics_created: list[str]
    migrations: dict[str, list[str]]


def service_sql_dirs() -> list[tuple[str, Path]]:
    dirs = [(name, REPO_ROOT / "services" / name / "sql") for name in MIGRATION_ORDER]
    return [(name, path) for name, path in dirs if path.is_dir()]


async def setup(common: CommonSettings) -> SetupReport:
    created = await ensure_topics(common.kafka_bootstrap_servers, common.partitions)
    applied = {"engram": await migrate_shared(common.database_url)}
    for name, path in service_sql_dirs():
        applied[name] = await migrate(common.database_url, name, path)
    return SetupReport(created, applied)
