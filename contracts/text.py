"""NUL characters: valid in JSON and Python strings, but Postgres's ``text`` cannot hold
one. Every command, envelope and turn refuses them (a clear 422 or rejection before
anything is decided); an event written before that was so has each replaced by U+FFFD
when it is read, so no reader of the log fails on it."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticCustomError

NUL = "\x00"
REPLACEMENT = "\ufffd"


def postgres_text(value: str) -> str:
    """A field's validator: its text refused (422, naming the field) before it reaches
    Postgres, where it would fail: a NUL, or a lone surrogate (JSON's ``"\\ud800"``, which
    Python's JSON reader lets through and UTF-8 cannot encode)."""
    if NUL in value:
        raise PydanticCustomError("nul_character", "text cannot hold the NUL character (U+0000)")
    if not is_unicode(value):
        raise PydanticCustomError(
            "string_unicode", "text must be valid Unicode: no lone surrogate (U+D800 to U+DFFF)"
        )
    return value


def is_unicode(value: str) -> bool:
    """Whether the text can be encoded (no lone surrogate)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def nul_in(values: dict[str, Any]) -> str | None:
    """The name of the first field whose text holds a NUL, or None (on every command's
    path: exact types, no isinstance)."""
    for name, value in values.items():
        kind = type(value)
        if kind is str:
            if NUL in value:
                return name
        elif (kind is tuple or kind is list) and value:
            for v in value:
                if type(v) is str and NUL in v:
                    return name
    return None


def refuse_nul(values: dict[str, Any]) -> None:
    if (name := nul_in(values)) is not None:
        raise ValueError(f"{name}: text must not contain a NUL character (\\u0000)")


def scrub_nul(raw: bytes) -> bytes:
    """The record with every NUL in its strings replaced (nothing to do for nearly all)."""
    if b"\\u0000" not in raw:
        return raw
    try:
        return json.dumps(_scrub(json.loads(raw))).encode()
    except RecursionError as exc:  # a reader's error for poison, as for invalid JSON
        raise ValueError("the record nests deeper than it can be read") from exc


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value
