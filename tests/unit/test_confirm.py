from __future__ import annotations

import time

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
        # QA: typed apostrophes, other negations, and the words as no request at all.
        ("Don\u2019t remember that my bank PIN is 9182", "My bank PIN is 9182", False, False),
        ("Please don\u02bct save this: my door code is 5521", "my door code is 5521", False, False),
        ("dont remember that I like tea", "I like tea", False, False),
        ("You shouldn't save that I like tea", "I like tea", False, False),
        ("I can't remember whether I like tea", "I like tea", False, False),
        ("Do NOT under any circumstances remember: I like tea", "I like tea", False, False),
        ("Don't, please, save it: I like tea", "I like tea", False, False),
        ("I want you to remember that I like tea", "I like tea", False, True),
        ("Please remember \u2019cause I like tea", "I like tea", False, True),
        ("Updates for all later: the offsite is in Porto", "the offsite is in Porto", True, False),
        ("I kept a note: I like tea", "I like tea", False, False),
        ("Don\u2019t forget to save this: I like tea", "I like tea", False, True),
        ("Remember that Ana\u2019s colour is blue", "Ana\u2019s colour is blue", False, True),
        ("Please remember: we\u2019re flying on Friday", "We're flying on Friday", False, True),
        ("Don\u00b4t remember that my PIN is 1234", "my PIN is 1234", False, False),
        ("never forget to remember that I like tea", "I like tea", False, True),
        # Seed coverage audit: the content's words must come in the message's order, and
        # "everything" names nobody.
        ("Remember that Ana likes coffee, not tea", "Ana likes tea, not coffee", False, False),
        (
            "Remember: the budget is 1500 EUR, the deadline is 2000 days away",
            "The budget is 2000 EUR",
            False,
            False,
        ),
        (
            "Remember: the budget is 1500 EUR, the deadline is 2000 days away",
            "Budget 1500 EUR",
            False,
            True,
        ),
        ("Please save that my cat, a tabby, is called Miso", "My cat is called Miso", False, True),
        (
            "Remember everything I said: the offsite is in Porto",
            "the offsite is in Porto",
            True,
            False,
        ),
        ("Remember for everyone: the offsite is in Porto", "the offsite is in Porto", True, True),
        # QA: a number cut short, a word inside another, a negation or another fact's
        # number between the content's words.
        ("Remember the budget is 1500", "The budget is 150", False, False),
        ("remember that banana likes teapots", "Ana likes tea", False, False),
        ("Remember that the user is not vegan.", "The user is vegan.", False, False),
        (
            "Remember: the flight is at 10, the hotel is at 12.",
            "The flight is at 12.",
            False,
            False,
        ),
        ("Tea or coffee? Remember: tea at four.", "Tea at four", False, True),
        ("Remember that Ana isnt vegan", "Ana is vegan", False, False),
        ("Remember that Ana wasnt ever vegan", "Ana was vegan", False, False),
        ("Remember that Ana aint vegan", "Ana vegan", False, False),
    ],
)
def test_who_may_confirm(message: str | None, content: str, shared: bool, expected: bool) -> None:
    assert user_asked_to_save(message, content, shared=shared) is expected


@pytest.mark.parametrize(
    ("message", "content", "shared"),
    [  # A seed coverage audit: each was a confirmed fact, saying what the message did not.
        (
            "Keep in mind, the user wants light mode. Dark mode is bad.",
            "The user wants dark mode.",
            False,
        ),
        (
            "Remember for everyone: Ana rejected the plan and Bob approved the budget.",
            "Ana approved the budget.",
            True,
        ),
        (
            "Keep all teammates posted: the deploy freeze is rumored to be lifted, unconfirmed.",
            "The deploy freeze is lifted.",
            True,
        ),
        ("Remember that Ana likes Carol and Bob hates her.", "Ana likes Bob.", False),
        ("Remember Ana is hardly allergic to peanuts.", "Ana is allergic to peanuts.", False),
        ("Remember that Ana, not Bob, likes tea.", "Ana likes tea.", False),
        ("Remember: Ana likes tea; Bob likes coffee.", "Ana likes coffee", False),
    ],
)
def test_the_content_must_be_in_one_sentence_of_the_message(
    message: str, content: str, shared: bool
) -> None:
    assert user_asked_to_save(message, content, shared=shared) is False


