"""Text that gives access: passwords, keys, tokens and links that let someone in.

Memory is handed to every later run and shown in the app, so a candidate that
names or carries a credential is never proposed (seed 002: "never keep
passwords, keys or links that give access"). The check errs on the side of
dropping: a lost candidate costs little, a stored secret costs a lot.
"""

from __future__ import annotations

import re
import unicodedata

# Words that name a credential; "my password is …" must never become a fact. (QA: "pass",
# "pw", "login", a door's "code", a wifi "key", a recovery phrase, a security answer, and
# the word in other languages were kept.)
CREDENTIAL_WORDS = re.compile(
    r"\b(pass(?:word|words|phrase|code)?s?|pwd|pw|logins?|"
    r"(?:door|gate|entry|alarm|safe|lock|garage|building|access|wifi|wi-fi|key)\s?codes?|"
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
# With a scheme, or "www.", or a bare host with a path ("example.com/reset?code=1").
URL = re.compile(
    r"\b(?:https?|ftp)://\S+|\bwww\.\S+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}/\S*",
    re.IGNORECASE,
)
# Links whose path invites someone in: invitations, shares, resets, magic links.
ACCESS_PATH = re.compile(
    r"/(?:invite|join|share|shared|s|j|w|reset|magic|token|auth|oauth|login|signin|sso|"
    r"verify|activate|unlock|meetup-join)\b|^meet\.google\.com/",
    re.IGNORECASE,
)


def gives_access(text: str) -> bool:
    """True when the text names a credential or carries one (key, token, access link).
    Read as NFKC (full-width letters are plain ones); a word mixing Latin with Cyrillic or
    Greek letters (a "password" with a Cyrillic "a") counts as one, a look-alike."""
    text = unicodedata.normalize("NFKC", text)
    if any(p.search(text) for p in (CREDENTIAL_WORDS, PIN, SECRET_SHAPES)) or _opaque(text):
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


def _access_link(url: str) -> bool:
    """A link with credentials, a query or fragment (signatures, codes), or an invite path."""
    rest = url.split("://", 1)[-1]
    host, _, path = rest.partition("/")
    return "@" in host or "?" in rest or "#" in rest or bool(ACCESS_PATH.search("/" + path))
