"""A caller's rate over HTTP (seed 004: rate limits protect the shared service): a bucket
per org, member and agent, refused with 429 problem+json and a Retry-After before the
route runs."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from engram.auth import TokenVerifier, dev_secret, mint_token
from engram.http import PROBLEM, install_problem_handlers
from engram.ratelimit import Buckets, RateLimit, install_rate_limit
from engram.settings import CommonSettings


def test_a_bucket_lets_a_burst_through_then_the_rate() -> None:
    buckets = Buckets(rate=2, burst=3)
    assert [buckets.take("ana", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("ana", 0.0) == pytest.approx(0.5)  # one more in half a second
    assert buckets.take("bob", 0.0) == 0.0  # a caller of its own
    assert buckets.take("ana", 0.5) == 0.0
    assert buckets.take("ana", 0.6) == pytest.approx(0.4)
    assert buckets.take("ana", 100.0) == 0.0  # refilled, to its burst and no more
    assert [buckets.take("ana", 100.0) for _ in range(3)][-1] > 0


def test_a_refused_request_takes_nothing_and_a_clock_going_back_gives_nothing() -> None:
    buckets = Buckets(rate=1, burst=1)
    assert buckets.take("ana", 10.0) == 0.0
    assert buckets.take("ana", 10.5) == pytest.approx(0.5)
    assert buckets.take("ana", 10.5) == pytest.approx(0.5)  # still half a token, not less
    assert buckets.take("ana", 9.0) > 0  # no refill from the past
    assert buckets.take("ana", 11.0) == 0.0


def test_the_callers_kept_are_bounded_and_full_buckets_go_first() -> None:
    buckets = Buckets(rate=10, burst=10, max_callers=4)
    for n in range(4):
        buckets.take(f"idle-{n}", 0.0)
    buckets.take("busy", 5.0)  # the idle ones are full again after 1 s: forgotten
    assert len(buckets) == 1
    for n in range(3):
        buckets.take(f"new-{n}", 5.0)
    buckets.take("one-more", 5.0)  # all busy: the oldest half goes
    assert len(buckets) == 3
    with pytest.raises(ValueError):
        Buckets(rate=0, burst=1)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def service(rate: float, burst: int, clock: Clock | None = None) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    if clock is None:
        install_rate_limit(
            app,
            CommonSettings.model_validate(
                {"ENGRAM_RATE_LIMIT_PER_SECOND": rate, "ENGRAM_RATE_LIMIT_BURST": burst}
            ),
        )
    else:
        app.add_middleware(RateLimit, rate=rate, burst=burst, clock=clock)
    app.state.verifier = TokenVerifier(CommonSettings())
    ran: list[str] = []
    app.state.ran = ran

    @app.get("/work")
    async def work() -> dict[str, int]:
        ran.append("work")
        return {"done": len(ran)}

    return app


def bearer(**claims: str | bool) -> dict[str, str]:
    token = mint_token(dev_secret(), org=str(claims.pop("org", "acme")), **claims)  # type: ignore[arg-type]
    return {"Authorization": f"Bearer {token}"}


async def test_a_caller_over_its_rate_is_refused_before_the_route_runs() -> None:
    clock = Clock()
    app = service(rate=1, burst=2, clock=clock)
    ana, ana_agent = bearer(member="ana"), bearer(member="ana", agent="helper")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as http:
        assert [(await http.get("/work", headers=ana)).status_code for _ in range(2)] == [200, 200]
        refused = await http.get("/work", headers=ana)
        assert refused.status_code == 429
        assert refused.headers["content-type"] == PROBLEM
        assert refused.headers["retry-after"] == "1"
        body = refused.json()
        assert (body["code"], body["retry_after_seconds"]) == ("rate_limited", 1.0)
        assert "1 requests a second" in body["detail"]
        assert len(app.state.ran) == 2  # the refused request never reached its route
        # Another caller, the same member's agent, another org: buckets of their own.
        for other in (ana_agent, bearer(member="bob"), bearer(org="globex", member="ana")):
            assert (await http.get("/work", headers=other)).status_code == 200
        # Not counted: no token, or one the service cannot verify (its route answers 401
        # or, here, the route runs); health and such carry none.
        for _ in range(3):
            assert (await http.get("/work")).status_code == 200
            bad = {"Authorization": "Bearer not-a-token"}
            assert (await http.get("/work", headers=bad)).status_code == 200
        # The caller is the first Authorization header's, as the route reads it (QA: a
        # second, made-up one went uncounted); probes are never limited.
        twice = httpx.Headers(
            [("Authorization", ana["Authorization"]), ("Authorization", "Bearer x")]
        )
        assert (await http.get("/work", headers=twice)).status_code == 429
        assert (await http.get("/health", headers=ana)).status_code == 404  # not a 429
        assert (await http.get("/work", headers=ana_agent)).status_code == 200
        assert (await http.get("/work", headers=ana_agent)).status_code == 429
        person = bearer(member="ana", agent="helper", person=True)
        assert (await http.get("/work", headers=person)).status_code == 200  # its own
        clock.now = 1.0
        assert (await http.get("/work", headers=ana)).status_code == 200


async def test_the_settings_set_the_limit_and_zero_turns_it_off() -> None:
    ana = bearer(member="ana")
    # A token every 1,000 s: the real clock refills none while the test runs (review).
    for rate, expected in ((0, [200] * 30), (0.001, [200] * 20 + [429] * 10)):
        app = service(rate=rate, burst=20)
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            got = [(await http.get("/work", headers=ana)).status_code for _ in range(30)]
        assert got == expected