@pytest.mark.parametrize(
    ("message", "content"),
    [
        ("Please save that my cat, a tabby, is called Miso", "My cat is called Miso"),
        ("Remember: the meeting is at 10:30 on Monday.", "The meeting is at 10:30 on Monday"),
        ("Remember that the trip budget is 1500 EUR. Thanks!", "Trip budget 1500 EUR"),
        ("Remember Ana and Bob like tea: it matters.", "Ana and Bob like tea."),
    ],
)
def test_the_content_in_a_sentence_or_past_an_aside_is_confirmed(
    message: str, content: str
) -> None:
    assert user_asked_to_save(message, content, shared=False) is True


@pytest.mark.parametrize(
    ("message", "content"),
    [  # QA, over the one-sentence rule: each was confirmed, saying what the message did not.
        ("Remember for everyone: Bob, not Ana, approved the budget.", "Ana approved the budget"),
        ("Remember for everyone that the user, unlike Bob, is vegan.", "Bob is vegan"),
        (
            "Remember for everyone: Ana approved. The budget is still open.",
            "Ana approved the budget",
        ),
        ("Remember for everyone that Ana likes, I mean hates, coffee.", "Ana likes coffee"),
        ("Remember for everyone except Ana is vegan.", "Ana is vegan"),
        ("Remember to ask whether Ana is vegan.", "Ana is vegan"),
        ("Remember: it is false that Ana is vegan.", "Ana is vegan"),
        ("Remember: nobody thinks Ana is vegan.", "Ana is vegan"),
        ("Remember if the user likes Python.", "the user likes Python"),
        ("Remember: the user likes Python?", "the user likes Python"),
        ("Remember the user likes Python less than Go.", "the user likes Python"),
        ("Remember the user wants dark mode off.", "the user wants dark mode"),
        ("Remember the user was vegan.", "the user is vegan"),
    ],
)
def test_a_denied_asked_or_turned_content_is_not_confirmed(message: str, content: str) -> None:
    assert user_asked_to_save(message, content, shared=True) is False


@pytest.mark.parametrize(
    ("message", "content"),
    [  # QA: ordinary phrasings the one-sentence rule had made candidates.
        ("Remember that Ana really likes green tea.", "Ana likes green tea"),
        (
            "Please remember the user usually prefers short answers.",
            "The user prefers short answers",
        ),
        ("Remember Ana is strictly vegan.", "Ana is vegan"),
        ("Remember that Dr. Smith is the dentist.", "Dr. Smith is the dentist"),
        ("Remember: Ana, who leads our design team, prefers Figma.", "Ana prefers Figma"),
        ("Remember: Ana - our designer - prefers Figma.", "Ana prefers Figma"),
        ("Remember: Ana (our designer) prefers Figma.", "Ana prefers Figma"),
        ("Remember that Ana likes tea, not coffee.", "Ana likes tea"),
        ("Remember: Ana likes tea. Bob likes coffee.", "Ana likes tea. Bob likes coffee."),
        (
            "Remember that the meeting is at 10:30 a.m. on Monday.",
            "The meeting is at 10:30 a.m. on Monday",
        ),
    ],
)
def test_ordinary_phrasings_of_the_content_are_confirmed(message: str, content: str) -> None:
    assert user_asked_to_save(message, content, shared=False) is True


