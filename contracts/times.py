"""Times as Engram keeps them: in UTC, and only those a date in UTC can hold."""

from __future__ import annotations

from datetime import UTC, datetime


def in_utc(value: datetime) -> datetime:
    """``value`` in UTC (one without a zone is taken as UTC); ValueError when no date in
    UTC holds it (year 9999 at -14:00, year 1 at +05:00), which every reader downstream
    (Postgres, asyncpg) would otherwise fail on."""
    try:
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except OverflowError as exc:
        raise ValueError("out of range in UTC") from exc
