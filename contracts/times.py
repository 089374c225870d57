"""Times as Engram keeps them: in UTC, and only those a date in UTC can hold."""

from __future__ import annotations

from datetime import UTC, datetime


def in_utc(value: datetime) -> datetime:
    """``value`` in UTC (one without a zone is taken as UTC); ValueError when no date in
    UTC holds it (year 9999 at -14:00, year 1 at +05:00), which every reader downstream
    (Postgres, asyncpg) would otherwise fail on."""
    try:
        utc = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except OverflowError as exc:
        raise ValueError("out of range in UTC") from exc
    if utc.replace(tzinfo=None) in (datetime.min, datetime.max):
        # asyncpg writes these two as Postgres's -infinity and infinity, which read back
        # as no time at all (QA: a memory "expired" at 0001-01-01T00:00:00, zone lost).
        raise ValueError(
            "out of range: after 0001-01-01T00:00:00Z, before 9999-12-31T23:59:59.999999Z"
        )
    return utc
