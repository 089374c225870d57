"""Text that gives access: passwords, keys, tokens and links that let someone in.

Memory is handed to every later run and shown in the app, so a candidate that
names or carries a credential is never proposed (seed 002: "never keep
passwords, keys or links that give access"). The check errs on the side of
dropping: a lost candidate costs little, a stored secret costs a lot.
"""

from __future__ import annotations

import re
import unicodedata

# What a code opens: "the gate code", "the code to the garage".
OPENABLE = (
    r"(?:door|gate|garage|lock|padlock|alarm|safe|vault|locker|keypad|lock\s?box|key\s?box|"
    r"building|entrance|house|apartment|suitcase)"
)
# Words that name a credential; "my password is …" must never become a fact. (QA: "pass",
# "pw", "login", a door's "code", a wifi "key", a recovery phrase, a security answer, and
# the word in other languages were kept.)
CREDENTIAL_WORDS = re.compile(
    r"\b(pass(?:word|words|phrase|code)?s?|pwd|pw|logins?|"
    rf"(?:{OPENABLE}|entry|access|unlock|wifi|wi-fi|key)\s?codes?|"
    r"(?<!zip\s)(?<!postal\s)(?<!post\s)(?<!area\s)(?<!country\s)(?<!flight\s)"
    r"(?<!dress\s)(?<!source\s)(?<!error\s)(?<!status\s)(?<!color\s)(?<!colour\s)"
    r"(?<!airport\s)(?<!language\s)(?<!currency\s)(?<!product\s)(?<!tax\s)"
    r"codes?\s+(?:is|are|was|:)|keys?\s+(?:is|are|was|:)|"
    r"recovery\s+(?:phrase|words?|key)s?|security\s+(?:answer|question)s?|"
    r"contrase\u00f1as?|passw(?:o|\u00f6)rt(?:er)?|mot\s+de\s+passe|senhas?|"
    r"wachtwoord|\u043f\u0430\u0440\u043e\u043b\u044c\w*|"
    r"pin[\s-]?(?:code|number)s?|api[\s_-]?keys?|"
    r"access[\s_-]?keys?|secret(?:s|[\s_-]?keys?)?|private[\s_-]?keys?|ssh[\s_-]?keys?|"
    r"(?:auth|access|bearer|api|refresh|session)?[\s_-]?tokens?|credentials?|"
    r"otp|2fa|mfa|one[\s-]time[\s-](?:code|password)s?|recovery[\s-]codes?|"
    r"seed[\s-]phrases?|mnemonic|cvv|cvc|security[\s-]codes?)\b",
    re.IGNORECASE,
)
# "PIN" only in capitals: "pin this note" is an instruction, not a credential.
PIN = re.compile(r"\bPINs?\b")
# Shapes of well-known secrets, whatever words surround them; a card's number (13 to 19
# digits) and a US social security number too.
SECRET_SHAPES = re.compile(
    r"(\b(?:\d[ -]?){12,18}\d\b|\b\d{3}-\d{2}-\d{4}\b|"
    r"sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|"
    r"xox[abpors]-[\w-]{10,}|AKIA[0-9A-Z]{16}|AIza[\w-]{30,}|"
    r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
# A long unbroken run mixing letters and digits reads like a key or a hash. The run is
# found first and checked for a digit and a letter after: lookaheads that scanned the
# run from each place in it took time quadratic in its length (QA, a security review:
# a 20,000-character turn held the extractor's loop for 1.4 s).
OPAQUE_RUN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
DIGIT, LETTER = re.compile(r"\d"), re.compile(r"[A-Za-z]")
# A code given as what opens something: a safe's combination, "the gate opens with 7788",
# "enter 4815 to unlock" (QA: the first two were proposed). Three digits at least, dashes
# or spaces between them, so "the office opens at 9:00" and "opens with 2 tabs" stay facts.
CODE = r"[#*]?\d(?:[\s-]?\d){2,}\b"
KEYED_IN = r"(?:enter|dial|type|press|punch\s+in|key\s+in|use)\s+(?:the\s+)?(?:code\s+)?"
WHOSE = r"(?:(?:the|my|our|your|a)\s+)?(?:\w+\s+)?"  # "the code to the (front) door"
OPENS = r"(?:open|opens|opened|unlock|unlocks|unlocked|disarm|disarms|disarmed|get\s+in)"
OPENING_CODE = re.compile(
    rf"\b(?:(?:safe|lock|padlock|locker|vault|suitcase|bike)(?:'s)?\s+combinations?|"
    rf"combinations?(?:\s+(?:to|for|of)\s+{WHOSE}{OPENABLE})?(?:\s+(?:is|are|was)\b|\s*:)"
    rf"\s*{CODE}|codes?\s+(?:to|for)\s+{WHOSE}{OPENABLE}\b|"
    rf"{OPENS}\s+(?:with|using|by|via)\s+(?:(?:the|a|code|pin|number|typing|entering|"
    rf"dialing|dialling|pressing|punching|keying|in)\s+){{0,3}}{CODE}|"
    rf"{KEYED_IN}{CODE}[^.!?\n]{{0,30}}?\bto\s+{OPENS}|"
    rf"to\s+{OPENS}\b[^.!?\n]{{0,40}}?\b{KEYED_IN}{CODE})",
    re.IGNORECASE,
)
# Answers to the usual security questions open an account as a password does (QA: "My
# mother's maiden name is Smith." was proposed). "First pet" whatever follows: "my first
# pet was a dog called Rex" answers it too.
SECURITY_ANSWER = re.compile(
    r"\b(?:maiden\s+name|first\s+(?:pet|car|school|boss|teacher|love|kiss)|"
    r"name\s+of\s+(?:my|your)\s+first\s+\w+|"
    r"childhood\s+(?:pet|nickname|hero|street|home|phone|(?:best\s+)?friend)|"
    r"street\s+(?:i|you|we)\s+grew\s+up\s+on|where\s+(?:my|your)\s+parents\s+met|"
    r"(?:father|mother|dad|mom|mum)(?:['\u2019]?s)?\s+middle\s+name|"
    r"memorable\s+(?:questions?|answers?|words?|phrases?|places?|dates?|names?|"
    r"information))\b",
    re.IGNORECASE,
)
# An account and its secret given together: "root@10.0.0.5 using hunter2", "the account is
# ana@example.com with sunshine99" (QA: both were proposed), "ana@example.com / hunter2",
# "ana@example.com:hunter2". An address alone is contact data ("Ana's email is
# ana@example.com", "write to ana@example.com with questions"), so an email with a word
# after it counts only where the word reads as a secret (letters and digits, or a symbol)
# or the text speaks of an account or a login; a user at an address or a one-word host
# ("root@10.0.0.5", "admin@nas") is a login wherever it stands. A ":" before a path
# ("git@github.com:acme/app.git") or a port ("root@10.0.0.5:22") gives no secret. The
# name before "@" starts where no name precedes it, so a long word is read once.
CREDENTIAL_PAIR = re.compile(
    r"(?<![\w.+-])[\w.+-]+@(?P<host>[\w-]+(?:\.[\w-]+)*)(?::\d+\b)?"
    r"(?:\s+(?:using|with)\s+|(?P<joined>\s+/\s+|:(?!\d+\b)(?=[^\s/]+(?:\s|$))))"
    r"(?P<secret>\S+)",
    re.IGNORECASE,
)
LOGIN_HOST = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|[\w-]+")
SYMBOL = re.compile(r"[!#$%^&*+=~|<>]")
ACCOUNT = re.compile(
    r"\b(?:accounts?|log(?:ging)?[\s-]?ins?|sign(?:ing)?[\s-]?ins?|user\s?names?|ssh|sftp|"
    r"servers?|reachable|vpn|portal)\b",
    re.IGNORECASE,
)
# With a scheme, or "www.", or a bare host with a path ("example.com/reset?code=1"). A bare
# host starts where no host precedes it: tried from each label of a long dotted run
# ("a.a.a…"), it took time quadratic in its length (a 20,000-character turn took 5 s).
URL = re.compile(
    r"\b(?:https?|ftp)://\S+|\bwww\.\S+|"
    r"(?<![\w-])(?<![\w-]\.)[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}/\S*",
    re.IGNORECASE,
)
# Links whose path invites someone in: invitations, shares, resets, magic links.
ACCESS_PATH = re.compile(
    r"/(?:invite|join|share|shared|s|j|w|reset|magic|token|auth|oauth|login|signin|sso|"
    r"verify|activate|unlock|meetup-join)\b",
    re.IGNORECASE,
)
# Links that let whoever holds them into a meeting, a call or a group chat, read against the
# host and the path together (QA: "meet.google.com/abc-defg-hij" was tested against the
# path alone, which never holds the host, so a Meet link was kept).
MEETING_LINK = re.compile(
    r"(?:[\w-]+\.)*(?:meet\.google\.com/[\w-]|zoom\.us/(?:j|my|s|w|wc)/|zoomgov\.com/j/|"
    r"teams\.microsoft\.com/l/meetup-join|teams\.live\.com/meet/|webex\.com/(?:meet|join)|"
    r"whereby\.com/[\w-]|meet\.jit\.si/[\w-]|meet\.goto\.com/|"
    r"gotomeeting\.com/join|bluejeans\.com/\d|chime\.aws/\d|join\.skype\.com/|"
    r"discord\.gg/|discord\.com/invite|chat\.whatsapp\.com/|join\.slack\.com/|"
    r"t\.me/(?:\+|joinchat))",
    re.IGNORECASE,
)


def gives_access(text: str) -> bool:
    """True when the text names a credential or carries one (key, token, access link).
    Read as NFKC (full-width letters are plain ones); a word mixing Latin with Cyrillic or
    Greek letters (a "password" with a Cyrillic "a") counts as one, a look-alike."""
    text = unicodedata.normalize("NFKC", text)
    said = (CREDENTIAL_WORDS, PIN, SECRET_SHAPES, OPENING_CODE, SECURITY_ANSWER)
    if any(p.search(text) for p in said) or _opaque(text) or _credential_pair(text):
        return True
    if NON_LATIN.search(text) and any(_mixes_scripts(w) for w in WORDS.findall(text)):
        return True
    return any(_access_link(m.group(0)) for m in URL.finditer(text))


# A word holding a Cyrillic or Greek letter beside a Latin one. Words are found first and
# looked into after (a pattern of a word around such a letter backtracked over a long word
# without one).
NON_LATIN = re.compile(r"[\u0370-\u03ff\u0400-\u04ff]")
WORDS = re.compile(r"\w+")
LATIN = re.compile(r"[A-Za-z]")


def _mixes_scripts(word: str) -> bool:
    return bool(NON_LATIN.search(word) and LATIN.search(word))


def _opaque(text: str) -> bool:
    return any(
        DIGIT.search(run.group(0)) and LETTER.search(run.group(0))
        for run in OPAQUE_RUN.finditer(text)
    )


def _credential_pair(text: str) -> bool:
    """A login and its secret side by side (see ``CREDENTIAL_PAIR``)."""
    pairs = list(CREDENTIAL_PAIR.finditer(text))
    if pairs and ACCOUNT.search(text):  # once a text, not once a pair
        return True
    return any(
        pair.group("joined")
        or LOGIN_HOST.fullmatch(pair.group("host"))
        or _secret_like(pair.group("secret"))
        for pair in pairs
    )


def _secret_like(word: str) -> bool:
    return bool((DIGIT.search(word) and LETTER.search(word)) or SYMBOL.search(word))


def _access_link(url: str) -> bool:
    """A link with credentials, a query or fragment (signatures, codes), an invite path, or
    one of a meeting service's."""
    rest = url.split("://", 1)[-1]
    host, _, path = rest.partition("/")
    if "@" in host or "?" in rest or "#" in rest or ACCESS_PATH.search("/" + path):
        return True
    return bool(MEETING_LINK.match(rest))
