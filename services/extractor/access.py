"""Text that gives access: passwords, keys, tokens and links that let someone in.

Memory is handed to every later run and shown in the app, so a candidate that
names or carries a credential is never proposed (seed 002: "never keep
passwords, keys or links that give access"). The check errs on the side of
dropping: a lost candidate costs little, a stored secret costs a lot.
"""

from __future__ import annotations

import re

# Words that name a credential; "my password is …" must never become a fact.
CREDENTIAL_WORDS = re.compile(
    r"\b(pass(?:word|words|phrase|code)s?|pwd|pin[\s-]?(?:code|number)s?|api[\s_-]?keys?|"
    r"access[\s_-]?keys?|secret(?:s|[\s_-]?keys?)?|private[\s_-]?keys?|ssh[\s_-]?keys?|"
    r"(?:auth|access|bearer|api|refresh|session)?[\s_-]?tokens?|credentials?|"
    r"otp|2fa|mfa|one[\s-]time[\s-](?:code|password)s?|recovery[\s-]codes?|"
    r"seed[\s-]phrases?|mnemonic|cvv|cvc|security[\s-]codes?)\b",
    re.IGNORECASE,
)
# "PIN" only in capitals: "pin this note" is an instruction, not a credential.
PIN = re.compile(r"\bPINs?\b")
# Shapes of well-known secrets, whatever words surround them.
SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|"
    r"xox[abpors]-[\w-]{10,}|AKIA[0-9A-Z]{16}|AIza[\w-]{30,}|"
    r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
# A long unbroken run mixing letters and digits reads like a key or a hash. The run is
# found first and checked for a digit and a letter after: lookaheads that scanned the
# run from each place in it took time quadratic in its length (QA, a security review:
# a 20,000-character turn held the extractor's loop for 1.4 s).
OPAQUE_RUN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
DIGIT, LETTER = re.compile(r"\d"), re.compile(r"[A-Za-z]")
URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.IGNORECASE)
# Links whose path invites someone in: invitations, shares, resets, magic links.
ACCESS_PATH = re.compile(
    r"/(?:invite|join|share|shared|s|reset|magic|token|auth|oauth|login|signin|sso|"
    r"verify|activate|unlock)\b",
    re.IGNORECASE,
)


def gives_access(text: str) -> bool:
    """True when the text names a credential or carries one (key, token, access link)."""
    if any(p.search(text) for p in (CREDENTIAL_WORDS, PIN, SECRET_SHAPES)) or _opaque(text):
        return True
    return any(_access_link(m.group(0)) for m in URL.finditer(text))


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
