"""The words an agent's save is read by (seed 000): the word lists and patterns for what
asks to save, denies, doubts, stresses or takes back a fact, and the splitting of a text
into sentences, the stretches between aside marks, and words. Whether the save is
confirmed is decided in ``confirm``."""

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
# Said as a phrase of its own, beside the request to save, and not denied just before it:
# not "That's all.", "all nuts", "not for everyone", "don't tell all teammates" or "keep it
# from my teammates" (QA).
EVERYONE_PHRASES = tuple(  # looked for at every word: "for everyone" is "everyone"'s
    tuple(p.split())
    for p in (
        "for all",
        "for the team",
        "everyone",
        "everybody",
        "all of us",
        "all of you",
        "all agents",
        "all members",
        "teammates",
        "teammate",
        "profile",
        "team wide",
        "whole team",
        "for every one",
        "for every member",
        "for every agent",
    )
)
KEPT_FROM = frozenset("just only from private hide hidden except without but".split())
WORD = re.compile(r"[\w']+")
# Words between the content's in the message that change what they say: a negation, or a
# number (another fact's, or the content's own cut short).
NUMBER = re.compile(r"\d+")
CHANGES_MEANING = re.compile(
    r"^(not|no|never|nothing|nobody|none|nor|cannot|\w+n't|\w*\d\w*|"
    r"(do|does|did|is|are|was|were|ca|can|could|should|would|wo|must|need|have|has|had|ai|"
    r"might|sha)nt)$"  # the same without an apostrophe (QA: "Ana isnt vegan" confirmed)
)
STOPWORDS = frozenset(
    "a an the is are was were be to of and or in on at for my our i we you that this "
    "it with as by ".split()
)
# Small words a content keeps all the same: "the user is vegan" is not in "the user was
# vegan" (QA: a tense changed the fact).
KEPT = frozenset(
    "is are was were be been i my we our you your me us they their he she his her "
    "and or for with by to in on at of".split()
)  # and whose, and how things join (QA: "your cat" held "my cat", "tea or coffee" "tea
# and coffee", "works for Bob" "works with Bob")
# Words that only stress what they stand before, skipped like small ones ("Ana really
# likes green tea" holds "Ana likes green tea"; QA: refused after the one-sentence rule).
# Not "hardly", "rarely", "sometimes": they weaken it.
SOFT = frozenset(
    "really truly definitely absolutely strictly usually generally also still very totally "
    "just typically normally always now".split()
)
# Just before the content, in its sentence: words that deny it, except someone from it,
# make it a question, someone else's claim, a hedge, a plan or a condition, or say how
# seldom ("Bob, not Ana, approved the budget"; "everyone except Ana is vegan"; "ask
# whether Ana is vegan"; "it is false that Ana is vegan"; "Bob said Ana likes coffee"; "I
# guess Ana is vegan"; "we plan to deploy on Mondays"; "unless Ana wants dark mode"; "we
# seldom deploy"; "used to deploy") (QA). Any word that negates counts too ("I don't eat
# meat" holds no "I eat meat").
DOUBTED_BEFORE = frozenset(
    "not no never nobody none nor except unlike false untrue whether if doubt doubts "
    "maybe perhaps probably possibly without said says say claims claimed claim denies "
    "denied deny thinks think thought believes believe believed guess guessed suppose "
    "supposedly allegedly apparently heard rumored rumoured plan plans planned want wants "
    "wanted refuse refuses refused fail fails failed hope hopes hoped try tries tried "
    "should could would might may sometimes seldom rarely occasionally once used unless "
    "when whenever until check verify ask asked confirm find wonder told tells mentioned "
    "reckons insists suspects assumes assume assuming joked wrote pretends pretend lied "
    "read dreamt dreamed feel chance likely rumor rumour will shall intend intends need "
    "needs must let going aim propose i'd we'd you'd they'd i'll we'll of but besides "
    "apart than other seems seem sure according case".split()
)
# Just after it: words that undo, turn or attribute it ("wants dark mode off", "likes
# Python less than Go", "Ana is vegan, according to Bob", "…, I mean light mode", "… is
# false", "Ana is vegan or vegetarian") (QA): in the rest of its clause, and in the first
# AFTER_MARK words after an aside mark. A contrast after a mark ("tea, not coffee") says
# nothing against it; "…, not sure" or a "not" standing alone ("(NOT)") does.
DOUBTED_AFTER = frozenset(
    "not no never off less anymore except unless nor or false untrue wrong kidding joking "
    "though according said says claims maybe perhaps probably mean rather actually sorry "
    "instead think apparently iirc unconfirmed believe guess suppose supposedly allegedly "
    "tbc kinda unsure recall lol jk told per mentioned if assuming formerly theory myth "
    "right million thousand billion percent disabled removed gone".split()
)
# What may follow the content in its clause: small words and words of stress only, up to
# the clause's end or a word that joins another clause ("Ana is vegan and Bob likes tea").
# So no qualifier cut off it is confirmed (QA: "Ana is vegan on weekends", "the office is
# closed on Mondays", "the budget is 1500 EUR per day").
JOINING = frozenset("and but while whereas because so".split())
CONTRASTED = frozenset("not no never".split())
EMPHASIS = frozenset("joking kidding lying".split())  # "not joking" stresses, QA
NO_CONTRAST = frozenset("true right sure really correct so quite exactly at".split())
# A later sentence that takes the request back: "Just kidding.", "Actually, she's not.",
# "Save nothing about it.", "Save? No." (QA).
TAKEN_BACK = re.compile(
    r"\b(?:just kidding|(?<!no )(?<!not )kidding|(?<!no )(?<!not )joking|scratch that|"
    r"strike that|cancel that|delete that|disregard|never ?mind|ignore (?:that|this|it|the above)|"
    r"(?<!never )(?<!don't )(?<!not )forget (?:that|it|this|about it|i said)|save nothing|"
    r"remember nothing|not true|isn't true|isnt true|is false|that's wrong|thats wrong|"
    r"a lie|false alarm|not really|on second thought|i meant|correction|oops|undo|"
    r"lol|jk|nah|hmm,? no|wait,? no|update: .{0,40}\bnot\b|"
    r"actually\b[^.!?\n]{0,80}?\b(?:not|no|\w+n't)\b)|^\W*(?:no|nope|not)\W*$",
    re.IGNORECASE,
)
# Anywhere in the message: a request not to save, or play ("don't actually store this",
# "do not, under any circumstances, save that", "pretend to remember") (QA).
NOT_TO_SAVE = re.compile(
    r"\b(?:don't|dont|do not|never)\b(?!\s+forget\b)[^.!?\n]{0,60}?"
    r"\b(?:save|store|remember|keep|record)\b"
    r"(?!\s+(?:repeating|asking|telling|forgetting))|"
    r"\b(?:pretend|role-?play|hypothetical(?:ly)?|imagine|make believe|story where|"
    r"remember nothing|save nothing|nothing to (?:save|remember))\b",
    re.IGNORECASE,
)
# A question that asks to save, put politely: "Can you remember that …?", "…, ok?"; not
# "Should I save that …?", "Did you save that …?" or "Remember that …?" (QA).
REQUEST_QUESTION = re.compile(
    r"^\W*(?:(?:hey|ok|okay|so|and)\W+)?(?:(?:can|could|will|would)\s+you\b|please\b)|"
    r",\s*(?:ok|okay|please)\W*$",
    re.IGNORECASE,
)
# In an aside, words that take back what came before ("Ana likes, I mean hates, coffee").
CORRECTING = frozenset("mean rather actually sorry instead correction scratch oops".split())
# Where a sentence ends (a clause's colon or semicolon too), not after a common abbreviation
# or an initial ("Dr. Smith", "e.g.", "J. Smith"): the content's words are looked for in
# one sentence (QA: "the user wants light mode. Dark mode is bad" held "the user wants dark
# mode"; "Dr. Smith is our dentist" was cut in two).
SENTENCE_END = re.compile(r"([.!?;:]+(?=\s|$)|\n+)")  # a line's end too: "1. …\n2. …"
ABBREVIATIONS = frozenset(
    "dr mr mrs ms prof st sr jr vs etc eg ie inc ltd co mt no approx dept".split()
)
# An aside stands between commas, dashes or brackets ("Ana (our designer) prefers Figma").
ASIDE_MARKS = re.compile(r"\s[-\u2013\u2014]\s|[(),\[\]]")