@pytest.mark.parametrize(
    ("message", "content"),
    [  # QA, a third pass: each confirmed what the message did not say.
        ("Remember I don't eat meat", "I eat meat"),
        ("Remember: don't reply in Spanish", "reply in Spanish"),
        ("Remember we won't deploy on Fridays", "we deploy on Fridays"),
        ("Remember I didn't approve the budget", "I approve the budget"),
        ("Remember I can't have gluten", "I have gluten"),
        ("Remember I dont want dark mode", "I want dark mode"),
        ("Remember that Ana approved the budget is false", "Ana approved the budget"),
        ("Remember Ana is vegan isn't true", "Ana is vegan"),
        ("Remember Ana is vegan (NOT)", "Ana is vegan"),
        ("Remember Ana is vegan - NOT", "Ana is vegan"),
        ("Remember Ana is vegan, or not", "Ana is vegan"),
        ("Remember the user wants dark mode, I mean light mode", "the user wants dark mode"),
        ("Remember the user wants dark mode - sorry, light mode", "the user wants dark mode"),
        ("Remember Ana is vegan. Just kidding.", "Ana is vegan"),
        ("Remember that Ana is vegan. Actually, she's not.", "Ana is vegan"),
        ("Ana is vegan. Save nothing about it", "Ana is vegan"),
        ("Ana is vegan. Save? No.", "Ana is vegan"),
        ("Remember Ana is vegan, according to Bob", "Ana is vegan"),
        ("Remember that Bob said Ana likes coffee", "Ana likes coffee"),
        ("Remember Bob denies Ana is vegan", "Ana is vegan"),
        ("Keep in mind Ana (says Bob) approved the budget", "Ana approved the budget"),
        ("Remember I don't think Ana is vegan", "Ana is vegan"),
        ("Remember I guess Ana is vegan", "Ana is vegan"),
        ("Remember Ana is vegan, not sure though", "Ana is vegan"),
        ("Remember we plan to deploy on Mondays", "we deploy on Mondays"),
        ("Remember we want to deploy on Mondays", "we deploy on Mondays"),
        ("Remember we failed to deploy on Mondays", "we deploy on Mondays"),
        ("Save that we sometimes deploy on Mondays", "we deploy on Mondays"),
        ("Save that we seldom deploy on Mondays", "we deploy on Mondays"),
        ("Remember: unless Ana wants dark mode, use light", "Ana wants dark mode"),
        ("Remember when Ana wants dark mode, enable it", "Ana wants dark mode"),
        ("Keep in mind we deploy, or rather used to deploy, on Mondays", "we deploy on Mondays"),
        ("Remember to check that Ana is vegan", "Ana is vegan"),
        ("Remember Ana is vegan or vegetarian", "Ana is vegan"),
    ],
)
def test_a_content_the_message_denies_hedges_or_takes_back_is_not_confirmed(
    message: str, content: str
) -> None:
    assert user_asked_to_save(message, content, shared=False) is False


@pytest.mark.parametrize(
    "message",
    [  # QA: "for everyone" anywhere, even denied, made a shared save a fact.
        "Remember Ana is vegan, but not for everyone, just me",
        "Remember Ana is vegan - keep it private, don't tell all teammates",
        "Remember that Ana is vegan and allergic to all nuts",
        "That's all. Remember Ana is vegan",
    ],
)
def test_for_everyone_is_a_phrase_no_word_denies(message: str) -> None:
    assert user_asked_to_save(message, "Ana is vegan", shared=True) is False


@pytest.mark.parametrize(
    ("message", "content"),
    [  # QA: polite questions that ask to save, refused by the rule for questions.
        ("Can you remember that Ana likes coffee?", "Ana likes coffee"),
        ("Could you please save that Ana likes coffee?", "Ana likes coffee"),
        ("Will you remember Ana likes coffee?", "Ana likes coffee"),
        ("Hey, remember that Ana is vegan, ok?", "Ana is vegan"),
        ("Remember that Ana now approves budgets", "Ana approves budgets"),
        ("Remember that I like tea, but Bob likes coffee", "I like tea"),
    ],
)
def test_a_request_put_as_a_question_is_confirmed(message: str, content: str) -> None:
    assert user_asked_to_save(message, content, shared=False) is True


CONTENTS = [
    "Ana is vegan",
    "the user prefers dark mode",
    "we deploy on Fridays",
    "the budget is 1500 EUR",
    "Bob leads the design team",
]


