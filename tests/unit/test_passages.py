"""A long memory's passages (engram.passages): what the indexer embeds one vector each
for and what a search shows."""

from __future__ import annotations

import itertools
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from engram.passages import passages, spans


def test_a_text_that_fits_is_one_passage_as_it_is() -> None:
    text = "Line one.\n\n    Line two.   Three."
    assert passages(text, 100) == [text]


def test_passages_are_the_texts_own_slices_line_breaks_and_indentation_kept() -> None:
    """QA: re-joined sentences lost the code's line breaks and indentation."""
    one = "def handler_{}(event):\n    if event.kind:\n        retry(event)"
    code = "\n".join(one.format(i) for i in range(40))
    parts = passages(code, 300)
    assert len(parts) > 1 and all(part in code for part in parts)
    assert parts[0].startswith("def handler_0(event):\n    if event.kind:")


def test_lines_without_end_marks_are_cut_between_lines_not_words() -> None:
    """QA: a list of steps with no full stops was cut in the middle of a word."""
    steps = "\n".join(f"- step {n}: restart the worker pool and check the depth" for n in range(40))
    for part in passages(steps, 500):
        assert part.startswith("- step ") and part.endswith("check the depth")


def test_a_text_with_no_break_is_cut_between_words_into_even_pieces() -> None:
    """QA: 1,201 characters with no sentence end gave a passage of one character."""
    text = ("the eight inch reflector stays in the shed " * 30)[:1201]
    parts = passages(text)
    assert len(parts) == 2 and all(550 < len(part) <= 1200 for part in parts)
    assert all(not part[0].isspace() and not part[-1].isspace() for part in parts)


def test_a_short_sentence_before_a_long_run_goes_with_its_first_piece() -> None:
    """QA: "Okay." before 1,300 characters with no sentence end was a passage of its own."""
    parts = passages("Okay. " + ("reflector " * 130)[:1300])
    assert len(parts) == 2 and parts[0].startswith("Okay. reflector")


def test_chinese_and_japanese_sentences_end_without_a_space() -> None:
    """QA: Chinese text was cut at a fixed count, in the middle of a word."""
    sentence = "我们去年春天把厨房的旧柜子换成了开放式的橡木搁板。岛台也换了新的石英石台面。"
    parts = passages((sentence * 40)[:2410])
    assert len(parts) == 2 and all(part.endswith("。") for part in parts)


def test_a_hard_cut_never_splits_a_character_of_several_code_points() -> None:
    """QA: passages began with a Thai vowel sign, a joiner, or the second half of a flag."""
    for text in ("🇩🇪🇫🇷🇯🇵" * 300, "สวัสดีครับยินดีต้อนรับ" * 80, "👨\u200d👩\u200d👧" * 400):
        for part in passages(text):
            assert unicodedata.category(part[0]) not in ("Mn", "Mc", "Me")
            assert part[0] != "\u200d" and not part.endswith("\u200d")
    assert all(len(part) % 2 == 0 for part in passages("🇩🇪🇫🇷🇯🇵" * 300))  # flags whole


text_pieces = st.lists(
    st.sampled_from(["word", "Sentence.", "Done!", "\n", "  ", "\n\n", "é", "日本語", "x" * 70]),
    max_size=300,
)


@given(text_pieces, st.sampled_from([40, 200, 1200]))
def test_passages_are_bounded_ordered_slices_that_lose_no_text(
    pieces: list[str], size: int
) -> None:
    text = " ".join(pieces)
    found = spans(text, size)
    assert all(0 < end - start <= size for start, end in found)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(found))
    kept = "".join(text[start:end] for start, end in found)
    assert "".join(kept.split()) == "".join(text.split())  # only the breaks between left out
