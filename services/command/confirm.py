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
NEAR = 5  # words from the request to save
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
MAX_ASIDE = 6  # other words the content's may have between them, in an aside
MAX_SMALL = 8  # and small words (which bounds the work a 20,000-character message costs)
MAX_STARTS = 50  # places in the message the content is looked for from
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
BEFORE = 3  # words looked at before it
# Just after it: words that undo, turn or attribute it ("wants dark mode off", "likes
# Python less than Go", "Ana is vegan, according to Bob", "…, I mean light mode", "… is
# false", "Ana is vegan or vegetarian") (QA): the next AFTER words of its clause, and the
# first AFTER_MARK after an aside mark. A contrast after a mark ("tea, not coffee") says
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
AFTER, AFTER_MARK = 3, 2
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


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(THOUSANDS.sub("", text))]


def _split_sentences(text: str) -> list[tuple[str, bool]]:
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


def _sentences(message: str) -> list[Sentence]:
    """The message's sentences, each word marked whether it stands in an aside."""
    found = []
    for sentence, asks in _split_sentences(message):
        parts = ASIDE_MARKS.split(sentence)
        words = [
            Said(w, 0 < at < len(parts) - 1, at)
            for at, part in enumerate(parts)
            for w in _words(part)
        ]
        if words:
            request = INTENT.search(sentence) and REQUEST_QUESTION.search(sentence.strip())
            found.append(Sentence(sentence, words, asks and not request))
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
    for sentence, _ in _split_sentences(message):
        words = _words(sentence)
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
