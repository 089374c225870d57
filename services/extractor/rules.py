"""Rule-based extraction: explicit self-statements and requests in a user message.

Precision over recall. A rule fires only at the start of a statement, never in
a question, a negation, or a remark about the task at hand ("for now", "this
time"): a missed fact can still be saved by hand, while a wrong candidate costs
the person a review. What the rules find is quoted from the message, so the
evidence of every rule-based candidate is the user's own words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from contracts.commands import Kind
from services.extractor.core import Candidate

CI = re.IGNORECASE

# Where a statement may end: a line break or a semicolon always ends one; the space
# after a stop ends one unless the stop closes an abbreviation (``_abbreviated``).
BREAK = re.compile(r"[\r\n]+|;\s+|(?<=[.!?])\s+")
# The word a stop closes, opening brackets and quotes aside ("(e.g.", "J.R.R.").
STOPPED_WORD = re.compile(r"[(\[\"'\u2018\u201c]*(?P<word>\S+)\.$")
# Never the end of a sentence: a title or a saint before a name ("Dr. Molar", "St. Louis"),
# "e.g.", "i.e.", "vs.".
ABBREVIATIONS = frozenset({"dr", "mr", "mrs", "ms", "prof", "st", "e.g", "i.e", "vs"})
# Often inside a sentence, sometimes its end ("at 5 p.m. Then …"): the end only when the
# next word starts with a capital.
CLOSING_ABBREVIATIONS = frozenset({"etc", "a.m", "p.m", "inc", "ltd", "jr", "sr"})
# Initials before a name ("J. Smith", "J.R.R. Tolkien").
INITIALS = re.compile(r"(?:[A-Z]\.)*[A-Z]")
BULLET = re.compile(r"^(?:[-*\u2022>]|\d+[.)])\s+")
LEAD_IN = re.compile(
    r"^(?:(?:also|and|but|oh|ok|okay|so|well|actually|btw|by the way|fyi|hey|hi|hello|"
    r"just so you know|for the record|for future reference|please)\b[,:!]?\s*)+",
    CI,
)
NEGATED = re.compile(
    r"^(?:don'?t|do not|never|no need to|stop)\s+(?:\w+\s+){0,2}?"
    r"(?:remember|save|keep|note)\b|^forget\b",
    CI,
)
# The self-statements whose words after the verb state a thing: negated there, they state
# none. ("I don't like X" and "Never X" are negative by their verb, and stand.)
STATES_A_THING = frozenset({"call_me", "prefer", "decided", "we_use", "my_is"})
# A statement that negates what it states ("My name is not Bob.", "I prefer not to say.",
# "We decided nothing yet.", "I prefer tea, don't I"): no fact, as the README promises
# (QA: each was proposed). It errs on the side of dropping: "no" alone ("tea with no
# sugar") does not count, and what a person asks to remember is kept as they say it
# ("remember that I can't eat nuts").
NEGATES = re.compile(
    r"\b(?:not|never|nothing|nobody|none|neither|nor|dont|doesnt|didnt|cant|wont|isnt|"
    r"arent|wasnt|werent)\b|n['\u2019]t\b",
    CI,
)
TEMPORARY = re.compile(
    r"\b(?:for now|for this|this time|right now|today|at the moment|in this (?:answer|reply|"
    r"chat|conversation|task|file|thread|message))\b",
    CI,
)
CHATTER = re.compile(r"^(?:it|that|this|these|those|them|you|your|yours)\b", CI)
WH_WORD = re.compile(r"^(?:when|what|how|who|where|why|if|whether|which)\b", CI)
NOT_A_FACT = re.compile(
    r"^(?:question|point|problem|issue|request|concern|guess|thoughts?|bad|mistake|"
    r"fault|apologies|pleasure|understanding|hope|worry)$",
    CI,
)
ASK = r"(?:(?:can|could|would|will) you\s+)?"
# What a keyed statement names: the words between "my" and its first "is" or "are".
KEYED = re.compile(r"^my\s+(?P<subject>[\w' -]{1,40}?)\s+(?:is|are)\s", CI)
CALL_ME = re.compile(r"^call me\b", CI)
# Words for one value, not for a person or a thing of which many things are said.
VALUE_WORDS = frozenset(
    "name age birthday address email number budget deadline timezone colour color size "
    "salary rent limit language pronouns nickname".split()
)
FAVOURITE = frozenset({"favourite", "favorite", "preferred"})  # "my favourite food is …"


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    kind: Kind | None  # None: the kind of the statement being remembered
    # A request keeps what it asks to remember; a self-statement keeps itself.
    keeps: Literal["statement", "rest"] = "statement"


# Order matters: a request to remember wins over what it contains.
RULES: tuple[Rule, ...] = (
    Rule(
        "remember_to",
        re.compile(rf"^{ASK}(?:remember|don'?t forget|do not forget)\s+to\s+(?P<rest>.+)", CI),
        "procedure",
        "rest",
    ),
    Rule(
        "remember",
        re.compile(
            rf"^{ASK}(?:remember|keep in mind|note|make a note|take note|don'?t forget|"
            r"do not forget)(?:\s+(?:that|of))?[\s:,]+(?P<rest>.+)",
            CI,
        ),
        None,
        "rest",
    ),
    Rule("call_me", re.compile(r"^call me\s+(?P<rest>.+)", CI), "preference"),
    Rule(
        "prefer",
        re.compile(
            r"^i\s+(?:really\s+|generally\s+|usually\s+|much\s+|strongly\s+|definitely\s+)?"
            r"(?:prefer|like|love|enjoy|dislike|hate|don'?t like|do not like|can'?t stand|"
            r"cannot stand)\s+(?P<rest>.+)",
            CI,
        ),
        "preference",
    ),
    Rule(
        "decided",
        re.compile(
            r"^(?:we|i|the team)(?:'ve|\s+have|\s+has)?\s+(?:just\s+|finally\s+|already\s+)?"
            r"(?:decided|agreed|chose|settled on)\b[\s:,]*(?P<rest>.+)",
            CI,
        ),
        "decision",
    ),
    Rule(
        "we_use",
        re.compile(
            r"^(?:we|our team|the team)\s+(?:always\s+|now\s+)?(?:use|uses|will use|"
            r"standardi[sz]ed on)\s+(?P<rest>.+)|^we(?:'re|\s+are)\s+going\s+with\s+(?P<with>.+)",
            CI,
        ),
        "decision",
    ),
    Rule(
        "always",
        re.compile(
            r"^(?!never\s*mind)(?:always|never|from now on|going forward|in (?:the )?future|"
            r"don'?t ever|do not ever)\b[\s,]*(?P<rest>.+)",
            CI,
        ),
        "procedure",
    ),
    Rule(
        "my_is",
        re.compile(r"^my\s+(?P<subject>[\w' -]{1,40}?)(?:\s+(?:is|are)|'s)\s+(?P<rest>.+)", CI),
        "fact",
    ),
    Rule(
        "about_me",
        re.compile(
            r"^i\s+(?:work\s+(?:at|as|for|in|on)|live\s+in)\s+(?P<rest>.+)|"
            r"^i(?:'m|\s+am)\s+(?:(?:based|located)\s+in|allergic\s+to|"
            r"(?:a\s+)?(?:vegetarian|vegan))\b(?P<tail>.*)",
            CI,
        ),
        "fact",
    ),
)


def rule_candidates(message: str) -> list[Candidate]:
    """Every explicit statement the rules recognise, in message order (not yet capped)."""
    found = (_candidate(s) for s in statements(message))
    return [c for c in found if c is not None]


def statements(message: str) -> list[str]:
    """Sentences, lines and list items of a message, each stripped of its bullet."""
    parts = (BULLET.sub("", p.strip()).strip() for p in _pieces(message))
    return [p for p in parts if p]


def _pieces(message: str) -> list[str]:
    """The message cut at each break that ends a statement: "Dr. Molar" stays whole, so
    a fact is never cut at an abbreviation ("My dentist is Dr."). A stop ends a sentence
    only before a space, so a decimal point ("3.5") never does."""
    pieces, start = [], 0
    for gap in BREAK.finditer(message):
        # A window, not the whole prefix: an abbreviation is a short word.
        before = message[max(start, gap.start() - 40) : gap.start()]
        if not _abbreviated(before, gap.group(), message[gap.end() : gap.end() + 1]):
            pieces.append(message[start : gap.start()])
            start = gap.end()
    return [*pieces, message[start:]]


def _abbreviated(before: str, gap: str, after: str) -> bool:
    """The stop ending ``before`` closes an abbreviation, not the sentence."""
    stopped = STOPPED_WORD.search(before)
    if stopped is None or gap.startswith(";") or "\n" in gap or "\r" in gap:
        return False  # "!", "?", a line break or a semicolon
    word = stopped.group("word")
    lowered = word.casefold()
    # "I" alone is the pronoun that ends "So do I.", not an initial.
    if lowered in ABBREVIATIONS or (INITIALS.fullmatch(word) and word != "I"):
        return True
    if lowered == "no":  # "No. 5", not "No. I prefer tea."
        return after.isdigit()
    return lowered in CLOSING_ABBREVIATIONS and not after.isupper()


def _candidate(statement: str) -> Candidate | None:
    body = LEAD_IN.sub("", statement).strip()
    if not body or NEGATED.search(body) or TEMPORARY.search(body):
        return None
    match = _match(body)
    if match is None:
        return None
    rule, found = match
    if rule.keeps == "statement":
        if rule.name in STATES_A_THING and NEGATES.search(_stated(found)):
            return None
        content = sentence(body)
        return Candidate(content, rule.kind or "fact", statement, _key(content))
    rest = found.group("rest")
    if WH_WORD.match(rest):  # "remember when we …" recalls, it does not ask to keep
        return None
    content = sentence(rest)
    return Candidate(content, rule.kind or _kind_of(rest), statement, _key(content))


def _key(content: str) -> str | None:
    """The name of the one value a statement gives: "my trip budget" for "My trip budget
    is 2000 EUR", "my dentist's name" for "My dentist's name is Dr. Fang", "my favourite
    food" for "My favourite food is sushi", "what to call me" for "Call me Sam". Only where
    the subject is a word for a value (a name, a budget, an age, a colour, a favourite …):
    of a person or a thing many things are said ("My manager is Alice", "My manager is on
    leave", "My daughter is 7", "My wife is French"), and one key for them would make
    confirming the one archive the other (QA). None for the rest."""
    if CALL_ME.match(content):
        return "what to call me"
    if (named := KEYED.match(content)) is None:
        return None
    subject = " ".join(named.group("subject").casefold().split())
    words = subject.split()
    if words[-1] in VALUE_WORDS or words[0] in FAVOURITE:
        return f"my {subject}"
    return None


def _stated(found: re.Match[str]) -> str:
    """What a self-statement says after its verb ("not Bob" of "My name is not Bob")."""
    groups = found.groupdict()
    return groups.get("rest") or groups.get("with") or ""


def _kind_of(remembered: str) -> Kind:
    """What a remember request asks to keep: "remember that I prefer tea" is a preference."""
    # The request may be a question ("could you remember that …?"); what it holds is not.
    inner = _match(LEAD_IN.sub("", remembered).rstrip(" ?"))
    return (inner[0].kind if inner else None) or "fact"


def _match(body: str) -> tuple[Rule, re.Match[str]] | None:
    asks = body.rstrip().endswith("?")
    for rule in RULES:
        found = rule.pattern.match(body)
        if found is None or not _plausible(rule, found):
            continue
        # A question only counts when it asks to remember ("could you remember …?").
        if asks and rule.name not in ("remember", "remember_to"):
            return None
        return rule, found
    return None


def _plausible(rule: Rule, found: re.Match[str]) -> bool:
    """Reject the matches that are conversation, not memory ("I like that", "my question is")."""
    if rule.name == "prefer" and CHATTER.match(found.group("rest")):
        return False
    return not (rule.name == "my_is" and NOT_A_FACT.match(found.group("subject").strip()))


def sentence(text: str) -> str:
    """One clean sentence: single spaces, a capital first letter, one closing stop."""
    text = " ".join(text.split()).rstrip(" .!?,;:")
    if not text:
        return text
    return text[0].upper() + text[1:] + "."
