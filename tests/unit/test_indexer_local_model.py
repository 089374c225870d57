"""The local model gives real embeddings: meaning, not spelling, decides the distance."""

from __future__ import annotations

import copy
import math

import pytest

from engram.embeddings.providers import LOCAL_DIMENSIONS, LocalProvider


@pytest.fixture(scope="module")
def model(local_model: LocalProvider) -> LocalProvider:
    """The session's model, two texts a run: three texts take two runs."""
    twin = copy.copy(local_model)
    twin._batch = 2
    return twin


def cosine_distance(a: list[float], b: list[float]) -> float:
    return 1.0 - sum(x * y for x, y in zip(a, b, strict=True))


async def test_a_budget_fact_is_nearer_to_a_vacation_question_than_to_a_work_rule(
    model: LocalProvider,
) -> None:
    fact, rule = await model.embed(
        ["The trip budget is 1500 EUR.", "Run the tests before you report that work is done."]
    )
    [question] = await model.embed_queries(["How much can we spend on the vacation?"])
    assert cosine_distance(question, fact) < cosine_distance(question, rule)
    assert cosine_distance(question, rule) > model.max_distance  # beyond recall's cut


async def test_a_query_and_a_memory_of_the_same_words_are_embedded_differently(
    model: LocalProvider,
) -> None:
    [as_memory] = await model.embed(["the trip budget"])
    [as_query] = await model.embed_queries(["the trip budget"])
    assert 1e-3 < cosine_distance(as_memory, as_query) < model.max_distance


async def test_vectors_are_384_dimensional_unit_length_and_independent_of_batching(
    model: LocalProvider,
) -> None:
    texts = ["short", "a somewhat longer sentence about the quarterly budget", "tea"]
    together = await model.embed(texts)
    alone = [(await model.embed([t]))[0] for t in texts]
    for vector, single in zip(together, alone, strict=True):
        assert len(vector) == LOCAL_DIMENSIONS
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-4)
        # Padding does not change the meaning. (The int8 model scales its activations per
        # run, so the company of other texts moves a vector by about 0.002.)
        assert cosine_distance(vector, single) < 5e-3


async def test_long_texts_are_truncated_not_refused(model: LocalProvider) -> None:
    [vector] = await model.embed(["budget " * 2000])
    assert len(vector) == LOCAL_DIMENSIONS


def test_a_passage_is_sliced_where_the_model_would_stop_reading_it(
    local_model: LocalProvider,
) -> None:
    """QA: a German passage of 1,200 characters was read to its 667th, Chinese to its
    250th; each slice now fits the model's 256 tokens with its marks and the title."""
    german = ("Die Zahlungsverarbeitung wird nachts von der Bereitschaft überwacht. " * 20)[:1190]
    for passage in (german, "日本語のテキストです。" * 60, "Short English text."):
        pieces = local_model.pieces("A title", passage)
        assert "".join(pieces).replace(" ", "") == passage.replace(" ", "")
        assert all(piece in passage for piece in pieces)
        for piece in pieces:
            assert len(local_model._counter.encode(f"passage: A title\n{piece}").ids) <= 256
    assert local_model.pieces("A title", "Short English text.") == ["Short English text."]
    assert len(local_model.pieces(None, german)) == 2


def test_a_long_title_is_cut_so_that_every_slice_of_the_text_is_read(
    local_model: LocalProvider,
) -> None:
    """QA: a Korean title of 200 characters took 356 tokens: no slice of the text was read."""
    title = ("주방 리모델링 공사 기록 " * 20)[:200].strip()
    head = local_model.heading(title)
    assert head is not None and title.startswith(head) and len(head) < len(title)
    assert local_model.heading("A short title") == "A short title"
    text = ("강아지 훈련 수업은 매주 토요일에 있습니다. " * 40)[:1190]
    for piece in local_model.pieces(head, text):
        assert len(local_model._counter.encode(f"passage: {head}\n{piece}").ids) <= 256
