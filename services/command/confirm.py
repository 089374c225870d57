"""Who may confirm (seed 000): an agent's save is a confirmed fact only when the
run's user message asked for it; anything else becomes a candidate."""

from __future__ import annotations

import re

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
MAX_SKIPPED = 3  # other words the content's may have between them, in an aside
MAX_SMALL = 8  # and small words (which bounds the work a 20,000-character message costs)
MAX_STARTS = 50  # places in the message the content is looked for from
STOPWORDS = frozenset(
    "a an the is are was were be to of and or in on at for my our i we you that this "
    "it with as by ".split()
)
# Where a sentence ends (a clause's colon or semicolon too): the content's words are looked
# for in one (QA: "the user wants light mode. Dark mode is bad" held "the user wants dark
# mode").
SENTENCE_END = re.compile(r"[.!?;:\n]+(?=\s|$)")


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def _sentences(message: str) -> list[list[tuple[str, bool]]]:
    """The message's words, sentence by sentence, each marked whether it stands in an aside
    (between two of its sentence's commas: "my cat, a tabby, is called Miso")."""
    sentences = []
    for sentence in SENTENCE_END.split(message):
        parts = sentence.split(",")
        words = [
            (w, 0 < at < len(parts) - 1) for at, part in enumerate(parts) for w in _words(part)
        ]
        if words:
            sentences.append(words)
    return sentences


def content_in_message(content: str, message: str) -> bool:
    """The saved content appears in the message (seed 000): verbatim (whole words), or its
    words but the small ones in one of its sentences, in the same order, with only small
    words between them, or up to MAX_SKIPPED others in an aside between commas, none of
    which negates or holds a number. So no fact the message did not give is confirmed: one
    turned round ("Ana likes tea, not coffee" from "Ana likes coffee, not tea"), a negation
    dropped ("the user is vegan" from "the user is not vegan"), a number cut or taken from
    another fact ("the budget is 150" from "the budget is 1500"), or words picked across
    the message ("Ana approved the budget" from "Ana rejected the plan and Bob approved the
    budget", "Ana is allergic" from "Ana is hardly allergic") (a seed coverage audit, QA)."""
    if f" {' '.join(_words(content))} " in f" {' '.join(_words(message))} ":
        return True
    wanted = [w for w in _words(content) if w not in STOPWORDS]
    if not wanted:
        return False
    tries = 0
    for said in _sentences(message):
        for start, (word, _) in enumerate(said):
            if word != wanted[0]:
                continue
            tries += 1
            if tries > MAX_STARTS:
                return False
            if _follows(wanted, said, start):
                return True
    return False


def _follows(wanted: list[str], said: list[tuple[str, bool]], start: int) -> bool:
    """``wanted`` in ``said`` from ``start``, in order, each next word the first that comes,
    past small words and few words of an aside, none that changes what the words say."""
    skipped, small, at = 0, 0, start + 1
    for word in wanted[1:]:
        while at < len(said) and said[at][0] != word:
            other, aside = said[at]
            if other in STOPWORDS:
                small += 1
            elif aside:
                skipped += 1
            else:
                return False
            if skipped > MAX_SKIPPED or small > MAX_SMALL or CHANGES_MEANING.match(other):
                return False
            at += 1
        if at == len(said):
            return False
        at += 1
    return True


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
