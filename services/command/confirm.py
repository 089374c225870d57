"""Who may confirm (seed 000): an agent's save is a confirmed fact only when the
run's user message asked for it; anything else becomes a candidate.

The words it reads by, and how a message is split into them, are in ``wording``."""

from __future__ import annotations

from services.command.wording import (
    APOSTROPHES,
    CHANGES_MEANING,
    CONTRASTED,
    CORRECTING,
    DOUBTED_AFTER,
    DOUBTED_BEFORE,
    EMPHASIS,
    EVERYONE_PHRASES,
    INTENT,
    JOINING,
    KEPT,
    KEPT_FROM,
    NEGATION,
    NO_CONTRAST,
    NOT_TO_SAVE,
    NUMBER,
    SAVE_WORDS,
    SOFT,
    STOPWORDS,
    TAKEN_BACK,
    Said,
    Sentence,
    sentences_of,
    split_sentences,
    words_of,
)

# How far the words are looked for (see DOUBTED_BEFORE, DOUBTED_AFTER, EVERYONE_PHRASES).
NEAR = 5  # words from the request to save
MAX_ASIDE = 6  # other words the content's may have between them, in an aside
MAX_SMALL = 8  # and small words (which bounds the work a 20,000-character message costs)
MAX_STARTS = 50  # places in the message the content is looked for from
BEFORE = 3  # words looked at before the content
AFTER_MARK = 2  # words looked at past an aside mark after the content (the rest of its
# clause is looked at whole)


def content_in_message(content: str, message: str) -> bool:
    """The saved content appears in the message (seed 000), in one of its sentences and
    one that does not ask: its words (but the small ones) in the same order, with only
    small words or words of stress between them, or a few others in an aside that takes
    nothing back, none of which negates or holds a number; and no word just before it that
    denies it, nor just after it, in its clause, that undoes it. So no fact the message did
    not give is confirmed: one turned round ("Ana likes tea, not coffee" from "Ana likes
    coffee, not tea"), a negation dropped ("the user is not vegan"), a number cut or taken
    from another fact, words picked across the message ("Ana approved the budget" from "Ana
    rejected the plan and Bob approved the budget"), a denied or asked one ("Bob, not Ana,
    approved the budget", "ask whether Ana is vegan") (a seed coverage audit, QA). An
    agent's save it does not find waits as a candidate: the safe side."""
    sentences = [
        [w for w in words_of(sentence) if w not in STOPWORDS or w in KEPT]
        for sentence, _ in split_sentences(content)
    ]
    sentences = [wanted for wanted in sentences if wanted]
    if not sentences:
        return False
    said = sentences_of(message)
    last = -1
    for wanted in sentences:
        found = _in_one(wanted, said)
        if found is None:
            return False
        last = max(last, found)
    return not any(TAKEN_BACK.search(later.text) for later in said[last + 1 :])


def _in_one(wanted: list[str], sentences: list[Sentence]) -> int | None:
    """The first sentence of the message (one that does not merely ask) that holds these
    words so, by its place; None if none does."""
    tries = 0
    for place, sentence in enumerate(sentences):
        if sentence.asks:
            continue
        said = sentence.words
        for start, first in enumerate(said):
            if first.word != wanted[0]:
                continue
            tries += 1
            if tries > MAX_STARTS:
                return None
            end = _follows(wanted, said, start)
            if end is not None and not _doubted(said, start, end):
                return place
    return None


def _follows(wanted: list[str], said: list[Said], start: int) -> int | None:
    """Where ``wanted`` ends in ``said`` from ``start``, in order, each next word the first
    that comes, past small words, words of stress and a few of an aside, none that changes
    what the words say; None if it is not there so."""
    skipped, small, at = 0, 0, start + 1
    for word in wanted[1:]:
        while at < len(said) and said[at].word != word:
            other = said[at]
            if other.word in STOPWORDS or other.word in SOFT:
                small += 1
            elif other.aside and not _doubts(other.word) and other.word not in DOUBTED_AFTER:
                skipped += 1
            else:
                return None
            if skipped > MAX_ASIDE or small > MAX_SMALL or CHANGES_MEANING.match(other.word):
                return None
            at += 1
        if at == len(said):
            return None
        at += 1
    return at


