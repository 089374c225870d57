"""The local model gives real embeddings: meaning, not spelling, decides the distance."""

from __future__ import annotations

import math

import pytest

from engram.embeddings.providers import LOCAL_DIMENSIONS, LocalProvider


@pytest.fixture(scope="module")
def model() -> LocalProvider:
    return LocalProvider(batch_size=2)


def cosine_distance(a: list[float], b: list[float]) -> float:
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True))


async def test_a_budget_fact_is_nearer_to_a_vacation_question_than_to_a_work_rule(
    model: LocalProvider,
) -> None:
    fact, question, rule = await model.embed(
        [
            "The trip budget is 1500 EUR.",
            "How much can we spend on the vacation?",
            "Run the tests before you report that work is done.",
        ]
    )
    assert cosine_distance(fact, question) < cosine_distance(fact, rule)
    assert cosine_distance(fact, question) < 0.5 < cosine_distance(fact, rule)


async def test_vectors_are_384_dimensional_unit_length_and_independent_of_batching(
    model: LocalProvider,
) -> None:
    texts = ["short", "a somewhat longer sentence about the quarterly budget", "tea"]
    together = await model.embed(texts)
    alone = [(await model.embed([t]))[0] for t in texts]
    for vector, single in zip(together, alone, strict=True):
        assert len(vector) == LOCAL_DIMENSIONS
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-4)
        assert cosine_distance(vector, single) < 1e-3  # padding does not change the meaning


async def test_long_texts_are_truncated_not_refused(model: LocalProvider) -> None:
    [vector] = await model.embed(["budget " * 2000])
    assert len(vector) == LOCAL_DIMENSIONS
