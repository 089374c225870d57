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
MAX_SKIPPED = 3  # other words the content's may have between them in the message
MAX_SMALL = 8  # and small words (which bounds the work a 20,000-character message costs)
MAX_STARTS = 50  # places in the message the content is looked for from
STOPWORDS = frozenset(
    "a an the is are was were be to of and or in on at for my our i we you that this "
    "it with as by ".split()
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def content_in_message(content: str, message: str) -> bool:
    """The saved content appears in the message: verbatim (whole words), or its words but
    the small ones in the message in the same order, with at most MAX_SKIPPED other words
    between them and none that negates or holds a number. So a fact turned round ("Ana
    likes tea, not coffee" from "Ana likes coffee, not tea"), a negation dropped ("the user
    is vegan" from "the user is not vegan"), a number cut ("the budget is 150" from "the
    budget is 1500") or taken from another fact ("the flight is at 12" from "the flight is
    at 10, the hotel is at 12") is no fact the message gave (a seed coverage audit, QA)."""
    said = _words(message)
    if f" {' '.join(_words(content))} " in f" {' '.join(said)} ":
        return True
    wanted = [w for w in _words(content) if w not in STOPWORDS]
    if not wanted:
        return False
    starts = [at for at, w in enumerate(said) if w == wanted[0]][:MAX_STARTS]
    return any(_follows(wanted, said, start) for start in starts)


def _follows(wanted: list[str], said: list[str], start: int) -> bool:
    """``wanted`` in ``said`` from ``start``, in order, each next word the first that comes,
    past few others and none that changes what the words say."""
    skipped, small, at = 0, 0, start + 1
    for word in wanted[1:]:
        while at < len(said) and said[at] != word:
            other = said[at]
            if other in STOPWORDS:
                small += 1
            else:
                skipped += 1
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
