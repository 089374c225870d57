"""When to ask a remote provider again: pure, so the schedule is tested without waiting."""

from __future__ import annotations


def backoff(attempt: int, base: float, cap: float, retry_after: float | None = None) -> float:
    """Delay before retry ``attempt`` (0-based): doubling from ``base``, never above ``cap``.

    A server's Retry-After wins when it asks for longer (still capped).
    """
    delay = min(cap, base * 2**attempt)
    if retry_after is not None:
        delay = min(cap, max(delay, retry_after))
    return delay


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds; None for an HTTP date (our own backoff applies)."""
    try:
        return float(value) if value else None
    except ValueError:
        return None
