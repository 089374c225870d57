"""Who may confirm (seed 000): an agent's save is a confirmed fact only when the
run's user message asked for it; anything else becomes a candidate."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The five words in the form a request takes ("remember that", "please save"): "updates",
# "kept" or "corrected" in a message say nothing of saving (QA: "Updates for all later").
INTENT = re.compile(r"\b(remember|save|keep|update|correct)\b", re.IGNORECASE)
# A negation a few words before one of them: "don't", "do not", any "-n't" ("shouldn't",
# "can't", "won't"), and the same without an apostrophe; "never", "not", "cannot", "stop";
# but "don't forget to save" asks to save.
NEGATION = re.compile(
    r"\b(\w+n't|(do|does|did|ca|can|could|should|would|wo|must|need|is|are|was|were)nt|"
    r"do not|cannot|never|not|no need to|stop)(?!\W+forget\b)(\W+\w+){0,3}?\W+"
    r"(remember|save|keep|update|correct)\w*\b",
    re.IGNORECASE,
)
# Typed apostrophes (U+2019 as phones and Macs type it, U+2018, the modifier letter U+02BC,
# a full-width one, a prime, an acute accent, a backtick) read as "'" (QA: "Don\u2019t
# remember..." with U+2019 saved a confirmed fact).
APOSTROPHES = str.maketrans(dict.fromkeys("\u2019\u2018\u02bc\uff07\u2032\u00b4`", "'"))
# Seed 000's words for everyone: "all", "every", "teammates", "profile" (and "everyone",
# "everybody"; not "everything" or "everywhere", which name no people: a seed coverage
# audit).
EVERYONE = re.compile(r"\b(all|every(one|body)?|teammates?|profile)\b", re.IGNORECASE)
WORD = re.compile(r"[\w']+")
# Words between the content's in the message that change what they say: a negation, or a
# number (another fact's, or the content's own cut short).
CHANGES_MEANING = re.compile(
    r"^(not|no|never|nothing|nobody|none|nor|cannot|\w+n't|\w*\d\w*|"
    r"(do|does|did|is|are|was|were|ca|can|could|should|would|wo|must|need|have|has|had|ai|"
    r"might|sha)nt)$"  # the same without an apostrophe (QA: "Ana isnt vegan" confirmed)
)
MAX_ASIDE = 6  # other words the content's may have between them, in an aside
MAX_SMALL = 8  # and small words (which bounds the work a 20,000-character message costs)
MAX_STARTS = 50  # places in the message the content is looked for from
STOPWORDS = frozenset(
    "a an the is are was were be to of and or in on at for my our i we you that this "
    "it with as by ".split()
)
# Small words a content keeps all the same: "the user is vegan" is not in "the user was
# vegan" (QA: a tense changed the fact).
KEPT = frozenset("is are was were be been".split())
# Words that only stress what they stand before, skipped like small ones ("Ana really
# likes green tea" holds "Ana likes green tea"; QA: refused after the one-sentence rule).
# Not "hardly", "rarely", "sometimes": they weaken it.
SOFT = frozenset(
    "really truly definitely absolutely strictly usually generally also still very totally "
    "just typically normally always".split()
)
# Just before the content, in its sentence: words that deny it, except someone from it or
# make it a question ("Bob, not Ana, approved the budget"; "everyone except Ana is vegan";
# "ask whether Ana is vegan"; "it is false that Ana is vegan") (QA).
DOUBTED_BEFORE = frozenset(
    "not no never nobody none nor except unlike false untrue whether if doubt doubts "
    "maybe perhaps without".split()
)
BEFORE = 3  # words looked at before it
# Just after it, in its clause: words that undo or turn it ("wants dark mode off", "likes
# Python less than Go") (QA). A contrast after a comma ("tea, not coffee") is another clause.
DOUBTED_AFTER = frozenset("not no never off less anymore except unless nor".split())
AFTER = 2
# In an aside, words that take back what came before ("Ana likes, I mean hates, coffee").
CORRECTING = frozenset("mean rather actually sorry instead correction scratch oops".split())
# Where a sentence ends (a clause's colon or semicolon too), not after a common abbreviation
# or an initial ("Dr. Smith", "e.g.", "J. Smith"): the content's words are looked for in
# one sentence (QA: "the user wants light mode. Dark mode is bad" held "the user wants dark
# mode"; "Dr. Smith is our dentist" was cut in two).
SENTENCE_END = re.compile(r"([.!?;:\n]+)(?=\s|$)")
ABBREVIATIONS = frozenset(
    "dr mr mrs ms prof st sr jr vs etc eg ie inc ltd co mt no approx dept".split()
)
LAST_WORD = re.compile(r"[\w']+")
# An aside stands between commas, dashes or brackets ("Ana (our designer) prefers Figma").
ASIDE_MARKS = re.compile(r"\s[-\u2013\u2014]\s|[(),\[\]]")


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def _split_sentences(text: str) -> list[tuple[str, bool]]:
    """The text's sentences, each with whether it asks (ends in "?")."""
    pieces = SENTENCE_END.split(text)
    sentences: list[tuple[str, bool]] = []
    current = ""
    for at in range(0, len(pieces), 2):
        current += pieces[at]
        end = pieces[at + 1] if at + 1 < len(pieces) else ""
        last = LAST_WORD.findall(pieces[at][-40:])[-1:]  # this piece's: linear in all
        if end == "." and last and (last[0].lower() in ABBREVIATIONS or len(last[0]) == 1):
            current += end  # "Dr." or "J.": the sentence goes on
            continue
        if current.strip():
            sentences.append((current, "?" in end))
        current = ""
    return sentences