# The words that ask to save, as a stop for the words looked at before a content ("will
# you remember"): seed 000's five (``INTENT``, which alone makes a request) and the two a
# request to save is also put in ("store", "note").
SAVE_WORDS = frozenset("remember save keep update correct store note".split())
THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def words_of(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(THOUSANDS.sub("", text))]


def split_sentences(text: str) -> list[tuple[str, bool]]:
    """The text's sentences, each with whether it asks (ends in "?")."""
    pieces = SENTENCE_END.split(text)
    sentences: list[tuple[str, bool]] = []
    current = ""
    for at in range(0, len(pieces), 2):
        current += pieces[at]
        end = pieces[at + 1] if at + 1 < len(pieces) else ""
        last = WORD.findall(pieces[at][-40:])[-1:]  # this piece's: linear in all
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


@dataclass(frozen=True)
class Sentence:
    text: str
    words: list[Said]
    # Whether it asks (ends in "?") and does not ask to save ("Can you remember that Ana
    # likes coffee?" asks to save; "Remember: the user likes Python?" asks whether).
    asks: bool


def sentences_of(message: str) -> list[Sentence]:
    """The message's sentences, each word marked whether it stands in an aside."""
    found = []
    for sentence, asks in split_sentences(message):
        parts = ASIDE_MARKS.split(sentence)
        words = [
            Said(w, 0 < at < len(parts) - 1, at)
            for at, part in enumerate(parts)
            for w in words_of(part)
        ]
        if words:
            request = INTENT.search(sentence) and REQUEST_QUESTION.search(sentence.strip())
            found.append(Sentence(sentence, words, asks and not request))
    return found
