"""What a service keeps per org: read again once stale, the least recently read leaving."""

from __future__ import annotations

from engram.orgcache import OrgCache


def test_a_kept_value_is_fresh_until_its_time_then_stale() -> None:
    cache: OrgCache[int] = OrgCache(ttl=60)
    assert cache.stale(["a", "b"]) == ["a", "b"]
    cache.keep("a", 1)
    assert cache.stale(["a", "b"]) == ["b"] and cache.get("a") == 1
    cache.forget("a")
    assert cache.stale(["a"]) == ["a"]
    expired: OrgCache[int] = OrgCache(ttl=0)
    expired.keep("a", 1)
    assert expired.stale(["a"]) == ["a"]


def test_past_its_bound_the_least_recently_read_leave() -> None:
    cache: OrgCache[str] = OrgCache(ttl=60, most=2)
    cache.keep("a", "1")
    cache.keep("b", "2")
    cache.keep("a", "3")  # read again: the newest now
    cache.keep("c", "4")
    assert cache.stale(["a", "b", "c"]) == ["b"]
