from __future__ import annotations

import pytest

from services.command.confirm import user_asked_to_save


@pytest.mark.parametrize(
    ("message", "content", "shared", "expected"),
    [
        ("Please remember that I like tea", "I like tea", False, True),
        ("save this: the trip budget is 1500 EUR", "The trip budget is 1500 EUR.", False, True),
        ("Don't remember that I like tea", "I like tea", False, False),
        ("do not save: I like tea", "I like tea", False, False),
        ("I like tea", "I like tea", False, False),  # no intent to save
        ("remember that I like tea", "I like coffee", False, False),  # content not there
        ("remember that I like tea", "I like tea", True, False),  # shared needs "everyone"
        ("remember for all teammates: I like tea", "I like tea", True, True),
        ("update my profile: I like tea", "I like tea", True, True),
        (None, "I like tea", False, False),
    ],
)
def test_who_may_confirm(message: str | None, content: str, shared: bool, expected: bool) -> None:
    assert user_asked_to_save(message, content, shared=shared) is expected
