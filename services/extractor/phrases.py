"""Secrets said in words or as a seed rather than as a password: a "pass" given a value, a
network's or a vault's phrase, a second factor's seed or codes, a wallet's seed phrase.
Part of the extractor's check for text that gives access (``access.gives_access``)."""

from __future__ import annotations

import re

from services.extractor.logins import TRAILING

# "pass" alone is a ticket or a verb as often as a password ("Ana has a bus pass", "the tests
# pass" were both dropped): it counts after a login's word ("wifi pass", "user/pass"),
# or given a value ("my pass is …", "pass: …") or a secret's shape ("pass Tr0ub4dor&3")
# where no ticket's word comes before it. Tickets are looked for only where a value follows,
# one lookbehind per length of word (one per word, tried at every "pass", was ten times
# slower on a turn of them).
TICKETS = (
    "bus boarding season ski day week weekly month monthly annual year yearly train rail metro "
    "subway transit travel ferry museum gym hall mountain free press backstage visitor parking "
    "festival park event hiking concert zoo library club"
).split()


def _not_after(words: list[str], then: str) -> str:
    """Lookbehinds for ``then`` after one of the words, one for each length of word (a
    lookbehind's width is fixed)."""
    by_length: dict[int, list[str]] = {}
    for word in words:
        by_length.setdefault(len(word), []).append(word)
    return "".join(rf"(?<!\b(?:{'|'.join(w)})[\s-]{then})" for w in by_length.values())


PASS_VALUE = (
    r"\s+(?:is|are|was|were)\b|\s*[:=]|\s+(?=\S*[!#$%^&*+=~|<>])|"
    r"\s+(?=[^\s\d]*\d)(?=[^\sA-Za-z]*[A-Za-z])"
)
PASS_GIVEN = re.compile(
    r"\b(?:wi-?fi|wlan|e-?mail|mail|login|user(?:name)?|account|admin|root|router|vpn|network|"
    r"server|db|database|ssh|ftp|portal)(?:['\u2019]s)?(?:\s*[/&]\s*|\s+and\s+|[\s-]+)pass\b|"
    rf"\bpass\b(?={PASS_VALUE}){_not_after(TICKETS, 'pass')}",
    re.IGNORECASE,
)
# A phrase that opens a network or a vault, said without "pass" ("the wifi phrase is …").
PHRASE_NAMED = re.compile(
    r"\b(?:wi-?fi|wlan|network|router|vault|login|unlock|master|access)\s+phrases?\b",
    re.IGNORECASE,
)
# A second factor's seed or code ("the TOTP seed is JBSW…", "authenticator key JBSW Y3DP …"
# were kept). "2FA", "MFA" and "OTP" alone are policy ("Bob set up 2FA for everyone" was
# dropped): they count where a code or a base32 seed follows, given or not.
FACTOR_GIVEN = re.compile(
    r"\b(?:[th]?otp|2fa|mfa|two[\s-]factor|2[\s-]?step|authenticator|authy)\b"
    r"(?:\s+(?:app|setup|backup|recovery|secret|codes?|seeds?|secrets?|keys?|tokens?|pins?|"
    r"backups?)\b){0,2}(?:\s+(?:is|are|was|were)\s+|\s*[:=]\s*|\s+)"
    r"(?P<value>[A-Za-z2-7]{4,}(?:[ -][A-Za-z2-7]{4,}){0,7}|\d(?:[ -]?\d){3,})",
    re.IGNORECASE,
)
FACTOR_WORDS = ("otp", "2fa", "mfa", "factor", "step", "auth")
OTPAUTH = re.compile(r"\botpauth(?:-migration)?://", re.IGNORECASE)
SEPARATORS = re.compile(r"[ -]")
BASE32 = re.compile(r"[A-Za-z2-7]{16,}")
# A wallet's seed: twelve short plain words in a row (BIP-39's are of three to eight letters,
# none of them in ``NOT_SEED_WORDS``) where the text speaks of a wallet, a seed or a
# recovery phrase ("my seed is apple banana …" and "metamask: apple banana …" were kept).
# Crypto, coins, backups and "recovery" alone are not (review: "Ana likes crypto news:
# bitcoin price alerts, …" was dropped). A seed given fewer words counts where it is
# someone's or a wallet's ("my seed is apple banana cherry dog"), not any seed's ("the
# random seed is fixed because tests need stable ordering" was dropped). Words are read one
# by one, so a long turn is read once.
WALLET = re.compile(
    r"\b(?:seeds?|wallets?|mnemonics?|bip[\s-]?39|metamask|ledger|trezor|exodus|phantom|"
    r"(?:recovery|restore|backup)\s+(?:phrase|words))\b",
    re.IGNORECASE,
)
WALLET_WORDS = tuple(
    "seed wallet mnemonic bip mask ledger trezor exodus phantom phrase words".split()
)
SEED_GIVEN = re.compile(
    r"\b(?:my|our|his|her|their|your|wallet(?:['\u2019]s)?|recovery|secret)\s+seed"
    r"(?:\s+(?:phrase|words))?(?:\s+(?:is|are|was|were)\b|\s*[:=])",
    re.IGNORECASE,
)
PLAIN_WORD = re.compile(r"[A-Za-z][a-z]{2,7}")
NUMBERING = re.compile(r"\(?\d{1,2}[.):]?")  # "1. apple 2. banana": a list's numbers
NOT_SEED_WORDS = frozenset(
    "the and for with was were are has had not but your our his her its their them she him "
    "from been which who these those some would could should does did than every each".split()
)
SEED_WORDS, SEED_GIVEN_WORDS = 12, 4


def secret_phrase(text: str) -> bool:
    """A pass given a value, a network's phrase, a second factor's seed, a wallet's seed."""
    lowered = text.lower()  # each pattern is tried only where its word is (as ``SAID_WITH``)
    if "pass" in lowered and PASS_GIVEN.search(text):
        return True
    if "phrase" in lowered and PHRASE_NAMED.search(text):
        return True
    if "otpauth" in lowered and OTPAUTH.search(text):
        return True
    if any(w in lowered for w in FACTOR_WORDS) and any(
        _factor_value(m.group("value")) for m in FACTOR_GIVEN.finditer(text)
    ):
        return True
    return any(w in lowered for w in WALLET_WORDS) and _wallet_seed(text)


def _factor_value(value: str) -> bool:
    """A code of four digits or more, or a base32 seed of sixteen characters or more that
    holds a digit or is in capitals ("sent every morning" is words)."""
    compact = SEPARATORS.sub("", value)
    if compact.isdigit():
        return len(compact) >= 4
    if not BASE32.fullmatch(compact):
        return False
    return compact.isupper() or any(c.isdigit() for c in compact)


def _wallet_seed(text: str) -> bool:
    if not WALLET.search(text):
        return False
    if _longest_run(text.split()) >= SEED_WORDS:
        return True
    return any(
        _longest_run(text[m.end() : m.end() + 120].split(), leading=True) >= SEED_GIVEN_WORDS
        for m in SEED_GIVEN.finditer(text)
    )


def _longest_run(words: list[str], leading: bool = False) -> int:
    """The most plain words in a row (a list's numbers between them do not count); with
    ``leading``, those at the start only."""
    longest = run = 0
    for word in words:
        plain = word.rstrip(TRAILING)
        if NUMBERING.fullmatch(word):
            continue
        if PLAIN_WORD.fullmatch(plain) and plain.lower() not in NOT_SEED_WORDS:
            run += 1
            longest = max(longest, run)
        elif leading:
            break
        else:
            run = 0
    return longest