@dataclass(frozen=True)
class Said:
    word: str
    aside: bool  # between two of its sentence's aside marks
    part: int  # which stretch between aside marks it stands in


def _sentences(message: str) -> list[tuple[list[Said], bool]]:
    """The message's words, sentence by sentence, each marked whether it stands in an
    aside, with whether the sentence asks."""
    found = []
    for sentence, asks in _split_sentences(message):
        parts = ASIDE_MARKS.split(sentence)
        words = [
            Said(w, 0 < at < len(parts) - 1, at)
            for at, part in enumerate(parts)
            for w in _words(part)
        ]
        if words:
            found.append((words, asks))
    return found


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
        [w for w in _words(sentence) if w not in STOPWORDS or w in KEPT]
        for sentence, _ in _split_sentences(content)
    ]
    sentences = [wanted for wanted in sentences if wanted]
    if not sentences:
        return False
    said = _sentences(message)
    return all(_in_one(wanted, said) for wanted in sentences)


def _in_one(wanted: list[str], sentences: list[tuple[list[Said], bool]]) -> bool:
    """Whether one sentence of the message (that does not ask) holds these words."""
    tries = 0
    for said, asks in sentences:
        if asks:
            continue
        for start, first in enumerate(said):
            if first.word != wanted[0]:
                continue
            tries += 1
            if tries > MAX_STARTS:
                return False
            end = _follows(wanted, said, start)
            if end is not None and not _doubted(said, start, end):
                return True
    return False


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
            elif other.aside and other.word not in CORRECTING:
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
    """Whether a word just before the content denies it, or one just after it, in its
    clause (up to the next aside mark), undoes it."""
    before = {s.word for s in said[max(0, start - BEFORE) : start]}
    clause = [s for s in said[end : end + AFTER] if s.part == said[end - 1].part]
    return bool(before & DOUBTED_BEFORE) or any(s.word in DOUBTED_AFTER for s in clause)


def user_asked_to_save(message: str | None, content: str, *, shared: bool) -> bool:
    if not message:
        return False
    # Both sides alike (QA: "Remember that Ana\u2019s colour is blue" no longer held
    # "Ana\u2019s colour is blue" once only the message read its apostrophe as "'").
    message, content = message.translate(APOSTROPHES), content.translate(APOSTROPHES)
    if not INTENT.search(message):
        return False
    # A negated intent anywhere ("don't remember") withdraws the request.
    if NEGATION.search(message):
        return False
    if not content_in_message(content, message):
        return False
    return not shared or bool(EVERYONE.search(message))
