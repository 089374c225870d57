"""The keyed hash a re-save of forgotten text is found by: case, spacing and invisible
format characters do not make another text (QA: a zero-width space at the start brought
forgotten text back)."""

from __future__ import annotations

import pytest

from engram.crypto import MasterKey

KEY = MasterKey(b"k" * 32)
FORGOTTEN = "The vault code is 4711 forever."


@pytest.mark.parametrize(
    "variant",
    [
        "the VAULT code is 4711 forever.",
        "  The vault\tcode is 4711\u00a0forever. ",
        "\u200bThe vault code is 4711 forever.",  # zero-width space
        "The vault\u200d code is 47\u206011 forever.\ufeff",  # joiner, word joiner, BOM
        "The vault code is \u202e4711\u202c forever.",  # direction marks
    ],
)
def test_the_same_text_hashes_the_same(variant: str) -> None:
    assert KEY.content_hash("acme", variant) == KEY.content_hash("acme", FORGOTTEN)


def test_another_text_or_org_hashes_otherwise() -> None:
    assert KEY.content_hash("acme", "The vault code is 4712 forever.") != KEY.content_hash(
        "acme", FORGOTTEN
    )
    assert KEY.content_hash("other", FORGOTTEN) != KEY.content_hash("acme", FORGOTTEN)
