"""A memory's key, tags and sources are a person's words: the HTTP gateway seals them in a
command as it seals the text, and the keyed hashes the writer keeps of them are exact, of
their org, and of one kind each."""

from __future__ import annotations

import os

import pytest

from engram.crypto import MasterKey, has_sensitive, open_payload, seal_payload, sealed_key_ids

MASTER = MasterKey(b"m" * 32)


def test_a_commands_key_tags_and_sources_are_sealed_and_open_as_they_were() -> None:
    payload: dict[str, object] = {
        "content": "Ana's doctor is Dr Reyes.",
        "key": "doctor",
        "tags": ["health", "family"],
        "sources": ["msg-9"],
        "kind": "fact",
        "pinned": True,
    }
    data_key = os.urandom(32)
    sealed = seal_payload(payload, "item-1", data_key)
    for name in ("content", "key", "tags", "sources"):
        assert isinstance(sealed[name], dict)
    assert (sealed["kind"], sealed["pinned"]) == ("fact", True)  # no words: plain
    for word in ("doctor", "health", "family", "msg-9"):
        assert word not in str(sealed)
    assert sealed_key_ids(sealed) == {"item-1"}
    assert open_payload(sealed, {"item-1": data_key}) == payload


def test_a_reason_is_sealed_too() -> None:
    """QA: a rejection's or a proposal's reason went on Kafka in plain."""
    data_key = os.urandom(32)
    payload: dict[str, object] = {"proposal_id": "p-1", "reason": "Bob is leaving"}
    assert has_sensitive(payload)
    sealed = seal_payload(payload, "cmd-1", data_key)
    assert "Bob" not in str(sealed)
    assert open_payload(sealed, {"cmd-1": data_key}) == payload


def test_a_sealed_list_that_is_no_json_is_a_value_error() -> None:
    data_key = os.urandom(32)
    sealed = seal_payload({"content": "tags, not JSON"}, "item-1", data_key)
    with pytest.raises(ValueError):
        open_payload({"tags": sealed["content"]}, {"item-1": data_key})


def test_label_hashes_are_exact_per_org_and_per_kind() -> None:
    key = MASTER.key_hash("acme", "doctor")
    assert key == MASTER.key_hash("acme", "doctor") and len(key) == 32
    assert key != MASTER.key_hash("acme", "Doctor")  # a key matches exactly
    assert key != MASTER.key_hash("other", "doctor")
    assert key != MASTER.source_hash("acme", "doctor")  # a key is no source
    assert key != MasterKey(b"n" * 32).key_hash("acme", "doctor")  # keyed
    assert "doctor" not in key
