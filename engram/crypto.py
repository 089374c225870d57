"""Crypto-shredding: per-item data keys wrapped by a master key (AES-GCM).

Content-bearing event fields are sealed with the item's data key. The wrapped
key lives in Postgres, never in Kafka; deleting it makes every copy of the text
in the log unreadable, which is how an immutable log can forget.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import unicodedata

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from contracts.events import Sealed
from engram.service import StartupRefused
from engram.settings import CommonSettings, dev_secret_file


class KeyMissingError(Exception):
    """The item's data key is gone: the item was forgotten."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def load_master_key(settings: CommonSettings) -> bytes:
    """32 bytes from ENGRAM_MASTER_KEY (base64); development generates one once. A missing
    key in production, or a malformed one, refuses the start."""
    if settings.master_key:
        try:
            key = base64.b64decode(settings.master_key, validate=True)
        except binascii.Error:
            raise StartupRefused("ENGRAM_MASTER_KEY is not valid base64") from None
    elif settings.environment == "production":
        raise StartupRefused("production refuses to start without ENGRAM_MASTER_KEY")
    else:
        key = _unb64(dev_secret_file("master-key", lambda: _b64(secrets.token_bytes(32))))
    if len(key) != 32:
        raise StartupRefused(
            f"ENGRAM_MASTER_KEY must be 32 bytes, base64-encoded (it holds {len(key)})"
        )
    return key


class MasterKey:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        # A separate key for hashes, so a hash never doubles as a key check.
        self._hash_key = hmac.new(key, b"engram content hash v1", hashlib.sha256).digest()
        self._label_key = hmac.new(key, b"engram label hash v1", hashlib.sha256).digest()
        self._issue_key = hmac.new(key, b"engram issued command v1", hashlib.sha256).digest()

    def new_data_key(self) -> bytes:
        return AESGCM.generate_key(bit_length=256)

    def wrap(self, key_id: str, data_key: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, data_key, key_id.encode())

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        return self._aead.decrypt(wrapped[:12], wrapped[12:], key_id.encode())

    def digest(self, data: bytes) -> bytes:
        """A keyed digest of exact bytes (a command's, to know a repeat): nothing a reader
        of a checkpoint could test guesses of its text against (BLAKE2b keyed: one pass,
        on every command's path)."""
        return hashlib.blake2b(data, key=self._hash_key, digest_size=16).digest()

    def issued_id(self, stream_id: str, token: str, payload: dict[str, object]) -> str:
        """The id of a command the command service sends itself (a move's forget): a keyed
        hash of its stream, token and payload, which no caller can make, so none can send
        such a command, take its id first, or send one again under another token."""
        data = f"{stream_id}\x00{token}\x00{json.dumps(payload, sort_keys=True)}".encode()
        return "issued-" + hashlib.blake2b(data, key=self._issue_key, digest_size=16).hexdigest()

    def key_hash(self, org: str, key: str) -> str:
        """Keyed hash of a memory's key, exact: the writer finds a key's memory by it
        without keeping the key, which is sealed with the memory's text."""
        return self._label_hash(b"key", org, key)

    def source_hash(self, org: str, source: str) -> str:
        """Keyed hash of a source id (a message's, a turn's): a forgotten memory's sources
        suppress extraction from them by it, without keeping the ids."""
        return self._label_hash(b"source", org, source)

    def _label_hash(self, kind: bytes, org: str, value: str) -> str:
        data = f"{org}\x00{value}".encode()
        return hashlib.blake2b(data, key=self._label_key, person=kind, digest_size=16).hexdigest()

    def content_hash(self, org: str, text: str) -> str:
        """Keyed hash of normalised text: finds a re-save without keeping the text. Case,
        spacing and invisible format characters (a zero-width space, a joiner) do not
        count: a forgotten text with one added is the same text."""
        visible = unicodedata.normalize("NFKC", text)
        if not visible.isascii():  # Unicode's format characters (category Cf) are invisible
            visible = "".join(ch for ch in visible if unicodedata.category(ch) != "Cf")
        normal = " ".join(visible.casefold().split())
        return hmac.new(self._hash_key, f"{org}\x00{normal}".encode(), hashlib.sha256).hexdigest()


def seal(key_id: str, data_key: bytes, text: str) -> Sealed:
    nonce = os.urandom(12)
    ciphertext = AESGCM(data_key).encrypt(nonce, text.encode(), key_id.encode())
    return Sealed(key_id=key_id, nonce=_b64(nonce), ciphertext=_b64(ciphertext))


def open_sealed(sealed: Sealed, data_key: bytes) -> str:
    try:
        plain = AESGCM(data_key).decrypt(
            _unb64(sealed.nonce), _unb64(sealed.ciphertext), sealed.key_id.encode()
        )
    except InvalidTag as exc:
        raise ValueError(f"sealed field under key {sealed.key_id} does not authenticate") from exc
    return plain.decode()


# Command fields that carry a person's words. The HTTP gateway seals them before
# the command touches Kafka, so a forget also shreds the command's copy: text (a
# proposal's or a rejection's reason too: QA), and lists of it (tags, sources), each list
# sealed as its JSON.
SENSITIVE_FIELDS = ("content", "title", "user_message", "key", "reason")
SENSITIVE_LISTS = ("tags", "sources")


def has_sensitive(payload: dict[str, object]) -> bool:
    """Whether a command's payload holds words to seal."""
    return any(isinstance(payload.get(n), str) for n in SENSITIVE_FIELDS) or any(
        isinstance(payload.get(n), list) for n in SENSITIVE_LISTS
    )


def seal_payload(payload: dict[str, object], key_id: str, data_key: bytes) -> dict[str, object]:
    sealed = dict(payload)
    for name in SENSITIVE_FIELDS:
        value = payload.get(name)
        if isinstance(value, str):
            sealed[name] = seal(key_id, data_key, value).model_dump()
    for name in SENSITIVE_LISTS:
        value = payload.get(name)
        if isinstance(value, list):
            sealed[name] = seal(key_id, data_key, json.dumps(value)).model_dump()
    return sealed


def sealed_key_ids(payload: dict[str, object]) -> set[str]:
    return {
        v["key_id"]
        for n in (*SENSITIVE_FIELDS, *SENSITIVE_LISTS)
        if isinstance(v := payload.get(n), dict) and isinstance(v.get("key_id"), str)
    }


def open_payload(payload: dict[str, object], keys: dict[str, bytes]) -> dict[str, object]:
    """Plain fields stay; sealed ones are opened. A shredded key raises KeyMissingError;
    a sealed list that is not JSON, ValueError."""
    opened = dict(payload)
    for name in (*SENSITIVE_FIELDS, *SENSITIVE_LISTS):
        value = payload.get(name)
        if isinstance(value, dict):
            sealed = Sealed.model_validate(value)
            if sealed.key_id not in keys:
                raise KeyMissingError(sealed.key_id)
            text = open_sealed(sealed, keys[sealed.key_id])
            opened[name] = json.loads(text) if name in SENSITIVE_LISTS else text
    return opened