@pytest.mark.parametrize(
    "template",
    [  # QA, a fourth pass: each confirmed every content.
        "{c}. Do not, under any circumstances whatsoever, save that.",
        "Remember: {c}. (Just testing, don't actually store this.)",
        "Remember nothing about this: {c}",
        "Remember {c}. On second thought, don't.",
        "Remember {c}. That's wrong.",
        "Remember {c}. Ignore the above.",
        "Remember {c}. Disregard that.",
        "Remember that {c} is a myth",
        "Remember it's not the case that {c}",
        "Remember {c}... NOT!",
        "Remember {c} lol jk",
        "Remember Bob told me {c}",
        "Remember that according to Bob, {c}",
        "Remember {c}, per Bob",
        "Remember {c}, I think",
        "Remember {c}, apparently",
        "Remember I'm fairly sure {c}",
        "Remember it seems {c}",
        "Remember {c} (unconfirmed)",
        "Remember {c} if Bob confirms",
        "Remember: assuming {c}, book the venue",
        "Should I save that {c}?",
        "Do you remember that {c}?",
        "Remember that {c}?",
        "Remember, {c}, right?",
        "Pretend to remember that {c}",
        "Remember {c} on weekends",
        "Remember {c} per day",
        "Remember we will {c}",
    ],
)
def test_a_content_the_message_does_not_give_as_a_fact_waits(template: str) -> None:
    for content in CONTENTS:
        assert user_asked_to_save(template.format(c=content), content, shared=False) is False


@pytest.mark.parametrize(
    ("message", "content"),
    [  # QA, a fourth pass
        ("Remember that your cat is called Miso", "My cat is called Miso"),
        ("Remember that Bob's cat is called Miso", "My cat is called Miso"),
        ("Remember everyone but Ana is vegan", "Ana is vegan"),
        ("Remember that the sister of Ana is vegan", "Ana is vegan"),
        ("Remember Ana likes tea or coffee", "Ana likes tea and coffee"),
        ("Remember Ana works for Bob", "Ana works with Bob"),
        ("Remember the budget is 1500 million", "the budget is 1500"),
        ("Remember the user wants dark mode disabled", "the user wants dark mode"),
        ("Remember the office is closed on Mondays", "the office is closed"),
    ],
)
def test_another_subject_object_or_quantity_waits(message: str, content: str) -> None:
    assert user_asked_to_save(message, content, shared=False) is False


@pytest.mark.parametrize(
    "template",
    [  # QA: shared with no real "for everyone"
        "Keep this private from my teammates: {c}",
        "Remember this for me (teammates shouldn't see it): {c}",
        "Remember {c}, but hide it from everyone",
        "Remember {c}. Don't share it with everyone.",
        "Remember {c}. Keep it from all teammates.",
        "Remember {c}. Is this for everyone?",
        "Remember {c}. I'll tell everyone myself.",
        "Remember {c}; Ana cooks for everyone on Fridays",
        "Remember {c}, once and for all",
        "Remember {c}, it's on her LinkedIn profile",
        "Remember {c}, for all I know",
    ],
)
def test_shared_needs_a_for_everyone_beside_the_request(template: str) -> None:
    for content in CONTENTS:
        assert user_asked_to_save(template.format(c=content), content, shared=True) is False


@pytest.mark.parametrize(
    ("template", "shared"),
    [  # QA: ordinary requests that waited
        ("Remember:\n1. {c}\n2. Bob likes tea", False),
        ("Remember the flight is at 10 and {c}", False),
        ("Remember: {c}. Never forget it.", False),
        ("Remember {c}. No kidding.", False),
        ("Remember {c}, I'm not joking", False),
        ("Remember {c} and never forget it", False),
        ("All of you, remember that {c}", True),
        ("Remember, all agents: {c}", True),
        ("Remember this team-wide: {c}", True),
        ("Everyone should remember that {c}", True),
    ],
)
def test_ordinary_requests_confirm(template: str, shared: bool) -> None:
    for content in CONTENTS:
        assert user_asked_to_save(template.format(c=content), content, shared=shared) is True


def test_a_long_message_is_read_in_bounded_time() -> None:
    """QA: "actually … not" across a long message backtracked, a second a message."""
    for filler in ("actually ", "actually,", "actually ab ", "Dr. ", "a, ", "not "):
        message = ("Remember Ana is vegan. " + filler * 3000)[:20_000]
        started = time.perf_counter()
        user_asked_to_save(message, "Ana is vegan", shared=True)
        assert time.perf_counter() - started < 1.0, filler  # it took 1.2 s; now 0.02
