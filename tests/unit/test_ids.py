"""``engram.ids`` gives exactly what the standard library's ``uuid`` gives."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from engram.ids import name_id, random_id


@given(st.uuids(), st.text())
def test_a_name_id_is_uuid5s(namespace: uuid.UUID, name: str) -> None:
    assert name_id(namespace, name) == str(uuid.uuid5(namespace, name))


def test_a_random_id_is_a_version_4_uuid_as_text() -> None:
    ids = {random_id() for _ in range(2_000)}
    assert len(ids) == 2_000
    for text in ids:
        parsed = uuid.UUID(text)
        assert (str(parsed), parsed.version, parsed.variant) == (text, 4, uuid.RFC_4122)
