"""The seeds' packet rules, as pure functions."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from contracts.recall import RecallRequest, SearchRequest, phrases_of
from services.recall.core import (
    AGENT_PRIVACY,
    EXCERPT_WORDS,
    PREAMBLE,
    Candidate,
    Ranked,
    TermStats,
    bm25_weight,
    bound,
    build_packet,
    excerpt,
    fed_back,
    feedback_items,
    fuse,
    header,
    holds,
    in_order,
    lendable,
    or_query,
    passages,
    phrase_pattern,
)


def item(
    n: int,
    text: str = "x",
    pinned: bool = False,
    kind: str = "fact",
    scope: str = "shared",
    updated: float = 0.0,
) -> Candidate:
    return Candidate(
        item_id=f"i{n}",
        revision=n,
        scope=scope,
        kind=kind,
        title=None,
        content=text,
        pinned=pinned,
        updated_at=updated,
    )


def test_the_querys_words_are_or_ed() -> None:
    assert or_query("What's the trip budget? budget!") == "what | s | the | trip | budget"
    assert or_query("¿…?") == ""


def test_fusion_adds_one_over_sixty_plus_rank_and_puts_pinned_first() -> None:
    a, b, c, p = item(1), item(2), item(3), item(4, pinned=True)
    ranked = fuse({"full_text": [a, b], "vector": [b, c]}, [p], top=12)
    assert [r.item.item_id for r in ranked] == ["i4", "i2", "i1", "i3"]
    assert ranked[1].score == 1 / 62 + 1 / 61 and ranked[1].why == ["full_text#2", "vector#1"]
    assert ranked[0].why == ["pinned"]
    assert len(fuse({"full_text": [item(n) for n in range(40)]}, [], top=12)) == 12


def test_entries_have_the_header_of_id_revision_scope_and_kind() -> None:
    assert header(item(3, scope="member:ana", kind="preference")) == (
        "[memory:i3@3; member:ana; preference]"
    )


def test_the_packet_is_cut_at_the_budget_without_splitting_an_item() -> None:
    entries = [Ranked(item(n, "y" * 1900)) for n in range(1, 6)]
    packet = build_packet(entries, 6000)
    assert len(packet.text) <= 6000 and len(packet.entries) == 3 and packet.omitted == 2
    for entry in packet.entries:
        assert f"{header(entry.item)}\n{'y' * 1900}" in packet.text


def test_newest_first_stops_before_the_first_fact_that_does_not_fit() -> None:
    entries = [Ranked(item(1, "a" * 5000)), Ranked(item(2, "b" * 4000)), Ranked(item(3, "c"))]
    packet = build_packet(entries, 8000, stop_at_first_misfit=True)
    assert [e.item.item_id for e in packet.entries] == ["i1"]  # i3 would fit, but never
    skipping = build_packet(entries, 8000, stop_at_first_misfit=False)
    assert [e.item.item_id for e in skipping.entries] == ["i1", "i3"]


def test_an_empty_result_is_never_padded() -> None:
    assert build_packet([], 6000).text == ""
    assert fuse({"full_text": []}, [], top=12) == []


def test_short_memories_come_back_whole() -> None:
    e = excerpt("The budget is 1500 EUR.", "budget")
    assert (e.text, e.truncated, e.full_length) == ("The budget is 1500 EUR.", False, 23)


def test_long_memories_come_back_as_the_passage_that_matched() -> None:
    filler = "Nothing to see in this sentence at all. " * 40
    text = filler + "Escalation: page the on-call rotation first. " + filler
    e = excerpt(text, "who do we page on escalation?")
    assert e.truncated and e.full_length == len(text) and len(e.text) <= 1200
    assert "page the on-call rotation" in e.text
    assert excerpt(text, "").text == passages(text)[0]  # no query: from the start


def test_a_memory_found_by_a_passages_vector_comes_back_as_that_passage() -> None:
    """Seed 004: the chunk the ranking scored, even when another has more query words."""
    filler = "Nothing to see in this sentence at all. " * 40
    text = filler + "Escalation: page the on-call rotation first. " + filler
    parts = passages(text)
    assert excerpt(text, "page escalation", passage=2).text == parts[2]
    assert excerpt(text, "page escalation", passage=0).text == parts[0]
    # A passage the text no longer has (never written so; defensive): by the words.
    assert "on-call" in excerpt(text, "page escalation", passage=99).text


def test_a_text_that_fits_is_one_passage_as_it_is() -> None:
    text = "Line one.\n\nLine two.   Three."
    assert passages(text) == [text]  # its vector and its excerpt: the whole text, unchanged


def test_passages_cover_the_text_in_order_within_the_size() -> None:
    text = "One. " * 500 + "x" * 3000
    parts = passages(text)
    assert all(len(p) <= 1200 for p in parts)
    assert "".join(parts).replace(" ", "") == text.replace(" ", "")


def test_results_are_bounded_with_the_top_hit_always_kept() -> None:
    assert bound([5000, 100, 100], 1000) == 1  # the top hit, however large
    assert bound([400, 400, 400, 400], 1000) == 2
    assert bound([], 1000) == 0


def worded(item_id: str, score: float, **terms: int) -> Candidate:
    return Candidate(item_id, 1, "shared", "fact", None, item_id, False, score=score, terms=terms)


ADOPTED = worded("adopted", 4.0, carolin=1, adopt=1, dog=1, rufus=2, shelter=1)
WALKS = worded("walks", 1.0, carolin=1, walk=1, rufus=1, dog=1, river=1)
PAINTED = worded("painted", 1.1, carolin=1, paint=1, sunset=1, lake=1)


def test_only_words_another_item_holds_are_lent() -> None:
    # "shelter" only the feedback item holds; the query's "carolin" is lent here and
    # left out by the statistics, which know the query's words.
    assert lendable([ADOPTED], [ADOPTED, WALKS, PAINTED]) == {"carolin": 1, "dog": 1, "rufus": 2}
    assert lendable([ADOPTED], [ADOPTED]) == {}
    assert lendable([ADOPTED], [Candidate("x", 1, "shared", "fact", None, "x", False)]) == {}


def test_lent_words_lift_the_items_that_hold_them() -> None:
    lent = lendable([ADOPTED], [ADOPTED, WALKS, PAINTED])
    stats = TermStats(
        items=50, avgdl=5.0, docs={"carolin": 3, "dog": 2, "rufus": 2}, query=frozenset({"carolin"})
    )
    assert [c.item_id for c in fed_back([ADOPTED, PAINTED, WALKS], lent, stats, 10, 0.3)] == [
        "adopted",
        "walks",
        "painted",
    ]
    # Only the strongest word (rufus: tf 2) counts with terms=1; the query's own never.
    one = fed_back([PAINTED, WALKS], lent, stats, 1, 0.3)
    assert [c.item_id for c in one] == ["walks", "painted"]
    none = fed_back([PAINTED, WALKS], {"carolin": 1}, stats, 10, 0.3)
    assert [c.item_id for c in none] == ["painted", "walks"]  # the old order stands
    # The scoring is memory.bm25_weight's (k1 1.2, b 0.75) and the term index's IDF.
    assert bm25_weight(1, 5, 5.0) == pytest.approx(1.0)
    assert bm25_weight(2, 5, 5.0) == pytest.approx(4.4 / 3.2)
    assert bm25_weight(1, 10, 5.0) < 1.0 < bm25_weight(1, 2, 5.0)
    assert stats.idf("rufus") == pytest.approx(math.log(1 + 48.5 / 2.5))


def test_the_feedback_items_are_the_fused_first_answers() -> None:
    a, b, c = (worded(i, 0.0) for i in "abc")
    lists = {"full_text": [a, b, c], "vector": [c, a]}
    assert [x.item_id for x in feedback_items(lists, 2)] == ["a", "c"]
    assert [x.item_id for x in feedback_items(lists, 3)] == ["a", "c", "b"]


def test_one_list_in_order_keeps_its_order_pinned_or_not_up_to_the_cap() -> None:
    newest = [item(n, pinned=n == 3) for n in (5, 4, 3, 2, 1)]
    ranked = in_order("newest", newest, 3)
    assert [r.item.item_id for r in ranked] == ["i5", "i4", "i3"]
    assert ranked[2].why == ["newest#3"] and ranked[0].score == 1 / 61
    assert in_order("newest", newest, 12) == in_order("newest", newest, 5)


def test_an_excerpt_weighs_the_querys_first_words_only() -> None:
    """A query may be 20,000 characters and every hit of a search is excerpted: only its
    first EXCERPT_WORDS distinct words are matched (a review found a 5,000-word query
    holding the service for most of a second a hit)."""
    content = "alpha " * 150 + "omega " * 150 + "gamma " * 150
    near_end = excerpt(content, "gamma", size=400)
    assert near_end.truncated and "gamma" in near_end.text
    padded = " ".join(f"w{i:03d}" for i in range(EXCERPT_WORDS)) + " gamma"
    assert "gamma" not in excerpt(content, padded, size=400).text  # past the cap: the head


def test_an_inflected_query_word_finds_its_passage() -> None:
    """Full text stems "databases" to match "database": the excerpt does the same (QA)."""
    content = "alpha " * 150 + "the payments database is read-only at night " + "omega " * 150
    assert "payments database" in excerpt(content, "databases", size=400).text


def test_a_packet_says_memory_is_past_evidence_and_the_instructions_win() -> None:
    """Seed 002: the text tells the model that memory is past evidence and that current
    instructions win; an agent's memory, which every member who uses the agent shares,
    comes with its rule of privacy (a seed coverage audit: packets said neither)."""
    packet = build_packet([Ranked(item(1, "Ana likes tea."))], 6000)
    assert packet.text == f"{PREAMBLE}\n\n[memory:i1@1; shared; fact]\nAna likes tea."
    assert "current instructions, they win" in PREAMBLE and AGENT_PRIVACY not in packet.text
    agents = build_packet([Ranked(item(1)), Ranked(item(2, scope="agent:helper"))], 6000)
    assert agents.text.startswith(f"{PREAMBLE}\n{AGENT_PRIVACY}\n\n")
    # The preamble counts toward the budget: an entry that fits only without it is left out.
    exact = len("[memory:i1@1; shared; fact]\n") + 100
    assert build_packet([Ranked(item(1, "y" * 100))], exact).entries == []
    assert build_packet([Ranked(item(1, "y" * 100))], exact + len(PREAMBLE) + 2).entries


def test_a_larger_budget_never_holds_fewer_entries() -> None:
    """QA: a member entry then an agent entry: 350-360 characters gave an empty packet
    (a second pass with the rule of privacy), and 370-470 the rule without the agent's
    entry."""
    entries = [
        Ranked(item(1, "Ana's office wifi is Pelican.", scope="member:ana")),
        Ranked(item(2, "The office wifi is Pelican-5G.", scope="agent:helper")),
    ]
    held = [len(build_packet(entries, chars).entries) for chars in range(150, 600, 5)]
    assert held == sorted(held) and held[-1] == 2
    for chars in range(150, 600, 5):
        packet = build_packet(entries, chars)
        assert len(packet.text) <= chars
        has_agent = any(e.item.scope.startswith("agent:") for e in packet.entries)
        assert (AGENT_PRIVACY in packet.text) == has_agent


def test_quoted_phrases_are_matched_as_written() -> None:
    """Seed 004's exact matching: a phrase in double quotes must appear as written, at
    word boundaries, case aside, however its words are spaced (QA: "ERR-1042" found
    "ERR-10423"; a sixth phrase, or one after a phrase too long, was silently dropped)."""
    assert phrases_of('deploy "release  train" and \u201con-call rotation\u201d "x" "X"') == [
        "release train",
        "on-call rotation",
        "x",
    ]
    assert phrases_of("no quotes here") == [] and phrases_of('"" " "') == []
    with pytest.raises(ValidationError, match="at most 5 phrases"):
        SearchRequest(query=" ".join(f'"p{n}"' for n in range(6)))
    with pytest.raises(ValidationError, match="at most 200 characters"):
        RecallRequest(query=f'"{"x" * 201}" shipped "v2.3.1"')

    def item(content: str, title: str | None = None) -> Candidate:
        return Candidate("i-1", 1, "member:ana", "fact", title, content, False)

    def held(content: str, *phrases: str, title: str | None = None) -> bool:
        return holds(item(content, title), [phrase_pattern(p) for p in phrases])

    assert held("Leaves on Tuesdays.", "release train", "LEAVES ON", title="Release Train")
    assert not held("The train for the release.", "release train")
    assert held("The payment service threw ERR-1042 twice.", "ERR-1042")
    assert not held("The gateway threw ERR-10423 once.", "ERR-1042")
    assert not held("We shipped v2.3.10.", "v2.3.1") and held("We shipped v2.3.1.", "v2.3.1")
    assert not held("Concatenate the strings.", "catenate")
    assert held("The quick  brown fox", "quick brown")
    assert held("The deploy window\nopens at noon.", "window opens")
    assert held("Costs (x) rise 100%.", "(x) rise 100%")