def _doubted(said: list[Said], start: int, end: int) -> bool:
    """Whether a word just before the content denies, attributes or hedges it, or what
    follows it in its clause is more than small words before the clause ends or joins
    another, or the first words past an aside mark undo, turn or attribute it (see
    DOUBTED_BEFORE, JOINING, DOUBTED_AFTER)."""
    counted = 0  # BEFORE words back, small words not counted ("according to Bob, the user")
    for s in reversed(said[max(0, start - 4 * BEFORE) : start]):
        if s.word in SAVE_WORDS or counted >= BEFORE:  # "will you remember": no doubt
            break
        if _doubts(s.word):
            return True
        counted += s.word not in STOPWORDS
    part = said[end - 1].part
    at = end
    while at < len(said) and said[at].part == part:  # the rest of its clause
        word = said[at].word
        if word in JOINING:
            return False
        if word in DOUBTED_AFTER or CHANGES_MEANING.match(word):
            return True
        if word not in STOPWORDS and word not in SOFT:
            return True  # a qualifier: "vegan on weekends", "closed on Mondays"
        at += 1
    for i in range(at, min(at + AFTER_MARK, len(said))):  # past an aside mark: its first
        word, follower = said[i].word, _next(said, i)  # words only
        if word in CONTRASTED and follower in EMPHASIS:
            return False  # "…, I'm not joking": it stresses the content
        contrast = follower is not None and follower not in NO_CONTRAST
        if word in CONTRASTED and _part_start(said, i) == i and contrast:
            return False  # "tea, not coffee": a contrast; the rest is its
        if word in DOUBTED_AFTER or CHANGES_MEANING.match(word):
            return True
    return False


def _doubts(word: str) -> bool:
    """A word before the content that negates or doubts it; a number there is a list's or
    another fact's ("1. Ana is vegan", "the flight is at 10 and Ana is vegan")."""
    if word in DOUBTED_BEFORE or word in CORRECTING:
        return True
    return bool(CHANGES_MEANING.match(word)) and not NUMBER.fullmatch(word)


def _next(said: list[Said], at: int) -> str | None:
    """The word after ``said[at]``, if one is."""
    return said[at + 1].word if at + 1 < len(said) else None


def _part_start(said: list[Said], at: int) -> int:
    """Where the stretch between aside marks that holds ``said[at]`` begins."""
    while at > 0 and said[at - 1].part == said[at].part:
        at -= 1
    return at


def user_asked_to_save(message: str | None, content: str, *, shared: bool) -> bool:
    if not message:
        return False
    # Both sides alike (QA: "Remember that Ana\u2019s colour is blue" no longer held
    # "Ana\u2019s colour is blue" once only the message read its apostrophe as "'").
    message, content = message.translate(APOSTROPHES), content.translate(APOSTROPHES)
    if not INTENT.search(message):
        return False
    # A negated intent anywhere ("don't remember") withdraws the request.
    if NEGATION.search(message) or NOT_TO_SAVE.search(message):
        return False
    if not content_in_message(content, message):
        return False
    return not shared or _for_everyone(message)


def _for_everyone(message: str) -> bool:
    """Whether the message says, beside its request to save and in the same sentence, in a
    phrase no word just before denies, that it is for everyone (seed 000: "all", "every",
    "teammates", "profile"). Not "hide it from everyone", "Is this for everyone?", "once
    and for all" or "her LinkedIn profile" further on (QA)."""
    for sentence, _ in split_sentences(message):
        words = words_of(sentence)
        asks = [at for at, w in enumerate(words) if w in SAVE_WORDS]
        for at in range(len(words)):
            if not _everyone_at(words, at) or not any(abs(at - i) <= NEAR for i in asks):
                continue
            around = words[max(0, at - BEFORE) : at] + words[at + 1 : at + 1 + BEFORE]
            if not any(_denies(w) for w in around):  # "teammates shouldn't see it", QA
                return True
    return False


def _everyone_at(words: list[str], at: int) -> bool:
    if words[at : at + 4] == ["for", "all", "i", "know"]:  # a hedge, QA
        return False
    return any(tuple(words[at : at + len(p)]) == p for p in EVERYONE_PHRASES)


def _denies(word: str) -> bool:
    return word in KEPT_FROM or bool(CHANGES_MEANING.match(word) and not NUMBER.fullmatch(word))
