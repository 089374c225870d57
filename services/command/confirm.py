"""Who may confirm (seed 000): an agent's save is a confirmed fact only when the
run's user message asked for it; anything else becomes a candidate."""

from __future__ import annotations

import re

INTENT = re.compile(r"\b(remember|save|keep|update|correct)\w*\b", re.IGNORECASE)
NEGATION = re.compile(
    r"\b(don'?t|do not|never|not|no need to|stop)\s+(\w+\s+){0,2}?"
    r"(remember|save|keep|update|correct)\w*\b",
    re.IGNORECASE,
)
EVERYONE = re.compile(r"\b(all|every\w*|teammates?|profile)\b", re.IGNORECASE)
WORD = re.compile(r"[\w']+")
STOPWORDS = frozenset(
    "a an the is are was were be to of and or in on at for my our i we you that this "
    "it with as by ".split()
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def content_in_message(content: str, message: str) -> bool:
    """The saved content appears in the message: verbatim, or every content word does."""
    if " ".join(_words(content)) in " ".join(_words(message)):
        return True
    wanted = {w for w in _words(content) if w not in STOPWORDS}
    return bool(wanted) and wanted <= set(_words(message))


def user_asked_to_save(message: str | None, content: str, *, shared: bool) -> bool:
    if not message or not INTENT.search(message):
        return False
    # A negated intent anywhere ("don't remember") withdraws the request.
    if NEGATION.search(message):
        return False
    if not content_in_message(content, message):
        return False
    return not shared or bool(EVERYONE.search(message))
