"""The signing keys of a JWKS endpoint (RS256 tokens), cached and read again in the
background so that no request waits on the endpoint once the first token has."""

from __future__ import annotations

import threading
from typing import Any

import jwt

from engram.logging import get_logger

log = get_logger(__name__)

# A read of the JWKS waits 3 s at most, not PyJWT's 30: the first token's and an unknown
# key id's run on the event loop (a security review). After the first token, a thread reads
# the key set again every 4 minutes, so the cached set (kept 10) does not expire in a
# request while the endpoint answers; after a failed read it tries again in 10 s.
JWKS_TIMEOUT_SECONDS = 3.0
JWKS_KEPT_SECONDS = 600.0
JWKS_REFRESH_SECONDS = 240.0
JWKS_RETRY_SECONDS = 10.0


class JwksKeySource:
    """One endpoint's keys: PyJWT's cache of them, kept fresh by a thread from the first
    token on."""

    def __init__(self, url: str) -> None:
        self._client = jwt.PyJWKClient(
            url, timeout=JWKS_TIMEOUT_SECONDS, lifespan=JWKS_KEPT_SECONDS
        )
        self._refresher: threading.Thread | None = None
        self._stopped = threading.Event()

    def key(self, token: str) -> Any:
        """The key that signed ``token`` (by its key id); the first starts the refresher."""
        key = self._client.get_signing_key_from_jwt(token).key
        if self._refresher is None:
            self._refresher = threading.Thread(
                target=self._refresh_keys, name="jwks-refresh", daemon=True
            )
            self._refresher.start()
        return key

    def _refresh_keys(self) -> None:
        """Read the key set again before the cached one expires, off the event loop."""
        wait = JWKS_REFRESH_SECONDS
        while not self._stopped.wait(wait):
            try:
                self._client.get_jwk_set(refresh=True)
                wait = JWKS_REFRESH_SECONDS
            except Exception as exc:  # the thread must outlive any failed read
                log.warning(
                    "jwks_refresh_failed", error=str(exc)[:300], retry_seconds=JWKS_RETRY_SECONDS
                )
                wait = JWKS_RETRY_SECONDS

    def close(self) -> None:
        """Stop reading the key set in the background."""
        self._stopped.set()
