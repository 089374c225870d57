"""RS256 tokens checked against a JWKS endpoint (a real one, on a local port): the key set
is read at the first token, then again by a thread before the cache expires, so no later
request waits on the endpoint; a failed read keeps the cached keys (review: every five
minutes one request read the key set on the event loop)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from engram import jwks
from engram.auth import AUDIENCE, ISSUER, AuthError, TokenVerifier
from engram.settings import CommonSettings

KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Endpoint:
    """A JWKS endpoint that serves the keys it holds, or fails, and counts its reads."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {"k1": KEY}
        self.failing = False
        self.reads: list[str] = []  # the reading thread's name, per read

    def body(self) -> bytes:
        keys = [
            {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(k.public_key())), "kid": kid}
            for kid, k in self.keys.items()
        ]
        return json.dumps({"keys": keys}).encode()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Endpoint, str]]:
    served = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if served.failing:
                self.send_error(503)
                return
            body = served.body()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    fetch = jwt.PyJWKClient.fetch_data

    def counted(client: jwt.PyJWKClient) -> Any:
        served.reads.append(threading.current_thread().name)
        return fetch(client)

    monkeypatch.setattr(jwt.PyJWKClient, "fetch_data", counted)
    monkeypatch.setattr(jwks, "JWKS_REFRESH_SECONDS", 0.05)
    monkeypatch.setattr(jwks, "JWKS_RETRY_SECONDS", 0.05)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()


def token(key: Any, kid: str, member: str = "ana") -> str:
    claims = {
        "sub": member,
        "org": "acme",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": int(time.time()) + 60,
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def until(check: Any, deadline: float = 5.0) -> None:
    end = time.monotonic() + deadline
    while not check():
        assert time.monotonic() < end, "not within the deadline"
        time.sleep(0.01)


def test_the_key_set_is_read_again_off_the_callers_thread(
    endpoint: tuple[Endpoint, str],
) -> None:
    served, url = endpoint
    verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_JWKS_URL": url}))
    try:
        assert verifier.verify(token(KEY, "k1")).member == "ana"
        assert served.reads == [threading.current_thread().name]  # the first token's read
        until(lambda: served.reads.count("jwks-refresh") >= 3)
        caller = threading.current_thread().name
        before = served.reads.count(caller)
        for n in range(20):  # new tokens, each checked with the cached keys
            assert verifier.verify(token(KEY, "k1", f"m{n}")).member == f"m{n}"
        assert served.reads.count(caller) == before
    finally:
        verifier.close()


def test_a_failed_read_keeps_the_cached_keys_and_a_new_key_is_found(
    endpoint: tuple[Endpoint, str],
) -> None:
    served, url = endpoint
    verifier = TokenVerifier(CommonSettings.model_validate({"ENGRAM_JWT_JWKS_URL": url}))
    try:
        verifier.verify(token(KEY, "k1"))
        served.failing = True
        reads = len(served.reads)
        until(lambda: len(served.reads) >= reads + 2)  # failed reads, retried
        assert verifier.verify(token(KEY, "k1", "bob")).member == "bob"
        served.keys["k2"] = OTHER  # a rotated key: the next read in the background brings it
        served.failing = False
        reads = len(served.reads)
        until(lambda: len(served.reads) >= reads + 2)
        caller = served.reads.count(threading.current_thread().name)
        assert verifier.verify(token(OTHER, "k2", "cleo")).member == "cleo"
        assert served.reads.count(threading.current_thread().name) == caller
        with pytest.raises(AuthError, match="signing key"):  # a key no set holds
            verifier.verify(token(KEY, "k9", "dan"))
    finally:
        verifier.close()
