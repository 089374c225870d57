"""Text that gives access: passwords, keys, tokens and links that let someone in.

Memory is handed to every later run and shown in the app, so a candidate that
names or carries a credential is never proposed (seed 002: "never keep
passwords, keys or links that give access"). The check errs on the side of
dropping: a lost candidate costs little, a stored secret costs a lot.
"""

from __future__ import annotations

import re
import unicodedata

# What a code alone opens, so "the gate is 4815" gives it (QA: proposed); and what a code
# opens besides, where a number may be the street's or the floor's ("the house is 120").
LOCKS = (
    r"(?:door|gate|garage|lock|padlock|alarm|safe|vault|locker|keypad|lock\s?box|key\s?box|"
    r"buzzer|intercom|suitcase)"
)
OPENABLE = rf"(?:{LOCKS}|building|entrance|house|apartment)"
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
# A number is a code where nothing it counts follows: the clause ends, or it is said where
# it is keyed in (QA: "the museum opens with 300 visitors a day" was dropped).
CODE_END = (
    rf"(?=[#*]?\s*(?:$|[.!?,;:)\n]|(?:and|or|but|then)\b|(?:on|at|by|via)\s+(?:the|its|a)\s+"
    rf"(?:panel|pad|{OPENABLE})\b))"
)
OPENING_CODE = re.compile(
    rf"\b(?:(?:safe|lock|padlock|locker|vault|suitcase|bike)(?:'s)?\s+(?:combinations?|combos?)|"
    rf"(?:combinations?|combos?)(?:\s+(?:to|for|of)\s+{WHOSE}{OPENABLE})?(?:\s+(?:is|are|was)\b|"
    rf"\s*:)\s*{CODE}|codes?\s+(?:to|for)\s+{WHOSE}{OPENABLE}\b|"
    rf"{OPENS}(?:\s+{WHOSE}{OPENABLE})?\s+(?:with|using|by|via)\s+(?:(?:the|a|code|pin|number|"
    rf"typing|entering|dialing|dialling|pressing|punching|keying|in)\s+){{0,3}}{CODE}{CODE_END}|"
    rf"{KEYED_IN}{CODE}[^.!?\n]{{0,30}}?\bto\s+{OPENS}|"
    rf"to\s+{OPENS}\b[^.!?\n]{{0,40}}?\b{KEYED_IN}{CODE})",
    re.IGNORECASE,
)
# The same said another way (QA: each was proposed): "the padlock is 3-3-7", "disarm the
# alarm: 5566", "at the gate, dial 4815", "dial 4815 at the gate", "the code to get in is
# 4815", "the code to open the safe is 909".
CODE_GIVEN = re.compile(
    rf"\b(?:{LOCKS}s?(?:\s+(?:is|was)\s+(?:now\s+|still\s+|set\s+to\s+)?|\s*[:=]\s*){CODE}"
    rf"{CODE_END}|{OPENABLE}\b[^.!?\n]{{0,30}}?\b{KEYED_IN}{CODE}{CODE_END}|"
    rf"{KEYED_IN}{CODE}\s+(?:at|on|for)\s+{WHOSE}{OPENABLE}\b|"
    rf"codes?\s+(?:to|for)\s+(?:get(?:ting)?\s+in(?:side)?\b|com(?:e|ing)\s+in\b|entry\b|"
    rf"let\s+\w+\s+in\b|(?:{OPENS}|enter|entering)\s+{WHOSE}{OPENABLE}\b))",
    re.IGNORECASE,
)
# Answers to the usual security questions open an account as a password does (QA: "My
# mother's maiden name is Smith." was proposed). The question's own words count ("my first
# pet's name", "the name of my first school"); a first pet, car, school, boss or teacher
# said of otherwise is a fact ("my first car was a Volvo", QA: wrongly dropped), unless the text
# frames it as an answer (``FRAMED``).
SECURITY_ANSWER = re.compile(
    r"\b(?:maiden\s+name|name\s+of\s+(?:my|your|the)\s+first\s+\w+|"
    r"first\s+(?:pet|car|school|boss|teacher|love)['\u2019]?s\s+name|"
    r"childhood\s+(?:pet|nickname|hero|street|home|phone|(?:best\s+)?friend)|"
    r"street\s+(?:i|you|we)\s+grew\s+up\s+on|where\s+(?:my|your)\s+parents\s+met|"
    r"(?:father|mother|dad|mom|mum)(?:['\u2019]?s)?\s+middle\s+name|"
    r"memorable\s+(?:questions?|answers?|words?|phrases?|places?|dates?|names?|"
    r"information))\b",
    re.IGNORECASE,
)
FIRST_THING = re.compile(r"\bfirst\s+(?:pet|car|school|boss|teacher|love|kiss)", re.IGNORECASE)
FRAMED = re.compile(
    r"\b(?:(?:security|secret|challenge)\s+(?:questions?|answers?)|answers?\s+(?:to|for|is|was))\b",
    re.IGNORECASE,
)
# An account and its secret given together: "root@10.0.0.5 using hunter2", "the account is
# ana@example.com with sunshine99" (QA: both were proposed), "the account ana@example.com
# uses sunshine99" (QA: proposed), "ana@example.com / hunter2", "ana@example.com:hunter2".
# An address alone is contact data ("write to ana@example.com with Q3 results", "contact
# ana@example.com with your account questions": QA, both wrongly dropped), so an email with a
# word after it counts only where the word reads as a secret (letters and digits, or a
# symbol) and the text speaks of an account or a login or the word ends the clause; a user
# at an address or a one-word host ("root@10.0.0.5", "admin@nas") is a login wherever it
# stands. Joined by "/" or ":", a second email is a second address ("billing@acme.com /
# finance@acme.com", QA: wrongly dropped); a ":" before a path ("git@github.com:acme/app.git") or a
# port ("root@10.0.0.5:22") gives no secret. The name before "@" starts where no name
# precedes it, so a long word is read once.
CREDENTIAL_PAIR = re.compile(
    r"(?<![\w.+-])[\w.+-]+@(?P<host>[\w-]+(?:\.[\w-]+)*)(?::\d+\b)?"
    r"(?:\s+(?:using|with|uses?)\s+|(?P<joined>\s+/\s+|:(?!\d+\b)(?=[^\s/]+(?:\s|$))))"
    r"(?P<secret>\S+)",
    re.IGNORECASE,
)
LOGIN_HOST = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|[\w-]+")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
SYMBOL = re.compile(r"[!#$%^&*+=~|<>]")
TRAILING = ".,;:!?)]'\""
CLAUSE_END = re.compile(r"\s*(?:$|[.!?,;:)\n]|(?:and|or|but|then)\b)", re.IGNORECASE)
ACCOUNT = re.compile(
    r"\b(?:accounts?|log(?:ging|ged)?[\s-]?ins?|sign(?:ing|ed)?[\s-]?ins?|user\s?names?|ssh|"
    r"sftp|servers?|reachable|vpn|portal)\b",
    re.IGNORECASE,
)
# A user and a secret joined by "/" ("admin / sunshine", QA: proposed) where the text speaks
# of a login or the user is one of the usual accounts; "tea / coffee" and "read/write" say
# none. Unspaced ("req/s", "TCP/IP"), the second must read as a secret. A word followed by
# another "/" is a path's. Possessive runs: a long word is read once.
SLASH_PAIR = re.compile(
    r"(?<![\w.+@/:-])(?P<user>[A-Za-z_][\w.+-]*+)(?:(?P<spaced>\s+/\s+)|/)"
    r"(?P<secret>[^\s/]++)(?!/)"
)
USUAL_USER = re.compile(r"admin(?:istrator)?|root|superuser|sysadmin|guest", re.IGNORECASE)
# "log in as admin with sunshine" (QA: proposed); "... with the SSO button" names no secret.
LOGIN_AS = re.compile(
    r"\b(?:log(?:s|ged|ging)?|sign(?:s|ed|ing)?)[\s-]?(?:in|on|into)\s+as\s+\S+\s+"
    r"(?:with|using|via)\s+(?!(?:the|your|my|our|their|his|her|its|a|an)\b)\S",
    re.IGNORECASE,
)
# A login typed with its secret after it: "ssh admin@nas hunter" (QA: proposed). A word
# that joins the clause ("to", "and", "-p") is no secret; a remote command errs as one.
SHELL_LOGIN = re.compile(
    r"\b(?:ssh|sftp|mosh|telnet)\s+(?:-\w+\s+(?:\d+\s+)?){0,3}[\w.+-]+@[\w.-]+(?::\d+)?\s+"
    r"(?!(?:to|and|or|then|for|from|with|on|in|at|if|when|via|as|is|was|the|a|an)\b)[^\s-]",
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
    said = (CREDENTIAL_WORDS, PIN, SECRET_SHAPES, OPENING_CODE, CODE_GIVEN, SECURITY_ANSWER)
    if any(p.search(text) for p in said) or _framed_answer(text) or _opaque(text):
        return True
    if LOGIN_AS.search(text) or SHELL_LOGIN.search(text) or _login_given(text):
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


def _framed_answer(text: str) -> bool:
    return bool(FIRST_THING.search(text) and FRAMED.search(text))


def _login_given(text: str) -> bool:
    """A login and its secret side by side (``CREDENTIAL_PAIR``, ``SLASH_PAIR``)."""
    pairs = list(CREDENTIAL_PAIR.finditer(text))
    slashes = list(SLASH_PAIR.finditer(text))
    if not pairs and not slashes:
        return False
    login = ACCOUNT.search(text) is not None  # once a text, not once a pair
    return any(_email_login(text, pair, login) for pair in pairs) or any(
        _slash_login(pair, login) for pair in slashes
    )


def _email_login(text: str, pair: re.Match[str], login: bool) -> bool:
    secret = pair.group("secret")
    word = secret.rstrip(TRAILING)
    if pair.group("joined"):
        return not EMAIL.fullmatch(word)
    if LOGIN_HOST.fullmatch(pair.group("host")):
        return True
    ends = word != secret or CLAUSE_END.match(text, pair.end()) is not None
    return _secret_like(word) and (login or ends)


def _slash_login(pair: re.Match[str], login: bool) -> bool:
    secret = pair.group("secret").rstrip(TRAILING)
    if EMAIL.fullmatch(secret) or not (login or USUAL_USER.fullmatch(pair.group("user"))):
        return False
    return bool(pair.group("spaced")) or _secret_like(secret)


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
