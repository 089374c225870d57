"""Text that gives access: passwords, keys, tokens and links that let someone in.

Memory is handed to every later run and shown in the app, so a candidate that
names or carries a credential is never proposed (seed 002: "never keep
passwords, keys or links that give access"). The check errs on the side of
dropping: a lost candidate costs little, a stored secret costs a lot.
"""

from __future__ import annotations

import re
import unicodedata

from services.extractor.links import link_gives_access
from services.extractor.logins import (
    AUTH_HEADER,
    COMMAND_SECRET,
    DIGIT,
    LETTER,
    LOGIN_AS,
    SHELL_LOGIN,
    TRAILING,
    USERINFO,
    assigned_secret,
    login_given,
    secret_like,
    token_given,
)
from services.extractor.phrases import secret_phrase

# What a code alone opens, so "the gate is 4815" gives it (QA: proposed); and what a code
# opens besides, where a number may be the street's or the floor's ("the house is 120").
LOCKS = (
    r"(?:door|gate|garage|lock|padlock|alarm|safe|vault|locker|keypad|lock\s?box|key\s?box|"
    r"buzzer|intercom|suitcase|opener)"
)
# Those said with a bare code, "Door 4815", "Alarm 5566" (QA: kept); a gate or a locker has a
# number of its own ("at gate 104"), and a code after "at", "to" or "from" is a place's.
BARE_LOCKS = r"(?:door|garage|alarm|padlock|keypad|lock\s?box|key\s?box|buzzer|safe|vault)"
OPENABLE = rf"(?:{LOCKS}|building|entrance|house|apartment)"
# A code: three digits at least, dashes or spaces between them, so "the office opens at
# 9:00" and "opens with 2 tabs" stay facts.
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
# Words that name a credential; "my password is …" must never become a fact. (QA: "pass",
# "pw", "login", a door's "code", a wifi "key", a recovery phrase, a security answer, and
# the word in other languages were kept; then "passwd", "p@ssword", "pa55word", a PSK, a seed
# phrase, a backup or confirmation code, an SSN, a sort code, an IBAN, "Kennwort", "hasło".)
# "pass", "2FA", "MFA" and "OTP" alone are read in ``phrases`` ("a bus pass" and "set up
# 2FA" were dropped).
CREDENTIAL_WORDS = re.compile(
    r"\b(pass(?:word|words|phrase|code)s?|pass[\s-](?:phrase|code)s?|pwd|pw|logins?|"
    r"p[a@4]?[s5$]{1,2}[\s-]?w[o0]?r?ds?|"
    r"p-?words?|"
    rf"(?:{OPENABLE}|entry|access|unlock|wifi|wi-fi|key)\s?codes?|unlock\s+(?:pattern|gesture)s?|"
    r"recovery\s+(?:phrase|words?|key)s?|security\s+(?:answer|question)s?|"
    r"contrase\u00f1as?|passw(?:o|\u00f6)rt(?:er)?|kennw(?:o|\u00f6)rt(?:e|er)?|mot\s+de\s+passe|"
    r"senhas?|wachtwoord(?:en)?|\u043f\u0430\u0440\u043e\u043b\u044c\w*|parol|heslo|"
    r"has(?:\u0142|l)[oa]|l(?:\u00f6|o)senord|passord|adgangskode|salasana|jelsz(?:o|\u00f3)|"
    r"(?:la|mi|tu|su|nuestra|una)\s+claves?|claves?\s+(?:es|era|de)|"
    r"pin[\s-]?(?:code|number)s?|api[\s_-]?keys?|"
    r"access[\s_-]?keys?|secret(?:s|[\s_-]?keys?)?|private[\s_-]?keys?|ssh[\s_-]?keys?|"
    r"psks?|pre[\s-]?shared[\s-]?keys?|"
    r"(?:auth|access|bearer|api|refresh|session)?[\s_-]?tokens?|credentials?|"
    r"one[\s-]time[\s-](?:code|password)s?|"
    r"(?:recovery|backup|confirmation|verification|authentication|auth|login|sms|reset|"
    r"activation|security|scratch)[\s-]codes?|"
    r"(?:seed|wallet|restore)[\s-](?:phrase|words?|sentence)s?|bip[\s-]?39|mnemonic|cvv|cvc|"
    r"ssns?|social[\s-]security\s+(?:numbers?|nos?)|ibans?|sort[\s-]codes?|"
    r"routing\s+numbers?|(?:bank\s+)?account\s+(?:numbers?|nos?))\b",
    re.IGNORECASE,
)
# The word in scripts without spaces between words, where "\b" finds no edge.
CREDENTIAL_SCRIPTS = re.compile(
    "\u30d1\u30b9\u30ef\u30fc\u30c9|\u6697\u8a3c\u756a\u53f7|"  # Japanese
    "\u5bc6\u7801|\u5bc6\u78bc|\ube44\ubc00\ubc88\ud638"  # Chinese, Korean
)
# A credential spoken of in general names none (QA: "I use a password manager" and "we
# rotate API keys every 90 days" were dropped): a tool or a rule for them, or a plural that
# no one owns ("my", "the", "Ana's") with no value in the rest of its clause.
ABOUT_THEM = re.compile(
    r"\s+(?:managers?|polic(?:y|ies)|rules?|requirements?|rotation|strength|complexity|"
    r"length|hygiene|hashing|vaults?|formats?)\b",
    re.IGNORECASE,
)
PLURAL = re.compile(r"(?<!s)s$", re.IGNORECASE)
OWNED = re.compile(
    r"(?:\b(?:my|our|your|his|her|their|its|the|these|those|this|that)|['\u2019]s?)"
    r"(?:\s+[\w-]+)?\s*$",
    re.IGNORECASE,
)
CLAUSE_END_AT = re.compile(r"[.!?\n;]")
CODE_IN = re.compile(rf"{CODE}{CODE_END}", re.IGNORECASE)
# A code or a key given a value: "the code is 4815", "the code: 4815", "the key: hunter2",
# "the key to the server is hunter2". QA: "codes?\s+(?:is|:)\b" needed a word right after
# the ":", so "the code: 4815" was kept; a promo or a status code opens nothing.
SYSTEMS = (
    r"(?:server|account|vpn|database|db|box|machine|laptop|computer|phone|wifi|network|repo|"
    r"car|office|room|site|system|cluster|instance|bucket|wallet|admin)"
)
NAMED_VALUE = r"(?:\s+(?:is|are|was|were)\b|\s*[:=])"
NAMED_VALUE_AT = re.compile(NAMED_VALUE, re.IGNORECASE)
VALUE_GIVEN = re.compile(
    r"\b(?<!zip\s)(?<!postal\s)(?<!post\s)(?<!area\s)(?<!country\s)(?<!flight\s)"
    r"(?<!dress\s)(?<!source\s)(?<!error\s)(?<!status\s)(?<!color\s)(?<!colour\s)"
    r"(?<!airport\s)(?<!language\s)(?<!currency\s)(?<!product\s)(?<!tax\s)(?<!promo\s)"
    r"(?<!coupon\s)(?<!discount\s)(?<!voucher\s)(?<!project\s)(?<!course\s)(?<!exit\s)"
    rf"codes?{NAMED_VALUE}|\bkeys?{NAMED_VALUE}|\bclaves?\s*[:=]|"
    rf"\bkeys?\s+(?:to|for)\s+{WHOSE}(?:{OPENABLE}|{SYSTEMS})s?{NAMED_VALUE}",
    re.IGNORECASE,
)
# "my pin is 1234", "pin: 1234", "the pin for my card is 1234" (QA: kept). A pin is otherwise
# one on a map or a board ("the pin on the map is Lisbon"): lowercase, it needs a number.
PIN_GIVEN = re.compile(
    rf"\bpins?(?:\s+(?:for|to|of|on)\s+{WHOSE}\w+)?(?:\s+(?:is|was|are)\b|\s*[:=])?\s*{CODE}",
    re.IGNORECASE,
)
# "PIN" only in capitals: "pin this note" is an instruction, not a credential.
PIN = re.compile(r"\bPINs?\b")
# Shapes of well-known secrets, whatever words surround them; a card's number (13 to 19
# digits), a US social security number (spaced too, QA: "123 45 6789" was kept) and an IBAN.
SECRET_SHAPES = re.compile(
    r"(\b(?:\d[ -]?){12,18}\d\b|\b\d{3}[ -]\d{2}[ -]\d{4}\b|"
    r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b|"
    r"sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|"
    r"xox[abpors]-[\w-]{10,}|AKIA[0-9A-Z]{16}|AIza[\w-]{30,}|"
    r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
# A long unbroken run mixing letters and digits reads like a key or a hash. The run is
# found first and checked for a digit and a letter after: lookaheads that scanned the
# run from each place in it took time quadratic in its length (QA, a security review:
# a 20,000-character turn held the extractor's loop for 1.4 s).
OPAQUE_RUN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
# A git commit's hash is no key ("the fix is in commit 3f9a…" was dropped at forty digits).
COMMIT_HASH = re.compile(r"[0-9a-f]{7,40}")
COMMITTED = re.compile(r"\b(?:commits?|revision|rev|sha-?1?)\W{1,3}$", re.IGNORECASE)
# A code given as what opens something: a safe's combination, "the gate opens with 7788",
# "enter 4815 to unlock" (QA: the first two were proposed). A combination is one where it is
# given something: "my locker combination changed last week" gives none (QA: dropped).
OPENING_CODE = re.compile(
    rf"\b(?:(?:safe|lock|padlock|locker|vault|suitcase|bike)(?:'s)?\s+(?:combinations?|combos?)"
    rf"(?:{NAMED_VALUE}|\s+{CODE})|"
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
# 4815", "the code to open the safe is 909"; and (QA: kept) "the keypad takes 4815", "Door
# 4815", "Alarm 5566".
CODE_GIVEN = re.compile(
    rf"\b(?:{LOCKS}s?(?:\s+(?:is|was)\s+(?:now\s+|still\s+|set\s+to\s+)?|"
    rf"\s+(?:takes|accepts)\s+|\s*[:=]\s*){CODE}{CODE_END}|"
    rf"(?<!\bat\s)(?<!\bto\s)(?<!\bfrom\s)(?<!\bnear\s)(?<!\bvia\s)(?<!\bby\s)"
    rf"{BARE_LOCKS}s?\s+{CODE}{CODE_END}|{OPENABLE}\b[^.!?\n]{{0,30}}?\b{KEYED_IN}{CODE}{CODE_END}|"
    rf"{KEYED_IN}{CODE}\s+(?:at|on|for)\s+{WHOSE}{OPENABLE}\b|"
    rf"codes?\s+(?:to|for)\s+(?:get(?:ting)?\s+in(?:side)?\b|com(?:e|ing)\s+in\b|entry\b|"
    rf"let\s+\w+\s+in\b|(?:{OPENS}|enter|entering)\s+{WHOSE}{OPENABLE}\b))",
    re.IGNORECASE,
)
# Answers to the usual security questions open an account as a password does (QA: "My
# mother's maiden name is Smith." was proposed). The question's own words count ("my first
# pet's name", "the name of my first school"); a first pet, car, school, boss or teacher
# said of otherwise is a fact ("my first car was a Volvo", QA: wrongly dropped), unless the text
# frames it as an answer (``FRAMED``). A childhood home is a fact ("my childhood home was in
# Porto", QA: dropped); its street, address or phone number is an answer.
SECURITY_ANSWER = re.compile(
    r"\b(?:maiden\s+name|name\s+of\s+(?:my|your|the)\s+first\s+\w+|"
    r"first\s+(?:pet|car|school|boss|teacher|love)['\u2019]?s\s+name|"
    r"childhood\s+(?:pet|nickname|hero|(?:home\s+)?(?:street|address|phone)|(?:best\s+)?friend)|"
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
# A wifi given without the word "password" (QA: "the wifi is Sunshine2024!", "HomeNet uses
# sunshine99", "Guest network: CafeGuest, sunshine99" were kept). In a sentence that speaks
# of a network, a word that reads as a secret is one; "the wifi is fast" gives none, nor do
# a standard, a speed or an address ("WPA2", "5GHz", "ops1@acme.com").
NETWORK = re.compile(r"\b(?:wi-?fi|wlan|ssid|hotspot|network)s?\b", re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
NETWORK_TERM = re.compile(
    r"wpa|wep|ipv\d|802\.|\d+(?:\.\d+)*[a-z]{0,4}\W*$|[^\s@]*@|\w+://|www\.", re.IGNORECASE
)
# What opens with a word that reads as a secret: "the laptop unlocks with hunter2" (QA:
# kept); a fingerprint, a key or Face ID tells whoever reads it nothing.
OPENS_WITH = re.compile(
    rf"\b{OPENS}\s+(?:with|using|via)\s+(?P<value>[^\s,;]+)",
    re.IGNORECASE,
)


# What is said outright, wherever it stands; and what is looked for only where the character
# it needs is (each pass over a million-character turn costs about 0.05 s).
SAID: tuple[re.Pattern[str], ...] = (PIN, PIN_GIVEN, VALUE_GIVEN, CREDENTIAL_SCRIPTS)
SAID += (SECRET_SHAPES, OPENING_CODE, CODE_GIVEN, SECURITY_ANSWER, AUTH_HEADER)
SAID_WITH = ((USERINFO, "@"), (COMMAND_SECRET, "-"))


def gives_access(text: str) -> bool:
    """True when the text names a credential or carries one (key, token, seed, access link).
    Read as NFKC (full-width letters are plain ones); a word mixing Latin with Cyrillic or
    Greek letters (a "password" with a Cyrillic "a") counts as one, a look-alike."""
    text = unicodedata.normalize("NFKC", text)
    if any(p.search(text) for p in SAID) or _names_credential(text) or _opaque(text):
        return True
    if any(needed in text and p.search(text) for p, needed in SAID_WITH):
        return True
    if LOGIN_AS.search(text) or SHELL_LOGIN.search(text) or login_given(text):
        return True
    if _framed_answer(text) or token_given(text) or _network_given(text):
        return True
    if _opens_with_secret(text) or assigned_secret(text):
        return True
    if NON_LATIN.search(text) and any(_mixes_scripts(w) for w in WORDS.findall(text)):
        return True
    return secret_phrase(text) or link_gives_access(text)


def _names_credential(text: str) -> bool:
    return any(not _in_general(text, word) for word in CREDENTIAL_WORDS.finditer(text))


def _in_general(text: str, word: re.Match[str]) -> bool:
    """A credential word for a tool or a rule (``ABOUT_THEM``), or a plural that no one owns
    and that is given no value."""
    if ABOUT_THEM.match(text, word.end()):
        return True
    owned = OWNED.search(text, max(0, word.start() - 40), word.start())
    if owned or not PLURAL.search(word.group(0)):
        return False
    clause = CLAUSE_END_AT.split(text[word.end() : word.end() + 160], maxsplit=1)[0]
    if NAMED_VALUE_AT.match(clause) or CODE_IN.search(clause):
        return False
    return not any(_secret_word(w, 1) for w in clause.split())


def _network_given(text: str) -> bool:
    if not NETWORK.search(text):
        return False
    for sentence in SENTENCE_END.split(text):
        if NETWORK.search(sentence) and any(
            _secret_word(word, 6) and not NETWORK_TERM.match(word) for word in sentence.split()
        ):
            return True
    return False


def _opens_with_secret(text: str) -> bool:
    return any(_secret_word(m.group("value"), 5) for m in OPENS_WITH.finditer(text))


def _secret_word(value: str, shortest: int) -> bool:
    word = value.rstrip(TRAILING)
    return len(word) >= shortest and secret_like(word)


# A word holding a Cyrillic or Greek letter beside a Latin one. Words are found first and
# looked into after (a pattern of a word around such a letter backtracked over a long word
# without one).
NON_LATIN = re.compile(r"[\u0370-\u03ff\u0400-\u04ff]")
WORDS = re.compile(r"\w+")
LATIN = re.compile(r"[A-Za-z]")


def _mixes_scripts(word: str) -> bool:
    return bool(NON_LATIN.search(word) and LATIN.search(word))


def _opaque(text: str) -> bool:
    return any(_opaque_run(text, run) for run in OPAQUE_RUN.finditer(text))


def _opaque_run(text: str, run: re.Match[str]) -> bool:
    word = run.group(0)
    if not (DIGIT.search(word) and LETTER.search(word)):
        return False
    before = text[max(0, run.start() - 12) : run.start()]
    return not (COMMIT_HASH.fullmatch(word) and COMMITTED.search(before))


def _framed_answer(text: str) -> bool:
    return bool(FIRST_THING.search(text) and FRAMED.search(text))
